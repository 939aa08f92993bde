"""PartitionLog: appends, reads, rolls, offsets by time, epochs, retention, truncation."""

from __future__ import annotations

import dataclasses
import os
import uuid
from pathlib import Path
from typing import Any

import pytest

from moldau.log import (
    CorruptRecordError,
    InvalidRecordError,
    LogConfig,
    OffsetOutOfRangeError,
    PartitionLog,
    RecordListTooLargeError,
    RecordTooLargeError,
)
from moldau.log.batch import assign_offsets, parse_batches
from moldau.log.segment import LogSegment

from .batchgen import Record, build_batch, crc_ok, decode_batches, simple_batch

NOW = 1_700_000_000_000


def open_log(tmp_path: Path, name: str = "orders.v2-eu-3", **overrides: Any) -> PartitionLog:
    config = dataclasses.replace(LogConfig(), **overrides)
    return PartitionLog.open(tmp_path / name, config, 0, True, NOW)


def one(timestamp: int = NOW) -> bytes:
    """A one-record batch of fixed size (BATCH bytes)."""
    return build_batch([Record(b"key", b"x" * 100, timestamp, (("h", b"v"),))])


BATCH = len(one())
THREE_PER_SEGMENT = 3 * BATCH + 10


def offsets_in(data: bytes) -> list[int]:
    return [b.base_offset + i for b in decode_batches(data) for i in range(len(b.records))]


def test_names_from_directory(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    assert (plog.topic, plog.partition) == ("orders.v2-eu", 3)
    assert (plog.log_start_offset, plog.log_end_offset, plog.high_watermark) == (0, 0, 0)
    # A new partition's segment gets its index files with its first data (fewer files to
    # create when thousands of partitions are made at once).
    assert [p.name for p in sorted(plog.directory.iterdir())] == ["00000000000000000000.log"]
    plog.append(one(), leader_epoch=0, now_ms=NOW)
    assert [p.name for p in sorted(plog.directory.iterdir())] == [
        "00000000000000000000.index", "00000000000000000000.log",
        "00000000000000000000.timeindex", "leader-epoch-checkpoint",
    ]


def test_append_and_read_back(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    r1 = plog.append(simple_batch(3), leader_epoch=0, now_ms=NOW)
    r2 = plog.append(simple_batch(2, tag=1), leader_epoch=0, now_ms=NOW)
    assert (r1.base_offset, r1.last_offset, r1.record_count) == (0, 2, 3)
    assert (r2.base_offset, r2.last_offset, r1.log_append_time_ms) == (3, 4, -1)
    assert plog.log_end_offset == 5
    data = plog.read(0, 1 << 20)
    assert data is not None
    batches = decode_batches(data.read())
    assert [b.base_offset for b in batches] == [0, 3]
    assert batches[0].records == decode_batches(simple_batch(3))[0].records
    assert plog.read(5, 100) is None
    with pytest.raises(OffsetOutOfRangeError):
        plog.read(6, 100)
    with pytest.raises(OffsetOutOfRangeError):
        plog.read(-1, 100)


def test_append_rejections_write_nothing(tmp_path: Path) -> None:
    plog = open_log(tmp_path, max_message_bytes=500, segment_bytes=2_000)
    with pytest.raises(InvalidRecordError):
        plog.append(b"", leader_epoch=0, now_ms=NOW)
    bad = bytearray(simple_batch(2))
    bad[-1] ^= 1
    with pytest.raises(CorruptRecordError):
        plog.append(bytes(bad), leader_epoch=0, now_ms=NOW)
    with pytest.raises(RecordTooLargeError):
        plog.append(simple_batch(1, value_size=600), leader_epoch=0, now_ms=NOW)
    many = b"".join(simple_batch(3, value_size=100, tag=i) for i in range(10))
    with pytest.raises(RecordListTooLargeError):
        plog.append(many, leader_epoch=0, now_ms=NOW)
    assert plog.log_end_offset == 0 and plog.size_bytes == 0


def test_log_append_time(tmp_path: Path) -> None:
    plog = open_log(tmp_path, message_timestamp_type="LogAppendTime")
    result = plog.append(simple_batch(2, timestamp=5), leader_epoch=3, now_ms=NOW)
    assert result.log_append_time_ms == NOW
    data = plog.read(0, 1 << 20)
    assert data is not None
    raw = data.read()
    (batch,) = decode_batches(raw)
    assert crc_ok(raw) and batch.max_timestamp == NOW and batch.attributes & 0x08
    assert batch.partition_leader_epoch == 3
    assert plog.max_timestamp_entry() == (0, NOW)


def test_roll_by_size(tmp_path: Path) -> None:
    plog = open_log(tmp_path, segment_bytes=1_000)
    batch_size = len(simple_batch(2, value_size=100))
    for i in range(20):
        plog.append(simple_batch(2, value_size=100, tag=i), leader_epoch=0, now_ms=NOW)
    segments = plog.segments
    assert len(segments) > 3
    assert all(s.size <= 1_000 for s in segments)
    assert [s.base_offset for s in segments] == [
        i * 2 * (1_000 // batch_size) for i in range(len(segments))
    ]
    names = sorted(p.name for p in plog.directory.glob("*.log"))
    assert names == [f"{s.base_offset:020d}.log" for s in segments]
    # A read from an old segment stays inside it; the next read continues in the next one.
    first = plog.read(0, 1 << 20)
    assert first is not None and first.size == segments[0].size
    assert offsets_in(first.read())[-1] == segments[1].base_offset - 1


def test_roll_by_time_uses_record_timestamps(tmp_path: Path) -> None:
    plog = open_log(tmp_path, segment_ms=1_000)
    plog.append(one(NOW), leader_epoch=0, now_ms=NOW)
    plog.append(one(NOW + 1_000), leader_epoch=0, now_ms=NOW)
    plog.append(one(NOW), leader_epoch=0, now_ms=NOW + 10**9)  # broker clock is not used
    assert len(plog.segments) == 1
    plog.append(one(NOW + 1_001), leader_epoch=0, now_ms=NOW)
    assert [s.base_offset for s in plog.segments] == [0, 3]


def test_roll_by_time_without_timestamps_uses_broker_clock(tmp_path: Path) -> None:
    plog = open_log(tmp_path, segment_ms=1_000)
    plog.append(one(-1), leader_epoch=0, now_ms=NOW)
    plog.append(one(-1), leader_epoch=0, now_ms=NOW + 1_000)
    assert len(plog.segments) == 1
    plog.append(one(-1), leader_epoch=0, now_ms=NOW + 1_001)
    assert [s.base_offset for s in plog.segments] == [0, 2]


def test_roll_when_index_full(tmp_path: Path) -> None:
    plog = open_log(tmp_path, index_interval_bytes=0, segment_index_bytes=8 * 3)
    for i in range(7):
        plog.append(simple_batch(1, tag=i), leader_epoch=0, now_ms=NOW)
    assert [s.base_offset for s in plog.segments] == [0, 3, 6]


def test_roll_never_leaves_empty_segment(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    assert plog.roll(NOW) is plog.active_segment
    plog.append(simple_batch(1), leader_epoch=0, now_ms=NOW)
    plog.roll(NOW)
    plog.roll(NOW)
    assert [s.base_offset for s in plog.segments] == [0, 1]


def test_read_limits(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    for i in range(10):
        plog.append(simple_batch(2, value_size=100, tag=i), leader_epoch=0, now_ms=NOW)
    size = len(simple_batch(2, value_size=100))
    sl = plog.read(5, size * 3 - 1)
    assert sl is not None and offsets_in(sl.read()) == [4, 5, 6, 7]
    sl = plog.read(5, 1)
    assert sl is not None and offsets_in(sl.read()) == [4, 5]
    assert plog.read(5, 1, min_one_batch=False) is None
    plog.high_watermark = 8
    sl = plog.read(0, 1 << 20, max_offset=plog.high_watermark)
    assert sl is not None and offsets_in(sl.read())[-1] == 7
    assert plog.read(8, 1 << 20, max_offset=8) is None
    plog.high_watermark = 1_000
    assert plog.high_watermark == 20  # clamped to the log end


def _segment_with(directory: Path, base: int, *batch_offsets: int) -> None:
    seg = LogSegment.create(directory, base, index_interval_bytes=4096,
                            segment_index_bytes=1 << 20, now_ms=NOW)
    for offset in batch_offsets:
        buf = bytearray(simple_batch(2, tag=offset))
        headers = parse_batches(buf)
        assign_offsets(buf, headers, offset, 0, None)
        seg.append((buf,), headers)
    seg.close()


def test_read_continues_past_gap_at_segment_end(tmp_path: Path) -> None:
    directory = tmp_path / "gappy-0"
    directory.mkdir()
    _segment_with(directory, 0, 0, 2)  # offsets 0..3, then a gap up to 10 (e.g. compaction)
    _segment_with(directory, 10, 10, 12)
    plog = PartitionLog.open(directory, LogConfig(), 0, True, NOW)
    assert plog.log_end_offset == 14
    sl = plog.read(5, 1 << 20)
    assert sl is not None and offsets_in(sl.read()) == [10, 11, 12, 13]
    sl = plog.read(3, 1 << 20)
    assert sl is not None and offsets_in(sl.read()) == [2, 3]


def test_offsets_by_timestamp(tmp_path: Path) -> None:
    plog = open_log(tmp_path, segment_bytes=300, index_interval_bytes=0)
    stamps = [100, 300, 200, 700, 400, 500, 650, 600]
    for i, ts in enumerate(stamps):
        batch = build_batch([Record(b"k", b"v", ts - 5), Record(b"k", b"v", ts)])
        assert plog.append(batch, leader_epoch=0, now_ms=NOW).base_offset == 2 * i
    assert len(plog.segments) > 2
    # Record-level answers: each batch is (ts - 5, ts) at offsets (2i, 2i + 1).
    assert plog.offset_for_timestamp(0) == (0, 95)
    assert plog.offset_for_timestamp(96) == (1, 100)
    assert plog.offset_for_timestamp(250) == (2, 295)
    assert plog.offset_for_timestamp(450) == (6, 695)
    assert plog.offset_for_timestamp(700) == (7, 700)
    assert plog.offset_for_timestamp(701) is None
    assert plog.max_timestamp_entry() == (7, 700)
    plog.high_watermark = plog.log_end_offset
    plog.delete_records_before(7)
    assert plog.offset_for_timestamp(0) == (7, 700)
    assert plog.max_timestamp_entry() == (7, 700)
    plog.delete_records_before(8)
    assert plog.offset_for_timestamp(0) == (8, 395)
    assert plog.max_timestamp_entry() == (13, 650)


def test_leader_epochs(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    plog.append(simple_batch(2), leader_epoch=0, now_ms=NOW)
    plog.append(simple_batch(2), leader_epoch=0, now_ms=NOW)
    plog.append(simple_batch(3), leader_epoch=2, now_ms=NOW)
    plog.append(simple_batch(1), leader_epoch=5, now_ms=NOW)
    assert plog.leader_epochs == [(0, 0), (2, 4), (5, 7)]
    checkpoint = (plog.directory / "leader-epoch-checkpoint").read_text()
    assert checkpoint == "0\n3\n0 0\n2 4\n5 7\n"
    assert plog.end_offset_for_epoch(0) == (0, 4)
    assert plog.end_offset_for_epoch(1) == (0, 4)
    assert plog.end_offset_for_epoch(2) == (2, 7)
    assert plog.end_offset_for_epoch(5) == (5, 8)
    assert plog.end_offset_for_epoch(6) == (-1, -1)
    plog.truncate_to(7)
    assert plog.leader_epochs == [(0, 0), (2, 4)] and plog.log_end_offset == 7
    assert plog.end_offset_for_epoch(2) == (2, 7)
    plog.truncate_to(5)  # inside the batch 4..6: the whole batch goes, and epoch 2 with it
    assert plog.leader_epochs == [(0, 0)] and plog.log_end_offset == 4
    assert plog.end_offset_for_epoch(2) == (-1, -1)


def test_retention_by_time(tmp_path: Path) -> None:
    plog = open_log(tmp_path, segment_bytes=THREE_PER_SEGMENT, retention_ms=10_000)
    for i in range(12):
        plog.append(one(NOW + i * 1_000), leader_epoch=0, now_ms=NOW)
    before = [s.base_offset for s in plog.segments]
    assert len(before) == 4  # three batches per segment
    assert plog.enforce_retention(NOW + 10_000) == 0
    # Segment 0's newest batch is NOW+2000: expired once now > NOW+12000.
    assert plog.enforce_retention(NOW + 12_001) == 1
    assert plog.log_start_offset == 3
    assert plog.enforce_retention(NOW + 10**9) == 2  # never the active segment
    assert [s.base_offset for s in plog.segments] == [9]
    assert plog.log_start_offset == 9
    with pytest.raises(OffsetOutOfRangeError):
        plog.read(8, 100)
    assert sorted(p.name for p in plog.directory.glob("*.log")) == [f"{9:020d}.log"]


def test_retention_by_size_and_policy(tmp_path: Path) -> None:
    plog = open_log(tmp_path, segment_bytes=THREE_PER_SEGMENT, retention_bytes=6 * BATCH + 1,
                    retention_ms=-1)
    for _ in range(12):
        plog.append(one(), leader_epoch=0, now_ms=NOW)
    seg_size = plog.segments[0].size
    assert plog.size_bytes == 4 * seg_size
    assert plog.enforce_retention(NOW) == 1  # at least retention.bytes stays
    assert plog.size_bytes == 3 * seg_size and plog.log_start_offset == 3
    plog.update_config(dataclasses.replace(plog.config, cleanup_policy=("compact",),
                                           retention_bytes=0))
    assert plog.enforce_retention(NOW) == 0


def test_delete_records_before(tmp_path: Path) -> None:
    plog = open_log(tmp_path, segment_bytes=THREE_PER_SEGMENT)
    for _ in range(12):
        plog.append(one(), leader_epoch=0, now_ms=NOW)
    plog.high_watermark = 10
    with pytest.raises(OffsetOutOfRangeError):
        plog.delete_records_before(11)
    assert plog.delete_records_before(4) == 4
    assert [s.base_offset for s in plog.segments] == [3, 6, 9]
    with pytest.raises(OffsetOutOfRangeError):
        plog.read(3, 100)
    sl = plog.read(4, 1 << 20)
    assert sl is not None and offsets_in(sl.read())[0] == 4
    assert plog.delete_records_before(2) == 4  # never moves backwards
    assert plog.delete_records_before(-1) == 10  # -1: up to the high watermark
    assert [s.base_offset for s in plog.segments] == [9]
    # Segments fully below the start go at the next retention pass as well.
    assert plog.enforce_retention(NOW) == 0


def test_truncate_to_across_segments(tmp_path: Path) -> None:
    plog = open_log(tmp_path, segment_bytes=THREE_PER_SEGMENT)
    for _ in range(12):
        plog.append(one(), leader_epoch=0, now_ms=NOW)
    plog.high_watermark = 12
    removed = plog.truncate_to(4)
    assert removed > 0 and plog.log_end_offset == 4 and plog.high_watermark == 4
    assert [s.base_offset for s in plog.segments] == [0, 3]
    assert plog.append(simple_batch(1), leader_epoch=0, now_ms=NOW).base_offset == 4
    plog.truncate_to(3)
    assert [s.base_offset for s in plog.segments] == [0, 3]
    assert plog.active_segment.size == 0 and plog.log_end_offset == 3
    plog.truncate_fully_and_start_at(100, NOW)
    assert (plog.log_start_offset, plog.log_end_offset) == (100, 100)
    assert plog.append(simple_batch(1), leader_epoch=0, now_ms=NOW).base_offset == 100


def test_flush_moves_recovery_point(tmp_path: Path) -> None:
    plog = open_log(tmp_path, flush_interval_messages=5)
    plog.append(simple_batch(3), leader_epoch=0, now_ms=NOW)
    assert plog.recovery_point == 0
    plog.append(simple_batch(3), leader_epoch=0, now_ms=NOW)
    assert plog.recovery_point == 6
    plog.update_config(dataclasses.replace(plog.config, flush_interval_ms=1_000))
    plog.append(simple_batch(1), leader_epoch=0, now_ms=NOW)
    assert not plog.flush_if_due(NOW + 999)
    assert plog.flush_if_due(NOW + 1_000) and plog.recovery_point == 7
    assert not plog.flush_if_due(NOW + 5_000)  # nothing new


def test_reopen_clean_keeps_everything(tmp_path: Path) -> None:
    plog = open_log(tmp_path, segment_bytes=THREE_PER_SEGMENT)
    for i in range(10):
        plog.append(one(NOW + i), leader_epoch=1, now_ms=NOW)
    expected = plog.read(0, 1 << 20)
    assert expected is not None
    segment_bases = [s.base_offset for s in plog.segments]
    plog.close()
    again = PartitionLog.open(plog.directory, plog.config, 10, True, NOW)
    assert [s.base_offset for s in again.segments] == segment_bases
    assert again.log_end_offset == 10 and again.high_watermark == 10
    assert again.leader_epochs == [(1, 0)]
    assert again.max_timestamp_entry() == (9, NOW + 9)
    got = again.read(0, 1 << 20)
    assert got is not None and got.read() == expected.read()
    assert again.append(simple_batch(1), leader_epoch=1, now_ms=NOW).base_offset == 10


def test_topic_id_in_partition_metadata(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    topic_id = uuid.UUID("7d2c3e6a-1f0b-4c4e-9a51-3b0f6a2d8e11")
    plog.set_topic_id(topic_id)
    text = (plog.directory / "partition.metadata").read_text()
    assert text == "version: 0\ntopic_id: fSw-ah8LTE6aUTsPai2OEQ\n"
    plog.close()
    assert PartitionLog.open(plog.directory, LogConfig(), 0, True, NOW).topic_id == topic_id


def test_delete_removes_directory(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    plog.append(simple_batch(2), leader_epoch=0, now_ms=NOW)
    sl = plog.read(0, 1 << 20)
    plog.delete()
    assert os.listdir(tmp_path) == []
    assert sl is not None and len(offsets_in(sl.read())) == 2
