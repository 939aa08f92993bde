"""LogSegment: append, lookups, slices, timestamps, reload, recovery, truncation, deletion."""

from __future__ import annotations

import gc
import logging
import struct
import weakref
from pathlib import Path

import crc32c

from moldau.log.batch import BatchHeader, assign_offsets, parse_batches
from moldau.log.segment import LogSegment

from .batchgen import Record, build_batch, decode_batches, simple_batch


def new_segment(directory: Path, base: int = 0, interval: int = 100,
                index_bytes: int = 1 << 20) -> LogSegment:
    return LogSegment.create(directory, base, index_interval_bytes=interval,
                             segment_index_bytes=index_bytes, now_ms=0)


def reopen(directory: Path, base: int = 0, interval: int = 100) -> LogSegment:
    return LogSegment.open(directory, base, index_interval_bytes=interval,
                           segment_index_bytes=1 << 20, now_ms=0)


def append(segment: LogSegment, *batches: bytes) -> list[BatchHeader]:
    buf = bytearray(b"".join(batches))
    headers = parse_batches(buf)
    assign_offsets(buf, headers, segment.next_offset, 0, None)
    segment.append((buf,), headers)
    return headers


def fill(segment: LogSegment, n: int = 30) -> list[tuple[int, int]]:
    """n single appends of 3-record batches with varied sizes; returns (base, last) pairs."""
    spans = []
    for i in range(n):
        (h,) = append(segment, simple_batch(3, timestamp=1_000 + i, value_size=5 + i * 7, tag=i))
        spans.append((h.base_offset, h.last_offset))
    return spans


def test_files_named_like_kafka(tmp_path: Path) -> None:
    seg = new_segment(tmp_path, 1234)
    assert [p.name for p in tmp_path.iterdir()] == ["00000000000000001234.log"]
    assert seg.size == 0 and seg.next_offset == 1234
    append(seg, simple_batch(1))  # the index files come with the first data
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["00000000000000001234.index", "00000000000000001234.log",
                     "00000000000000001234.timeindex"]


def test_append_and_find(tmp_path: Path) -> None:
    seg = new_segment(tmp_path, 100)
    spans = fill(seg)
    assert seg.next_offset == 100 + 90
    assert seg.size == (tmp_path / "00000000000000000100.log").stat().st_size
    assert len(seg.offset_index) > 3  # sparse but present
    for base, last in spans:
        for offset in (base, base + 1, last):
            header = seg.find_batch(offset)
            assert header is not None and header.base_offset == base
    assert seg.find_batch(190) is None
    assert seg.lookup(100) == 0


def test_index_entries_point_at_batch_starts(tmp_path: Path) -> None:
    seg = new_segment(tmp_path, interval=0)  # index every batch
    headers = append(seg, *(simple_batch(2, tag=i) for i in range(5)))
    assert len(seg.offset_index) == 5
    for h in headers:
        assert seg.offset_index.lookup(h.last_offset) == (h.last_offset, h.position)


def test_read_slice_rules(tmp_path: Path) -> None:
    seg = new_segment(tmp_path)
    headers = append(seg, *(simple_batch(3, value_size=50, tag=i) for i in range(10)))
    size = headers[0].size
    # Starting mid-batch returns the whole batch that holds the offset.
    sl = seg.read_slice(4, 10_000)
    assert sl is not None and sl.position == headers[1].position
    assert [b.base_offset for b in decode_batches(sl.read())] == list(range(3, 30, 3))
    # max_bytes keeps whole batches only.
    sl = seg.read_slice(0, size * 3 + size // 2)
    assert sl is not None and sl.size == size * 3
    # min_one_batch returns a batch bigger than max_bytes; without it, nothing.
    sl = seg.read_slice(6, 10)
    assert sl is not None and sl.size == size and sl.position == headers[2].position
    assert seg.read_slice(6, 10, min_one_batch=False) is None
    # max_offset (high watermark) excludes batches not entirely below it.
    sl = seg.read_slice(0, 10_000, max_offset=9)
    assert sl is not None and sl.size == size * 3
    assert seg.read_slice(0, 10_000, max_offset=8) is not None
    assert seg.read_slice(0, 10_000, max_offset=8).size == size * 2
    assert seg.read_slice(9, 10_000, max_offset=9) is None
    assert seg.read_slice(30, 10_000) is None


def test_find_offset_by_timestamp(tmp_path: Path) -> None:
    seg = new_segment(tmp_path, interval=0)
    stamps = [100, 300, 200, 500, 400, 900, 600]
    headers = append(seg, *(simple_batch(2, timestamp=t, tag=t) for t in stamps))
    for target in (0, 100, 150, 250, 300, 450, 500, 501, 900):
        expected = next(h for h in headers if h.max_timestamp >= target)
        found = seg.find_offset_by_timestamp(target, 0)
        assert found == (expected.base_offset, expected.max_timestamp), target
    assert seg.find_offset_by_timestamp(901, 0) is None
    # The starting offset cuts the batch 4..5 (ts 200): its second record answers.
    assert seg.find_offset_by_timestamp(100, 5) == (5, 200)
    assert (seg.max_timestamp, seg.offset_of_max_timestamp) == (900, 11)


def test_find_offset_by_timestamp_inside_batches(tmp_path: Path) -> None:
    seg = new_segment(tmp_path, interval=0)
    # Offsets 0..3 then 4..7; timestamps out of order inside each batch.
    append(seg, build_batch([Record(None, b"a", t) for t in (100, 130, 110, 120)]))
    append(seg, build_batch([Record(None, b"b", t) for t in (140, 150, 145, 150)]))
    assert seg.find_offset_by_timestamp(0, 0) == (0, 100)
    assert seg.find_offset_by_timestamp(101, 0) == (1, 130)
    assert seg.find_offset_by_timestamp(125, 0) == (1, 130)
    assert seg.find_offset_by_timestamp(131, 0) == (4, 140)
    assert seg.find_offset_by_timestamp(146, 0) == (5, 150)
    assert seg.find_offset_by_timestamp(151, 0) is None
    # Batch 0..3 has max 130, but nothing >= 125 at/after offset 2: the next batch answers.
    assert seg.find_offset_by_timestamp(125, 2) == (4, 140)
    assert seg.find_offset_by_timestamp(115, 2) == (3, 120)


def test_max_timestamp_record(tmp_path: Path) -> None:
    seg = new_segment(tmp_path, interval=0)
    append(seg, build_batch([Record(None, b"a", t) for t in (100, 130, 110, 130)]))  # 0..3
    append(seg, build_batch([Record(None, b"b", t) for t in (90, 125, 120)]))  # 4..6
    append(seg, build_batch([Record(None, b"c", t) for t in (80, 120)]))  # 7..8
    # The first record with the largest timestamp, not the batch base or last offset.
    assert seg.max_timestamp_record(0) == (1, 130)
    assert seg.max_timestamp_record(2) == (3, 130)
    # The log start cuts the maximum away: the best live record wins.
    assert seg.max_timestamp_record(4) == (5, 125)
    assert seg.max_timestamp_record(6) == (6, 120)
    assert seg.max_timestamp_record(7) == (8, 120)
    assert seg.max_timestamp_record(9) is None
    # Reopened from disk (time index), the same answers.
    seg.close()
    again = reopen(tmp_path, interval=0)
    assert again.max_timestamp_record(0) == (1, 130)
    assert again.find_offset_by_timestamp(121, 4) == (5, 125)


def test_undecodable_batch_falls_back_to_batch_level(tmp_path: Path, caplog) -> None:
    seg = new_segment(tmp_path, interval=0)
    batch = bytearray(build_batch([Record(None, b"a", t) for t in (100, 130, 110)]))
    # The first record's length varint points far beyond the batch; the CRC still matches,
    # as with a client that framed its records wrongly.
    batch[61] = 0x7F
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    append(seg, bytes(batch))
    with caplog.at_level(logging.WARNING, logger="moldau.log.segment"):
        assert seg.find_offset_by_timestamp(105, 0) == (0, 130)
        assert seg.find_offset_by_timestamp(105, 1) == (1, 130)
        assert seg.max_timestamp_record(0) == (0, 130)
    assert "do not decode" in caplog.text


def test_reopen_restores_state(tmp_path: Path) -> None:
    seg = new_segment(tmp_path)
    fill(seg)
    state = (seg.size, seg.next_offset, seg.max_timestamp, seg.offset_of_max_timestamp,
             seg.rolling_base_ms, len(seg.offset_index))
    index_bytes = seg.offset_index.path.read_bytes()
    seg.close()
    again = reopen(tmp_path)
    assert again.needs_recovery is None
    assert (again.size, again.next_offset, again.max_timestamp, again.offset_of_max_timestamp,
            again.rolling_base_ms, len(again.offset_index)) == state
    # Appending after reopen continues the same index spacing as recovery would produce.
    fill(again, 5)
    again.close()
    appended_index = (tmp_path / "00000000000000000000.index").read_bytes()
    assert appended_index.startswith(index_bytes)
    rebuilt = reopen(tmp_path)
    rebuilt.recover()
    assert rebuilt.offset_index.path.read_bytes() == appended_index


def test_missing_or_torn_index_needs_recovery(tmp_path: Path) -> None:
    seg = new_segment(tmp_path)
    fill(seg)
    seg.close()
    index = tmp_path / "00000000000000000000.index"
    original = index.read_bytes()
    index.unlink()
    assert reopen(tmp_path).needs_recovery is not None
    index.write_bytes(original + b"\x01")
    assert reopen(tmp_path).needs_recovery is not None
    index.write_bytes(original)
    (tmp_path / "00000000000000000000.timeindex").write_bytes(b"12345")
    seg = reopen(tmp_path)
    assert seg.needs_recovery is not None
    assert seg.recover() == 0
    assert index.read_bytes() == original
    assert seg.next_offset == 90


def test_torn_log_tail_detected_on_plain_open(tmp_path: Path) -> None:
    seg = new_segment(tmp_path)
    fill(seg, 5)
    seg.close()
    with (tmp_path / "00000000000000000000.log").open("ab") as f:
        f.write(b"\x00" * 20)
    assert reopen(tmp_path).needs_recovery is not None


def test_recover_truncates_at_corruption(tmp_path: Path) -> None:
    seg = new_segment(tmp_path)
    spans = fill(seg, 10)
    last = seg.find_batch(spans[-1][0])
    assert last is not None
    seg.close()
    log_path = tmp_path / "00000000000000000000.log"
    data = bytearray(log_path.read_bytes())
    data[last.position + 80] ^= 0x40
    log_path.write_bytes(bytes(data))
    seg = reopen(tmp_path)
    truncated = seg.recover()
    assert truncated == last.size
    assert seg.recovery_problem is not None and "CRC" in seg.recovery_problem
    assert seg.next_offset == spans[-1][0] and seg.size == last.position
    assert log_path.stat().st_size == last.position
    (h,) = append(seg, simple_batch(1))
    assert h.base_offset == spans[-1][0]


def test_truncate_to(tmp_path: Path) -> None:
    seg = new_segment(tmp_path, 10, interval=0)
    spans = fill(seg, 10)  # batches of 3: 10-12, 13-15, ...
    removed = seg.truncate_to(17)  # inside batch 16-18: the whole batch goes
    assert removed > 0 and seg.next_offset == 16
    assert seg.offset_index.last_entry()[0] == 15
    assert seg.max_timestamp == 1_001 and seg.offset_of_max_timestamp == 15
    assert seg.truncate_to(100) == 0
    (h,) = append(seg, simple_batch(1))
    assert h.base_offset == 16
    seg.truncate_to(10)
    assert seg.size == 0 and seg.next_offset == 10 and len(seg.offset_index) == 0
    assert spans


def test_delete_keeps_outstanding_slices_readable(tmp_path: Path) -> None:
    seg = new_segment(tmp_path)
    fill(seg, 5)
    sl = seg.read_slice(0, 1 << 20)
    assert sl is not None
    expected = sl.read()
    handle = weakref.ref(sl.file)
    seg.delete()
    assert list(tmp_path.iterdir()) == []
    assert sl.read() == expected
    del seg
    gc.collect()
    assert sl.read() == expected
    del sl
    gc.collect()
    assert handle() is None  # the read handle went away with its last slice
