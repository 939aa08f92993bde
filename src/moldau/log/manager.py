"""All partition logs of a broker, spread over its ``log.dirs``.

Per log dir it owns Kafka's bookkeeping files: ``meta.properties`` (which cluster and node the
dir belongs to), the clean-shutdown marker, and the offset checkpoints (recovery points, log
start offsets, high watermarks). Opening the manager loads every partition directory, running
recovery where the last shutdown was not clean.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

from .checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
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
from .partition_log import PartitionLog

log = logging.getLogger(__name__)

CLEAN_SHUTDOWN_MARKER = ".kafka_cleanshutdown"

TopicPartition = tuple[str, int]


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
    ) -> None:
        """Open ``log_dirs`` for node ``node_id`` and load their partitions.

        ``cluster_id`` is checked against (or written to) each dir's ``meta.properties``; when
        None, the id already on disk is used, or a new one generated. Logs load with
        ``topic_configs[topic]`` or ``default_config``; the broker may refine them later with
        :meth:`update_config`. I/O errors are reported to ``failures`` (the broker shares its
        one with the metadata store); a dir it takes offline takes its logs with it.
        """
        if not log_dirs:
            raise LogError("at least one log dir is needed")
        self.log_dirs = [Path(d) for d in log_dirs]
        self.node_id = node_id
        self.default_config = default_config or LogConfig()
        self._topic_configs = dict(topic_configs or {})
        self._logs: dict[TopicPartition, PartitionLog] = {}
        self._dir_of: dict[TopicPartition, Path] = {}
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
        high_watermarks = read_offsets(log_dir / REPLICATION_OFFSET_CHECKPOINT)
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
            self._add(tp, log_dir, PartitionLog.open(
                path,
                self._config_for(tp[0]),
                recovery_points.get(tp, 0),
                clean,
                now_ms,
                log_start_offset=start_offsets.get(tp, 0),
                high_watermark=high_watermarks.get(tp),
            ))
        if clean:
            marker.unlink()
            fsync_dir(log_dir)

    def _add(self, tp: TopicPartition, log_dir: Path, plog: PartitionLog) -> None:
        plog.failures = self.failures
        self._logs[tp] = plog
        self._dir_of[tp] = log_dir

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

    def all_logs(self) -> list[PartitionLog]:
        """Every log in an online dir: what background work may touch."""
        return [plog for plog in self._logs.values() if not plog.offline]

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
            online = self.online_dirs()
            if not online:
                raise LogDirOfflineError("every log dir is offline")
            counts = {d: 0 for d in online}
            for d in self._dir_of.values():
                if d in counts:
                    counts[d] += 1
            log_dir = min(online, key=lambda d: counts[d])
            path = log_dir / partition_dir_name(topic, partition)
            try:
                plog = PartitionLog.open(path, config, now_ms=now_ms)
                if topic_id is not None:
                    plog.set_topic_id(topic_id)
                fsync_dir(log_dir)
            except OSError as exc:
                if plog is not None:
                    plog.close()
                shutil.rmtree(path, ignore_errors=True)
                raise self.failures.io_failed(log_dir, f"{topic}-{partition}", exc) from None
            self.failures.io_succeeded(plog.name)
            self._add(tp, log_dir, plog)
            return plog
        plog.update_config(config)
        if topic_id is not None:
            try:
                plog.set_topic_id(topic_id)
            except OSError as exc:
                raise self.failures.io_failed(self._dir_of[tp], plog.name, exc) from None
        return plog

    def delete(self, topic: str, partition: int) -> bool:
        """Delete the partition's log and directory; False if there was none."""
        plog = self._logs.pop((topic, partition), None)
        log_dir = self._dir_of.pop((topic, partition), None)
        if plog is None or log_dir is None:
            return False
        if plog.offline:
            return True  # its files go at the next start: they are not in the metadata then
        try:
            plog.delete()
        except OSError as exc:
            # Logged by the failure channel; a leftover dir is deleted at the next start.
            self.failures.io_failed(log_dir, plog.name, exc)
        return True

    def update_config(self, topic: str, config: LogConfig) -> None:
        """Give every partition of ``topic`` (and partitions loaded later) ``config``."""
        self._topic_configs[topic] = config
        for (name, _), plog in self._logs.items():
            if name == topic:
                plog.update_config(config)

    # -- periodic work --------------------------------------------------------------------

    def checkpoint(self) -> None:
        """Write each online dir's recovery points, log start offsets and high watermarks.

        A dir whose checkpoints fail (a full disk) keeps its previous ones, which only makes
        the next recovery scan more; the failure is logged once per event, never raised.
        """
        for log_dir in self.online_dirs():
            logs = {tp: plog for tp, plog in self._logs.items() if self._dir_of[tp] == log_dir}
            subject = f"checkpoints of {log_dir}"
            try:
                write_offsets(log_dir / RECOVERY_POINT_CHECKPOINT,
                              {tp: plog.recovery_point for tp, plog in logs.items()})
                write_offsets(log_dir / LOG_START_OFFSET_CHECKPOINT,
                              {tp: plog.log_start_offset for tp, plog in logs.items()})
                write_offsets(log_dir / REPLICATION_OFFSET_CHECKPOINT,
                              {tp: plog.high_watermark for tp, plog in logs.items()})
            except OSError as exc:
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
