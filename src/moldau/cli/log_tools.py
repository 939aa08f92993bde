"""``moldau log``: look inside segment files without a broker (``dump``, ``verify``).

``dump`` is moldau's ``kafka-dump-log``: every batch of a ``.log`` file with its offsets,
position, size, stored and computed CRC, codec, producer fields and timestamps, optionally its
records; every entry of a ``.index`` / ``.timeindex`` (optionally checked against the log)
and every aborted transaction of a ``.txnindex``.
``verify`` checks whole log dirs fast and answers with an exit status (0 clean, 1 problems).
Both only read, so they are safe on a live broker's data dir. The reading and checking is in
:mod:`moldau.log.inspect`; this module only formats.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from ..log.errors import CorruptRecordError
from ..log.inspect import (
    BatchScan,
    BatchTable,
    NotASegmentError,
    Problem,
    ScannedBatch,
    SegmentReport,
    base_offset_of,
    check_batches,
    check_partition_dir,
    parse_offset_index,
    parse_time_index,
    partition_dirs,
    segment_files,
)
from ..log.records import decode_records
from ..log.records_reader import iter_batch_records
from ..log.segment import INDEX_SUFFIX, LOG_SUFFIX
from ..log.txn_index import ENTRY_SIZE as TXN_ENTRY_SIZE
from ..log.txn_index import TXN_INDEX_SUFFIX, TransactionIndex
from .errors import CliError

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
_CONTROL_TYPES = {0: "ABORT", 1: "COMMIT"}


@click.group("log")
def log_group() -> None:
    """Inspect and verify segment files on disk (read-only; safe on a live broker)."""


#: Control characters would garble a terminal: text output shows them as ``\xNN`` (JSON
#: escapes them itself).
_ESCAPES = {c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F)}


def _text(data: bytes | None) -> str | None:
    """Keys and values as text: UTF-8 where it is, backslash escapes for other bytes."""
    return None if data is None else data.decode("utf-8", "backslashreplace")


class _Output:
    """Writes either text lines or JSON Lines (one object per line, each with a ``type``)."""

    def __init__(self, fmt: str) -> None:
        self.json = fmt == "json"

    def emit(self, kind: str, text: str, fields: dict[str, Any]) -> None:
        if self.json:
            click.echo(json.dumps({"type": kind, **fields}))
        else:
            click.echo(text)


def _batch_fields(path: Path, batch: ScannedBatch) -> dict[str, Any]:
    h = batch.header
    return {
        "file": str(path), "baseOffset": h.base_offset, "lastOffset": h.last_offset,
        "count": h.records_count, "position": h.position, "size": h.size, "magic": h.magic,
        "crc": h.crc, "computedCrc": batch.computed_crc, "crcValid": batch.crc_ok,
        "compression": CODECS[h.compression] if h.compression < len(CODECS) else h.compression,
        "producerId": h.producer_id, "producerEpoch": h.producer_epoch,
        "baseSequence": h.base_sequence, "partitionLeaderEpoch": h.partition_leader_epoch,
        "isTransactional": h.is_transactional, "isControl": h.is_control,
        "timestampType": "LogAppendTime" if h.timestamp_type else "CreateTime",
        "baseTimestamp": h.base_timestamp, "maxTimestamp": h.max_timestamp,
    }


def _batch_text(f: dict[str, Any]) -> str:
    flag = "" if f["crcValid"] else "  <-- CRC MISMATCH"
    return (
        f"baseOffset: {f['baseOffset']} lastOffset: {f['lastOffset']} count: {f['count']} "
        f"position: {f['position']} size: {f['size']} magic: {f['magic']} "
        f"compression: {f['compression']} crc: {f['crc']:#010x} computed: "
        f"{f['computedCrc']:#010x} valid: {str(f['crcValid']).lower()} "
        f"producerId: {f['producerId']} producerEpoch: {f['producerEpoch']} "
        f"baseSequence: {f['baseSequence']} partitionLeaderEpoch: {f['partitionLeaderEpoch']} "
        f"isTransactional: {str(f['isTransactional']).lower()} "
        f"isControl: {str(f['isControl']).lower()} {f['timestampType']}: "
        f"baseTimestamp: {f['baseTimestamp']} maxTimestamp: {f['maxTimestamp']}{flag}"
    )


def _record_lines(batch: ScannedBatch) -> Iterator[dict[str, Any]]:
    """The records of a batch, decoded; a control batch shows its marker type."""
    assert batch.data is not None
    if batch.header.is_control:
        _, _, views = decode_records(batch.data)
        for view in views:
            key = view.key or b""
            kind = int.from_bytes(key[2:4], "big") if len(key) >= 4 else -1
            yield {"offset": view.offset, "timestamp": view.timestamp,
                   "control": _CONTROL_TYPES.get(kind, f"type {kind}")}
        return
    for record in iter_batch_records(batch.data):
        yield {"offset": record.offset, "timestamp": record.timestamp,
               "key": _text(record.key), "value": _text(record.value)}


def _record_text(r: dict[str, Any]) -> str:
    if "control" in r:
        return f"| offset: {r['offset']} timestamp: {r['timestamp']} control: {r['control']}"
    key = "null" if r["key"] is None else r["key"].translate(_ESCAPES)
    value = "null" if r["value"] is None else r["value"].translate(_ESCAPES)
    return f"| offset: {r['offset']} timestamp: {r['timestamp']} key: {key} value: {value}"


def _problem_fields(problem: Problem) -> dict[str, Any]:
    return {"file": str(problem.path), "position": problem.position, "offset": problem.offset,
            "what": problem.what}


def _dump_log(path: Path, out: _Output, print_records: bool) -> BatchTable:
    """Print every batch of a log file; return where its batches are (for index checks)."""
    table = BatchTable()
    report = SegmentReport(path)

    def show(batch: ScannedBatch) -> None:
        fields = _batch_fields(path, batch)
        out.emit("batch", _batch_text(fields), fields)
        if print_records and batch.data is not None and batch.crc_ok:
            try:
                for record in _record_lines(batch):
                    out.emit("record", _record_text(record), {"file": str(path), **record})
            except CorruptRecordError as exc:
                fields = {"file": str(path), "position": batch.header.position,
                          "offset": batch.header.base_offset,
                          "what": f"records do not decode: {exc}"}
                out.emit("problem", f"| records do not decode: {exc}", fields)

    with open(path, "rb", buffering=0) as file:
        scan = BatchScan(file.fileno(), os.fstat(file.fileno()).st_size, keep_bytes=print_records)
        check_batches(path, base_offset_of(path), scan, report, table, show)
    for problem in report.problems:
        if "CRC mismatch" not in problem.what:  # already flagged on the batch line
            out.emit("problem", f"Problem: {problem}", _problem_fields(problem))
    return table


def _table_for(index_path: Path, tables: dict[Path, BatchTable]) -> BatchTable:
    log_path = index_path.with_suffix(LOG_SUFFIX)
    if log_path not in tables:
        if not log_path.exists():
            raise CliError(f"cannot verify {index_path}: {log_path} does not exist")
        table = BatchTable()
        with open(log_path, "rb", buffering=0) as file:
            scan = BatchScan(file.fileno(), os.fstat(file.fileno()).st_size)
            check_batches(log_path, base_offset_of(log_path), scan, SegmentReport(log_path), table)
        tables[log_path] = table
    return tables[log_path]


def _dump_index(path: Path, out: _Output, table: BatchTable | None) -> int:
    """Print an index file's entries; return how many are wrong (0 when not checked)."""
    base = base_offset_of(path)
    data = path.read_bytes()
    offset_index = path.suffix == INDEX_SUFFIX
    entries, torn = (parse_offset_index if offset_index else parse_time_index)(data, base, table)
    bad = 0
    for entry in entries:
        if offset_index:
            fields: dict[str, Any] = {"file": str(path), "offset": entry.offset,
                                      "position": entry.value}
            text = f"offset: {entry.offset} position: {entry.value}"
        else:
            fields = {"file": str(path), "timestamp": entry.value, "offset": entry.offset}
            text = f"timestamp: {entry.value} offset: {entry.offset}"
        if table is not None:
            fields["valid"] = entry.problem is None
            if entry.problem is not None:
                fields["problem"] = entry.problem
                text += f"  <-- {entry.problem}"
                bad += 1
        out.emit("index_entry" if offset_index else "time_index_entry", text, fields)
    if torn is not None:
        out.emit("problem", f"Problem: {path}: {torn}",
                 {"file": str(path), "position": len(data) - len(data) % (8 if offset_index
                                                                          else 12),
                  "offset": -1, "what": torn})
    return bad


def _dump_txn_index(path: Path, out: _Output) -> None:
    """Print a ``.txnindex`` file's aborted transactions (34-byte entries, Kafka's layout)."""
    index = TransactionIndex(path)
    index.load()
    for entry in index.entries:
        out.emit("aborted_txn",
                 f"producerId: {entry.producer_id} firstOffset: {entry.first_offset} "
                 f"lastOffset: {entry.last_offset} lastStableOffset: "
                 f"{entry.last_stable_offset}",
                 {"file": str(path), "producerId": entry.producer_id,
                  "firstOffset": entry.first_offset, "lastOffset": entry.last_offset,
                  "lastStableOffset": entry.last_stable_offset})
    size = path.stat().st_size
    if size % TXN_ENTRY_SIZE:
        out.emit("problem", f"Problem: {path}: a torn entry of {size % TXN_ENTRY_SIZE} bytes",
                 {"file": str(path), "position": size - size % TXN_ENTRY_SIZE, "offset": -1,
                  "what": "torn entry"})


def _expand(paths: tuple[Path, ...]) -> list[Path]:
    files: list[Path] = []
    for path in paths:
        try:
            files.extend(segment_files(path))
        except (FileNotFoundError, NotASegmentError) as exc:
            raise CliError(str(exc)) from None
    return files


@log_group.command("dump")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--print-records", is_flag=True,
              help="Decode and print every record (offset, timestamp, key, value).")
@click.option("--verify-index", is_flag=True,
              help="Check each index entry against the log: it must point at a batch start.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="json: one JSON object per line, each with a 'type'.")
def dump(paths: tuple[Path, ...], print_records: bool, verify_index: bool, fmt: str) -> None:
    """Print the batches of .log files and the entries of .index/.timeindex/.txnindex files.

    PATHS are segment files or partition directories (all their segment files, in order).
    """
    out = _Output(fmt)
    tables: dict[Path, BatchTable] = {}
    for path in _expand(paths):
        out.emit("file", f"Dumping {path}", {"file": str(path)})
        try:
            if path.suffix == LOG_SUFFIX:
                tables[path] = _dump_log(path, out, print_records)
            elif path.suffix == TXN_INDEX_SUFFIX:
                _dump_txn_index(path, out)
            else:
                table = _table_for(path, tables) if verify_index else None
                _dump_index(path, out, table)
        except FileNotFoundError:
            raise CliError(f"{path} disappeared while reading it") from None
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise CliError(f"cannot read {path}: {exc.strerror or exc}") from None


@log_group.command("verify")
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="json: one JSON object per problem, then a summary.")
def verify(directory: Path, fmt: str) -> None:
    """Check every batch CRC and both indexes of a log dir or partition dir.

    Prints one line per problem (file, position, offset, what) and a summary. Exit status 0
    when everything is sound, 1 when a problem was found.
    """
    out = _Output(fmt)
    try:
        dirs = partition_dirs(directory)
    except (FileNotFoundError, NotASegmentError) as exc:
        raise CliError(str(exc)) from None
    started = time.monotonic()
    segments = batches = checked = problems = 0
    for partition_dir in dirs:
        try:
            reports = list(check_partition_dir(partition_dir))
        except FileNotFoundError:
            continue  # the partition was deleted while we looked
        except OSError as exc:
            raise CliError(f"cannot read {partition_dir}: {exc.strerror or exc}") from None
        for report in reports:
            segments += 1
            batches += report.batches
            checked += report.bytes_checked
            for problem in report.problems:
                problems += 1
                out.emit("problem", str(problem), _problem_fields(problem))
    elapsed = time.monotonic() - started
    summary = {"partitions": len(dirs), "segments": segments, "batches": batches,
               "bytes": checked, "problems": problems, "seconds": round(elapsed, 3)}
    out.emit("summary",
             f"{'OK' if not problems else 'CORRUPT'}: {len(dirs)} partitions, {segments} "
             f"segments, {batches} batches, {checked} bytes checked in {elapsed:.2f} s, "
             f"{problems} problems", summary)
    if problems:
        raise SystemExit(1)
