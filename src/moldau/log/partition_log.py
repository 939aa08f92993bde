"""The log of one topic-partition: an ordered list of segments in ``<log.dir>/<topic>-<partition>``.

This is the storage API the broker uses: append a produce request's records, read a range for
a fetch, answer offset queries, roll, flush, retain, truncate and recover. It holds no
knowledge of replication beyond the high watermark the broker sets and the leader epochs it
is told about.

Not thread-safe: the broker calls it from its event loop (slow work such as recovery happens
before the log is handed out). The log cleaner works on a thread of its own but changes a log
only through :meth:`PartitionLog.replace_segments`, which it runs on the event loop.
"""

from __future__ import annotations

import contextlib
import enum
import logging
import os
import random
import shutil
import time
import uuid
from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..metrics.histogram import DurationHistogram
from .batch import (
    BATCH_HEADER_SIZE,
    BatchHeader,
    check_client_batches,
    iter_batch_headers,
    offset_patched_chunks,
    parse_batches,
    read_header,
)
from .checkpoint import fsync_dir
from .config import LONG_MAX, LogConfig
from .control_batch import ControlType, encode_marker, marker_of
from .dir_failures import LogDirFailures
from .errors import (
    InvalidRecordError,
    LogDirOfflineError,
    LogError,
    OffsetOutOfRangeError,
    RecordListTooLargeError,
    RecordTooLargeError,
    StorageError,
    record_errors_error,
)
from .file_slice import FileSlice
from .leader_epoch import LEADER_EPOCH_CHECKPOINT, LeaderEpochCache
from .metadata_files import read_partition_metadata, write_partition_metadata
from .names import delete_dir_name, parse_future_dir, parse_partition_dir
from .producer_state import BatchMetadata, MarkerReader, ProducerState, rebuild
from .records import null_key_indexes, out_of_range_timestamps
from .segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, LogSegment
from .swap import commit_cleaned_segment, finish_interrupted_swaps
from .txn_index import TXN_INDEX_SUFFIX, AbortedTxn

log = logging.getLogger(__name__)

#: Leftovers of interrupted operations (Kafka's suffixes); removed when a log is opened, after
#: an interrupted clean was completed or rolled back (swap.finish_interrupted_swaps).
_STALE_SUFFIXES = (".deleted", ".cleaned", ".swap", ".tmp")

#: How long each log flush (fsync) took, for the broker's metrics (Kafka's
#: LogFlushRateAndTimeMs). One per process: a process runs one broker, and the log layer knows
#: nothing of the broker; plain ints, so a flush on a worker thread may very rarely lose a count.
FLUSH_TIMES = DurationHistogram()


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _buffer_markers(records: bytes | bytearray | memoryview, headers: list[BatchHeader]
                    ) -> MarkerReader | None:
    """Read the markers of the control batches among ``headers`` (in ``records``) now,
    before anything is written: an unreadable one refuses the append (CorruptRecordError).
    None when there is no control batch (the usual case, one attribute test per batch)."""
    found: dict[int, tuple[ControlType, int]] = {}
    view = memoryview(records)
    for header in headers:
        if header.is_control and header.producer_id >= 0:
            found[header.position] = marker_of(view[header.position:header.end])
    if not found:
        return None
    return lambda header: found[header.position]


def _file_markers(fd: int, name: str) -> MarkerReader:
    """Read a control batch's marker from a segment file (rebuilding producer state); an
    unreadable one counts as an ABORT with an unknown coordinator epoch, logged."""
    def read(header: BatchHeader) -> tuple[ControlType, int]:
        try:
            return marker_of(os.pread(fd, header.size, header.position))
        except LogError as exc:
            log.warning("%s: unreadable control batch at offset %d: %s", name,
                        header.base_offset, exc)
            return ControlType.ABORT, -1
    return read


def _parse_log_dir_name(name: str) -> tuple[str, int] | None:
    """(topic, partition) of a partition's or a future replica's directory name."""
    return parse_partition_dir(name) or parse_future_dir(name)


class AppendOrigin(enum.Enum):
    """Who is appending: producers must follow stricter rules than the broker's own writers.

    Kafka makes the same distinction: a producer sends one batch per partition and never
    control batches, while coordinators (markers, offsets) and replication may do both.
    """

    CLIENT = "client"
    COORDINATOR = "coordinator"
    REPLICATION = "replication"


@dataclass(frozen=True, slots=True)
class AppendResult:
    """What a produce response needs to report about one append."""

    base_offset: int
    last_offset: int
    #: The broker timestamp stamped on the batches, or -1 when the topic uses CreateTime.
    log_append_time_ms: int
    log_start_offset: int
    record_count: int
    #: True when the batch repeats one of its producer's last batches (a retry): nothing
    #: was written and the offsets are the original ones.
    duplicate: bool = False


class PartitionLog:
    """Segments, offsets and metadata of one partition; see the module docstring."""

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        segments: list[LogSegment],
        epochs: LeaderEpochCache,
        *,
        log_start_offset: int,
        recovery_point: int,
        now_ms: int,
    ) -> None:
        """Assemble a loaded log; use :meth:`open`."""
        parsed = _parse_log_dir_name(directory.name)
        if parsed is None:
            raise LogError(f"{directory} is not named <topic>-<partition>")
        self.directory = directory
        self.topic, self.partition = parsed
        self.config = config
        self._segments = segments
        self._bases = [segment.base_offset for segment in segments]
        self._epochs = epochs
        self._log_start_offset = log_start_offset
        self._recovery_point = recovery_point
        self._high_watermark = self.log_end_offset
        self._topic_id: uuid.UUID | None = None
        self._unflushed_messages = 0
        self._last_flush_ms = now_ms
        self._dir_dirty = False
        #: Where I/O errors are reported; the log manager gives every log the broker's one.
        self.failures = LogDirFailures()
        #: True once the log dir failed: every operation raises LogDirOfflineError.
        self.offline = False
        self._write_failing = False
        #: Set once the directory was renamed for deletion: the cleaner must not swap in.
        self._deleted = False
        #: Idempotent producers' epochs and last batches (see log/producer_state.py).
        self.producers = ProducerState(directory, self.name)
        #: Called with the new log end offset after every truncation (a move between log
        #: dirs follows this log's truncations in its future replica).
        self.truncation_listeners: list[Callable[[int], None]] = []
        #: True while a move to another log dir copies this log: the cleaner leaves it alone
        #: (Kafka pauses cleaning of a partition being moved), so the swap at the end never
        #: meets a clean writing into the directory that goes away.
        self.moving = False
        #: How many aborted transactions the segments' ``.txnindex`` hold: read_committed
        #: fetches of a log that has none (the usual case) skip the search at once.
        self._aborted_entries = 0

    # -- opening --------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        directory: Path,
        config: LogConfig,
        recovery_point: int = 0,
        clean_shutdown: bool = True,
        now_ms: int | None = None,
        *,
        log_start_offset: int = 0,
        high_watermark: int | None = None,
    ) -> PartitionLog:
        """Open (or create) the partition directory and load its segments.

        After an unclean shutdown, every segment from the one holding ``recovery_point`` (the
        offset up to which data was fsynced) is scanned and CRC-checked; a torn or corrupt
        tail is truncated at the last valid batch and later segments are dropped, all logged.
        Segments with missing or damaged index files are rebuilt in any case.
        ``log_start_offset`` and ``high_watermark`` come from the log dir's checkpoints; a
        missing high watermark defaults to the log end offset.
        """
        if _parse_log_dir_name(directory.name) is None:
            raise LogError(f"{directory} is not named <topic>-<partition>")
        now = _now_ms() if now_ms is None else now_ms
        directory.mkdir(parents=True, exist_ok=True)
        segments = cls._load_segments(directory, config, now)
        if segments:
            cls._recover_segments(directory, segments, recovery_point, clean_shutdown)
        else:
            segments = [cls._new_segment(directory, config, log_start_offset, now)]
        for segment in segments[:-1]:
            segment.seal()
        plog = cls(
            directory,
            config,
            segments,
            LeaderEpochCache.load(directory / LEADER_EPOCH_CHECKPOINT),
            log_start_offset=max(log_start_offset, segments[0].base_offset),
            recovery_point=recovery_point,
            now_ms=now,
        )
        if plog._log_start_offset > plog.log_end_offset:
            plog.truncate_fully_and_start_at(plog._log_start_offset, now)
        leo = plog.log_end_offset
        plog._recovery_point = min(max(recovery_point, plog._log_start_offset), leo)
        plog._epochs.truncate_from_end(leo)
        plog._epochs.truncate_from_start(plog._log_start_offset)
        plog.high_watermark = leo if high_watermark is None else high_watermark
        plog._load_producer_state(clean_shutdown)
        plog._recount_aborted()
        try:
            plog._topic_id = read_partition_metadata(directory)
        except LogError as exc:
            log.warning("%s; the topic id will be rewritten", exc)
        return plog

    @staticmethod
    def _new_segment(directory: Path, config: LogConfig, base: int, now_ms: int) -> LogSegment:
        jitter = config.segment_jitter_ms
        return LogSegment.create(
            directory,
            base,
            index_interval_bytes=config.index_interval_bytes,
            segment_index_bytes=config.segment_index_bytes,
            now_ms=now_ms,
            roll_jitter_ms=random.randrange(min(jitter, config.segment_ms)) if jitter > 0 else 0,
        )

    @staticmethod
    def _load_segments(directory: Path, config: LogConfig, now_ms: int) -> list[LogSegment]:
        """Open every ``<base>.log``, after removing leftovers and orphaned index files."""
        finish_interrupted_swaps(directory)
        bases: list[int] = []
        orphans: list[Path] = []
        for path in directory.iterdir():
            name = path.name
            if name.endswith(_STALE_SUFFIXES):
                log.info("removing leftover file %s", path)
                path.unlink(missing_ok=True)
            elif name.endswith(LOG_SUFFIX) and name[: -len(LOG_SUFFIX)].isdigit():
                bases.append(int(name[: -len(LOG_SUFFIX)]))
            elif name.endswith((INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)):
                orphans.append(path)
        for path in orphans:
            if not path.with_suffix(LOG_SUFFIX).exists():
                log.info("removing index file %s without a log file", path)
                path.unlink(missing_ok=True)
        return [
            LogSegment.open(
                directory,
                base,
                index_interval_bytes=config.index_interval_bytes,
                segment_index_bytes=config.segment_index_bytes,
                now_ms=now_ms,
            )
            for base in sorted(bases)
        ]

    @staticmethod
    def _recover_segments(
        directory: Path, segments: list[LogSegment], recovery_point: int, clean_shutdown: bool
    ) -> None:
        """Recover the unflushed segments (unclean shutdown) and any with damaged indexes.

        Damage in the unflushed tail is a torn write: everything after it was written later
        and is dropped with it, so later segments are deleted. Damage found below the
        recovery point (only when an index had to be rebuilt) is bit rot in flushed data:
        that segment is cut, but later segments stay, leaving a gap that reads step over.
        """
        bases = [segment.base_offset for segment in segments]
        first_unflushed = len(segments)
        if not clean_shutdown:
            first_unflushed = max(0, bisect_right(bases, recovery_point) - 1)
        for i, segment in enumerate(segments):
            if i < first_unflushed and segment.needs_recovery is None:
                continue
            reason = segment.needs_recovery or "unclean shutdown"
            log.info("%s: recovering segment %d (%s)", directory.name, segment.base_offset, reason)
            truncated = segment.recover()
            if not truncated:
                continue
            log.warning(
                "%s: truncated %d bytes of segment %d at offset %d: %s",
                directory.name, truncated, segment.base_offset, segment.next_offset,
                segment.recovery_problem,
            )
            if i < first_unflushed:
                continue
            for later in segments[i + 1 :]:
                log.warning(
                    "%s: deleting segment %d, which follows the corruption",
                    directory.name, later.base_offset,
                )
                later.delete()
            del segments[i + 1 :]
            return

    # -- state ----------------------------------------------------------------------------

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        return tuple(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        """The offset the next appended record will get."""
        return self._segments[-1].next_offset

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @high_watermark.setter
    def high_watermark(self, value: int) -> None:
        """Set by the broker (single node: the log end offset after each append); clamped."""
        self._high_watermark = min(max(value, self._log_start_offset), self.log_end_offset)

    @property
    def recovery_point(self) -> int:
        """Offset below which all data is known to be fsynced."""
        return self._recovery_point

    @property
    def size_bytes(self) -> int:
        return sum(segment.size for segment in self._segments)

    @property
    def topic_id(self) -> uuid.UUID | None:
        return self._topic_id

    def set_topic_id(self, topic_id: uuid.UUID, *, sync: bool = True) -> None:
        """Record the topic id in ``partition.metadata`` (written only when it changes).

        ``sync=False`` for a new partition: a lost file is rewritten at the next start.
        """
        if topic_id != self._topic_id:
            write_partition_metadata(self.directory, topic_id, sync=sync)
            self._topic_id = topic_id

    @property
    def leader_epochs(self) -> list[tuple[int, int]]:
        """(epoch, start offset) pairs from the leader-epoch cache."""
        return self._epochs.entries

    @property
    def latest_epoch(self) -> int:
        return self._epochs.latest_epoch

    def start_leader_epoch(self, epoch: int) -> None:
        """A new leader's epoch starts at the current log end (Kafka's
        ``maybeAssignEpochStartOffset`` on becoming leader), before it appends anything.

        OffsetForLeaderEpoch answers from this cache: without the entry, a leader that has
        not written in its epoch yet (an unclean election leaves it with a shorter log and
        no ISR to accept writes) would know no end for its followers' older epoch, and they
        would keep a tail it never had.
        """
        self._epochs.assign(epoch, self.log_end_offset)

    def copy_leader_epochs(self, other: PartitionLog) -> None:
        """Take ``other``'s epochs newer than this log's latest (a future replica about to
        replace ``other``: an epoch in which nothing was written yet has no batch to carry
        it over)."""
        latest = self._epochs.latest_epoch
        for epoch, start in other.leader_epochs:
            if epoch > latest:
                self._epochs.assign(epoch, start)

    def update_config(self, config: LogConfig) -> None:
        """Swap the config; it applies to future appends, rolls and retention runs."""
        self.config = config
        self.active_segment.index_interval_bytes = config.index_interval_bytes

    # -- storage faults ---------------------------------------------------------------------

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    def _check_online(self) -> None:
        if self.offline:
            raise LogDirOfflineError(f"{self.name}: log dir {self.directory.parent} is offline")

    def _io_failed(self, exc: OSError) -> StorageError:
        """Report an OSError to the broker's failure channel; the error to raise instead."""
        self._write_failing = True
        return self.failures.io_failed(self.directory.parent, self.name, exc)

    def _io_succeeded(self) -> None:
        if self._write_failing:
            self._write_failing = False
            self.failures.io_succeeded(self.name)

    def go_offline(self) -> None:
        """The log dir failed: refuse everything from now on and let go of descriptors."""
        self.offline = True
        for segment in self._segments:
            with contextlib.suppress(OSError):
                segment.close()

    # -- append ---------------------------------------------------------------------------

    def append(
        self,
        records: bytes | bytearray | memoryview,
        *,
        leader_epoch: int,
        now_ms: int,
        origin: AppendOrigin = AppendOrigin.COORDINATOR,
    ) -> AppendResult:
        """Validate, assign offsets to and append a produce request's record batches.

        No copy of the record bytes in Python: each batch's patched header (offsets, and the
        timestamp and CRC under LogAppendTime) goes out with a view of its body in one
        ``os.writev``. Raises CorruptRecordError, InvalidRecordError,
        RecordTooLargeError (a batch over ``max.message.bytes``) or RecordListTooLargeError
        (more than a whole segment) without writing anything.
        """
        self._check_online()
        headers = parse_batches(records)
        config = self.config
        if origin is AppendOrigin.CLIENT:
            check_client_batches(headers)
        elif not headers:
            raise InvalidRecordError("the append carries no record batch")
        for header in headers:
            if header.size > config.max_message_bytes:
                raise RecordTooLargeError(
                    f"record batch of {header.size} bytes exceeds max.message.bytes "
                    f"({config.max_message_bytes})"
                )
        if origin is AppendOrigin.CLIENT and (config.compacts or config.bounds_timestamps):
            # After the size check: decompression is bounded by the batch's size.
            self._check_records(records, now_ms)
        if len(records) > config.segment_bytes:
            raise RecordListTooLargeError(
                f"{len(records)} bytes of records exceed segment.bytes ({config.segment_bytes})"
            )
        producer_batch = origin is AppendOrigin.CLIENT and headers[0].producer_id >= 0
        markers = None if origin is AppendOrigin.CLIENT else _buffer_markers(records, headers)
        if producer_batch:
            duplicate = self.producers.check(headers[0])
            if duplicate is not None:
                return self._duplicate_result(duplicate)
        append_time = now_ms if config.log_append_time else None
        base_offset = self.log_end_offset
        last_offset, chunks = offset_patched_chunks(records, headers, base_offset, leader_epoch,
                                                    append_time)
        max_timestamp = max(header.max_timestamp for header in headers)
        try:
            # The epoch first, as Kafka does: if the data then fails, the next append
            # carries the same epoch and start offset, and loading drops dangling epochs.
            self._epochs.assign(leader_epoch, base_offset)
            segment = self._maybe_roll(len(records), last_offset, max_timestamp, now_ms)
            segment.append(chunks, headers)
        except OSError as exc:
            raise self._io_failed(exc) from None
        self._io_succeeded()
        if producer_batch:
            self.producers.update(headers[0])
        elif origin is not AppendOrigin.CLIENT:
            self._index_aborted(self.producers.update_all(headers, markers))
        count = last_offset - base_offset + 1
        self._unflushed_messages += count
        if self._unflushed_messages >= config.flush_interval_messages:
            self.flush(now_ms)
        return AppendResult(
            base_offset,
            last_offset,
            -1 if append_time is None else append_time,
            self._log_start_offset,
            count,
        )

    def append_marker(self, producer_id: int, producer_epoch: int, control: ControlType,
                      coordinator_epoch: int, *, leader_epoch: int, now_ms: int
                      ) -> AppendResult:
        """Write a COMMIT or ABORT marker for a producer's transaction (the leader, on the
        coordinator's request). Raises InvalidProducerEpochError for a producer epoch older
        than the producer's current one, TransactionCoordinatorFencedError for an older
        coordinator epoch; a producer with no open transaction here still gets its marker."""
        self._check_online()
        self.producers.check_marker(producer_id, producer_epoch, coordinator_epoch)
        batch = encode_marker(producer_id, producer_epoch, control, coordinator_epoch, now_ms)
        return self.append(batch, leader_epoch=leader_epoch, now_ms=now_ms,
                           origin=AppendOrigin.COORDINATOR)

    def _index_aborted(self, aborted: list[AbortedTxn]) -> None:
        """Add aborted transactions to the ``.txnindex`` of the segment holding each marker
        (skipping those already there: a rebuild after a crash meets indexed ones again)."""
        for entry in aborted:
            segment = self._segments[self._segment_index(entry.last_offset)]
            index = segment.txn_index
            if index.entries and entry.last_offset <= index.entries[-1].last_offset:
                continue
            try:
                index.append(entry)
            except OSError as exc:
                raise self._io_failed(exc) from None
            self._aborted_entries += 1

    def _recount_aborted(self) -> None:
        """Count the aborted-transaction entries again (segments went or were truncated)."""
        self._aborted_entries = sum(len(segment.txn_index.entries)
                                    for segment in self._segments)

    # -- transactions ---------------------------------------------------------------------

    @property
    def first_unstable_offset(self) -> int | None:
        """Kafka's first unstable offset: the first offset of the oldest transaction that is
        open or whose marker is not yet below the high watermark; None when there is none."""
        return self.producers.first_unstable_offset(self._high_watermark)

    @property
    def last_stable_offset(self) -> int:
        """The offset read_committed consumers read up to: min(first unstable offset, high
        watermark)."""
        hw = self._high_watermark
        if not self.producers.has_transactions:
            return hw
        first = self.producers.first_unstable_offset(hw)
        if first is None or first > hw:
            return hw
        # An open transaction whose start went with retention or DeleteRecords: as Kafka,
        # the stable offset does not fall below the log start.
        return max(first, self._log_start_offset)

    def aborted_transactions(self, start: int, end: int) -> list[AbortedTxn]:
        """The aborted transactions overlapping ``[start, end)``, from the ``.txnindex`` of
        the segment holding ``start`` on. As in Kafka, the search stops at the first entry
        whose LSO at abort time reached ``end``: no later abort can overlap the range."""
        found: list[AbortedTxn] = []
        for segment in self._segments[self._segment_index(start):]:
            for entry in segment.txn_index.entries:
                if entry.last_offset >= start and entry.first_offset < end:
                    found.append(entry)
                if entry.last_stable_offset >= end:
                    return found
        return found

    def bytes_between(self, start: int, end: int) -> int:
        """About how many bytes of batches lie between offsets ``start`` and ``end`` (to wake
        read_committed fetches by what became stable); 0 if ``end <= start``."""
        if end <= start:
            return 0
        segments = self._segments
        i, j = self._segment_index(start), self._segment_index(end)
        try:
            a = segments[i].lookup(start)
            b = segments[j].lookup(end)
        except OSError:
            return end - start  # only a wake-up hint; never fail the append for it
        a = segments[i].size if a is None else a
        b = segments[j].size if b is None else b
        return max(1, sum(seg.size for seg in segments[i:j]) - a + b)

    def _duplicate_result(self, duplicate: BatchMetadata) -> AppendResult:
        """The answer to a producer's retry of a batch already written: its original
        offsets and, under LogAppendTime, its append time (as Kafka answers)."""
        _first, _last, base, last_offset, timestamp = duplicate
        return AppendResult(base, last_offset,
                            timestamp if self.config.log_append_time else -1,
                            self._log_start_offset, 0, duplicate=True)

    def append_replicated(self, records: bytes | bytearray | memoryview, now_ms: int) -> int:
        """Append batches fetched from the leader as they are: their offsets and leader
        epochs were given by the leader, so nothing is patched (a follower's log is a byte
        copy of the leader's). The first batch must not start below the log end offset (the
        fetch asked from there; the leader sends whole batches only); it may start above it
        when the leader's cleaner removed the batches in between (a compacted log has gaps,
        and Kafka's followers accept them too). Returns the new log end offset.
        """
        self._check_online()
        headers = parse_batches(records)
        if not headers:
            return self.log_end_offset
        if headers[0].base_offset < self.log_end_offset:
            raise InvalidRecordError(
                f"replicated batch starts at {headers[0].base_offset}, below the log end "
                f"{self.log_end_offset} ({self.topic}-{self.partition})")
        markers = _buffer_markers(records, headers)
        end = headers[-1].position + headers[-1].size
        view = memoryview(records)[headers[0].position:end]
        last_offset = headers[-1].base_offset + headers[-1].last_offset_delta
        max_timestamp = max(header.max_timestamp for header in headers)
        try:
            for header in headers:
                if header.partition_leader_epoch >= 0:
                    self._epochs.assign(header.partition_leader_epoch, header.base_offset)
            segment = self._maybe_roll(len(view), last_offset, max_timestamp, now_ms)
            segment.append([view], headers)
        except OSError as exc:
            raise self._io_failed(exc) from None
        self._io_succeeded()
        self._index_aborted(self.producers.update_all(headers, markers))
        self._unflushed_messages += last_offset - headers[0].base_offset + 1
        if self._unflushed_messages >= self.config.flush_interval_messages:
            self.flush(now_ms)
        return self.log_end_offset

    def _check_records(self, records: bytes | bytearray | memoryview, now_ms: int) -> None:
        """Refuse a producer's batch for some of its records, naming each (KIP-467) so the
        client fails only those: as Kafka does, keyless records on a compacted topic (the
        cleaner could never tell which of them is the latest) and, on a topic that bounds
        them, CreateTime timestamps too far from the broker's clock (KIP-937). A record
        with both faults is named once, for its key.

        The only places the produce path walks records, and only for compacted topics or
        bounded timestamps: measured per record of a 1000 x 100 B batch at about 0.7 µs for
        keys and 2.2 µs for timestamps (plus decompression for a compressed batch), where
        other topics pay nothing.
        """
        config = self.config
        view = memoryview(records)
        errors: dict[int, str] = {}
        if config.compacts:
            message = (f"Compacted topic cannot accept message without key in topic partition "
                       f"{self.topic}-{self.partition}")
            errors.update((index, message) for index in null_key_indexes(view))
        bad_timestamps = False
        if config.bounds_timestamps:
            low = now_ms - config.message_timestamp_before_max_ms
            high = now_ms + config.message_timestamp_after_max_ms
            for index, offset, timestamp in out_of_range_timestamps(view, low, high):
                if index not in errors:
                    bad_timestamps = True
                    errors[index] = (f"Timestamp {timestamp} of message with offset {offset} is "
                                     f"out of range. The timestamp should be within [{low}, "
                                     f"{high}]")
        if errors:
            raise record_errors_error(tuple(sorted(errors.items())), bad_timestamps)

    def _maybe_roll(
        self, size: int, last_offset: int, max_timestamp: int, now_ms: int
    ) -> LogSegment:
        """Roll before an append that would overfill the segment, age it past segment.ms
        (see LogSegment.time_waited_for_roll), overflow an index, or not fit its int32
        relative offsets. An empty segment never rolls.
        """
        segment = self._segments[-1]
        if segment.size == 0:
            return segment
        config = self.config
        age = segment.time_waited_for_roll(now_ms, max_timestamp)
        if (
            segment.size + size > config.segment_bytes
            or age > config.segment_ms - segment.roll_jitter_ms
            or segment.is_full
            or not segment.can_hold(last_offset)
        ):
            return self.roll(now_ms)
        return segment

    def roll(self, now_ms: int | None = None) -> LogSegment:
        """Start a new active segment at the log end offset (no-op if the active one is empty).

        The old segment is not fsynced here, keeping the append path free of disk waits; it
        stays above the recovery point until the next flush, so a crash makes recovery check it.
        """
        active = self._segments[-1]
        if active.size == 0:
            return active
        now = _now_ms() if now_ms is None else now_ms
        segment = self._new_segment(self.directory, self.config, self.log_end_offset, now)
        try:
            active.seal()
        except OSError:
            with contextlib.suppress(OSError):
                segment.delete()  # so the next roll can create it again
            raise
        self._segments.append(segment)
        self._bases.append(segment.base_offset)
        self._dir_dirty = True
        # As Kafka does at every roll: truncation and crash recovery rebuild the producer
        # state from the nearest snapshot instead of the log start. Not fsynced here (a few
        # bytes per producer into the page cache; the next flush syncs the directory).
        try:
            self.producers.write_snapshot(segment.base_offset, sync=False)
        except OSError as exc:
            log.warning("%s: could not write a producer snapshot: %s", self.name, exc)
        return segment

    # -- flush ----------------------------------------------------------------------------

    def flush(self, now_ms: int | None = None) -> None:
        """fsync every segment above the recovery point (and the directory if it changed),
        then move the recovery point to the log end offset."""
        self._check_online()
        leo = self.log_end_offset
        first = max(0, bisect_right(self._bases, self._recovery_point) - 1)
        started = time.perf_counter_ns()
        try:
            for segment in self._segments[first:]:
                segment.flush()
            if self._dir_dirty:
                fsync_dir(self.directory)
                self._dir_dirty = False
        except OSError as exc:
            raise self._io_failed(exc) from None
        FLUSH_TIMES.observe(time.perf_counter_ns() - started)
        self._recovery_point = leo
        self._unflushed_messages = 0
        self._last_flush_ms = _now_ms() if now_ms is None else now_ms

    def flush_if_due(self, now_ms: int) -> bool:
        """Flush when ``flush.ms`` has passed since the last flush and data is unflushed."""
        interval = self.config.flush_interval_ms
        if interval is None or interval >= LONG_MAX:
            return False
        if self._recovery_point >= self.log_end_offset or now_ms - self._last_flush_ms < interval:
            return False
        self.flush(now_ms)
        return True

    # -- reads ----------------------------------------------------------------------------

    def _check_offset(self, offset: int) -> None:
        if offset < self._log_start_offset or offset > self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"offset {offset} is outside [{self._log_start_offset}, {self.log_end_offset}] "
                f"of {self.topic}-{self.partition}"
            )

    def _segment_index(self, offset: int) -> int:
        return max(0, bisect_right(self._bases, offset) - 1)

    def read(
        self,
        offset: int,
        max_bytes: int,
        *,
        min_one_batch: bool = True,
        max_offset: int | None = None,
    ) -> FileSlice | None:
        """Whole batches from the one holding ``offset``, for a fetch.

        The first batch may start before ``offset`` (clients skip the records before it, as
        with Kafka). At most ``max_bytes`` are returned, except that with ``min_one_batch``
        the first batch comes whole even if larger (KIP-74). Batches that are not entirely
        below ``max_offset`` (the high watermark) are left out. An offset in a gap at the end
        of a segment continues in the next one. None: nothing to return (offset at the log
        end or at/above ``max_offset``, or the first batch too big without ``min_one_batch``).
        Raises OffsetOutOfRangeError outside ``[log_start_offset, log_end_offset]``, and
        StorageError when the log dir is offline or the read fails.
        """
        self._check_online()
        self._check_offset(offset)
        if offset == self.log_end_offset or (max_offset is not None and offset >= max_offset):
            return None
        segments = self._segments
        try:
            for i in range(self._segment_index(offset), len(segments)):
                first = segments[i].find_batch(offset)
                if first is not None:
                    return segments[i].slice_from(first, max_bytes, min_one_batch, max_offset)
        except OSError as exc:
            raise self._io_failed(exc) from None
        return None

    def read_committed(self, offset: int, max_bytes: int, *, min_one_batch: bool = True
                       ) -> tuple[FileSlice | None, list[AbortedTxn]]:
        """:meth:`read` for a read_committed fetch: batches below the last stable offset, and
        the aborted transactions overlapping them.

        The range of the aborted list ends at the offset after the returned batches (one
        header read at the slice's end, as Kafka bounds it through its offset index), so a
        consumer far behind gets only the transactions of what it receives.
        """
        self._check_online()
        self._check_offset(offset)
        lso = self.last_stable_offset
        if offset == self.log_end_offset or offset >= lso:
            return None, []
        segments = self._segments
        try:
            for i in range(self._segment_index(offset), len(segments)):
                segment = segments[i]
                first = segment.find_batch(offset)
                if first is None:
                    continue
                data = segment.slice_from(first, max_bytes, min_one_batch, lso)
                if data is None or not self._aborted_entries:
                    return data, []  # no aborted transaction at all: the usual case
                end = data.position + data.size
                upper = segment.next_offset
                if end < segment.size:
                    raw = os.pread(segment.fd, BATCH_HEADER_SIZE, end)
                    if len(raw) == BATCH_HEADER_SIZE:
                        upper = read_header(raw, 0, end).base_offset
                return data, self.aborted_transactions(offset, min(upper, lso))
        except OSError as exc:
            raise self._io_failed(exc) from None
        return None, []

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) for ListOffsets by time, or None if no record is that recent.

        As in Kafka, the first *record* (at or after the log start offset) whose timestamp is
        >= the target, with that record's timestamp. Headers locate the batch; only that
        batch's records are decoded (see :meth:`LogSegment.find_offset_by_timestamp`).
        """
        self._check_online()
        start = self._log_start_offset
        try:
            for segment in self._segments:
                if segment.next_offset <= start or segment.max_timestamp < timestamp_ms:
                    continue
                found = segment.find_offset_by_timestamp(timestamp_ms, start)
                if found is not None:
                    return found
        except OSError as exc:
            raise self._io_failed(exc) from None
        return None

    def max_timestamp_entry(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the largest timestamp in the log, for ListOffsets -3.

        As in Kafka, the offset is that of the first record carrying the timestamp (for a
        LogAppendTime batch, its first record). Records below the log start offset do not
        count. Segments are skipped by their in-memory maximum, so usually one batch is read.
        """
        self._check_online()
        start = self._log_start_offset
        best: tuple[int, int] | None = None  # (offset, timestamp)
        try:
            for segment in self._segments:
                if segment.next_offset <= start or segment.max_timestamp < 0:
                    continue
                if best is not None and segment.max_timestamp <= best[1]:
                    continue
                found = segment.max_timestamp_record(start)
                if found is not None and (best is None or found[1] > best[1]):
                    best = found
        except OSError as exc:
            raise self._io_failed(exc) from None
        return best

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetForLeaderEpoch; (-1, -1) when the epoch is unknown."""
        return self._epochs.end_offset_for(epoch, self.log_end_offset)

    # -- compaction -----------------------------------------------------------------------

    def replace_segments(self, old: Sequence[LogSegment], cleaned: LogSegment) -> bool:
        """Put the cleaner's ``cleaned`` segment in place of the consecutive segments ``old``.

        Runs on the thread that owns the log, so no append, read, roll or retention sees a
        half-done swap. Refuses (False, nothing changed; the caller deletes ``cleaned``) when
        ``old`` is no longer a run of inactive segments of this log: retention, DeleteRecords,
        truncation or deletion got there first while the cleaner was writing. Fetches still
        holding slices of the old segments keep reading them (see LogSegment.delete).
        """
        segments = self._segments
        try:
            first = next(i for i, seg in enumerate(segments) if seg is old[0])
        except StopIteration:
            return False
        last = first + len(old)
        if last >= len(segments) or any(a is not b for a, b in zip(segments[first:last], old,
                                                                      strict=True)):
            return False
        if self._deleted:
            return False
        commit_cleaned_segment(cleaned, old)
        cleaned.track_files()
        segments[first:last] = [cleaned]
        self._bases[first:last] = [cleaned.base_offset]
        self._dir_dirty = True
        self._recount_aborted()
        return True

    # -- deletion of old data ---------------------------------------------------------------

    def _delete_oldest(self, deletable: Callable[[LogSegment, LogSegment], bool]) -> int:
        """Delete leading non-active segments while ``deletable(segment, next_segment)``."""
        self._check_online()
        count = 0
        try:
            while len(self._segments) > 1 and deletable(self._segments[0], self._segments[1]):
                self._segments[0].delete()
                self._segments.pop(0)
                self._bases.pop(0)
                count += 1
        except OSError as exc:
            raise self._io_failed(exc) from None
        finally:
            if count:  # even after a failure: what was deleted is gone
                self._dir_dirty = True
                self._recount_aborted()
                self._advance_log_start(self._segments[0].base_offset)
                # Snapshots of deleted segments go with them; the producers stay known.
                with contextlib.suppress(OSError):
                    self.producers.delete_snapshots(below=self._segments[0].base_offset)
        return count

    def _advance_log_start(self, offset: int) -> None:
        if offset > self._log_start_offset:
            self._log_start_offset = offset
            try:
                self._epochs.truncate_from_start(offset)  # memory first; reloads redo it
            except OSError as exc:
                raise self._io_failed(exc) from None
            self._high_watermark = max(self._high_watermark, offset)
            self._recovery_point = max(self._recovery_point, offset)

    def enforce_retention(self, now_ms: int) -> int:
        """Apply ``retention.ms`` and ``retention.bytes``; return the number of segments deleted.

        Only whole, non-active segments go, oldest first: by time when the segment's largest
        timestamp is older than retention.ms, by size while the log stays at or above
        retention.bytes without the segment. Segments entirely below the log start offset
        (after DeleteRecords) go too. The active segment is never deleted, so the newest data
        outlives retention until the segment rolls.
        """
        config = self.config
        if not config.deletes:
            return 0
        deleted = self._delete_oldest(lambda _seg, nxt: nxt.base_offset <= self._log_start_offset)
        if config.retention_ms >= 0:
            retention_ms = config.retention_ms
            deleted += self._delete_oldest(
                lambda seg, _nxt: now_ms - seg.largest_timestamp() > retention_ms
            )
        if config.retention_bytes >= 0:
            excess = self.size_bytes - config.retention_bytes

            def over_size(segment: LogSegment, _next: LogSegment) -> bool:
                nonlocal excess
                if excess - segment.size < 0:
                    return False
                excess -= segment.size
                return True

            deleted += self._delete_oldest(over_size)
        return deleted

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: make ``offset`` the log start offset; return the new log start.

        -1 means the high watermark, as in the DeleteRecords API. Whole segments below the
        new start are deleted now; the rest of the data below it stays on disk but is no
        longer readable. Raises OffsetOutOfRangeError above the high watermark.
        """
        if offset == -1:
            offset = self._high_watermark
        if offset < 0 or offset > self._high_watermark:
            raise OffsetOutOfRangeError(
                f"cannot delete records before {offset}: outside [0, high watermark "
                f"{self._high_watermark}] of {self.topic}-{self.partition}"
            )
        self._advance_log_start(offset)
        self._delete_oldest(lambda _seg, nxt: nxt.base_offset <= self._log_start_offset)
        return self._log_start_offset

    # -- truncation -----------------------------------------------------------------------

    def truncate_to(self, offset: int) -> int:
        """Remove everything at and after ``offset`` (whole batches); return bytes removed.

        For replication (a follower dropping a divergent tail). Below the log start offset
        the log is emptied and restarted at ``offset``.
        """
        if offset >= self.log_end_offset:
            # No record goes, but epochs starting there do (Kafka truncates its epoch cache
            # always): a broker that led without writing has its epoch at its log end, and
            # a follower asking the leader about it would never learn about older ones.
            self._epochs.truncate_from_end(offset)
            return 0
        if offset < self._log_start_offset:
            removed = self.size_bytes
            self.truncate_fully_and_start_at(offset)
            return removed
        removed = 0
        while len(self._segments) > 1 and self._segments[-1].base_offset > offset:
            segment = self._segments.pop()
            self._bases.pop()
            removed += segment.size
            segment.delete()
        removed += self._segments[-1].truncate_to(offset)
        self._dir_dirty = True
        if self.log_end_offset < self._log_start_offset:
            # The batch holding the log start went (a target inside it): nothing readable is
            # left, so continue empty at the log start rather than below it.
            removed += self.size_bytes
            self.truncate_fully_and_start_at(self._log_start_offset)
            return removed
        self._after_truncation()
        return removed

    def truncate_fully_and_start_at(self, offset: int, now_ms: int | None = None) -> None:
        """Delete every segment and continue empty at ``offset`` (a follower out of range)."""
        for segment in self._segments:
            segment.delete()
        now = _now_ms() if now_ms is None else now_ms
        self._segments = [self._new_segment(self.directory, self.config, offset, now)]
        self._bases = [offset]
        self._log_start_offset = offset
        self._epochs.clear()
        self._dir_dirty = True
        self.producers.clear()
        self.producers.delete_snapshots()
        self._after_truncation()

    def _after_truncation(self) -> None:
        leo = self.log_end_offset
        self._high_watermark = min(self._high_watermark, leo)
        self._recovery_point = min(self._recovery_point, leo)
        self._epochs.truncate_from_end(leo)
        self.producers.delete_snapshots(above=leo)
        self._rebuild_producer_state()
        self._recount_aborted()
        for listener in self.truncation_listeners:
            listener(leo)

    def advance_log_start(self, offset: int) -> None:
        """Raise the log start offset to ``offset`` (at most the log end) and delete the
        segments entirely below it: a future replica following its current log's retention
        and DeleteRecords."""
        self._advance_log_start(min(offset, self.log_end_offset))
        self._delete_oldest(lambda _seg, nxt: nxt.base_offset <= self._log_start_offset)

    # -- producer state -------------------------------------------------------------------

    def _load_producer_state(self, clean_shutdown: bool) -> None:
        """At open: the newest snapshot at or below the log end, then the batches after it.

        After a clean shutdown the snapshot is at the log end and nothing is scanned. With no
        snapshot at all (a log written before producer state existed), a clean shutdown
        scans only the last two segments, as Kafka does on upgrade, and an unclean one the
        whole log. After a crash the scan starts one snapshot earlier: a snapshot keeps only
        each producer's last batch (Kafka's format), and a roll just before the crash would
        otherwise lose the batches a producer may still retry."""
        leo = self.log_end_offset
        self.producers.delete_snapshots(above=leo)
        offsets = self.producers.snapshot_offsets()
        at_most = offsets[-2] if not clean_shutdown and len(offsets) > 1 else leo
        start = self.producers.load_latest_snapshot(at_most)
        if start is None and clean_shutdown:
            start = self._segments[-2].base_offset if len(self._segments) > 1 else \
                self._segments[0].base_offset
        self._scan_producers(self._log_start_offset if start is None else start)

    def _rebuild_producer_state(self) -> None:
        """After truncation: the newest snapshot at or below the new log end, then the
        log's batch headers from there."""
        start = self.producers.load_latest_snapshot(self.log_end_offset)
        self._scan_producers(self._log_start_offset if start is None else start)

    def _scan_producers(self, start: int) -> None:
        """Apply the producer batches from ``start`` to the log end (headers only)."""
        leo = self.log_end_offset
        start = max(start, self._log_start_offset)
        if start >= leo:
            return
        first = max(0, bisect_right(self._bases, start) - 1)
        for segment in self._segments[first:]:
            header = segment.find_batch(start)
            if header is None:
                continue
            fd = segment.fd
            self._index_aborted(rebuild(self.producers, start,
                                        iter_batch_headers(fd, header.position, segment.size),
                                        _file_markers(fd, self.name)))

    def take_producer_snapshot(self) -> None:
        """Write the producer state as of the log end, fsynced (clean shutdown)."""
        if self.producers or self.producers.snapshot_offsets():
            self.producers.write_snapshot(self.log_end_offset, sync=True)

    def expire_producers(self, now_ms: int, expiration_ms: int) -> int:
        """Forget producers idle longer than ``producer.id.expiration.ms``."""
        return self.producers.expire(now_ms, expiration_ms)

    # -- end of life ----------------------------------------------------------------------

    def close(self) -> None:
        """Flush and release all descriptors (slices already handed out stay readable)."""
        try:
            if not self.offline:
                self.flush()
                try:
                    self.take_producer_snapshot()
                except OSError as exc:
                    log.warning("%s: could not write a producer snapshot: %s", self.name, exc)
        finally:
            for segment in self._segments:
                with contextlib.suppress(OSError):
                    segment.close()

    def untrack_files(self) -> None:
        """Take the segments out of the cache of open segments, on the owner thread, so that
        another thread may then rename and remove them (:meth:`rename_for_deletion`)."""
        for segment in self._segments:
            segment.untrack_files()

    def rename_for_deletion(self) -> Path:
        """Close the segments and rename the directory to its ``-delete`` name (no fsync).

        The rename is atomic, so a crash mid-removal leaves a ``-delete`` directory that the
        next start deletes instead of a half-removed partition that would load. The caller
        fsyncs the parent directory once for a whole batch of partitions, then removes the
        renamed directory. The name is shortened for long topic names (see
        :func:`~moldau.log.names.delete_dir_name`).
        """
        for segment in self._segments:
            segment.close()
        target = self.directory.with_name(delete_dir_name(self.topic, self.partition))
        os.rename(self.directory, target)
        self._deleted = True
        return target

    @property
    def is_future(self) -> bool:
        """True for a future replica (``<topic>-<partition>.<hex>-future``, a move between log
        dirs under way)."""
        return parse_future_dir(self.directory.name) is not None

    @property
    def renamed_for_deletion(self) -> bool:
        return self._deleted

    def rename_dir(self, target: Path) -> None:
        """Rename the partition directory to ``target`` (same log dir; no fsync) while the log
        stays open: a future replica becoming the current one. Descriptors follow the files."""
        os.rename(self.directory, target)
        self.directory = target
        for segment in self._segments:
            segment.relocate(target)
        self._epochs.path = target / LEADER_EPOCH_CHECKPOINT
        self.producers.directory = target

    def undo_rename_for_deletion(self, renamed: Path) -> None:
        """Put a directory renamed by :meth:`rename_for_deletion` back (a failed deletion);
        the segments reopen their files on next use."""
        os.rename(renamed, self.directory)
        self._deleted = False
        for segment in self._segments:
            segment.reopen()

    def delete(self) -> None:
        """Remove the partition now: rename to ``*-delete``, fsync the parent, then rm."""
        target = self.rename_for_deletion()
        fsync_dir(target.parent)
        shutil.rmtree(target, ignore_errors=True)
