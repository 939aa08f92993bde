"""One log segment: ``<base>.log`` with its ``.index``, ``.timeindex`` and ``.txnindex``.

The ``.log`` file is written with raw ``os.write`` on an ``O_APPEND`` descriptor and read with
``os.pread`` / ``sendfile`` on a separate read handle. No Python-level buffering is involved,
because the broker serves a fetch with ``sendfile`` right after an append: the bytes must
already be in the kernel's page cache, not in a userspace buffer.

The segment keeps in memory what reads and rolls need without touching the disk: its size,
the next offset, the largest timestamp seen (and the last offset of the batch that carried
it, as Kafka's time index does), and the timestamp used for ``segment.ms`` rolling.

Descriptors: none is open while the segment is idle. The read handle, the write descriptor
and the index descriptors are opened on first use, and the segment then registers with the
process-wide cache of open segments (:mod:`open_files`), which makes the least recently used
segments release theirs beyond a bound; :meth:`LogSegment.seal` releases the write and index
descriptors when the segment stops being active. A released read handle stays alive as long
as a :class:`FileSlice` handed out earlier still uses it (see :mod:`file_slice`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

from .batch import NO_TIMESTAMP, BatchHeader, RecoveryScan, iter_batch_headers
from .errors import CorruptRecordError, LogError
from .file_slice import FileSlice, ReadHandle
from .fileio import Chunk, write_all
from .index import OffsetIndex, TimeIndex
from .open_files import SEGMENT_FILES, OpenSegments
from .records import iter_record_offsets_and_timestamps
from .txn_index import TXN_INDEX_SUFFIX, TransactionIndex

log = logging.getLogger(__name__)

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
#: Relative offsets are int32 in both indexes; a segment cannot span more offsets than this.
MAX_RELATIVE_OFFSET = 0x7FFFFFFF


def segment_file_name(base_offset: int, suffix: str) -> str:
    """Kafka's name for a segment file: the base offset as 20 zero-padded digits."""
    return f"{base_offset:020d}{suffix}"


class LogSegment:
    """A contiguous range of batches starting at ``base_offset``; only the last one is appended to.

    Not thread-safe: a partition's segments are used from one thread (the event loop) at a time.
    """

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        *,
        index_interval_bytes: int,
        segment_index_bytes: int,
        created_ms: int,
        roll_jitter_ms: int = 0,
        file_suffix: str = "",
        files: OpenSegments | None = SEGMENT_FILES,
    ) -> None:
        """Bind to the files; use :meth:`create` or :meth:`open` rather than calling this.

        ``file_suffix`` is appended to every file name (the cleaner writes ``.cleaned``).
        ``files`` is the cache that bounds open descriptors; None for a segment written on
        another thread, whose descriptors stay open until :meth:`close` or
        :meth:`track_files`.
        """
        self._files = files
        self.directory = directory
        self.base_offset = base_offset
        self.log_path = directory / (segment_file_name(base_offset, LOG_SUFFIX) + file_suffix)
        self.index_interval_bytes = index_interval_bytes
        self.offset_index = OffsetIndex(
            directory / (segment_file_name(base_offset, INDEX_SUFFIX) + file_suffix),
            base_offset,
            segment_index_bytes // OffsetIndex.ENTRY_SIZE,
            self._touch,
        )
        self.time_index = TimeIndex(
            directory / (segment_file_name(base_offset, TIME_INDEX_SUFFIX) + file_suffix),
            base_offset,
            segment_index_bytes // TimeIndex.ENTRY_SIZE,
            self._touch,
        )
        #: Aborted transactions whose ABORT marker is in this segment (``.txnindex``).
        self.txn_index = TransactionIndex(
            directory / (segment_file_name(base_offset, TXN_INDEX_SUFFIX) + file_suffix))
        #: When the segment object was made; the roll clock when no batch carries a timestamp.
        self.created_ms = created_ms
        self.roll_jitter_ms = roll_jitter_ms
        #: maxTimestamp of the first batch (Kafka's rule for segment.ms), None until known.
        self.rolling_base_ms: int | None = None
        self.size = 0
        self.next_offset = base_offset
        self.max_timestamp = NO_TIMESTAMP
        #: Last offset of the batch that first reached ``max_timestamp`` (-1 if none).
        self.offset_of_max_timestamp = -1
        #: Why :meth:`open` found that the segment must be recovered; None when it is sound.
        self.needs_recovery: str | None = None
        #: Why the last :meth:`recover` truncated, for the caller's log line.
        self.recovery_problem: str | None = None
        self._bytes_since_index = 0
        self._write_fd: int | None = None
        self._reader: ReadHandle | None = None
        self._closed = False
        self._dirty = False

    # -- lifecycle ------------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        directory: Path,
        base_offset: int,
        *,
        index_interval_bytes: int,
        segment_index_bytes: int,
        now_ms: int,
        roll_jitter_ms: int = 0,
        file_suffix: str = "",
        files: OpenSegments | None = SEGMENT_FILES,
    ) -> LogSegment:
        """Create the three (empty) files of a new segment (names end in ``file_suffix``).

        Only the ``.log`` file is created now; the index files appear with the first append
        (an empty segment needs none: loading one without them starts empty indexes). No
        descriptor stays open, and nothing is fsynced (the caller decides: a roll is covered
        by the next flush, a new partition by one directory fsync per batch of partitions).
        Creating 10,000 partitions is file-system bound, so every file saved counts.
        """
        segment = cls(
            directory,
            base_offset,
            index_interval_bytes=index_interval_bytes,
            segment_index_bytes=segment_index_bytes,
            created_ms=now_ms,
            roll_jitter_ms=roll_jitter_ms,
            file_suffix=file_suffix,
            files=files,
        )
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND
        os.close(os.open(segment.log_path, flags, 0o644))
        # Nothing to fsync yet: an empty file, whose name the caller's directory fsync covers.
        # (Flushing 20,000 idle new partitions at shutdown used to take 20 s.)
        segment._dirty = False
        return segment

    @classmethod
    def open(
        cls,
        directory: Path,
        base_offset: int,
        *,
        index_interval_bytes: int,
        segment_index_bytes: int,
        now_ms: int,
        roll_jitter_ms: int = 0,
    ) -> LogSegment:
        """Open an existing segment, trusting its indexes unless they look damaged.

        Sets :attr:`needs_recovery` (and leaves the in-memory state partial) when an index is
        missing, torn or inconsistent, or when the log does not end on a batch boundary; the
        caller then runs :meth:`recover`, which rebuilds everything from the log.
        """
        segment = cls(
            directory,
            base_offset,
            index_interval_bytes=index_interval_bytes,
            segment_index_bytes=segment_index_bytes,
            created_ms=now_ms,
            roll_jitter_ms=roll_jitter_ms,
        )
        segment.size = os.fstat(segment.fd).st_size
        segment.txn_index.load()
        segment.needs_recovery = segment._load_indexes()
        if segment.needs_recovery is None:
            segment.needs_recovery = segment._load_tail()
        if segment.needs_recovery is None:
            first = next(iter_batch_headers(segment.fd, 0, segment.size), None)
            if first is not None and first.max_timestamp >= 0:
                segment.rolling_base_ms = first.max_timestamp
        return segment

    def _load_indexes(self) -> str | None:
        offset_ok = self.offset_index.load()
        time_ok = self.time_index.load()
        if offset_ok and time_ok:
            problem = self.offset_index.sanity_problem(self.size)
            return None if problem is None else f"offset index: {problem}"
        if self.size == 0:  # nothing to lose: both start afresh (files made on first append)
            self.offset_index.reset()
            self.time_index.reset()
            return None
        return "offset index missing or torn" if not offset_ok else "time index missing or torn"

    def _load_tail(self) -> str | None:
        """Derive next offset, max timestamp and index spacing by scanning after the last entry.

        Everything before the last offset-index entry is summarised by the last time-index
        entry (the segment's running maximum when that entry was written), so only the tail
        needs reading: a few KiB instead of the whole segment.
        """
        _, start = self.offset_index.last_entry()
        max_timestamp, offset_of_max = self.time_index.last_entry()
        if max_timestamp < 0:
            offset_of_max = -1
        next_offset = self.base_offset
        end = start
        for header in iter_batch_headers(self.fd, start, self.size):
            next_offset = header.next_offset
            end = header.end
            if header.max_timestamp > max_timestamp:
                max_timestamp, offset_of_max = header.max_timestamp, header.last_offset
        if end != self.size:
            return f"log ends mid-batch ({self.size - end} bytes after the last whole batch)"
        problem = self.time_index.sanity_problem(next_offset)
        if problem is not None:
            return f"time index: {problem}"
        self.next_offset = next_offset
        self.max_timestamp, self.offset_of_max_timestamp = max_timestamp, offset_of_max
        self._bytes_since_index = self.size - start if len(self.offset_index) else self.size
        return None

    def seal(self) -> None:
        """Mark the segment inactive: final time-index entry, then release write descriptors.

        The final entry makes the time index's last entry the segment's true maximum, as
        Kafka does on roll, so later timestamp lookups and reloads see it without a scan.
        """
        if self.max_timestamp >= 0:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
        self._close_writers()

    def _close_writers(self) -> None:
        if self._write_fd is not None:
            os.close(self._write_fd)
            self._write_fd = None
        self.offset_index.close_file()
        self.time_index.close_file()

    def release_files(self) -> None:
        """Close the write and index descriptors and drop the read handle; all reopen on use.

        Called by the cache of open segments on eviction (and never while this segment's
        thread is inside one of its methods, see :mod:`open_files`). A slice handed out
        earlier keeps the read handle alive, so an in-flight ``sendfile`` is not cut.
        """
        self._close_writers()
        self._reader = None

    def untrack_files(self) -> None:
        """Leave the cache of open segments: from now on another thread may release the files
        (a partition being deleted), and eviction must no longer reach this segment."""
        if self._files is not None:
            self._files.forget(self)
            self._files = None

    def track_files(self, files: OpenSegments = SEGMENT_FILES) -> None:
        """Join the cache of open segments (a segment written by the cleaner, adopted by the
        loop): its descriptors are released at once and reopened through the cache on use."""
        self.release_files()
        self._files = files

    def reopen(self) -> None:
        """Undo :meth:`close` (a deletion rolled back): files reopen through the cache on use."""
        self._closed = False
        self._files = SEGMENT_FILES
        self.offset_index.set_on_open(self._touch)
        self.time_index.set_on_open(self._touch)

    def _touch(self) -> None:
        if self._files is not None:
            self._files.touch(self)

    def close(self) -> None:
        """Release every descriptor this segment owns (slices already handed out keep theirs)."""
        self.untrack_files()
        self.release_files()
        self._closed = True
        # The indexes call back into this segment when they open a file: a reference cycle
        # that would keep a closed segment alive until a full collection (or forever, once
        # frozen by gc.freeze).
        self.offset_index.set_on_open(None)
        self.time_index.set_on_open(None)

    def delete(self) -> None:
        """Unlink the segment's files.

        Outstanding :class:`FileSlice` objects keep the read handle, hence the unlinked data,
        alive until they are dropped, so a fetch response being sent is not cut short. That is
        also why ``file.delete.delay.ms`` is not needed here.
        """
        self.close()
        self.offset_index.delete()
        self.time_index.delete()
        self.txn_index.delete()
        self.log_path.unlink(missing_ok=True)

    def relocate(self, directory: Path) -> None:
        """Follow a rename of the whole partition directory to ``directory`` (a move between
        log dirs). Open descriptors, slices handed out included, follow the files; only the
        paths used to reopen them change."""
        self.directory = directory
        self.log_path = directory / self.log_path.name
        self.offset_index.relocate(directory)
        self.time_index.relocate(directory)
        self.txn_index.path = directory / self.txn_index.path.name

    def change_file_suffix(self, suffix: str) -> None:
        """Rename the segment's files to ``<base>.<ext><suffix>``: indexes first, log last.

        Kafka's changeFileSuffixes, used by the cleaner's swap (see :mod:`swap`): renaming
        the log last makes its new name the sign that the whole segment moved. Open
        descriptors, including slices handed out, follow the files.
        """
        self._close_writers()
        directory, base = self.directory, self.base_offset
        self.offset_index.rename(directory / (segment_file_name(base, INDEX_SUFFIX) + suffix))
        self.time_index.rename(directory / (segment_file_name(base, TIME_INDEX_SUFFIX) + suffix))
        self.txn_index.rename(directory / (segment_file_name(base, TXN_INDEX_SUFFIX) + suffix))
        target = directory / (segment_file_name(base, LOG_SUFFIX) + suffix)
        os.rename(self.log_path, target)
        self.log_path = target

    # -- state ----------------------------------------------------------------------------

    def _read_handle(self) -> ReadHandle:
        """The read handle, opened on first use; raises once the segment is closed."""
        reader = self._reader
        if reader is None:
            if self._closed:
                raise LogError(f"segment {self.log_path} is closed")
            reader = self._reader = ReadHandle(self.log_path, "rb")
        self._touch()
        return reader

    @property
    def fd(self) -> int:
        """The read descriptor (for ``pread``); raises once the segment is closed.

        Valid until this segment's thread next opens another segment's files (which may
        evict this one): use it at once, never keep it.
        """
        return self._read_handle().fileno()

    def file_slice(self) -> FileSlice:
        """The whole log file as a slice, for a reader on another thread (the cleaner): the
        slice keeps the data readable even if the segment is closed or deleted meanwhile."""
        return FileSlice(self._read_handle(), 0, self.size)

    @property
    def is_full(self) -> bool:
        """True when either index reached ``segment.index.bytes``: time to roll."""
        return self.offset_index.is_full or self.time_index.is_full

    def can_hold(self, last_offset: int) -> bool:
        """Whether ``last_offset`` still fits the int32 relative offsets of this segment."""
        return last_offset - self.base_offset <= MAX_RELATIVE_OFFSET

    def time_waited_for_roll(self, now_ms: int, incoming_max_timestamp: int) -> int:
        """Age of the segment for ``segment.ms``, measured the way Kafka does.

        When the first batch carries a timestamp, the age is the incoming batches' max
        timestamp minus that first timestamp: both come from the same clock (the producers'
        under CreateTime), so replaying old data does not roll on every append, which
        comparing against the broker clock would. Without a first timestamp, the age is the
        broker time since the segment object was created (or loaded).
        """
        if self.rolling_base_ms is not None:
            return incoming_max_timestamp - self.rolling_base_ms
        return now_ms - self.created_ms

    def last_modified_ms(self) -> int:
        return os.fstat(self.fd).st_mtime_ns // 1_000_000

    def largest_timestamp(self) -> int:
        """What retention.ms compares: max batch timestamp, or mtime if none has one (Kafka)."""
        return self.max_timestamp if self.max_timestamp >= 0 else self.last_modified_ms()

    # -- writes ---------------------------------------------------------------------------

    def _writer(self) -> int:
        if self._closed:
            raise LogError(f"segment {self.log_path} is closed")
        if self._write_fd is None:
            self._write_fd = os.open(self.log_path, os.O_WRONLY | os.O_APPEND)
        self._touch()
        return self._write_fd

    def append(self, chunks: Sequence[Chunk], batches: Sequence[BatchHeader]) -> None:
        """Append already-offset-assigned batches with one ``writev``, then index them.

        ``chunks`` are the batches' bytes in order (see
        :func:`~moldau.log.batch.offset_patched_chunks`) and ``batches`` describe them, their
        ``position`` relative to the first chunk. Indexing is per batch, so an entry always
        points at a batch start no matter how many batches one append carries. On a failed
        write (disk full) the file is cut back to its previous size so the segment never keeps
        half a batch,
        nor index entries pointing past its end.
        """
        if not batches:
            return
        start = self.size
        fd = self._writer()
        if start == 0:
            # A new (or emptied) segment's index files are made, empty, with its first data.
            self.offset_index.start_file()
            self.time_index.start_file()
        max_timestamp, offset_of_max = self.max_timestamp, self.offset_of_max_timestamp
        since_index = self._bytes_since_index
        offset_entries, time_entries = len(self.offset_index), len(self.time_index)
        try:
            written = write_all(fd, chunks)
            for batch in batches:
                if batch.max_timestamp > max_timestamp:
                    max_timestamp, offset_of_max = batch.max_timestamp, batch.last_offset
                if since_index >= self.index_interval_bytes:
                    self.offset_index.append(batch.last_offset, start + batch.position)
                    self.time_index.maybe_append(max_timestamp, offset_of_max)
                    since_index = 0
                since_index += batch.size
        except OSError:
            # All or nothing: the log and both indexes go back to where they were.
            os.ftruncate(fd, start)
            self.offset_index.keep(offset_entries)
            self.time_index.keep(time_entries)
            raise
        if start == 0 and batches[0].max_timestamp >= 0:
            self.rolling_base_ms = batches[0].max_timestamp
        self.max_timestamp, self.offset_of_max_timestamp = max_timestamp, offset_of_max
        self._bytes_since_index = since_index
        self.size = start + written
        self.next_offset = batches[-1].next_offset
        self._dirty = True

    def flush(self) -> None:
        """fsync the log and both indexes if anything changed since the last flush."""
        if self._dirty:
            os.fsync(self._write_fd if self._write_fd is not None else self.fd)
            self._dirty = False
        self.offset_index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    # -- reads ----------------------------------------------------------------------------

    def find_batch(self, offset: int) -> BatchHeader | None:
        """Header of the first batch whose last offset is >= ``offset`` (None past the end)."""
        if offset >= self.next_offset:
            return None
        _, start = self.offset_index.lookup(offset)
        for header in iter_batch_headers(self.fd, start, self.size):
            if header.last_offset >= offset:
                return header
        return None

    def lookup(self, offset: int) -> int | None:
        """File position of the batch holding ``offset`` (or the next batch after a gap)."""
        header = self.find_batch(offset)
        return None if header is None else header.position

    def read_slice(
        self,
        start_offset: int,
        max_bytes: int,
        min_one_batch: bool = True,
        max_offset: int | None = None,
    ) -> FileSlice | None:
        """Whole batches from the one holding ``start_offset``, within ``max_bytes``.

        None when the segment has nothing at or after ``start_offset`` below ``max_offset``,
        or when the first batch is bigger than ``max_bytes`` and ``min_one_batch`` is False.
        """
        first = self.find_batch(start_offset)
        if first is None:
            return None
        return self.slice_from(first, max_bytes, min_one_batch, max_offset)

    def slice_from(
        self,
        first: BatchHeader,
        max_bytes: int,
        min_one_batch: bool = True,
        max_offset: int | None = None,
    ) -> FileSlice | None:
        """The slice starting at batch ``first`` (see :meth:`read_slice` for the rules).

        A batch is included only if all its offsets are below ``max_offset`` (the high
        watermark), as Kafka does; the HW normally sits on a batch boundary anyway. The end
        is found with the offset index (its positions are batch boundaries) plus a short
        header scan, so the cost does not grow with ``max_bytes``.
        """
        end_bound = self.size
        if max_offset is not None and max_offset < self.next_offset:
            if first.last_offset >= max_offset:
                return None
            above = self.find_batch(max_offset)
            if above is not None:
                end_bound = above.position
        limit = first.position + max(max_bytes, 0)
        if end_bound <= limit:
            end = end_bound
        elif first.end > limit:
            if not min_one_batch:
                return None
            end = first.end
        else:
            end = max(self.offset_index.position_floor(limit), first.end)
            for header in iter_batch_headers(self.fd, end, end_bound):
                if header.end > limit:
                    break
                end = header.end
        return FileSlice(self._read_handle(), first.position, end - first.position)

    def find_offset_by_timestamp(
        self, timestamp: int, starting_offset: int
    ) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at/after ``starting_offset`` with a timestamp
        >= ``timestamp``, as Kafka answers ListOffsets; None if this segment has none.

        The time index gives the last entry strictly below ``timestamp``: every batch up to
        that entry's offset has a smaller timestamp, so the header scan can start there. Only
        batches whose maxTimestamp qualifies are opened; the first record that qualifies may
        sit anywhere inside one, and a batch can qualify by its maximum yet hold no matching
        record at/after ``starting_offset``, in which case the scan goes on, as in Kafka.
        """
        if self.max_timestamp < timestamp:
            return None
        _, offset = self.time_index.lookup(timestamp, strict=True)
        _, start = self.offset_index.lookup(max(offset, starting_offset))
        for header in iter_batch_headers(self.fd, start, self.size):
            if header.max_timestamp < timestamp or header.last_offset < starting_offset:
                continue
            try:
                for record_offset, record_timestamp in self._records_of(header):
                    if record_offset >= starting_offset and record_timestamp >= timestamp:
                        return record_offset, record_timestamp
            except CorruptRecordError as exc:
                self._warn_undecodable(header, exc)
                return max(header.base_offset, starting_offset), header.max_timestamp
        return None

    def max_timestamp_record(self, from_offset: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at/after ``from_offset`` carrying the largest
        timestamp among those records, for ListOffsets MAX_TIMESTAMP; None if none has one.

        Usually the batch remembered in ``offset_of_max_timestamp`` holds it and is the only
        one opened. When ``from_offset`` (the log start after DeleteRecords) cuts into the
        segment at or after that batch's start, the maximum may be gone: the headers of the
        rest are scanned for the best whole batch, and the cut batch's live records are
        compared with it.
        """
        if self.max_timestamp < 0:
            return None
        if self.offset_of_max_timestamp >= from_offset:
            header = self.find_batch(self.offset_of_max_timestamp)
            if header is not None and header.base_offset >= from_offset:
                return self._max_record(header, from_offset)
        first = self.find_batch(from_offset)
        if first is None:
            return None
        best_whole: BatchHeader | None = None
        for header in iter_batch_headers(self.fd, first.end, self.size):
            if best_whole is None or header.max_timestamp > best_whole.max_timestamp:
                best_whole = header
        best = self._max_record(first, from_offset)
        if best_whole is not None and (best is None or best_whole.max_timestamp > best[1]):
            later = self._max_record(best_whole, from_offset)
            if later is not None and (best is None or later[1] > best[1]):
                best = later
        return best

    def _max_record(self, header: BatchHeader, from_offset: int) -> tuple[int, int] | None:
        """First record at/after ``from_offset`` with the batch's largest live timestamp.

        Stops at the first record reaching the header's maxTimestamp, since nothing later can
        beat it. Records without a timestamp (negative) never count. An undecodable batch
        answers at batch level, as Kafka's old behaviour did.
        """
        best: tuple[int, int] | None = None
        try:
            for record_offset, record_timestamp in self._records_of(header):
                if record_offset < from_offset or record_timestamp < 0:
                    continue
                if best is None or record_timestamp > best[1]:
                    best = record_offset, record_timestamp
                    if record_timestamp >= header.max_timestamp:
                        break
        except CorruptRecordError as exc:
            self._warn_undecodable(header, exc)
            if header.max_timestamp < 0:
                return None
            return max(header.base_offset, from_offset), header.max_timestamp
        return best

    def _records_of(self, header: BatchHeader) -> Iterator[tuple[int, int]]:
        """(offset, timestamp) of each record of one batch, read with one ``pread``."""
        data = os.pread(self.fd, header.size, header.position)
        return iter_record_offsets_and_timestamps(data)

    def _warn_undecodable(self, header: BatchHeader, exc: CorruptRecordError) -> None:
        log.warning(
            "%s: records of the batch at offset %d (position %d) do not decode (%s); "
            "answering ListOffsets with the batch's base offset and maxTimestamp",
            self.log_path, header.base_offset, header.position, exc,
        )

    # -- repair ---------------------------------------------------------------------------

    def recover(self) -> int:
        """Rebuild the indexes from the log, verifying every batch; return bytes truncated.

        The scan stops at the first batch that is torn, fails its CRC or breaks offset order,
        and the file is truncated there: data after a damaged batch cannot be trusted, and
        since it was never fsynced-and-acknowledged-through-recovery it is the unacknowledged
        tail Kafka drops too. :attr:`recovery_problem` says what was found.
        """
        file_size = os.fstat(self.fd).st_size
        scan = RecoveryScan(self.fd, 0, file_size, self.base_offset)
        offset_entries: list[tuple[int, int]] = []
        time_entries: list[tuple[int, int]] = []
        max_timestamp, offset_of_max = NO_TIMESTAMP, -1
        next_offset = self.base_offset
        since_index = 0
        self.rolling_base_ms = None
        for header in scan:
            if header.position == 0 and header.max_timestamp >= 0:
                self.rolling_base_ms = header.max_timestamp
            if header.max_timestamp > max_timestamp:
                max_timestamp, offset_of_max = header.max_timestamp, header.last_offset
            if since_index >= self.index_interval_bytes:
                offset_entries.append((header.last_offset, header.position))
                if not time_entries or max_timestamp > time_entries[-1][0]:
                    time_entries.append((max_timestamp, offset_of_max))
                since_index = 0
            since_index += header.size
            next_offset = header.next_offset
        truncated = file_size - scan.valid_end
        if truncated:
            os.ftruncate(self._writer(), scan.valid_end)
        self.recovery_problem = scan.problem
        self.offset_index.rebuild(offset_entries)
        self.time_index.rebuild(time_entries)
        self.size = scan.valid_end
        self.next_offset = next_offset
        # Entries for markers that did not survive go; lost ones are found again by the
        # producer-state scan that follows recovery.
        self.txn_index.truncate(next_offset)
        self.max_timestamp, self.offset_of_max_timestamp = max_timestamp, offset_of_max
        self._bytes_since_index = since_index
        self.needs_recovery = None
        self._dirty = True
        return truncated

    def truncate_to(self, offset: int) -> int:
        """Remove the batch holding ``offset`` and everything after it; return bytes removed.

        Truncation works on whole batches, so a target inside a batch removes that batch too.
        """
        header = self.find_batch(offset)
        if header is None:
            return 0
        position = header.position
        removed = self.size - position
        os.ftruncate(self._writer(), position)
        self.size = position
        self.offset_index.truncate(offset, position)
        self.time_index.truncate(offset)
        self.txn_index.truncate(header.base_offset)
        if position == 0:
            self.rolling_base_ms = None
        problem = self._load_tail()
        if problem is not None:  # cannot happen on a log we wrote; recover rather than guess
            self.recover()
        self._dirty = True
        return removed
