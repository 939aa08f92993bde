"""Opening a partition after a crash: torn and corrupt tails, index rebuilds, recovery point."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import pytest

from moldau.log import LogConfig, PartitionLog

from .batchgen import Record, build_batch, decode_batches

NOW = 1_700_000_000_000


def one(i: int) -> bytes:
    return build_batch([Record(b"key", f"value-{i:04d}".encode() * 8, NOW + i)])


BATCH = len(one(0))
CONFIG = dataclasses.replace(LogConfig(), segment_bytes=4 * BATCH + 1, index_interval_bytes=BATCH)


def fill(directory: Path, count: int) -> PartitionLog:
    plog = PartitionLog.open(directory, CONFIG, 0, True, NOW)
    for i in range(count):
        plog.append(one(i), leader_epoch=0, now_ms=NOW)
    return plog


def crash(plog: PartitionLog) -> None:
    """Drop the log without flushing or writing anything (the page cache keeps the data)."""
    for segment in plog.segments:
        segment.close()


def all_values(plog: PartitionLog) -> list[bytes | None]:
    out: list[bytes | None] = []
    offset = plog.log_start_offset
    while True:
        sl = plog.read(offset, 1 << 20)
        if sl is None:
            return out
        for batch in decode_batches(sl.read()):
            out += [r.value for r in batch.records]
            offset = batch.last_offset + 1


def test_torn_tail_is_truncated(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    directory = tmp_path / "t-0"
    plog = fill(directory, 10)  # segments of 4: 0-3, 4-7, 8-9
    crash(plog)
    last = directory / f"{8:020d}.log"
    data = last.read_bytes()
    last.write_bytes(data[: BATCH + BATCH // 2])  # half of the batch at offset 9
    with caplog.at_level(logging.WARNING):
        again = PartitionLog.open(directory, CONFIG, 0, False, NOW)
    assert "truncated" in caplog.text
    assert again.log_end_offset == 9
    assert all_values(again) == [f"value-{i:04d}".encode() * 8 for i in range(9)]
    assert again.append(one(9), leader_epoch=0, now_ms=NOW).base_offset == 9
    assert again.append(one(10), leader_epoch=0, now_ms=NOW).base_offset == 10


def test_corrupt_last_batch_is_truncated(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    fill(directory, 10)  # the clean log keeps its fds; nothing was flushed
    last = directory / f"{8:020d}.log"
    data = bytearray(last.read_bytes())
    data[-5] ^= 0x10  # a flipped bit in the body of the batch at offset 9
    last.write_bytes(bytes(data))
    again = PartitionLog.open(directory, CONFIG, 0, False, NOW)
    assert again.log_end_offset == 9
    assert (directory / f"{8:020d}.log").stat().st_size == BATCH
    assert again.append(one(9), leader_epoch=0, now_ms=NOW).base_offset == 9


def test_corruption_in_middle_segment_drops_later_segments(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    fill(directory, 10)
    middle = directory / f"{4:020d}.log"
    data = bytearray(middle.read_bytes())
    data[BATCH + 70] ^= 0xFF  # batch at offset 5
    middle.write_bytes(bytes(data))
    again = PartitionLog.open(directory, CONFIG, 0, False, NOW)
    assert [s.base_offset for s in again.segments] == [0, 4]
    assert again.log_end_offset == 5
    assert not (directory / f"{8:020d}.log").exists()
    assert not (directory / f"{8:020d}.index").exists()


def test_recovery_starts_at_recovery_point(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    fill(directory, 10)
    first = directory / f"{0:020d}.log"
    data = bytearray(first.read_bytes())
    data[BATCH + 70] ^= 0xFF  # below the recovery point: not scanned
    first.write_bytes(bytes(data))
    again = PartitionLog.open(directory, CONFIG, 8, False, NOW)
    assert again.log_end_offset == 10
    assert again.recovery_point == 8


def test_clean_shutdown_skips_the_scan(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    plog = fill(directory, 10)
    plog.close()
    last = directory / f"{8:020d}.log"
    data = bytearray(last.read_bytes())
    data[-5] ^= 0x10  # a CRC error that only a scan can see
    last.write_bytes(bytes(data))
    assert PartitionLog.open(directory, CONFIG, 10, True, NOW).log_end_offset == 10
    assert PartitionLog.open(directory, CONFIG, 10, False, NOW).log_end_offset == 9


def test_torn_tail_after_clean_marker_is_still_caught(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    fill(directory, 6).close()
    with (directory / f"{4:020d}.log").open("ab") as f:
        f.write(one(99)[:30])
    again = PartitionLog.open(directory, CONFIG, 6, True, NOW)
    assert again.log_end_offset == 6
    assert again.append(one(6), leader_epoch=0, now_ms=NOW).base_offset == 6


def test_lost_or_torn_index_files_are_rebuilt(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    fill(directory, 10).close()
    index = directory / f"{0:020d}.index"
    timeindex = directory / f"{4:020d}.timeindex"
    original_index, original_time = index.read_bytes(), timeindex.read_bytes()
    index.unlink()
    timeindex.write_bytes(original_time[:-3])
    again = PartitionLog.open(directory, CONFIG, 10, True, NOW)
    assert again.log_end_offset == 10
    assert index.read_bytes() == original_index
    assert timeindex.read_bytes() == original_time
    assert len(all_values(again)) == 10
    assert again.offset_for_timestamp(NOW + 5) == (5, NOW + 5)


def test_leftovers_are_removed(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    fill(directory, 2).close()
    (directory / f"{0:020d}.log.deleted").write_bytes(b"x")
    (directory / f"{0:020d}.log.cleaned").write_bytes(b"x")
    (directory / f"{77:020d}.index").write_bytes(b"")
    PartitionLog.open(directory, CONFIG, 2, True, NOW)
    assert sorted(p.name for p in directory.iterdir()) == [
        f"{0:020d}.index", f"{0:020d}.log", f"{0:020d}.timeindex", "leader-epoch-checkpoint",
    ]


def test_log_start_beyond_end_restarts_empty(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    fill(directory, 3).close()
    again = PartitionLog.open(directory, CONFIG, 3, True, NOW, log_start_offset=50)
    assert (again.log_start_offset, again.log_end_offset, again.size_bytes) == (50, 50, 0)


def test_bit_rot_in_flushed_segment_keeps_later_segments(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    fill(directory, 10).close()
    first = directory / f"{0:020d}.log"
    data = bytearray(first.read_bytes())
    data[2 * BATCH + 70] ^= 0xFF  # batch at offset 2
    first.write_bytes(bytes(data))
    (directory / f"{0:020d}.index").unlink()  # forces a rebuild, hence a scan, of segment 0
    again = PartitionLog.open(directory, CONFIG, 10, True, NOW)
    assert [s.base_offset for s in again.segments] == [0, 4, 8]
    assert again.log_end_offset == 10
    sl = again.read(2, 1 << 20)  # the gap left by the cut is stepped over
    assert sl is not None and decode_batches(sl.read())[0].base_offset == 4
