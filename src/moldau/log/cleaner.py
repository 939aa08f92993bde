"""The log cleaner: compaction of the logs whose ``cleanup.policy`` contains ``compact``.

One background thread (DESIGN.md: CPU-heavy work stays off the event loop) repeats passes of
:meth:`LogCleaner.clean_once` and sleeps ``log.cleaner.backoff.ms`` when a pass found nothing
to do. A pass measures every compacted log (:mod:`cleanable`), and cleans each one that is due,
dirtiest first: map the dirty range's keys to their latest offsets (:mod:`offset_map`),
rewrite the inactive segments from the log start without obsolete records (:mod:`compactor`),
swap the result in (:mod:`swap`), and move the log's cleaner checkpoint to the end of the
cleaned range. A log is also cleaned when a tombstone it kept has since passed
``delete.retention.ms`` (remembered in memory; after a restart such a log waits for new dirty
data, as in Kafka before KIP-534), or when a tombstone it kept only because of the log's
tombstone bound is now below it. Transaction markers whose transaction a pass removed are
remembered the same way, so the pass that removes the marker follows (:mod:`txn_cleaning`).

Tombstone bound: a function given by the broker names, per log, the offset from which
tombstones must stay whatever their age (in a cluster: the lowest position any replica of the
partition is known to have fetched to; see docs/architecture.md, "Log compaction"). It is
asked once per pass and log, on the owner thread, and reaches the rewrite as one offset.
Without it (a lone broker, the tests of this layer) there is no such limit.

Threads: partition logs belong to the event loop and are not thread-safe. The cleaner touches
them only through an *owner call*, a function that runs a callable on the owning thread and
returns a future (:func:`loop_owner` for an asyncio loop; without one, calls run inline on the
caller's thread, which is what tests do). Two short owner calls per log: a snapshot (segment
list, config, read handles) and, per cleaned group, :meth:`PartitionLog.replace_segments`,
which checks that the replaced segments are still there and inactive before committing. All
reading, decoding, encoding and writing happens on the cleaner thread through the snapshot's
handles, which keep deleted segments readable, so the loop never waits for the cleaner.

The checkpoint lives in each log dir as ``cleaner-offset-checkpoint`` (Kafka's name and
format). Entries of partitions no longer in the dir are dropped when it is rewritten.
"""

from __future__ import annotations

import logging
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from .background import BackgroundWorker, OwnerCall, StopRequested, loop_owner, run_inline
from .checkpoint import read_offsets, write_offsets
from .cleanable import CleanableRange, LogSnapshot, cleanable_range, take_snapshot
from .compactor import (
    CleaningRules,
    RewriteStats,
    group_segments,
    last_batches,
    write_cleaned_group,
)
from .offset_map import build_offset_map
from .swap import CLEANED_SUFFIX
from .txn_cleaning import TxnCleaning

if TYPE_CHECKING:
    from .manager import LogManager
    from .partition_log import PartitionLog

log = logging.getLogger(__name__)

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"

__all__ = ["CleanResult", "CleanerConfig", "LogCleaner", "OwnerCall", "loop_owner", "run_inline"]

TopicPartition = tuple[str, int]
#: Per log, the offset from which its tombstones must stay (None: no limit); owner thread.
TombstoneBound = Callable[["PartitionLog"], int | None]


@dataclass(frozen=True, slots=True)
class CleanerConfig:
    """Broker-level cleaner settings (``log.cleaner.*``); per-topic ones are in LogConfig."""

    backoff_ms: int = 15_000
    #: Keys held in one offset map; a larger dirty range is cleaned over several passes.
    max_map_entries: int = 1_000_000


@dataclass(frozen=True, slots=True)
class CleanResult:
    """What one clean of one log did."""

    topic: str
    partition: int
    first_dirty_offset: int
    #: The new cleaner checkpoint: everything below it is now clean.
    end_offset: int
    dirty_ratio: float
    segments_before: int
    segments_after: int
    bytes_before: int
    bytes_after: int
    records_removed: int
    tombstones_removed: int
    #: Records of aborted transactions removed (included in records_removed).
    aborted_records_removed: int = 0
    #: Transaction markers removed.
    markers_removed: int = 0


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class CleanerStats:
    """What the cleaner did since start-up (read by the metrics endpoint; written by the
    cleaner thread only)."""

    __slots__ = ("bytes_after", "bytes_before", "cleans", "records_removed")

    def __init__(self) -> None:
        self.cleans = 0
        self.bytes_before = 0
        self.bytes_after = 0
        self.records_removed = 0

    def add(self, result: CleanResult) -> None:
        self.cleans += 1
        self.bytes_before += result.bytes_before
        self.bytes_after += result.bytes_after
        self.records_removed += result.records_removed


class LogCleaner(BackgroundWorker):
    """Compacts the compacted logs of a :class:`LogManager`; see the module docstring."""

    thread_name = "log-cleaner"
    description = "log cleaner"

    def __init__(
        self,
        manager: LogManager,
        config: CleanerConfig | None = None,
        *,
        owner: OwnerCall = run_inline,
        tombstone_bound: TombstoneBound | None = None,
    ) -> None:
        self.config = config or CleanerConfig()
        super().__init__(owner, self.config.backoff_ms)
        self.manager = manager
        self._tombstone_bound = tombstone_bound
        self.stats = CleanerStats()
        #: log dir -> (topic, partition) -> first dirty offset; loaded lazily per dir.
        self._checkpoints: dict[Path, dict[TopicPartition, int]] = {}
        #: When a tombstone kept by the last clean may be removed, per log.
        self._tombstone_expiry: dict[TopicPartition, int] = {}
        #: The lowest tombstone the last clean kept only for the tombstone bound, per log.
        self._tombstone_held: dict[TopicPartition, int] = {}
        #: The log object each partition had at the last pass, to notice a partition that
        #: was deleted and created again in between (its checkpoint would be a stranger's).
        self._seen: dict[TopicPartition, weakref.ref[PartitionLog]] = {}
        #: Subjects ("cleaning t-0") whose last clean hit a full disk, to report the recovery.
        self._failing: set[str] = set()

    # -- passes ---------------------------------------------------------------------------

    def run_pass(self) -> bool:
        """One pass of the thread: busy while some log was cleaned."""
        return bool(self.clean_once(_now_ms()))

    def clean_once(self, now_ms: int | None = None) -> list[CleanResult]:
        """One pass: clean every compacted log that is due, dirtiest first."""
        now = _now_ms() if now_ms is None else now_ms
        snapshots = self._on_owner(self._snapshot_all)
        candidates: list[CleanableRange] = []
        for snapshot in snapshots:
            cleanable = cleanable_range(snapshot, now)
            expiry = self._tombstone_expiry.get((snapshot.topic, snapshot.partition))
            # Strictly before now: the rewrite removes a tombstone when its batch's
            # maxTimestamp + delete.retention.ms < now, so an equal one would loop.
            held = self._tombstone_held.get((snapshot.topic, snapshot.partition))
            bound = snapshot.tombstone_bound
            if (cleanable.is_due or (expiry is not None and expiry < now)
                    or (held is not None and (bound is None or held < bound))):
                candidates.append(cleanable)
        candidates.sort(key=lambda c: (not c.max_lag_exceeded, -c.dirty_ratio))
        results: list[CleanResult] = []
        for cleanable in candidates:
            subject = f"cleaning {cleanable.snapshot.topic}-{cleanable.snapshot.partition}"
            try:
                result = self._clean(cleanable, now)
            except StopRequested:
                raise
            except Exception as exc:
                if cleanable.snapshot.log.renamed_for_deletion:
                    # Deleted (or moved to another log dir) under the clean: its directory
                    # went away, which says nothing about the disk.
                    log.info("%s-%d went away during cleaning; cleaning stopped",
                             cleanable.snapshot.topic, cleanable.snapshot.partition)
                    continue
                if isinstance(exc, OSError) and exc.errno is not None:
                    # A disk error, as the logs' own: a full disk is logged once until a
                    # clean succeeds, anything else takes the dir offline. Reported on the
                    # owner thread, which owns the logs an offline dir takes with it.
                    self._failing.add(subject)
                    self._on_owner(partial(self.manager.failures.io_failed,
                                           cleanable.snapshot.log_dir, subject, exc))
                    continue
                # One bad log (I/O error, topic deleted mid-clean) must not stop the others.
                log.exception("cleaning %s-%d failed", cleanable.snapshot.topic,
                              cleanable.snapshot.partition)
                continue
            if subject in self._failing:
                self._failing.discard(subject)
                self._on_owner(partial(self.manager.failures.io_succeeded, subject))
            if result is not None:
                results.append(result)
                self.stats.add(result)
                log.info(
                    "cleaned %s-%d up to offset %d: %d -> %d bytes, %d records (%d aborted), "
                    "%d tombstones and %d markers removed", result.topic, result.partition,
                    result.end_offset, result.bytes_before, result.bytes_after,
                    result.records_removed, result.aborted_records_removed,
                    result.tombstones_removed, result.markers_removed,
                )
        self._forget_missing(snapshots)
        return results

    def _checkpoint_of(self, log_dir: Path) -> dict[TopicPartition, int]:
        offsets = self._checkpoints.get(log_dir)
        if offsets is None:
            offsets = read_offsets(log_dir / CLEANER_OFFSET_CHECKPOINT)
            self._checkpoints[log_dir] = offsets
        return offsets

    def _snapshot_all(self) -> list[LogSnapshot]:
        """On the owner thread: snapshot every log whose policy includes compact."""
        snapshots = []
        for plog in self.manager.all_logs():
            if not plog.config.compacts or plog.moving:
                continue
            tp = (plog.topic, plog.partition)
            offsets = self._checkpoint_of(plog.directory.parent)
            seen = self._seen.get(tp)
            if seen is not None and seen() is not plog:
                offsets.pop(tp, None)
                self._tombstone_expiry.pop(tp, None)
                self._tombstone_held.pop(tp, None)
            self._seen[tp] = weakref.ref(plog)
            bound = None if self._tombstone_bound is None else self._tombstone_bound(plog)
            snapshots.append(take_snapshot(plog, offsets.get(tp), bound))
        return snapshots

    def _save_checkpoint(self, log_dir: Path) -> None:
        write_offsets(log_dir / CLEANER_OFFSET_CHECKPOINT, self._checkpoint_of(log_dir))

    def _forget_missing(self, snapshots: list[LogSnapshot]) -> None:
        """Drop checkpoints and notes of partitions no longer compacted here (deleted, moved
        or switched to delete), so a partition created again later starts dirty."""
        live = {(s.topic, s.partition) for s in snapshots}
        for log_dir, offsets in self._checkpoints.items():
            stale = [tp for tp in offsets if tp not in live]
            for tp in stale:
                del offsets[tp]
            if stale:
                self._save_checkpoint(log_dir)
        for notes in (self._tombstone_expiry, self._tombstone_held, self._seen):
            for tp in [tp for tp in notes if tp not in live]:
                del notes[tp]

    # -- one log --------------------------------------------------------------------------

    def _clean(self, cleanable: CleanableRange, now_ms: int) -> CleanResult | None:
        """Clean one log; None when the log changed under the cleaner and it gave up."""
        snapshot = cleanable.snapshot
        config = snapshot.config
        tp = (snapshot.topic, snapshot.partition)
        txns = TxnCleaning.of(snapshot.aborted)
        offset_map = build_offset_map(cleanable, self.config.max_map_entries, txns, self._stop)
        end = offset_map.end_offset
        rewritten = [s for s in snapshot.segments if s.base_offset < end]
        groups = group_segments(rewritten, config.segment_bytes)
        rules = CleaningRules.of(offset_map, cleanable.first_dirty_offset, now_ms,
                                 config.delete_retention_ms, snapshot.tombstone_bound)
        retained = last_batches(groups)
        stats = RewriteStats()
        bytes_after = 0
        segments_after = 0
        for group in groups:
            cleaned, changed = write_cleaned_group(
                group, snapshot.directory, config, rules, retained, stats, txns, now_ms,
                self._stop)
            if not changed:
                cleaned.delete()
                bytes_after += group[0].size
                segments_after += 1
                continue
            old = [s.segment for s in group]
            try:
                swapped = self._on_owner(partial(snapshot.log.replace_segments, old, cleaned))
            except BaseException:
                if cleaned.log_path.name.endswith(CLEANED_SUFFIX):
                    cleaned.delete()  # not committed: the old segments are intact
                else:  # committed on disk: the next start-up finishes the swap
                    log.error("%s-%d: the swap of cleaned segment %d failed after its commit "
                              "point; it completes at the next start", *tp, cleaned.base_offset)
                raise
            if not swapped:
                cleaned.delete()
                log.info("%s-%d changed during cleaning (retention, truncation or deletion); "
                         "cleaning stopped", *tp)
                return None
            bytes_after += cleaned.size
            segments_after += 1
        self._checkpoint_of(snapshot.log_dir)[tp] = end
        self._save_checkpoint(snapshot.log_dir)
        if stats.next_tombstone_expiry_ms is None:
            self._tombstone_expiry.pop(tp, None)
        else:
            self._tombstone_expiry[tp] = stats.next_tombstone_expiry_ms
        if stats.lowest_held_tombstone is None:
            self._tombstone_held.pop(tp, None)
        else:
            self._tombstone_held[tp] = stats.lowest_held_tombstone
        return CleanResult(
            snapshot.topic, snapshot.partition, cleanable.first_dirty_offset, end,
            cleanable.dirty_ratio, len(rewritten), segments_after,
            sum(s.size for s in rewritten), bytes_after, stats.records_removed,
            stats.tombstones_removed, stats.aborted_records_removed, stats.markers_removed,
        )
