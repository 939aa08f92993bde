"""FrameReader: frames cut from a byte stream however the stream is split into reads."""

from __future__ import annotations

import os
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from moldau.broker.frame_reader import FrameReader
from moldau.protocol.frames import FrameError


def framed(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def feed(reader: FrameReader, data: bytes, read_sizes: list[int]) -> list[bytes]:
    """Deliver ``data`` as a socket would: never more than the buffer handed out, in pieces."""
    frames: list[bytes] = []
    pos = 0
    sizes = iter(read_sizes)
    while pos < len(data):
        buf = reader.get_buffer()
        assert len(buf) > 0
        n = min(len(buf), len(data) - pos, next(sizes, len(data)) or 1)
        buf[:n] = data[pos : pos + n]
        pos += n
        for frame in reader.buffer_updated(n):
            if isinstance(frame, memoryview):
                assert frame.readonly
            frames.append(bytes(frame))
    return frames


@given(
    bodies=st.lists(st.one_of(st.binary(max_size=300), st.integers(0, 5000)), max_size=12),
    read_sizes=st.lists(st.integers(1, 4000), max_size=60),
)
def test_any_split_of_the_stream_gives_the_same_frames(
    bodies: list[bytes | int], read_sizes: list[int]
) -> None:
    # Small scratch and direct thresholds so both paths and compaction run on small data.
    concrete = [b if isinstance(b, bytes) else os.urandom(b) for b in bodies]
    reader = FrameReader(10_000, scratch_bytes=1024, direct_bytes=512)
    got = feed(reader, b"".join(framed(b) for b in concrete), read_sizes)
    assert got == concrete
    assert reader.partial_bytes == 0


def test_a_large_frame_is_received_into_its_own_buffer() -> None:
    reader = FrameReader(1 << 20, scratch_bytes=1024, direct_bytes=512)
    body = os.urandom(100_000)
    data = framed(b"small") + framed(body)
    first = reader.get_buffer()
    first[:600] = data[:600]
    assert [bytes(f) for f in reader.buffer_updated(600)] == [b"small"]
    # The rest of the large frame goes straight into a buffer exactly as big as what is left.
    direct = reader.get_buffer()
    assert len(direct) == len(data) - 600
    direct[:] = data[600:]
    (frame,) = reader.buffer_updated(len(direct))
    assert isinstance(frame, memoryview) and bytes(frame) == body


def test_partial_bytes_count_an_unfinished_frame() -> None:
    reader = FrameReader(1 << 20, scratch_bytes=1024, direct_bytes=512)
    data = framed(os.urandom(2000))
    assert feed(reader, data[:700], [700]) == []
    assert reader.partial_bytes == 700


@pytest.mark.parametrize("size", [-1, 10_001])
def test_a_size_outside_the_limit_is_refused(size: int) -> None:
    reader = FrameReader(10_000)
    buf = reader.get_buffer()
    buf[:4] = struct.pack(">i", size)
    with pytest.raises(FrameError, match=r"outside 0\.\.socket\.request\.max\.bytes"):
        reader.buffer_updated(4)
