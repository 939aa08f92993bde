"""FrameReader: frames cut from a byte stream however the stream is split into reads."""

from __future__ import annotations

import os
import struct
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from moldau.protocol.buffer_pool import BufferPool
from moldau.protocol.frame_reader import SCRATCH_BYTES, FrameReader
from moldau.protocol.frames import FrameError
from moldau.protocol.memory_pool import MemoryPool


def framed(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def feed(reader: FrameReader, data: bytes, read_sizes: list[int],
         keep_views: bool = False) -> list[Any]:
    """Deliver ``data`` as a socket would: never more than the buffer handed out, in pieces."""
    frames: list[Any] = []
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
            frames.append(frame if keep_views else bytes(frame))
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
    reader = FrameReader(10_000, limit_name="socket.request.max.bytes")
    buf = reader.get_buffer()
    buf[:4] = struct.pack(">i", size)
    with pytest.raises(FrameError, match=r"outside 0\.\.socket\.request\.max\.bytes \(10000\)"):
        reader.buffer_updated(4)


def test_a_handled_large_frame_gives_its_buffer_to_the_next_one() -> None:
    pool = BufferPool()
    reader = FrameReader(1 << 22, pool, scratch_bytes=1024, direct_bytes=512)
    first_body, second_body = os.urandom(300_000), os.urandom(200_000)
    (first,) = feed(reader, framed(first_body), [], keep_views=True)
    assert isinstance(first, memoryview) and bytes(first) == first_body
    buffer = first.obj
    reader.recycle(first)
    assert pool.pooled_bytes == len(buffer)
    (second,) = feed(reader, framed(second_body), [], keep_views=True)
    assert isinstance(second, memoryview) and second.obj is buffer  # reused, not allocated
    assert bytes(second) == second_body and pool.pooled_bytes == 0


def test_small_frames_are_not_pooled() -> None:
    pool = BufferPool()
    reader = FrameReader(1 << 20, pool)
    (frame,) = feed(reader, framed(b"tiny"), [], keep_views=True)
    reader.recycle(frame)
    assert pool.pooled_bytes == 0


def test_pool_limits_what_it_keeps() -> None:
    pool = BufferPool(max_pooled_bytes=3 << 20, max_buffer_bytes=2 << 20)
    big = pool.take(5 << 20)
    assert len(big) == 5 << 20
    pool.give(big)  # over max_buffer_bytes: dropped
    assert pool.pooled_bytes == 0
    a, b = pool.take(1), pool.take((1 << 20) + 1)
    assert (len(a), len(b)) == (1 << 20, 2 << 20)  # sizes rounded up to whole MiB
    pool.give(b)
    pool.give(a)
    assert pool.pooled_bytes == 3 << 20
    pool.give(bytearray(1 << 20))  # would exceed max_pooled_bytes: dropped
    assert pool.pooled_bytes == 3 << 20
    assert pool.take(10) is a  # the smallest buffer that fits


@given(
    streams=st.lists(st.lists(st.one_of(st.binary(max_size=300), st.integers(0, 3000)),
                              max_size=6), min_size=2, max_size=4),
    order=st.lists(st.integers(0, 3), max_size=200),
    read_sizes=st.lists(st.integers(1, 3000), max_size=200),
)
def test_connections_sharing_one_scratch_buffer_get_their_own_frames(
    streams: list[list[bytes | int]], order: list[int], read_sizes: list[int]
) -> None:
    """Reads of several connections interleave through one scratch buffer, as on the loop."""
    scratch = bytearray(1024)
    bodies = [[b if isinstance(b, bytes) else os.urandom(b) for b in s] for s in streams]
    data = [b"".join(framed(b) for b in s) for s in bodies]
    readers = [FrameReader(10_000, scratch=scratch, direct_bytes=512) for _ in streams]
    got: list[list[bytes]] = [[] for _ in streams]
    pos = [0] * len(streams)
    sizes = iter(read_sizes)
    turns = iter(order)
    while any(p < len(d) for p, d in zip(pos, data, strict=True)):
        i = next(turns, None)
        if i is None or i >= len(streams) or pos[i] >= len(data[i]):
            i = next(k for k, d in enumerate(data) if pos[k] < len(d))
        buf = readers[i].get_buffer()
        n = min(len(buf), len(data[i]) - pos[i], next(sizes, 1 << 20))
        buf[:n] = data[i][pos[i] : pos[i] + n]
        pos[i] += n
        got[i].extend(bytes(f) for f in readers[i].buffer_updated(n))
    assert got == bodies


def test_an_idle_reader_holds_no_buffer() -> None:
    scratch = bytearray(SCRATCH_BYTES)
    reader = FrameReader(1 << 20, scratch=scratch)
    assert feed(reader, framed(b"request"), []) == [b"request"]
    assert reader.partial_bytes == 0
    assert reader.get_buffer().obj is scratch  # nothing of its own between frames


def test_frames_reserve_their_size_until_recycled() -> None:
    memory = MemoryPool(limit=1000)
    reader = FrameReader(10_000, memory=memory, scratch_bytes=1024, direct_bytes=512)
    small, large = feed(reader, framed(b"x" * 100) + framed(b"y" * 700), [], keep_views=True)
    assert memory.used == 800
    reader.recycle(small)
    reader.recycle(large)
    assert memory.used == 0


def test_an_exhausted_pool_stops_new_frames_until_memory_frees() -> None:
    memory = MemoryPool(limit=1000)
    holder = FrameReader(10_000, memory=memory, scratch_bytes=1024, direct_bytes=512)
    (held,) = feed(holder, framed(b"h" * 1000), [], keep_views=True)
    assert memory.exhausted
    reader = FrameReader(10_000, memory=memory, scratch_bytes=1024, direct_bytes=512)
    woken: list[bool] = []
    # Only the size prefix is read while the pool is exhausted.
    buf = reader.get_buffer()
    assert len(buf) == 4
    buf[:] = struct.pack(">i", 600)
    assert reader.buffer_updated(4) == []
    assert reader.blocked and not reader.unblock()
    memory.wait(reader, lambda: woken.append(reader.unblock()))
    holder.recycle(held)
    assert woken == [True] and not reader.blocked and memory.used == 600
    body = os.urandom(600)
    assert feed(reader, body, []) == [body]


def test_closing_gives_back_an_unfinished_frame() -> None:
    memory = MemoryPool(limit=10_000)
    reader = FrameReader(10_000, memory=memory, scratch_bytes=1024, direct_bytes=512)
    assert feed(reader, framed(os.urandom(3000))[:1000], []) == []
    assert memory.used == 3000
    reader.close()
    assert memory.used == 0 and reader.partial_bytes == 0
