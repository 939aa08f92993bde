"""What the cleaner may clean in a log, and whether it is worth cleaning now.

Kafka's vocabulary: a compacted log is a *clean* part (already compacted, from the log start
to the cleaner checkpoint) followed by a *dirty* part. The dirty part is cleanable up to the
*first uncleanable offset*: the active segment's base offset, or earlier, the log's first
unstable offset (the first offset of the oldest transaction still open or whose marker is not
yet below the high watermark: its fate is not settled, and so neither is what follows it), or
earlier still, the first batch still inside ``min.compaction.lag.ms``. A log is worth cleaning
when dirty bytes / (clean + dirty bytes) reaches ``min.cleanable.dirty.ratio``, or when its
oldest dirty batch is older than ``max.compaction.lag.ms``.

A :class:`LogSnapshot` is taken on the thread that owns the log (the event loop) and is cheap:
a few attributes per segment plus a reference to each segment's read handle. Everything else
here runs on the cleaner thread and reads the files through those handles only, so a segment
that retention deletes meanwhile stays readable until the snapshot is dropped.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .batch import BatchHeader, iter_batch_headers
from .config import LONG_MAX, LogConfig
from .file_slice import FileSlice
from .segment import LogSegment
from .txn_index import AbortedTxn

if TYPE_CHECKING:
    from .partition_log import PartitionLog


@dataclass(frozen=True, slots=True)
class SegmentSnapshot:
    """An inactive segment as it was when the snapshot was taken."""

    segment: LogSegment
    base_offset: int
    next_offset: int
    size: int
    max_timestamp: int
    #: The whole log file; holding it keeps the descriptor (and unlinked data) alive.
    file: FileSlice

    @property
    def fd(self) -> int:
        return self.file.fd


@dataclass(frozen=True, slots=True)
class LogSnapshot:
    """One compacted log, seen from the cleaner: its config and its inactive segments."""

    log: PartitionLog
    topic: str
    partition: int
    directory: Path
    config: LogConfig
    log_start_offset: int
    #: Inactive segments only: the cleaner never reads or rewrites the active one.
    segments: tuple[SegmentSnapshot, ...]
    active_base_offset: int
    #: Where cleaning resumes: the checkpoint clamped into [log start, active base].
    first_dirty_offset: int
    #: (segment index, file position) of the batch holding ``first_dirty_offset``;
    #: (len(segments), 0) when nothing inactive is dirty.
    first_dirty_at: tuple[int, int]
    #: Tombstones at or above this offset must stay (some replica of the partition may not
    #: have fetched them yet); None: no such limit (a log that is every replica of its data).
    tombstone_bound: int | None = None
    #: The log's first unstable offset (None: no transaction is undecided), and the
    #: (segment index, position) of its batch ((len(segments), 0) when not in an inactive one).
    first_unstable_offset: int | None = None
    unstable_at: tuple[int, int] | None = None
    #: The aborted transactions overlapping the inactive segments (from their ``.txnindex``).
    aborted: tuple[AbortedTxn, ...] = ()

    @property
    def log_dir(self) -> Path:
        return self.directory.parent


def take_snapshot(plog: PartitionLog, checkpoint: int | None,
                  tombstone_bound: int | None = None) -> LogSnapshot:
    """Snapshot ``plog`` on its owner thread; ``checkpoint`` is its cleaner checkpoint,
    ``tombstone_bound`` the offset from which its tombstones must stay (None: no limit).

    A checkpoint outside the log (below the log start after retention or DeleteRecords, or
    beyond its end after a truncation) falls back to the log start, so the whole log counts
    as dirty, as in Kafka. The first unstable offset and the aborted transactions are read
    here too: both come from the log's in-memory producer state and ``.txnindex`` entries.
    """
    segments = plog.segments
    inactive = tuple(
        SegmentSnapshot(seg, seg.base_offset, seg.next_offset, seg.size, seg.max_timestamp,
                        seg.file_slice())
        for seg in segments[:-1]
    )
    active_base = segments[-1].base_offset
    start = plog.log_start_offset
    outside = checkpoint is None or not start <= checkpoint <= plog.log_end_offset
    first_dirty = start if outside or checkpoint is None else checkpoint
    first_dirty = min(first_dirty, active_base)
    at = _position_of(inactive, first_dirty)
    unstable = plog.first_unstable_offset
    unstable_at = None if unstable is None else _position_of(inactive, unstable)
    aborted = tuple(plog.aborted_transactions(start, active_base))
    return LogSnapshot(plog, plog.topic, plog.partition, plog.directory, plog.config, start,
                       inactive, active_base, first_dirty, at, tombstone_bound, unstable,
                       unstable_at, aborted)


def _position_of(inactive: tuple[SegmentSnapshot, ...], offset: int) -> tuple[int, int]:
    """(segment index, position) of the batch holding ``offset`` among ``inactive``;
    (len(inactive), 0) when it is past them."""
    for i, snap in enumerate(inactive):
        if snap.next_offset > offset:
            header = snap.segment.find_batch(offset)
            if header is not None:
                return i, header.position
    return len(inactive), 0


def iter_headers_between(
    segments: tuple[SegmentSnapshot, ...], start: tuple[int, int], end: tuple[int, int]
) -> Iterator[tuple[int, BatchHeader]]:
    """(segment index, header) of every batch from ``start`` up to ``end`` (both given as
    (segment index, position))."""
    for i in range(start[0], min(end[0] + 1, len(segments))):
        snap = segments[i]
        first = start[1] if i == start[0] else 0
        last = end[1] if i == end[0] else snap.size
        for header in iter_batch_headers(snap.fd, first, last):
            yield i, header


@dataclass(frozen=True, slots=True)
class CleanableRange:
    """The dirty range of one log at one moment, and whether cleaning it is due."""

    snapshot: LogSnapshot
    first_dirty_offset: int
    first_uncleanable_offset: int
    #: (segment index, position) of the first batch at/after the first uncleanable offset.
    uncleanable_at: tuple[int, int]
    clean_bytes: int
    dirty_bytes: int
    #: The oldest dirty batch is older than max.compaction.lag.ms.
    max_lag_exceeded: bool

    @property
    def dirty_ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0

    @property
    def is_due(self) -> bool:
        """Dirty data to clean, and enough of it (or old enough) to be worth a rewrite."""
        if self.dirty_bytes <= 0:
            return False
        return self.max_lag_exceeded or (
            self.dirty_ratio >= self.snapshot.config.min_cleanable_dirty_ratio
        )


def _bytes_before(snapshot: LogSnapshot, at: tuple[int, int]) -> int:
    return sum(s.size for s in snapshot.segments[: at[0]]) + at[1]


def cleanable_range(snapshot: LogSnapshot, now_ms: int) -> CleanableRange:
    """Measure the dirty range of ``snapshot`` at ``now_ms`` (reads batch headers only).

    The range ends at the active segment, at the first unstable offset, or at the first dirty
    batch whose maxTimestamp is within ``min.compaction.lag.ms`` of now: records that recent
    must stay uncompacted, and so must everything after them, since the range is one
    contiguous run of offsets. Segments whose maximum is already old enough are skipped
    without reading them.
    """
    config = snapshot.config
    segments = snapshot.segments
    dirty_at = snapshot.first_dirty_at
    end_offset, end_at = snapshot.active_base_offset, (len(segments), 0)
    first_dirty = snapshot.first_dirty_offset
    unstable = snapshot.first_unstable_offset
    if unstable is not None and snapshot.unstable_at is not None and unstable < end_offset:
        end_offset = max(unstable, first_dirty)
        end_at = max(snapshot.unstable_at, dirty_at)
    if config.min_compaction_lag_ms > 0 and dirty_at[0] < len(segments):
        horizon = now_ms - config.min_compaction_lag_ms
        for i in range(dirty_at[0], min(end_at[0] + 1, len(segments))):
            if segments[i].max_timestamp <= horizon:
                continue
            start = dirty_at[1] if i == dirty_at[0] else 0
            stop = end_at[1] if i == end_at[0] else segments[i].size
            for header in iter_batch_headers(segments[i].fd, start, stop):
                if header.max_timestamp > horizon:
                    end_offset = max(header.base_offset, first_dirty)
                    end_at = (i, header.position)
                    break
            if end_at[0] == i:
                break
    clean = _bytes_before(snapshot, dirty_at)
    dirty = max(0, _bytes_before(snapshot, end_at) - clean)
    max_lag_exceeded = False
    if config.max_compaction_lag_ms < LONG_MAX and dirty:
        first = next(iter_headers_between(segments, dirty_at, end_at), None)
        if first is not None:
            timestamp = first[1].max_timestamp
            max_lag_exceeded = 0 <= timestamp < now_ms - config.max_compaction_lag_ms
    return CleanableRange(snapshot, first_dirty, end_offset, end_at, clean, dirty,
                          max_lag_exceeded)
