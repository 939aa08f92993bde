"""records: decompressing a batch's records section and walking (offset, timestamp) pairs."""

from __future__ import annotations

import gzip
import struct

import cramjam
import crc32c
import lz4.frame
import pytest
from hypothesis import given
from hypothesis import strategies as st

from moldau.log.errors import CorruptRecordError
from moldau.log.records import (
    GZIP,
    LZ4,
    MAX_DECOMPRESSED_CAP,
    MIN_DECOMPRESSED_CAP,
    NO_COMPRESSION,
    SNAPPY,
    XERIAL_MAGIC,
    ZSTD,
    DecompressionLimitError,
    decode_records,
    decompress_records,
    decompressed_cap,
    iter_record_offsets_and_timestamps,
)

from ..helpers.bombs import bomb_batch, zstd
from .batchgen import Record, build_batch

BASE = 1_700_000_000_000


def walk(batch: bytes) -> list[tuple[int, int]]:
    return list(iter_record_offsets_and_timestamps(batch))


def rebatch(batch: bytes, codec: int, records: bytes) -> bytes:
    """``batch`` with its records section replaced by ``records`` under codec ``codec``."""
    out = bytearray(batch[:61]) + records
    struct.pack_into(">i", out, 8, len(out) - 12)
    (attributes,) = struct.unpack_from(">h", out, 21)
    struct.pack_into(">h", out, 21, attributes | codec)
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[21:])))
    return bytes(out)


def xerial(data: bytes, block: int) -> bytes:
    """Snappy in xerial framing, as snappy-java writes it: header, then length-prefixed blocks."""
    out = bytearray(XERIAL_MAGIC + struct.pack(">ii", 1, 1))
    for i in range(0, len(data), block):
        chunk = bytes(cramjam.snappy.compress_raw(data[i : i + block]))
        out += struct.pack(">i", len(chunk)) + chunk
    return bytes(out)


def test_keys_headers_and_nulls_are_skipped() -> None:
    records = [
        Record(b"key-1", b"v" * 300, BASE, (("h1", b"x"), ("h2", None))),
        Record(None, None, BASE + 7),
        Record(b"", b"", BASE + 3, (("", b""),)),
        Record(b"k" * 200, b"value", BASE + 1_000_000),
    ]
    batch = build_batch(records, base_offset=40)
    assert walk(batch) == [(40, BASE), (41, BASE + 7), (42, BASE + 3), (43, BASE + 1_000_000)]


def test_negative_and_zero_deltas_and_offset_gaps() -> None:
    # baseTimestamp above some records: their deltas are negative; gaps as after compaction.
    records = [
        Record(None, b"a", BASE - 5), Record(None, b"b", BASE), Record(None, b"c", BASE - 70_000),
    ]
    batch = build_batch(records, base_offset=100, base_timestamp=BASE, offset_deltas=[2, 3, 9])
    assert walk(batch) == [(102, BASE - 5), (103, BASE), (109, BASE - 70_000)]


def test_log_append_time_uses_the_batch_max_timestamp() -> None:
    batch = bytearray(build_batch([Record(None, b"a", 10), Record(None, b"b", 20)],
                                  log_append_time=True))
    struct.pack_into(">q", batch, 35, BASE)  # the broker's stamp, as on append
    assert walk(bytes(batch)) == [(0, BASE), (1, BASE)]


@pytest.mark.parametrize("codec", [NO_COMPRESSION, GZIP, SNAPPY, LZ4, ZSTD])
def test_compressed_batches(codec: int) -> None:
    records = [Record(f"k{i}".encode(), b"x" * (i * 50), BASE + 10 * i) for i in range(20)]
    plain = build_batch(records, base_offset=7)
    section = plain[61:]
    compressed = {
        NO_COMPRESSION: section,
        GZIP: gzip.compress(section),
        SNAPPY: bytes(cramjam.snappy.compress_raw(section)),
        LZ4: bytes(cramjam.lz4.compress(section)),
        ZSTD: bytes(cramjam.zstd.compress(section)),
    }[codec]
    assert decompress_records(codec, compressed) == section
    assert walk(rebatch(plain, codec, compressed)) == [(7 + i, BASE + 10 * i) for i in range(20)]


@pytest.mark.parametrize("block", [1, 100, 32 * 1024])
def test_xerial_framed_snappy(block: int) -> None:
    section = bytes(range(256)) * 20
    assert decompress_records(SNAPPY, xerial(section, block)) == section


@pytest.mark.parametrize(("codec", "data"), [
    (GZIP, b"not gzip at all"),
    (GZIP, gzip.compress(b"x" * 1000, mtime=0)[:-10]),
    (SNAPPY, b"\xff\xff\xff\xff\x0f garbage"),
    (SNAPPY, XERIAL_MAGIC + struct.pack(">iii", 1, 1, 500) + b"short"),
    (LZ4, b"\x04\x22\x4d\x18 truncated frame"),
    (ZSTD, b"\x28\xb5\x2f\xfd nonsense"),
    (7, b""),
])
def test_undecodable_sections_raise_corrupt(codec: int, data: bytes) -> None:
    with pytest.raises(CorruptRecordError):
        decompress_records(codec, data)


def test_malformed_record_sections_raise_corrupt() -> None:
    plain = build_batch([Record(b"k", b"v", BASE), Record(b"k", b"v", BASE + 1)])
    with pytest.raises(CorruptRecordError):
        walk(plain[:-3])  # batch length no longer matches
    with pytest.raises(CorruptRecordError):
        walk(rebatch(plain, 0, plain[61:-3]))  # last record cut short
    with pytest.raises(CorruptRecordError):
        walk(rebatch(plain, 0, plain[61:] + b"\x00"))  # bytes after the last record
    with pytest.raises(CorruptRecordError):
        walk(rebatch(plain, 0, b"\xff" * 12))  # an endless varint
    with pytest.raises(CorruptRecordError):
        walk(plain[:40])
    with pytest.raises(CorruptRecordError):
        walk(rebatch(plain, GZIP, b"garbage"))


records_strategy = st.lists(
    st.tuples(
        st.one_of(st.none(), st.binary(max_size=40)),
        st.one_of(st.none(), st.binary(max_size=200)),
        st.integers(min_value=0, max_value=2**40),
        st.lists(st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=5))),
                 max_size=3),
    ),
    min_size=1,
    max_size=30,
)


@given(records_strategy, st.integers(min_value=0, max_value=2**40),
       st.integers(min_value=0, max_value=2**40))
def test_walker_matches_encoder(raw: list, base_offset: int, base_ts: int) -> None:
    records = [Record(k, v, ts, tuple(h)) for k, v, ts, h in raw]
    batch = build_batch(records, base_offset=base_offset,
                        base_timestamp=min(base_ts, *(r.timestamp for r in records)))
    assert walk(batch) == [(base_offset + i, r.timestamp) for i, r in enumerate(records)]


# -- decompression bombs -------------------------------------------------------------------


@pytest.mark.parametrize("codec", [GZIP, LZ4, ZSTD])
def test_a_bomb_is_refused_past_the_cap(codec: int) -> None:
    """1 GiB of zeros in 32 KB (zstd) to 4.4 MB (lz4): refused at the cap, not decoded whole."""
    batch = bomb_batch(codec, 1 << 30)
    cap = decompressed_cap(len(batch) - 61)
    assert cap <= MAX_DECOMPRESSED_CAP
    with pytest.raises(DecompressionLimitError, match=f"more than {cap} bytes"):
        list(iter_record_offsets_and_timestamps(batch))
    with pytest.raises(CorruptRecordError):  # what the cleaner and produce catch
        decode_records(batch)


@pytest.mark.parametrize("codec", [GZIP, LZ4, ZSTD])
def test_the_cap_is_exact(codec: int) -> None:
    section = bomb_batch(codec, 100_000)[61:]
    size = len(decompress_records(codec, section))
    assert len(decompress_records(codec, section, cap=size)) == size
    with pytest.raises(DecompressionLimitError):
        decompress_records(codec, section, cap=size - 1)


def test_zstd_declared_size_is_refused_unread() -> None:
    frame = zstd.compress(bytes(80 << 20))  # the header carries the content size
    with pytest.raises(DecompressionLimitError):
        decompress_records(ZSTD, frame, cap=64 << 20)


def test_snappy_lengths_are_checked_first() -> None:
    section = bytes(4 << 20)
    raw = bytes(cramjam.snappy.compress_raw(section))
    with pytest.raises(DecompressionLimitError):
        decompress_records(SNAPPY, raw, cap=len(section) - 1)
    with pytest.raises(DecompressionLimitError):
        decompress_records(SNAPPY, xerial(section, 1 << 20), cap=len(section) - 1)
    assert decompress_records(SNAPPY, xerial(section, 1 << 20), cap=len(section)) == section


def test_cap_scales_with_the_batch_within_bounds() -> None:
    assert decompressed_cap(1000) == MIN_DECOMPRESSED_CAP
    assert decompressed_cap(2 << 20) == 128 << 20
    assert decompressed_cap(100 << 20) == MAX_DECOMPRESSED_CAP


def test_concatenated_frames_and_gzip_members() -> None:
    assert decompress_records(GZIP, gzip.compress(b"a") + gzip.compress(b"b") + b"\0\0") == b"ab"
    two_lz4 = lz4.frame.compress(b"a" * 1000) + lz4.frame.compress(b"b")
    assert decompress_records(LZ4, two_lz4) == b"a" * 1000 + b"b"
    assert decompress_records(ZSTD, zstd.compress(b"a") + zstd.compress(b"b")) == b"ab"


def test_zstd_window_over_the_limit_is_corrupt_not_allocated() -> None:
    options = {int(zstd.CompressionParameter.window_log): 27}
    compressor = zstd.ZstdCompressor(options=options)  # streamed: no content size, window 2^27
    frame = compressor.compress(bytes(1 << 20)) + compressor.flush()
    with pytest.raises(CorruptRecordError):
        decompress_records(ZSTD, frame)
