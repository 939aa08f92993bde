"""How fast the log cleaner compacts a log, in process (no broker), as JSON lines.

    python -m bench.cleaner [--records N] [--keys K] [--batch B] [--reps R] [--transactional]

Writes one compacted partition of ``N`` records of 100-byte values over ``K`` keys, in
batches of ``B`` records and 1 MiB segments, into a temporary directory, then times one full
clean (offset map, rewrite, swap) of a fresh copy per repetition. With ``--transactional``
every batch is written by a transactional producer, one transaction per 10 batches, every
fifth transaction aborted, each closed by its marker (needs the partition side of
transactions). Prints the median and the fastest wall seconds, the median CPU seconds (the
figure least disturbed by other load on a shared machine), every repetition's wall seconds,
and MB/s of input at the median.
Bounded: the record count is capped at 5 million and each repetition runs once.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import struct
import tempfile
import time
from pathlib import Path
from typing import Any

import crc32c

from moldau.log import LogConfig, LogManager
from moldau.log.cleaner import LogCleaner
from moldau.log.control_batch import ControlType
from moldau.log.records_writer import encode_batch

TOPIC = "bench-compact"
NOW = 1_700_000_000_000
MAX_RECORDS = 5_000_000


def _config() -> LogConfig:
    return LogConfig(segment_bytes=1 << 20, cleanup_policy=("compact",),
                     min_cleanable_dirty_ratio=0.0, delete_retention_ms=0)


def _set_producer(batch: bytes, producer_id: int, sequence: int, transactional: bool) -> bytes:
    """``batch`` as written by producer ``producer_id`` (epoch 0) from ``sequence``."""
    out = bytearray(batch)
    attributes = struct.unpack_from(">h", out, 21)[0] | (0x10 if transactional else 0)
    struct.pack_into(">h", out, 21, attributes)
    struct.pack_into(">qhi", out, 43, producer_id, 0, sequence)
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[21:])))
    return bytes(out)


def write_log(directory: Path, records: int, keys: int, batch: int,
              transactional: bool) -> int:
    """Write the benchmark log; returns its size in bytes."""
    config = _config()
    manager = LogManager([directory], node_id=0, default_config=config, now_ms=NOW)
    plog = manager.create(TOPIC, 0, config, now_ms=NOW)
    value = b"v" * 100
    sequence = 0
    for n, start in enumerate(range(0, records, batch)):
        rows = [(f"key-{(start + i) % keys}".encode(), value)
                for i in range(min(batch, records - start))]
        data = encode_batch(rows, NOW)
        if transactional:
            data = _set_producer(data, 1, sequence, True)
            sequence += len(rows)
        plog.append(data, leader_epoch=0, now_ms=NOW)
        if transactional and n % 10 == 9:
            control = ControlType.ABORT if n % 50 == 49 else ControlType.COMMIT
            plog.append_marker(1, 0, control, 0, leader_epoch=0, now_ms=NOW)
    plog.high_watermark = plog.log_end_offset
    plog.roll(NOW)
    size = plog.size_bytes
    manager.close()
    return size


def clean_copy(source: Path, work: Path) -> tuple[float, float]:
    """Wall and CPU seconds of one full clean of a fresh copy of ``source`` (the cleaner runs
    inline on this thread; CPU time is the figure least disturbed by other load)."""
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(source, work)
    config = _config()
    manager = LogManager([work], node_id=0, default_config=config, now_ms=NOW)
    cleaner = LogCleaner(manager)
    start, cpu = time.perf_counter(), time.process_time()
    results = cleaner.clean_once(NOW + 1)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    manager.close()
    if not results:
        raise RuntimeError("nothing was cleaned")
    return elapsed, cpu


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--transactional", action="store_true")
    args = parser.parse_args(argv)
    records = min(args.records, MAX_RECORDS)
    with tempfile.TemporaryDirectory(prefix="moldau-cleaner-") as tmp:
        source, work = Path(tmp) / "source", Path(tmp) / "work"
        source.mkdir()
        size = write_log(source, records, args.keys, args.batch, args.transactional)
        runs = [clean_copy(source, work) for _ in range(args.reps)]
    times = [wall for wall, _ in runs]
    cpus = [cpu for _, cpu in runs]
    result: dict[str, Any] = {
        "bench": "cleaner", "records": records, "keys": args.keys, "batch": args.batch,
        "transactional": args.transactional, "log_mb": round(size / 1e6, 1),
        "median_s": round(statistics.median(times), 3), "min_s": round(min(times), 3),
        "cpu_median_s": round(statistics.median(cpus), 3),
        "mb_per_s": round(size / 1e6 / statistics.median(times), 1),
        "runs_s": [round(t, 3) for t in times],
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
