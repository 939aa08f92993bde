"""``moldau log dump`` / ``moldau log verify`` on real segment files written by PartitionLog.

The CLI runs as the installed console script (a user's view: output and exit status); the
expected offsets, positions and CRCs come from this test's own encoder (batchgen) and
arithmetic, not from the code under test.
"""

from __future__ import annotations

import dataclasses
import json
import struct
from pathlib import Path

import crc32c

from moldau.log import LogConfig, PartitionLog
from moldau.log.inspect import check_partition_dir, check_segment

from ..helpers.cli import ok, one_line_error, run_moldau
from .batchgen import simple_batch

NOW = 1_700_000_000_000
BATCH = len(simple_batch(3))


def write_log(tmp_path: Path, batches: int = 30, *, per_segment: int = 10) -> Path:
    """A partition dir with ``batches`` 3-record batches, ``per_segment`` per segment."""
    config = dataclasses.replace(LogConfig(), segment_bytes=per_segment * BATCH + 5,
                                 index_interval_bytes=1)
    plog = PartitionLog.open(tmp_path / "data" / "orders-0", config, 0, True, NOW)
    for i in range(batches):
        plog.append(simple_batch(3, timestamp=NOW + i, tag=i % 10), leader_epoch=0, now_ms=NOW)
    plog.close()
    return tmp_path / "data" / "orders-0"


def flip(path: Path, position: int) -> None:
    with open(path, "r+b") as file:
        file.seek(position)
        byte = file.read(1)[0]
        file.seek(position)
        file.write(bytes([byte ^ 0x40]))


def segment(directory: Path, base: int, suffix: str = ".log") -> Path:
    return directory / f"{base:020d}{suffix}"


def test_verify_clean_log_dir(tmp_path: Path) -> None:
    directory = write_log(tmp_path)
    result = ok(run_moldau("log", "verify", str(directory.parent)))
    assert result.stdout.startswith("OK: 1 partitions, 3 segments, 30 batches"), result.stdout
    assert "0 problems" in result.stdout


def test_verify_reports_flipped_byte_with_its_offset(tmp_path: Path) -> None:
    directory = write_log(tmp_path)
    # Segment 2 starts at offset 30; its 5th batch (offsets 42-44) starts at 4 * BATCH.
    log_file = segment(directory, 30)
    flip(log_file, 4 * BATCH + 100)
    result = run_moldau("log", "verify", str(directory.parent))
    assert result.returncode == 1, result
    lines = result.stdout.splitlines()
    assert lines[0] == (
        f"{log_file}: position {4 * BATCH}, offset 42: CRC mismatch "
        f"(stored {stored_crc(log_file, 4 * BATCH):#010x}, "
        f"computed {computed_crc(log_file, 4 * BATCH):#010x})"
    )
    assert lines[-1].startswith("CORRUPT:") and lines[-1].endswith("1 problems")
    assert len(lines) == 2
    # The partition dir alone gives the same answer; JSON gives it as data.
    as_json = run_moldau("log", "verify", str(directory), "--format", "json")
    assert as_json.returncode == 1
    objects = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert objects[0] == {"type": "problem", "file": str(log_file), "position": 4 * BATCH,
                          "offset": 42, "what": objects[0]["what"]}
    assert objects[-1]["type"] == "summary" and objects[-1]["problems"] == 1


def stored_crc(path: Path, position: int) -> int:
    return int(struct.unpack_from(">I", path.read_bytes(), position + 17)[0])


def computed_crc(path: Path, position: int) -> int:
    data = path.read_bytes()
    (length,) = struct.unpack_from(">i", data, position + 8)
    return int(crc32c.crc32c(data[position + 21 : position + 12 + length]))


def test_verify_reports_bad_index_entries_and_torn_tail(tmp_path: Path) -> None:
    directory = write_log(tmp_path)
    index = segment(directory, 0, ".index")
    data = bytearray(index.read_bytes())
    struct.pack_into(">i", data, 8 + 4, BATCH + 7)  # 2nd entry: a position inside a batch
    index.write_bytes(bytes(data) + b"\x00\x00\x00")  # and a torn trailing entry
    timeindex = segment(directory, 0, ".timeindex")
    tdata = bytearray(timeindex.read_bytes())
    struct.pack_into(">q", tdata, len(tdata) - 12, NOW + 999)  # last: a timestamp no batch has
    timeindex.write_bytes(bytes(tdata))
    with open(segment(directory, 60), "ab") as file:
        file.write(simple_batch(3)[:100])  # a torn batch at the end of the last segment
    reports = list(check_partition_dir(directory))
    problems = [p for r in reports for p in r.problems]
    whats = [(p.path.name, p.position, p.what) for p in problems]
    assert len(problems) == 4, whats
    assert any(p.path == index and p.position == 8 and "not the start of a batch" in p.what
               for p in problems), whats
    assert any(p.path == index and "torn entry" in p.what for p in problems), whats
    assert any(p.path == timeindex and p.position == len(tdata) - 12 and "max timestamp" in p.what
               for p in problems), whats
    assert any(p.path == segment(directory, 60) and p.position == 10 * BATCH
               and "runs past the end" in p.what for p in problems), whats
    assert run_moldau("log", "verify", str(directory)).returncode == 1


def test_dump_prints_offsets_positions_and_crcs(tmp_path: Path) -> None:
    directory = write_log(tmp_path, batches=4)
    log_file = segment(directory, 0)
    data = log_file.read_bytes()
    result = ok(run_moldau("log", "dump", str(log_file)))
    lines = [line for line in result.stdout.splitlines() if line.startswith("baseOffset")]
    assert len(lines) == 4
    for i, line in enumerate(lines):
        crc = struct.unpack_from(">I", data, i * BATCH + 17)[0]
        assert line.startswith(
            f"baseOffset: {3 * i} lastOffset: {3 * i + 2} count: 3 position: {i * BATCH} "
            f"size: {BATCH} magic: 2 compression: none crc: {crc:#010x} computed: {crc:#010x} "
            "valid: true producerId: -1"), line
        assert f"baseTimestamp: {NOW + i} maxTimestamp: {NOW + i}" in line


def test_dump_json_with_records_and_checked_indexes(tmp_path: Path) -> None:
    directory = write_log(tmp_path, batches=4)
    flip(segment(directory, 0), 2 * BATCH + 70)
    result = ok(run_moldau("log", "dump", str(directory), "--print-records", "--verify-index",
                           "--format", "json"))
    objects = [json.loads(line) for line in result.stdout.splitlines()]
    batches = [o for o in objects if o["type"] == "batch"]
    assert [b["baseOffset"] for b in batches] == [0, 3, 6, 9]
    assert [b["crcValid"] for b in batches] == [True, True, False, True]
    records = [o for o in objects if o["type"] == "record"]
    # Records of the damaged batch are not decoded: they cannot be trusted.
    assert [r["offset"] for r in records] == [0, 1, 2, 3, 4, 5, 9, 10, 11]
    assert records[4]["key"] == "k1-1" and records[4]["value"] == "\x02" * 10
    entries = [o for o in objects if o["type"] == "index_entry"]
    assert entries and all(e["valid"] for e in entries)
    assert {(e["offset"], e["position"]) for e in entries} <= {
        (3 * i + 2, i * BATCH) for i in range(4)}
    times = [o for o in objects if o["type"] == "time_index_entry"]
    assert times and all(t["valid"] for t in times)


def test_dump_verify_index_flags_entry_off_a_batch_start(tmp_path: Path) -> None:
    directory = write_log(tmp_path, batches=4)
    index = segment(directory, 0, ".index")
    data = bytearray(index.read_bytes())
    struct.pack_into(">i", data, 4, 5)
    index.write_bytes(bytes(data))
    result = ok(run_moldau("log", "dump", str(index), "--verify-index"))
    assert "position: 5  <-- points to position 5, which is not the start of a batch" \
        in result.stdout, result.stdout


def test_one_line_errors(tmp_path: Path) -> None:
    one_line_error(run_moldau("log", "dump", str(tmp_path / "missing.log")), "does not exist")
    other = tmp_path / "notes.txt"
    other.write_text("hello")
    one_line_error(run_moldau("log", "dump", str(other)), "not a segment file")
    one_line_error(run_moldau("log", "verify", str(tmp_path / "nowhere")), "does not exist")
    one_line_error(run_moldau("log", "verify", str(tmp_path)), "no segments")


def test_an_append_in_progress_is_not_a_torn_tail(tmp_path: Path) -> None:
    """On a live broker the active segment can end mid-batch for an instant: read on."""
    directory = write_log(tmp_path, batches=25)
    active = segment(directory, 60)
    rest = bytearray(simple_batch(3))
    struct.pack_into(">q", rest, 0, 75)  # the next offset (outside the CRC)
    with open(active, "ab") as file:
        file.write(rest[:100])  # the first part of a write...
    appended = []

    def finish_the_write(size: int) -> None:  # ...completed while the segment is read
        if not appended:
            with open(active, "ab") as file:
                file.write(rest[100:])
            appended.append(size)

    report = check_segment(active, throttle=finish_the_write)
    assert report is not None and appended
    assert report.problems == [], report.problems
    assert report.batches == 6
    # Without the rest of the write it is a torn tail.
    with open(active, "ab") as file:
        file.write(rest[:100])
    report = check_segment(active)
    assert report is not None and [p.what for p in report.problems] == [
        f"batch of {BATCH} bytes runs past the end (100 bytes left)"]
