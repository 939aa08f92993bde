"""All partition logs of a broker, spread over its ``log.dirs``.

Per log dir it owns Kafka's bookkeeping files: ``meta.properties`` (which cluster and node the
dir belongs to), the clean-shutdown marker, and the offset checkpoints (recovery points, log
start offsets, high watermarks). Opening the manager loads every partition directory, running
recovery where the last shutdown was not clean.
"""

from __future__ import annotations

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
from .errors import LogError
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
    ) -> None:
        """Open ``log_dirs`` for node ``node_id`` and load their partitions.

        ``cluster_id`` is checked against (or written to) each dir's ``meta.properties``; when
        None, the id already on disk is used, or a new one generated. Logs load with
        ``topic_configs[topic]`` or ``default_config``; the broker may refine them later with
        :meth:`update_config`.
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
            self._logs[tp] = PartitionLog.open(
                path,
                self._config_for(tp[0]),
                recovery_points.get(tp, 0),
                clean,
                now_ms,
                log_start_offset=start_offsets.get(tp, 0),
                high_watermark=high_watermarks.get(tp),
            )
            self._dir_of[tp] = log_dir
        if clean:
            marker.unlink()
            fsync_dir(log_dir)

    # -- partitions -----------------------------------------------------------------------

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def all_logs(self) -> list[PartitionLog]:
        return list(self._logs.values())

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
        """
        tp = (topic, partition)
        plog = self._logs.get(tp)
        if plog is None:
            counts = {d: 0 for d in self.log_dirs}
            for d in self._dir_of.values():
                counts[d] += 1
            log_dir = min(self.log_dirs, key=lambda d: counts[d])
            plog = PartitionLog.open(log_dir / partition_dir_name(topic, partition), config,
                                     now_ms=now_ms)
            fsync_dir(log_dir)
            self._logs[tp] = plog
            self._dir_of[tp] = log_dir
        else:
            plog.update_config(config)
        if topic_id is not None:
            plog.set_topic_id(topic_id)
        return plog

    def delete(self, topic: str, partition: int) -> bool:
        """Delete the partition's log and directory; False if there was none."""
        plog = self._logs.pop((topic, partition), None)
        self._dir_of.pop((topic, partition), None)
        if plog is None:
            return False
        plog.delete()
        return True

    def update_config(self, topic: str, config: LogConfig) -> None:
        """Give every partition of ``topic`` (and partitions loaded later) ``config``."""
        self._topic_configs[topic] = config
        for (name, _), plog in self._logs.items():
            if name == topic:
                plog.update_config(config)

    # -- periodic work --------------------------------------------------------------------

    def checkpoint(self) -> None:
        """Write each dir's recovery points, log start offsets and high watermarks."""
        for log_dir in self.log_dirs:
            logs = {tp: plog for tp, plog in self._logs.items() if self._dir_of[tp] == log_dir}
            write_offsets(log_dir / RECOVERY_POINT_CHECKPOINT,
                          {tp: plog.recovery_point for tp, plog in logs.items()})
            write_offsets(log_dir / LOG_START_OFFSET_CHECKPOINT,
                          {tp: plog.log_start_offset for tp, plog in logs.items()})
            write_offsets(log_dir / REPLICATION_OFFSET_CHECKPOINT,
                          {tp: plog.high_watermark for tp, plog in logs.items()})

    def flush_and_checkpoint_recovery(self) -> None:
        """fsync every log (moving its recovery point to its end), then checkpoint."""
        for plog in self._logs.values():
            plog.flush()
        self.checkpoint()

    def run_retention(self, now_ms: int) -> int:
        """Apply retention to every log; return the number of segments deleted."""
        return sum(plog.enforce_retention(now_ms) for plog in self._logs.values())

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
        for plog in self._logs.values():
            plog.close()
        self.checkpoint()
        for log_dir in self.log_dirs:
            write_atomically(log_dir / CLEAN_SHUTDOWN_MARKER, b"")
        self._closed = True
