"""Read segment files without a broker: every batch with its CRC checked, indexes checked too.

What ``moldau log dump`` and ``moldau log verify`` print (see :mod:`moldau.cli.log_tools`)
and what the background scrubber (:mod:`scrubber`) re-checks. A segment written by the broker
was CRC-checked on the way in; this module catches what happened to it afterwards (a flipped
bit on disk, a bad copy, a hand edit), which the broker would otherwise serve silently, as
Kafka does.

Everything here is read-only and takes no lock, so it runs on a stopped broker's data dir and
on a live one. Live-broker details: index files are read *before* the log's size is taken,
so an index entry always describes a batch that is inside the scanned range (the broker
appends to the log first, then to the indexes); a segment that retention or compaction
deletes meanwhile keeps its data readable through the open descriptor, and one that is gone
before it was opened is skipped, not reported.

Speed: the log is read with large ``os.pread`` calls and checked per batch (one
``struct.unpack`` and one CRC32C call in C over a memoryview); records are never decoded
unless asked for. A batch larger than the read size has its CRC computed incrementally, so
memory stays bounded by the read size whatever a damaged length field claims.
"""

from __future__ import annotations

import os
import struct
from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import crc32c

from .batch import ATTRIBUTES_POS, BATCH_HEADER_SIZE, MAGIC_V2, MIN_BATCH_LENGTH, BatchHeader
from .batch import read_header as _read_header
from .index import OffsetIndex, TimeIndex
from .segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX
from .txn_index import TXN_INDEX_SUFFIX

#: Bytes per read: large enough that syscalls do not matter, small enough to stay in cache.
READ_CHUNK_BYTES = 4 << 20

#: How often a segment that grows while it is read (the active one of a live broker) is
#: read on before its tail is reported as torn.
_TAIL_RETRIES = 3
SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
assert _OFFSET_ENTRY.size == OffsetIndex.ENTRY_SIZE and _TIME_ENTRY.size == TimeIndex.ENTRY_SIZE


class NotASegmentError(ValueError):
    """A path that is not a segment file (or a directory holding none)."""


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong in a file: where (byte position in ``path``), which offset, what."""

    path: Path
    position: int
    #: The offset concerned (a batch's base offset, an index entry's offset); -1 if unknown.
    offset: int
    what: str

    def __str__(self) -> str:
        return f"{self.path}: position {self.position}, offset {self.offset}: {self.what}"


@dataclass(frozen=True, slots=True)
class ScannedBatch:
    """A batch as found in a log file, with the CRC computed over its bytes."""

    header: BatchHeader
    computed_crc: int
    #: The whole batch, when the scan was asked to keep bytes (for decoding records).
    data: memoryview | None = None

    @property
    def crc_ok(self) -> bool:
        return self.computed_crc == self.header.crc


#: Called with the number of bytes just read; the scrubber sleeps in it to bound its rate
#: (and raises to abandon a scan).
Throttle = Callable[[int], None]


class BatchScan:
    """Iterate every batch of ``[start, size)`` of a log file, computing each one's CRC.

    Unlike recovery's :class:`~moldau.log.batch.RecoveryScan`, a CRC mismatch does not stop the
    scan (the length field framed the batch, so the next one can still be found): the caller
    sees ``crc_ok`` false and goes on. The scan stops where framing breaks (impossible length,
    a batch running past the end, a magic other than 2); ``problem`` then says why and
    ``end`` is where the last whole batch ended.
    """

    def __init__(
        self,
        fd: int,
        size: int,
        *,
        start: int = 0,
        keep_bytes: bool = False,
        chunk_size: int = READ_CHUNK_BYTES,
        throttle: Throttle | None = None,
    ) -> None:
        self.fd = fd
        self.size = size
        self.start = start
        self.keep_bytes = keep_bytes
        self.chunk_size = max(chunk_size, BATCH_HEADER_SIZE)
        self.throttle = throttle
        self.end = start
        self.problem: str | None = None

    def _read(self, size: int, position: int) -> bytes:
        data = os.pread(self.fd, size, position)
        if self.throttle is not None:
            self.throttle(len(data))
        return data

    def __iter__(self) -> Iterator[ScannedBatch]:
        chunk = b""
        chunk_start = pos = self.start
        while pos < self.size:
            remaining = self.size - pos
            if remaining < BATCH_HEADER_SIZE:
                self.problem = f"{remaining} bytes at the end are too short for a batch header"
                return
            at = pos - chunk_start
            if at + BATCH_HEADER_SIZE > len(chunk):
                chunk, chunk_start, at = self._read(min(self.chunk_size, remaining), pos), pos, 0
                if len(chunk) < BATCH_HEADER_SIZE:
                    self.problem = "the file ends before its recorded size"
                    return
            header = _read_header(chunk, at, pos)
            self.problem = framing_problem(header, remaining)
            if self.problem is not None:
                return
            if at + header.size > len(chunk) and header.size <= self.chunk_size:
                chunk, chunk_start, at = self._read(min(self.chunk_size, remaining), pos), pos, 0
            if at + header.size <= len(chunk):
                view = memoryview(chunk)[at : at + header.size]
                computed = crc32c.crc32c(view[ATTRIBUTES_POS:])
                yield ScannedBatch(header, computed, view if self.keep_bytes else None)
            else:
                scanned = self._large_batch(header)
                if scanned is None:
                    self.problem = "the file ends before its recorded size"
                    return
                yield scanned
            pos = self.end = header.end

    def _large_batch(self, header: BatchHeader) -> ScannedBatch | None:
        """A batch bigger than a read: CRC it piece by piece (or whole when bytes are kept)."""
        if self.keep_bytes:
            data = self._read(header.size, header.position)
            if len(data) != header.size:
                return None
            view = memoryview(data)
            return ScannedBatch(header, crc32c.crc32c(view[ATTRIBUTES_POS:]), view)
        crc = 0
        pos = header.position + ATTRIBUTES_POS
        while pos < header.end:
            piece = self._read(min(self.chunk_size, header.end - pos), pos)
            if not piece:
                return None
            crc = crc32c.crc32c(piece, value=crc)
            pos += len(piece)
        return ScannedBatch(header, crc)


def framing_problem(header: BatchHeader, remaining: int) -> str | None:
    """Why the header at hand cannot be a batch stored in ``remaining`` bytes (None: it can)."""
    if header.batch_length < MIN_BATCH_LENGTH:
        return f"impossible batch length {header.batch_length}"
    if header.size > remaining:
        return f"batch of {header.size} bytes runs past the end ({remaining} bytes left)"
    if header.magic != MAGIC_V2:
        return f"unexpected magic {header.magic}"
    if header.last_offset_delta < 0:
        return f"negative lastOffsetDelta {header.last_offset_delta}"
    return None


def base_offset_of(path: Path) -> int:
    """The base offset in a segment file's name (``00000000000000000042.log`` -> 42)."""
    stem, suffix = os.path.splitext(path.name)
    if suffix not in SEGMENT_SUFFIXES or not stem.isdigit() or len(stem) != 20:
        raise NotASegmentError(
            f"{path} is not a segment file (expected a 20-digit base offset and one of "
            f"{', '.join(SEGMENT_SUFFIXES)})"
        )
    return int(stem)


def segment_files(path: Path) -> list[Path]:
    """The segment files a path names: itself, or those of a partition directory, in order.

    Raises FileNotFoundError for a missing path and NotASegmentError for anything else.
    """
    if path.is_dir():
        files = sorted(
            (p for p in path.iterdir() if p.suffix in SEGMENT_SUFFIXES and _is_segment(p)),
            key=lambda p: (p.name[:20], SEGMENT_SUFFIXES.index(p.suffix)),
        )
        if not files:
            raise NotASegmentError(f"{path} holds no segment files")
        return files
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist")
    base_offset_of(path)
    return [path]


def _is_segment(path: Path) -> bool:
    try:
        base_offset_of(path)
    except NotASegmentError:
        return False
    return True


def partition_dirs(path: Path) -> list[Path]:
    """Partition directories under ``path``: itself when it holds segments, else its children.

    Directories of topics being deleted (``-delete``) and the cleaner's temporary files are
    not segments and are skipped. Raises FileNotFoundError / NotASegmentError.
    """
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist")
    if not path.is_dir():
        raise NotASegmentError(f"{path} is not a directory")
    if any(_is_log(p) for p in path.iterdir()):
        return [path]
    found = sorted(p for p in path.iterdir() if p.is_dir() and any(_is_log(c) for c in p.iterdir()))
    if not found:
        raise NotASegmentError(f"{path} is neither a log dir nor a partition dir (no segments)")
    return found


def _is_log(path: Path) -> bool:
    return path.suffix == LOG_SUFFIX and _is_segment(path)


# -- one segment -----------------------------------------------------------------------------


@dataclass(slots=True)
class BatchTable:
    """Where each batch of a log file starts and what it holds: enough to check indexes."""

    positions: array[int] = field(default_factory=lambda: array("q"))
    last_offsets: array[int] = field(default_factory=lambda: array("q"))
    max_timestamps: array[int] = field(default_factory=lambda: array("q"))
    #: Bytes of whole batches (the log's size when nothing is torn).
    end: int = 0

    def add(self, header: BatchHeader) -> None:
        self.positions.append(header.position)
        self.last_offsets.append(header.last_offset)
        self.max_timestamps.append(header.max_timestamp)


@dataclass(slots=True)
class SegmentReport:
    """What checking one segment found."""

    log_path: Path
    batches: int = 0
    bytes_checked: int = 0
    problems: list[Problem] = field(default_factory=list)


def check_batches(
    path: Path,
    base_offset: int,
    scan: BatchScan,
    report: SegmentReport,
    table: BatchTable | None = None,
    on_batch: Callable[[ScannedBatch], None] | None = None,
) -> None:
    """Run ``scan`` over a log file, adding a problem per bad batch and one where framing ends.

    Checks: CRC, offsets at or above the segment base and increasing from batch to batch.
    """
    next_offset = base_offset
    for batch in scan:
        header = batch.header
        report.batches += 1
        if not batch.crc_ok:
            report.problems.append(Problem(
                path, header.position, header.base_offset,
                f"CRC mismatch (stored {header.crc:#010x}, computed {batch.computed_crc:#010x})"))
        elif header.base_offset < next_offset:
            report.problems.append(Problem(
                path, header.position, header.base_offset,
                f"offset goes backwards (expected at least {next_offset})"))
        if batch.crc_ok:
            next_offset = max(next_offset, header.next_offset)
        if table is not None:
            table.add(header)
        if on_batch is not None:
            on_batch(batch)
    report.bytes_checked += scan.end - scan.start
    if table is not None:
        table.end = scan.end
    if scan.problem is not None:
        report.problems.append(Problem(path, scan.end, next_offset, scan.problem))


@dataclass(frozen=True, slots=True)
class IndexEntry:
    """One index entry: offset -> position (``.index``) or timestamp -> offset (``.timeindex``)."""

    #: Byte position of the entry in the index file.
    entry_position: int
    offset: int
    #: File position for ``.index`` entries, timestamp for ``.timeindex`` entries.
    value: int
    #: What is wrong with it, when checked against the log (None: fine or not checked).
    problem: str | None = None


def parse_offset_index(data: bytes, base_offset: int, table: BatchTable | None) -> tuple[
        list[IndexEntry], str | None]:
    """The entries of a ``.index`` file's bytes, each checked against ``table`` when given.

    Checks, as ``kafka-dump-log`` does: each entry points at the start of a batch whose last
    offset is the entry's offset; entries grow. The second value is a whole-file problem
    (a torn trailing entry).
    """
    entries: list[IndexEntry] = []
    last_offset = last_position = -1
    for i, (relative, position) in enumerate(_OFFSET_ENTRY.iter_unpack(_whole(data, 8))):
        offset = base_offset + relative
        problem = None
        if offset <= last_offset or position <= last_position:
            problem = "entries do not increase"
        elif table is not None:
            problem = _offset_entry_problem(table, offset, position)
        entries.append(IndexEntry(i * _OFFSET_ENTRY.size, offset, position, problem))
        last_offset, last_position = offset, position
    return entries, _torn(data, _OFFSET_ENTRY.size)


def _offset_entry_problem(table: BatchTable, offset: int, position: int) -> str | None:
    if position >= table.end:
        return f"points to position {position}, past the last whole batch (ends at {table.end})"
    i = bisect_left(table.positions, position)
    if i == len(table.positions) or table.positions[i] != position:
        return f"points to position {position}, which is not the start of a batch"
    if table.last_offsets[i] != offset:
        return f"points to the batch at {position}, whose last offset is {table.last_offsets[i]}"
    return None


def parse_time_index(data: bytes, base_offset: int, table: BatchTable | None) -> tuple[
        list[IndexEntry], str | None]:
    """The entries of a ``.timeindex`` file's bytes, each checked against ``table`` when given.

    Checks: each entry's offset is the last offset of a batch whose max timestamp is the
    entry's timestamp; timestamps and offsets do not decrease.
    """
    entries: list[IndexEntry] = []
    last_timestamp = last_offset = -1 << 63
    for i, (timestamp, relative) in enumerate(_TIME_ENTRY.iter_unpack(_whole(data, 12))):
        offset = base_offset + relative
        problem = None
        if timestamp < last_timestamp or offset < last_offset:
            problem = "entries go backwards"
        elif table is not None:
            problem = _time_entry_problem(table, offset, timestamp)
        entries.append(IndexEntry(i * _TIME_ENTRY.size, offset, timestamp, problem))
        last_timestamp, last_offset = timestamp, offset
    return entries, _torn(data, _TIME_ENTRY.size)


def _time_entry_problem(table: BatchTable, offset: int, timestamp: int) -> str | None:
    i = bisect_left(table.last_offsets, offset)
    if i == len(table.last_offsets) or table.last_offsets[i] != offset:
        return f"offset {offset} is not the last offset of a batch in the log"
    if table.max_timestamps[i] != timestamp:
        return f"timestamp {timestamp} differs from the batch's max timestamp " \
               f"{table.max_timestamps[i]}"
    return None


def _whole(data: bytes, entry_size: int) -> bytes:
    return data[: len(data) - len(data) % entry_size]


def _torn(data: bytes, entry_size: int) -> str | None:
    extra = len(data) % entry_size
    return f"{extra} trailing bytes: a torn entry" if extra else None


def check_segment(log_path: Path, *, throttle: Throttle | None = None) -> SegmentReport | None:
    """Check one segment (log CRCs and framing, then both indexes against the log).

    Returns None when the segment vanished before it could be opened (deleted by retention
    or compaction on a live broker).
    """
    base_offset = base_offset_of(log_path)
    index_path = log_path.with_suffix(INDEX_SUFFIX)
    time_path = log_path.with_suffix(TIME_INDEX_SUFFIX)
    report = SegmentReport(log_path)
    # Indexes first (see the module docstring): their entries then describe scanned batches.
    try:
        offset_data = index_path.read_bytes()
    except FileNotFoundError:
        offset_data = None
    try:
        time_data = time_path.read_bytes()
    except FileNotFoundError:
        time_data = None
    try:
        fd = os.open(log_path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        table = BatchTable()
        size, start = os.fstat(fd).st_size, 0
        for _ in range(_TAIL_RETRIES):
            scan = BatchScan(fd, size, start=start, throttle=throttle)
            check_batches(log_path, base_offset, scan, report, table)
            grown = os.fstat(fd).st_size
            if scan.problem is None or grown <= size:
                break
            # The file grew while we read it: the "torn" tail was an append in progress on
            # a live broker. Read on from the last whole batch instead of reporting it.
            report.problems.pop()
            size, start = grown, scan.end
    finally:
        os.close(fd)
    # A segment gets its index files with its first data: an empty one needs none (and one
    # written to meanwhile on a live broker has them by now).
    if offset_data is None and (size == 0 or index_path.exists()):
        offset_data = b""
    if time_data is None and (size == 0 or time_path.exists()):
        time_data = b""
    if offset_data is None:
        report.problems.append(Problem(index_path, 0, base_offset, "offset index missing"))
    else:
        _index_problems(report, index_path, parse_offset_index(offset_data, base_offset, table),
                        _OFFSET_ENTRY.size)
    if time_data is None:
        report.problems.append(Problem(time_path, 0, base_offset, "time index missing"))
    else:
        _index_problems(report, time_path, parse_time_index(time_data, base_offset, table),
                        _TIME_ENTRY.size)
    return report


def _index_problems(report: SegmentReport, path: Path, result: tuple[list[IndexEntry], str | None],
                    entry_size: int) -> None:
    entries, torn = result
    for entry in entries:
        if entry.problem is not None:
            report.problems.append(Problem(path, entry.entry_position, entry.offset,
                                           f"index entry {entry.problem}"))
    if torn is not None:
        report.problems.append(Problem(path, len(entries) * entry_size, -1, torn))


def check_partition_dir(directory: Path, *, throttle: Throttle | None = None) -> Iterator[
        SegmentReport]:
    """Check every segment of a partition directory, oldest first."""
    logs = sorted(p for p in directory.iterdir() if _is_log(p))
    for log_path in logs:
        report = check_segment(log_path, throttle=throttle)
        if report is not None:
            yield report
