"""All partition logs of a broker, spread over its ``log.dirs``.

A partition moving to another log dir of the broker (AlterReplicaLogDirs) has, besides its
current log, a *future* log in the target dir (``<topic>-<partition>.<hex>-future``, Kafka's
name), which the replica layer fills and then swaps in
(:meth:`LogManager.replace_current_with_future`). The swap leaves a marker in the promoted
directory until the old one is renamed for deletion, so a crash between the two renames is
resolved at start-up (the marked copy wins) instead of stopping the broker with two copies of
one partition, as Kafka does.

Per log dir it owns Kafka's bookkeeping files: ``meta.properties`` (which cluster and node the
dir belongs to), the clean-shutdown marker, and the log's offset checkpoints (recovery points,
log start offsets). The high watermarks' ``replication-offset-checkpoint`` belongs to the
replica manager, as in Kafka. Opening the manager loads every partition directory, running
recovery where the last shutdown was not clean.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import shutil
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

from .checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    fsync_dir,
    read_offsets,
    write_atomically,
    write_offsets,
)
from .config import LogConfig
from .dir_failures import LogDirFailures
from .errors import LogDirOfflineError, LogError, StorageError
from .metadata_files import META_PROPERTIES, ensure_meta_properties, random_id, read_properties
from .names import (
    MAX_FILE_NAME_BYTES,
    delete_dir_name,
    future_dir_name,
    parse_future_dir,
    parse_partition_dir,
    partition_dir_name,
    renamed_dir_kind,
)
from .open_files import SEGMENT_FILES, default_capacity
from .partition_log import PartitionLog

log = logging.getLogger(__name__)

CLEAN_SHUTDOWN_MARKER = ".kafka_cleanshutdown"
#: In a partition directory: a future replica that was complete when its swap began; it
#: replaces any other directory of the partition found at start-up (see the module docstring).
PROMOTED_MARKER = ".promoted-future"

TopicPartition = tuple[str, int]
#: Per log dir: (partition, recovery point, log start offset) rows.
CheckpointContents = dict[Path, list[tuple[TopicPartition, int, int]]]
#: errnos of partition file work that say nothing about a log dir's health.
_NOT_DIR_FAILURES = frozenset({errno.ENAMETOOLONG, errno.EMFILE, errno.ENFILE, errno.EEXIST})


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class LogManager:
    """Creates, finds, checkpoints, retains and deletes the broker's partition logs.

    Constructing it opens the log dirs and loads every partition in them. Not thread-safe;
    use it from the broker's event loop.
    """

    def __init__(
        self,
        log_dirs: Sequence[Path | str],
        *,
        node_id: int,
        cluster_id: str | None = None,
        default_config: LogConfig | None = None,
        topic_configs: Mapping[str, LogConfig] | None = None,
        now_ms: int | None = None,
        failures: LogDirFailures | None = None,
        max_open_segments: int | None = None,
    ) -> None:
        """Open ``log_dirs`` for node ``node_id`` and load their partitions.

        ``cluster_id`` is checked against (or written to) each dir's ``meta.properties``; when
        None, the id already on disk is used, or a new one generated. Logs load with
        ``topic_configs[topic]`` or ``default_config``; the broker may refine them later with
        :meth:`update_config`. I/O errors are reported to ``failures`` (the broker shares its
        one with the metadata store); a dir it takes offline takes its logs with it.
        ``max_open_segments`` bounds the segments holding descriptors (default: from
        RLIMIT_NOFILE, see :mod:`open_files`).
        """
        if not log_dirs:
            raise LogError("at least one log dir is needed")
        self.log_dirs = [Path(d) for d in log_dirs]
        self.node_id = node_id
        self.default_config = default_config or LogConfig()
        self._topic_configs = dict(topic_configs or {})
        SEGMENT_FILES.set_capacity(max_open_segments or default_capacity())
        self._logs: dict[TopicPartition, PartitionLog] = {}
        self._dir_of: dict[TopicPartition, Path] = {}
        #: Partition numbers -> log, per topic, so per-topic work never scans every log.
        self._by_topic: dict[str, dict[int, PartitionLog]] = {}
        #: Partitions per log dir, kept up to date so placing a new one costs O(dirs).
        self._counts: dict[Path, int] = {d: 0 for d in self.log_dirs}
        #: Future replicas (moves between log dirs under way), by partition.
        self._futures: dict[TopicPartition, PartitionLog] = {}
        #: AlterReplicaLogDirs for a partition not hosted yet: where it goes when it comes.
        self._preferred: dict[TopicPartition, Path] = {}
        self._closed = False
        self.failures = failures or LogDirFailures()
        self.failures.add_listener(self._dir_offline)
        now = _now_ms() if now_ms is None else now_ms
        for log_dir in self.log_dirs:
            log_dir.mkdir(parents=True, exist_ok=True)
        self.cluster_id: str = cluster_id or self._existing_cluster_id() or random_id()
        for log_dir in self.log_dirs:
            ensure_meta_properties(log_dir, self.cluster_id, node_id)
        for log_dir in self.log_dirs:
            self._load_dir(log_dir, now)
        self._settle_moves()

    def _existing_cluster_id(self) -> str | None:
        for log_dir in self.log_dirs:
            props = read_properties(log_dir / META_PROPERTIES)
            if props and props.get("cluster.id"):
                return props["cluster.id"]
        return None

    def _config_for(self, topic: str) -> LogConfig:
        return self._topic_configs.get(topic, self.default_config)

    def _load_dir(self, log_dir: Path, now_ms: int) -> None:
        """Load every partition of one dir; the clean-shutdown marker decides on recovery.

        The marker is removed only after loading, before any append can happen, so a crash at
        any later point is seen as unclean on the next start.
        """
        marker = log_dir / CLEAN_SHUTDOWN_MARKER
        clean = marker.exists()
        announced = clean
        recovery_points = read_offsets(log_dir / RECOVERY_POINT_CHECKPOINT)
        start_offsets = read_offsets(log_dir / LOG_START_OFFSET_CHECKPOINT)
        for path in sorted(log_dir.iterdir()):
            if not path.is_dir():
                continue
            kind = renamed_dir_kind(path.name)
            if kind == "delete":
                log.info("removing %s, a partition deleted before the last shutdown", path)
                shutil.rmtree(path, ignore_errors=True)
                continue
            future_tp = parse_future_dir(path.name)
            if future_tp is not None:
                if future_tp in self._futures:
                    log.warning("removing %s: %s-%d has another future replica in %s", path,
                                *future_tp, self._futures[future_tp].directory)
                    _remove_dir(path)
                    continue
                future = PartitionLog.open(
                    path, self._config_for(future_tp[0]), recovery_points.get(future_tp, 0),
                    clean, now_ms, log_start_offset=start_offsets.get(future_tp, 0))
                future.failures = self.failures
                self._futures[future_tp] = future
                continue
            tp = parse_partition_dir(path.name)
            if tp is None:
                if kind is None:
                    log.debug("skipping %s: not a partition directory", path)
                else:
                    log.warning("skipping %s: '%s' partition directories are not supported",
                                path, kind)
                continue
            if tp in self._logs and not self._resolve_duplicate(tp, path):
                continue
            if not announced:
                log.info("%s: no clean shutdown marker, recovering unflushed segments", log_dir)
                announced = True
            self._add(PartitionLog.open(
                path,
                self._config_for(tp[0]),
                recovery_points.get(tp, 0),
                clean,
                now_ms,
                log_start_offset=start_offsets.get(tp, 0),
            ), log_dir)
        if clean:
            marker.unlink()
            fsync_dir(log_dir)

    def _resolve_duplicate(self, tp: TopicPartition, path: Path) -> bool:
        """``path`` holds a partition already loaded from another dir: a swap interrupted
        between its two renames. The copy with the promoted marker wins and the other is
        removed; True when ``path`` should be loaded. Two unmarked copies stop the start."""
        other = self._logs[tp]
        if (path / PROMOTED_MARKER).exists() == (other.directory / PROMOTED_MARKER).exists():
            raise LogError(f"partition {tp[0]}-{tp[1]} is in both {self._dir_of[tp]} and "
                           f"{path.parent}")
        if (path / PROMOTED_MARKER).exists():
            log.warning("%s-%d: completing an interrupted move to %s; removing %s", *tp,
                        path.parent, other.directory)
            self._remove(*tp)
            other.delete()
            return True
        log.warning("%s-%d: completing an interrupted move to %s; removing %s", *tp,
                    self._dir_of[tp], path)
        _remove_dir(path)
        return False

    def _settle_moves(self) -> None:
        """After loading: drop the markers of completed swaps, and futures whose partition
        has no current log here any more (nothing to move)."""
        for plog in self._logs.values():
            marker = plog.directory / PROMOTED_MARKER
            if marker.exists():
                marker.unlink()
                fsync_dir(plog.directory)
        for tp in [tp for tp in self._futures if tp not in self._logs]:
            log.warning("removing future replica %s: %s-%d has no current log here",
                        self._futures[tp].directory, *tp)
            self._futures.pop(tp).delete()
        for tp, future in self._futures.items():
            log.info("%s-%d: resuming its move to %s at offset %d", *tp,
                     future.directory.parent, future.log_end_offset)

    # -- storage faults -------------------------------------------------------------------

    def _dir_offline(self, log_dir: Path) -> None:
        """A dir failed: its logs refuse everything (they stay known, to answer with
        KAFKA_STORAGE_ERROR rather than UNKNOWN_TOPIC_OR_PARTITION)."""
        for tp, plog in self._logs.items():
            if self._dir_of[tp] == log_dir:
                plog.go_offline()
        for future in self._futures.values():
            if future.directory.parent == log_dir:
                future.go_offline()

    def is_offline(self, log_dir: Path) -> bool:
        return self.failures.is_offline(log_dir)

    def online_dirs(self) -> list[Path]:
        return [d for d in self.log_dirs if not self.failures.is_offline(d)]

    # -- partitions -----------------------------------------------------------------------

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        """The partition's log, offline ones included (check ``plog.offline``)."""
        return self._logs.get((topic, partition))

    def dir_of(self, topic: str, partition: int) -> Path | None:
        """The log dir of the partition's current log."""
        return self._dir_of.get((topic, partition))

    def resolve_dir(self, path: str) -> Path | None:
        """The configured log dir named by ``path`` (an absolute path, as AlterReplicaLogDirs
        sends what DescribeLogDirs reported), None when it is not one of ``log.dirs``."""
        for log_dir in self.log_dirs:
            if path in (str(log_dir), str(log_dir.resolve()), str(log_dir.absolute())):
                return log_dir
        return None

    # -- moves between log dirs -------------------------------------------------------------

    def future(self, topic: str, partition: int) -> PartitionLog | None:
        """The partition's future replica (a move under way), None when it has none."""
        return self._futures.get((topic, partition))

    def futures(self) -> list[PartitionLog]:
        return list(self._futures.values())

    def prefer_dir(self, topic: str, partition: int, log_dir: Path) -> None:
        """Where the partition's log goes when it is created here later (Kafka's
        maybeUpdatePreferredLogDir: AlterReplicaLogDirs before a reassignment adds it)."""
        self._preferred[(topic, partition)] = log_dir

    @staticmethod
    def can_move(topic: str, partition: int) -> bool:
        """Whether the future directory name fits the file system (Kafka's KAFKA-4893)."""
        return len(future_dir_name(topic, partition).encode()) <= MAX_FILE_NAME_BYTES

    def create_future(self, topic: str, partition: int, log_dir: Path) -> PartitionLog:
        """Make an empty future replica of the partition in ``log_dir``, starting at its
        current log's start offset. Raises StorageError when the disk refuses."""
        tp = (topic, partition)
        current = self._logs[tp]
        path = log_dir / future_dir_name(topic, partition)
        try:
            future = PartitionLog.open(path, current.config,
                                       log_start_offset=current.log_start_offset)
            if current.topic_id is not None:
                future.set_topic_id(current.topic_id, sync=False)
            fsync_dir(log_dir)
        except OSError as exc:
            _remove_dir(path)
            raise self.failures.io_failed(log_dir, f"future replica of {topic}-{partition}",
                                          exc) from None
        future.failures = self.failures
        self._futures[tp] = future
        return future

    def discard_future(self, topic: str, partition: int) -> None:
        """Remove the partition's future replica (a move cancelled or redirected, or the
        partition deleted); one in an offline dir is left for the next start to resume."""
        future = self._futures.pop((topic, partition), None)
        if future is None:
            return
        future.untrack_files()
        if future.offline:
            with contextlib.suppress(StorageError):
                future.close()
            return
        try:
            future.delete()
        except OSError as exc:
            self.io_failed(exc, f"future replica of {topic}-{partition}")

    def replace_current_with_future(self, topic: str, partition: int) -> Path | None:
        """Swap a caught-up future replica in as the partition's log (Kafka's
        replaceCurrentWithFutureLog); the caller made sure nothing was appended to the current
        log since the future reached its end. Returns the old directory, renamed for deletion,
        for the caller to remove off the loop (None when that rename failed: its dir went
        offline, and the next start removes it).

        Order, for crash safety: mark the future as promoted, rename it to the live name
        (now two live copies exist, told apart by the marker), rename the old one for
        deletion, drop the marker. Raises StorageError if the first renames fail (nothing
        changed then but a stray marker, which only matters next to a second copy).
        """
        tp = (topic, partition)
        current, future = self._logs[tp], self._futures[tp]
        source_dir, target_dir = self._dir_of[tp], future.directory.parent
        try:
            future.copy_leader_epochs(current)
            marker = future.directory / PROMOTED_MARKER
            marker.touch()
            fsync_dir(future.directory)
            future.rename_dir(target_dir / partition_dir_name(topic, partition))
            fsync_dir(target_dir)
        except OSError as exc:
            raise self.failures.io_failed(target_dir, f"move of {topic}-{partition}",
                                          exc) from None
        future.high_watermark = current.high_watermark
        del self._futures[tp]
        self._remove(topic, partition)
        self._add(future, target_dir)
        current.untrack_files()
        try:
            renamed = current.rename_for_deletion()
            fsync_dir(source_dir)
        except OSError as exc:
            # The marker keeps the new copy authoritative at the next start.
            self.failures.io_failed(source_dir, f"move of {topic}-{partition}", exc)
            return None
        try:
            (future.directory / PROMOTED_MARKER).unlink()
        except OSError as exc:
            log.warning("%s-%d: cannot remove %s: %s", topic, partition, PROMOTED_MARKER, exc)
        return renamed

    def all_logs_in(self, log_dir: Path) -> list[PartitionLog]:
        """Every log of one dir, offline or not."""
        return [plog for tp, plog in self._logs.items() if self._dir_of[tp] == log_dir]

    def online_logs_by_dir(self) -> dict[Path, list[PartitionLog]]:
        """Every online dir with its logs (the replica manager's high watermark checkpoints)."""
        by_dir: dict[Path, list[PartitionLog]] = {d: [] for d in self.online_dirs()}
        for tp, plog in self._logs.items():
            logs = by_dir.get(self._dir_of[tp])
            if logs is not None:
                logs.append(plog)
        return by_dir

    def all_logs(self) -> list[PartitionLog]:
        """Every log in an online dir: what background work may touch."""
        return [plog for plog in self._logs.values() if not plog.offline]

    def topic_logs(self, topic: str) -> dict[int, PartitionLog]:
        """The loaded partitions of ``topic`` by number (a copy)."""
        return dict(self._by_topic.get(topic, {}))

    def _add(self, plog: PartitionLog, log_dir: Path) -> None:
        plog.failures = self.failures
        tp = (plog.topic, plog.partition)
        self._logs[tp] = plog
        self._dir_of[tp] = log_dir
        self._by_topic.setdefault(plog.topic, {})[plog.partition] = plog
        self._counts[log_dir] += 1

    def _remove(self, topic: str, partition: int) -> PartitionLog | None:
        plog = self._logs.pop((topic, partition), None)
        if plog is None:
            return None
        self._counts[self._dir_of.pop((topic, partition))] -= 1
        by_number = self._by_topic[topic]
        del by_number[partition]
        if not by_number:
            del self._by_topic[topic]
        return plog

    # Creating many partitions is split in three so that the broker can keep its event loop
    # free: place (owner thread), make (any thread, the file work), adopt (owner thread).

    def place(self, topic: str, partitions: Sequence[int]) -> list[tuple[int, Path]]:
        """Choose a log dir for each new partition: the online dirs with the fewest partitions.

        Raises LogDirOfflineError when every dir is offline.
        """
        online = self.online_dirs()
        if not online:
            raise LogDirOfflineError("every log dir is offline")
        counts = dict(self._counts)
        placed = []
        for partition in partitions:
            preferred = self._preferred.pop((topic, partition), None)
            log_dir = preferred if preferred in online else min(online, key=lambda d: counts[d])
            counts[log_dir] += 1
            placed.append((partition, log_dir))
        return placed

    @staticmethod
    def make(
        topic: str,
        placed: Sequence[tuple[int, Path]],
        config: LogConfig,
        topic_id: uuid.UUID | None = None,
        now_ms: int | None = None,
    ) -> list[tuple[PartitionLog, Path]]:
        """Create the directories and empty logs of ``placed`` partitions; touches no state.

        Safe on any thread. No fsync per partition: one fsync per log dir at the end makes
        the new directory entries durable; the files inside a new partition are empty or
        rebuilt at start-up (segments, ``partition.metadata``) if a power loss takes them.
        On an error the partitions made so far are removed again and the error raised.
        """
        made: list[tuple[PartitionLog, Path]] = []
        try:
            for partition, log_dir in placed:
                path = log_dir / partition_dir_name(topic, partition)
                if path.exists():  # never adopt a stranger's files as a new partition
                    raise FileExistsError(errno.EEXIST, "partition directory exists", str(path))
                plog = PartitionLog.open(path, config, now_ms=now_ms)
                made.append((plog, log_dir))
                if topic_id is not None:
                    plog.set_topic_id(topic_id, sync=False)
            for log_dir in {d for _, d in placed}:
                fsync_dir(log_dir)
        except BaseException:
            LogManager.remove_renamed(LogManager.rename_for_deletion([p for p, _ in made]))
            raise
        return made

    def adopt(self, made: Sequence[tuple[PartitionLog, Path]]) -> None:
        """Register logs from :meth:`make` (owner thread); existing partitions are kept."""
        for plog, log_dir in made:
            if (plog.topic, plog.partition) in self._logs:
                raise LogError(f"partition {plog.topic}-{plog.partition} already exists")
            self._add(plog, log_dir)

    def create(
        self,
        topic: str,
        partition: int,
        config: LogConfig,
        topic_id: uuid.UUID | None = None,
        now_ms: int | None = None,
    ) -> PartitionLog:
        """Create the partition's log in the dir with the fewest partitions (or return it).

        An existing log gets ``config`` and the topic id, so calling this twice is harmless.
        Only online dirs are used. Raises StorageError (nothing is left behind) when the
        disk refuses.
        """
        tp = (topic, partition)
        plog = self._logs.get(tp)
        if plog is None:
            placed = self.place(topic, [partition])
            try:
                made = self.make(topic, placed, config, topic_id, now_ms)
            except OSError as exc:
                raise self.io_failed(exc, f"{topic}-{partition}") from None
            self.failures.io_succeeded(f"{topic}-{partition}")
            self.adopt(made)
            return made[0][0]
        plog.update_config(config)
        if topic_id is not None:
            try:
                plog.set_topic_id(topic_id)
            except OSError as exc:
                raise self.failures.io_failed(self._dir_of[tp], plog.name, exc) from None
        return plog

    # Deleting likewise: detach (owner thread), rename (any thread), remove (any thread).

    def detach(self, topic: str, partitions: Sequence[int]) -> list[PartitionLog]:
        """Forget the logs of ``partitions`` of ``topic`` and hand them over for deletion.

        Their segments leave the cache of open segments, so the thread that renames and
        removes them is the only one to touch their files from now on.
        """
        detached = []
        for partition in partitions:
            self.discard_future(topic, partition)
            self._preferred.pop((topic, partition), None)
            plog = self._remove(topic, partition)
            if plog is not None:
                plog.untrack_files()
                detached.append(plog)
        return detached

    @staticmethod
    def rename_for_deletion(logs: Sequence[PartitionLog]) -> list[Path]:
        """Rename each log's directory to its ``-delete`` name, then fsync each parent once.

        Safe on any thread for detached logs. If a rename fails, those already renamed are
        put back and the error raised, so the caller can keep the topic as it was.
        """
        renamed: list[tuple[PartitionLog, Path]] = []
        try:
            for plog in logs:
                renamed.append((plog, plog.rename_for_deletion()))
        except BaseException:
            for plog, path in reversed(renamed):
                try:
                    plog.undo_rename_for_deletion(path)
                except OSError as exc:
                    log.error("cannot rename %s back after a failed deletion: %s", path, exc)
            raise
        for parent in {path.parent for _, path in renamed}:
            fsync_dir(parent)
        return [path for _, path in renamed]

    def io_failed(self, exc: OSError, subject: str) -> StorageError:
        """Report an OSError of partition file work to the failure channel (which takes the
        dir offline unless the disk is merely full); the error to raise instead.

        The dir is found from the failing path. Errors that say nothing about the dir's
        health (a name too long for the file system, too many open files) are not reported
        as dir failures.
        """
        path = Path(exc.filename) if isinstance(exc.filename, str | Path) else None
        log_dir = next((d for d in self.log_dirs if path is not None and d in path.parents),
                       self.log_dirs[0])
        if exc.errno in _NOT_DIR_FAILURES:
            return StorageError(f"{subject}: {exc.strerror or exc}")
        return self.failures.io_failed(log_dir, subject, exc)

    def _delete_detached(self, detached: Sequence[PartitionLog]) -> None:
        """Rename and remove detached logs now; offline ones are left for the next start."""
        online = [plog for plog in detached if not plog.offline]
        try:
            self.remove_renamed(self.rename_for_deletion(online))
        except OSError as exc:
            # Logged by the failure channel; a leftover dir is deleted at the next start.
            self.io_failed(exc, online[0].name if online else "partitions")

    @staticmethod
    def remove_renamed(paths: Sequence[Path]) -> None:
        """Remove directories renamed for deletion (a leftover is removed at the next start)."""
        for path in paths:
            shutil.rmtree(path, ignore_errors=True)

    def delete(self, topic: str, partition: int) -> bool:
        """Delete the partition's log and directory now; False if there was none."""
        detached = self.detach(topic, [partition])
        if not detached:
            return False
        self._delete_detached(detached)
        return True

    def delete_all(self, topic: str, partitions: Sequence[int]) -> int:
        """Delete several partitions of ``topic`` now (one fsync per log dir); return how many."""
        detached = self.detach(topic, partitions)
        self._delete_detached(detached)
        return len(detached)

    def update_config(self, topic: str, config: LogConfig) -> None:
        """Give every partition of ``topic`` (and partitions loaded later) ``config``."""
        self._topic_configs[topic] = config
        for plog in self._by_topic.get(topic, {}).values():
            plog.update_config(config)

    # -- periodic work --------------------------------------------------------------------

    def checkpoint(self) -> None:
        """Write each online dir's recovery points and log start offsets.

        A dir whose checkpoints fail (a full disk) keeps its previous ones, which only makes
        the next recovery scan more; the failure is logged once per event, never raised.
        """
        self.report_checkpoint_errors(write_checkpoints(self.checkpoint_contents()))

    def checkpoint_contents(self) -> CheckpointContents:
        """What :meth:`checkpoint` writes, per online dir (cheap: owner thread).

        Split from the writing so the broker can write on a worker thread: with 20,000
        partitions the files with their fsyncs take 100-200 ms.
        """
        by_dir: CheckpointContents = {d: [] for d in self.online_dirs()}
        for tp, plog in self._logs.items():
            rows = by_dir.get(self._dir_of[tp])
            if rows is not None:
                rows.append((tp, plog.recovery_point, plog.log_start_offset))
        for tp, future in self._futures.items():  # never in the same dir as its current log
            rows = by_dir.get(future.directory.parent)
            if rows is not None:
                rows.append((tp, future.recovery_point, future.log_start_offset))
        return by_dir

    def report_checkpoint_errors(self, errors: Mapping[Path, OSError | None]) -> None:
        """Tell the failure channel how writing each dir's checkpoints went (owner thread)."""
        for log_dir, exc in errors.items():
            subject = f"checkpoints of {log_dir}"
            if exc is not None:
                self.failures.io_failed(log_dir, subject, exc)
            else:
                self.failures.io_succeeded(subject)

    def flush_and_checkpoint_recovery(self) -> None:
        """fsync every log (moving its recovery point to its end), then checkpoint."""
        for plog in self.all_logs():
            with contextlib.suppress(StorageError):  # reported by the failure channel
                plog.flush()
        self.checkpoint()

    def flush_due(self, now_ms: int) -> None:
        """Flush the logs whose ``flush.ms`` has passed."""
        for plog in self.all_logs():
            with contextlib.suppress(StorageError):  # reported by the failure channel
                plog.flush_if_due(now_ms)

    def run_retention(self, now_ms: int) -> int:
        """Apply retention to every log; return the number of segments deleted."""
        deleted = 0
        for plog in self.all_logs():
            with contextlib.suppress(StorageError):  # reported by the failure channel
                deleted += plog.enforce_retention(now_ms)
        return deleted

    def log_dir_sizes(self) -> dict[Path, list[tuple[TopicPartition, int, bool]]]:
        """(partition, bytes, is future) per log dir (DescribeLogDirs)."""
        sizes: dict[Path, list[tuple[TopicPartition, int, bool]]] = {d: [] for d in self.log_dirs}
        for tp, plog in self._logs.items():
            sizes[self._dir_of[tp]].append((tp, plog.size_bytes, False))
        for tp, future in self._futures.items():
            sizes[future.directory.parent].append((tp, future.size_bytes, True))
        return sizes

    def close(self) -> None:
        """Flush and close every log, checkpoint, and mark each dir as cleanly shut down."""
        if self._closed:
            return
        unflushed: set[Path] = set()
        for tp, plog in self._logs.items():
            try:
                plog.close()
            except StorageError:  # reported by the failure channel; recovery will check it
                unflushed.add(self._dir_of[tp])
        for future in self._futures.values():
            try:
                future.close()
            except StorageError:
                unflushed.add(future.directory.parent)
        self.checkpoint()
        for log_dir in self.online_dirs():
            if log_dir in unflushed:
                continue
            try:
                write_atomically(log_dir / CLEAN_SHUTDOWN_MARKER, b"")
            except OSError as exc:
                log.warning("%s: cannot write the clean shutdown marker (%s); the next start "
                            "recovers this dir", log_dir, exc.strerror or exc)
        self._closed = True


def write_checkpoints(contents: CheckpointContents) -> dict[Path, OSError | None]:
    """Write the two log offset checkpoints of each dir; safe on any thread (touches no log).

    Returns each dir's error (None when written), for
    :meth:`LogManager.report_checkpoint_errors` on the owner thread.
    """
    errors: dict[Path, OSError | None] = {}
    for log_dir, rows in contents.items():
        try:
            write_offsets(log_dir / RECOVERY_POINT_CHECKPOINT, {tp: r for tp, r, _ in rows})
            write_offsets(log_dir / LOG_START_OFFSET_CHECKPOINT, {tp: s for tp, _, s in rows})
        except OSError as exc:
            errors[log_dir] = exc
        else:
            errors[log_dir] = None
    return errors


def _remove_dir(path: Path) -> None:
    """Rename a partition directory that is not loaded for deletion, then remove it."""
    topic, partition = parse_partition_dir(path.name) or parse_future_dir(path.name) or ("x", 0)
    target = path.with_name(delete_dir_name(topic, partition))
    with contextlib.suppress(OSError):
        os.rename(path, target)
        fsync_dir(path.parent)
    shutil.rmtree(target, ignore_errors=True)
    shutil.rmtree(path, ignore_errors=True)
