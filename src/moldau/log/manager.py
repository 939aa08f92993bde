"""All partition logs of a broker, spread over its ``log.dirs``.

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
from .names import parse_partition_dir, partition_dir_name, renamed_dir_kind
from .open_files import SEGMENT_FILES, default_capacity
from .partition_log import PartitionLog

log = logging.getLogger(__name__)

CLEAN_SHUTDOWN_MARKER = ".kafka_cleanshutdown"

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
            tp = parse_partition_dir(path.name)
            if tp is None:
                if kind is None:
                    log.debug("skipping %s: not a partition directory", path)
                else:
                    log.warning("skipping %s: '%s' partition directories are not supported",
                                path, kind)
                continue
            if tp in self._logs:
                raise LogError(f"partition {tp[0]}-{tp[1]} is in both {self._dir_of[tp]} and "
                               f"{log_dir}")
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

    # -- storage faults -------------------------------------------------------------------

    def _dir_offline(self, log_dir: Path) -> None:
        """A dir failed: its logs refuse everything (they stay known, to answer with
        KAFKA_STORAGE_ERROR rather than UNKNOWN_TOPIC_OR_PARTITION)."""
        for tp, plog in self._logs.items():
            if self._dir_of[tp] == log_dir:
                plog.go_offline()

    def is_offline(self, log_dir: Path) -> bool:
        return self.failures.is_offline(log_dir)

    def online_dirs(self) -> list[Path]:
        return [d for d in self.log_dirs if not self.failures.is_offline(d)]

    # -- partitions -----------------------------------------------------------------------

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        """The partition's log, offline ones included (check ``plog.offline``)."""
        return self._logs.get((topic, partition))

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
            log_dir = min(online, key=lambda d: counts[d])
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

    def log_dir_sizes(self) -> dict[Path, dict[TopicPartition, int]]:
        """Bytes per partition, per log dir (DescribeLogDirs)."""
        sizes: dict[Path, dict[TopicPartition, int]] = {d: {} for d in self.log_dirs}
        for tp, plog in self._logs.items():
            sizes[self._dir_of[tp]][tp] = plog.size_bytes
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
