"""Batch header parsing, validation, offset assignment and file scanning."""

from __future__ import annotations

import os
import struct
import warnings
from pathlib import Path
from typing import Any

import crc32c
import pytest

from moldau.log.batch import (
    BATCH_HEADER_SIZE,
    RecoveryScan,
    assign_offsets,
    iter_batch_headers,
    offset_patched_chunks,
    parse_batches,
)
from moldau.log.errors import CorruptRecordError, InvalidRecordError

from .batchgen import Record, build_batch, crc_ok, decode_batches, simple_batch


def _kafka_python_records() -> Any:
    """kafka-python's record module (an independent v2 implementation), imported quietly."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka.record import default_records
    return default_records


def test_header_fields() -> None:
    records = [Record(b"a", b"1", 5_000), Record(None, b"22", 5_007), Record(b"c", None, 5_003)]
    data = build_batch(records, producer_id=42, producer_epoch=3, base_sequence=9,
                       transactional=True)
    (h,) = parse_batches(data)
    assert h.position == 0 and h.size == len(data) and h.end == len(data)
    assert h.magic == 2 and h.records_count == 3 and h.last_offset_delta == 2
    assert (h.base_timestamp, h.max_timestamp) == (5_000, 5_007)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (42, 3, 9)
    assert h.is_transactional and not h.is_control
    assert h.timestamp_type == 0 and h.compression == 0
    assert h.last_offset == 2 and h.next_offset == 3
    assert BATCH_HEADER_SIZE == 61


def test_several_batches_and_memoryview() -> None:
    a, b = simple_batch(2), simple_batch(5, tag=1)
    headers = parse_batches(memoryview(a + b))
    assert [(h.position, h.records_count) for h in headers] == [(0, 2), (len(a), 5)]
    assert parse_batches(b"") == []


def test_control_flag() -> None:
    (h,) = parse_batches(build_batch([Record(b"k", b"v", 1)], control=True))
    assert h.is_control


def test_bad_crc_rejected() -> None:
    data = bytearray(simple_batch(3))
    data[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC"):
        parse_batches(bytes(data))


def test_crc_covers_attributes_but_not_offset() -> None:
    data = bytearray(simple_batch(3))
    struct.pack_into(">q", data, 0, 12345)  # baseOffset: outside the CRC
    struct.pack_into(">i", data, 12, 7)  # partitionLeaderEpoch: outside the CRC
    parse_batches(bytes(data))
    struct.pack_into(">h", data, 21, 0x08)  # attributes: inside the CRC
    with pytest.raises(CorruptRecordError):
        parse_batches(bytes(data))


@pytest.mark.parametrize("cut", [1, 10, 30, 60])
def test_truncated_batch_rejected(cut: int) -> None:
    data = simple_batch(3)
    with pytest.raises(CorruptRecordError):
        parse_batches(data[:-cut])
    with pytest.raises(CorruptRecordError):
        parse_batches(data[:cut] if cut < 17 else data[: cut - 10])


def test_trailing_garbage_rejected() -> None:
    data = simple_batch(2)
    with pytest.raises(CorruptRecordError):
        parse_batches(data + b"\x00\x01\x02")
    with pytest.raises(CorruptRecordError):
        parse_batches(data + bytes(40))


def test_short_batch_length_rejected() -> None:
    data = bytearray(simple_batch(1))
    struct.pack_into(">i", data, 8, 30)
    with pytest.raises(CorruptRecordError):
        parse_batches(bytes(data[: 12 + 30]))


def test_wrong_magic_is_invalid() -> None:
    data = bytearray(simple_batch(1))
    data[16] = 1
    with pytest.raises(InvalidRecordError, match="magic"):
        parse_batches(bytes(data))
    data[16] = 7
    with pytest.raises(CorruptRecordError, match="magic"):
        parse_batches(bytes(data))


def _rewrite(data: bytes, **fields: int) -> bytes:
    buf = bytearray(data)
    positions = {"last_offset_delta": (23, ">i"), "records_count": (57, ">i")}
    for name, value in fields.items():
        pos, fmt = positions[name]
        struct.pack_into(fmt, buf, pos, value)
    struct.pack_into(">I", buf, 17, crc32c.crc32c(bytes(buf[21:])))
    return bytes(buf)


def test_inconsistent_counts_are_invalid() -> None:
    data = simple_batch(3)
    with pytest.raises(InvalidRecordError):
        parse_batches(_rewrite(data, records_count=0))
    with pytest.raises(InvalidRecordError):
        parse_batches(_rewrite(data, last_offset_delta=5))


def test_kafka_python_compressed_batches_parse() -> None:
    builder = _kafka_python_records().DefaultRecordBatchBuilder(
        magic=2, compression_type=1, is_transactional=False, producer_id=-1, producer_epoch=-1,
        base_sequence=-1, batch_size=1 << 20,
    )
    for i in range(20):
        builder.append(i, timestamp=1_000 + i, key=b"k", value=b"x" * 100, headers=[])
    data = bytes(builder.build())
    (h,) = parse_batches(data)
    assert h.compression == 1 and h.records_count == 20 and h.max_timestamp == 1_019


def test_assign_offsets_create_time() -> None:
    a, b = simple_batch(2, timestamp=7), simple_batch(3, timestamp=9)
    buf = bytearray(a + b)
    headers = parse_batches(buf)
    last = assign_offsets(buf, headers, 100, 4, None)
    assert last == 104
    decoded = decode_batches(bytes(buf))
    assert [(d.base_offset, d.partition_leader_epoch) for d in decoded] == [(100, 4), (102, 4)]
    assert [h.base_offset for h in headers] == [100, 102]
    assert bytes(buf[21:len(a)]) == a[21:]  # CRC-covered bytes untouched
    parse_batches(buf)


@pytest.mark.parametrize("append_time", [None, 99_999])
def test_offset_patched_chunks_match_in_place_patching(append_time: int | None) -> None:
    records = [Record(b"k", b"v" * 300, 10), Record(None, b"", 20)]
    data = build_batch(records) + simple_batch(1, timestamp=5) + build_batch(records)
    expected = bytearray(data)
    last_expected = assign_offsets(expected, parse_batches(expected), 40, 3, append_time)
    headers = parse_batches(data)
    last, chunks = offset_patched_chunks(data, headers, 40, 3, append_time)
    assert last == last_expected == 44
    assert b"".join(bytes(c) for c in chunks) == bytes(expected)
    assert data == bytes(data)  # the request's bytes are never touched
    assert [h.base_offset for h in headers] == [40, 42, 43]
    assert all(crc_ok(bytes(expected[h.position : h.end])) for h in headers)


def test_assign_offsets_log_append_time_recomputes_crc() -> None:
    records = [Record(b"a", b"1", 10), Record(b"b", b"2", 20)]
    buf = bytearray(build_batch(records) + build_batch(records))
    headers = parse_batches(buf)
    assign_offsets(buf, headers, 0, 1, 99_999)
    for h in headers:
        assert crc_ok(bytes(buf[h.position : h.end]))
        assert h.timestamp_type == 1 and h.max_timestamp == 99_999
    reparsed = parse_batches(buf)
    assert [(h.max_timestamp, h.base_timestamp, h.timestamp_type) for h in reparsed] == [
        (99_999, 10, 1), (99_999, 10, 1)
    ]
    # A real client decoder sees LogAppendTime on every record.
    batch = _kafka_python_records().DefaultRecordBatch(bytes(buf[: headers[0].end]))
    assert batch.validate_crc()
    assert [r.timestamp for r in batch] == [99_999, 99_999]


def _write(path: Path, data: bytes) -> int:
    path.write_bytes(data)
    return os.open(path, os.O_RDONLY)


def test_iter_batch_headers_skips_bodies(tmp_path: Path) -> None:
    batches = [simple_batch(1, value_size=n, tag=n) for n in (10, 40_000, 5, 70_000, 1)]
    buf = bytearray(b"".join(batches))
    headers = parse_batches(buf)
    assign_offsets(buf, headers, 0, 0, None)
    fd = _write(tmp_path / "x.log", bytes(buf))
    try:
        got = list(iter_batch_headers(fd, 0, len(buf), chunk_size=4096))
        assert [(h.base_offset, h.position) for h in got] == [
            (h.base_offset, h.position) for h in headers
        ]
        start = headers[2].position
        assert [h.base_offset for h in iter_batch_headers(fd, start, len(buf))] == [2, 3, 4]
        # A range that ends mid-batch stops before the torn batch.
        assert len(list(iter_batch_headers(fd, 0, len(buf) - 1))) == 4
    finally:
        os.close(fd)


def test_recovery_scan_stops_at_damage(tmp_path: Path) -> None:
    buf = bytearray(b"".join(simple_batch(2, tag=i) for i in range(5)))
    headers = parse_batches(buf)
    assign_offsets(buf, headers, 50, 0, None)
    good = bytes(buf)
    fd = _write(tmp_path / "ok.log", good)
    scan = RecoveryScan(fd, 0, len(good), 50, chunk_size=100)
    assert [h.base_offset for h in scan] == [50, 52, 54, 56, 58]
    assert scan.problem is None and scan.valid_end == len(good)
    os.close(fd)

    bad = bytearray(good)
    bad[headers[3].position + 70] ^= 1
    fd = _write(tmp_path / "bad.log", bytes(bad))
    scan = RecoveryScan(fd, 0, len(bad), 50)
    assert len(list(scan)) == 3 and scan.valid_end == headers[3].position
    assert scan.problem is not None and "CRC" in scan.problem
    os.close(fd)

    fd = _write(tmp_path / "torn.log", good[:-7] + bytes(100))
    scan = RecoveryScan(fd, 0, len(good) + 93, 50)
    assert len(list(scan)) == 4 and scan.valid_end == headers[4].position
    os.close(fd)

    fd = _write(tmp_path / "back.log", good)
    scan = RecoveryScan(fd, 0, len(good), 51)  # first batch below the segment base
    assert list(scan) == [] and scan.problem is not None
    os.close(fd)
