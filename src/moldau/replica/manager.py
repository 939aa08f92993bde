"""Every partition this broker hosts, by (topic, partition): Kafka's ReplicaManager.

The manager sits between the request handlers and the log manager. It hosts a
:class:`~moldau.replica.partition.Partition` for every partition log (made when the broker
starts, when topics are created or grow, dropped when they are deleted), answers the handlers'
lookups, parks ``acks=all`` produces until their partitions' high watermarks pass them, holds
the fetch purgatory (fetches waiting for data), and runs the ISR-expiry chore. It reads and
writes the high watermarks in each log dir's ``replication-offset-checkpoint`` (Kafka's file
and format: version, count, ``topic partition offset`` lines), as Kafka's ReplicaManager does.

A broker without a cluster leads every partition it hosts at epoch 0 (or the latest epoch in
the partition's leader-epoch checkpoint), with ISR = replicas = {itself}.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from kio.schema.errors import ErrorCode

from ..log.checkpoint import REPLICATION_OFFSET_CHECKPOINT, read_offsets, write_offsets
from ..log.errors import StorageError
from ..log.manager import LogManager
from ..log.partition_log import PartitionLog
from .log_dir_mover import LogDirMover
from .partition import IsrChangeCounts, Partition, TopicPartition
from .purgatory import FetchPurgatory
from .throttle import ReplicationThrottles

log = logging.getLogger(__name__)

#: Per log dir: each hosted partition's high watermark.
HighWatermarks = dict[Path, dict[TopicPartition, int]]


class ReplicaManager:
    """The broker's hosted partitions and what waits on them; see the module docstring."""

    def __init__(self, logs: LogManager, local_id: int, *, lead_all: bool = True) -> None:
        self._logs = logs
        self.local_id = local_id
        #: Alone, the broker leads every partition it hosts; in a cluster a hosted partition
        #: follows no one (leader -1) until its state znode says who leads.
        self._lead_all = lead_all
        #: Fetches waiting for data (woken when a high watermark passes new bytes).
        self.fetch_purgatory = FetchPurgatory()
        #: Follower fetches waiting for data (woken by every append as leader; a cluster only).
        self.replica_fetch_purgatory = FetchPurgatory()
        self._partitions: dict[TopicPartition, Partition] = {}
        #: ISR shrinks and expands of the partitions led here (for the metrics endpoint).
        self.isr_changes = IsrChangeCounts()
        #: Replication throttles (reassignments): the leader's and the follower's budgets.
        self.throttles = ReplicationThrottles(local_id)
        #: In a cluster: where a leader's ISR change goes (ZooKeeper, through the cluster link).
        self.propose_isr: Callable[[Partition, frozenset[int]], None] | None = None
        #: Moves of hosted partitions between this broker's log dirs (AlterReplicaLogDirs).
        self.mover = LogDirMover(logs, self.get)

    # -- hosting -----------------------------------------------------------------------------

    def host_loaded(self) -> None:
        """Host every partition log the log manager holds (start-up, once the broker made the
        logs on disk agree with the metadata), each with the high watermark its dir's
        checkpoint has (a partition missing there keeps its log end offset). Alone, the broker
        then leads each with ISR = {self}, which moves the high watermark to the log end."""
        for log_dir, plogs in self._logs.online_logs_by_dir().items():
            checkpointed = read_offsets(log_dir / REPLICATION_OFFSET_CHECKPOINT)
            for plog in plogs:
                hw = checkpointed.get((plog.topic, plog.partition))
                if hw is not None:
                    plog.high_watermark = hw
        self._host(self._logs.all_logs())

    def _host(self, plogs: Iterable[PartitionLog]) -> None:
        """Make a Partition of each log and lead it (a single broker: ISR = {self}); in a
        cluster, leave it leaderless until the controller's state for it is applied."""
        me = self.local_id
        notify = self.fetch_purgatory.notify_append
        for plog in plogs:
            partition = Partition(plog, me, on_committed=notify, isr_counts=self.isr_changes)
            if self._lead_all:
                partition.make_leader(max(plog.latest_epoch, 0), (me,))
            else:
                partition.on_leader_append = self.replica_fetch_purgatory.notify_append
                partition.propose_isr = self._propose_isr
                partition.make_follower(-1, max(plog.latest_epoch, 0))
            self._partitions[partition.key] = partition

    def adopt(self, made: Sequence[tuple[PartitionLog, Path]]) -> None:
        """New (or re-attached) partition logs: hand them to the log manager, then host them."""
        self._logs.adopt(made)
        self._host(plog for plog, _ in made)

    def detach(self, topic: str, partitions: Iterable[int]) -> list[PartitionLog]:
        """Stop hosting these partitions (a deletion): produces waiting on them are answered
        NOT_LEADER_OR_FOLLOWER, fetches waiting on them wake; their logs are returned."""
        numbers = list(partitions)
        detached = self._logs.detach(topic, numbers)
        for number in numbers:
            key = (topic, number)
            self.mover.cancel(key)
            partition = self._partitions.pop(key, None)
            if partition is not None:
                partition.stop()
            self.fetch_purgatory.wake_all(key)
            self.replica_fetch_purgatory.wake_all(key)
        return detached

    def dir_offline(self, log_dir: Path) -> None:
        """A log dir failed: wake the fetches waiting on its partitions (they now answer
        KAFKA_STORAGE_ERROR) and answer its ``acks=all`` waiters."""
        for plog in self._logs.all_logs_in(log_dir):
            key = (plog.topic, plog.partition)
            partition = self._partitions.get(key)
            if partition is not None:
                partition.fail_waiters(ErrorCode.kafka_storage_error)
            self.fetch_purgatory.wake_all(key)

    def _propose_isr(self, partition: Partition, isr: frozenset[int]) -> None:
        if self.propose_isr is not None:
            self.propose_isr(partition, isr)

    # -- lookups -----------------------------------------------------------------------------

    def get(self, topic: str, partition: int) -> Partition | None:
        """The hosted partition, or None when this broker does not host it."""
        return self._partitions.get((topic, partition))

    def all_partitions(self) -> list[Partition]:
        return list(self._partitions.values())

    def log_dir_sizes(self) -> dict[Path, list[tuple[TopicPartition, int, bool]]]:
        """(partition, bytes, is future) per log dir (DescribeLogDirs)."""
        return self._logs.log_dir_sizes()

    def future_log(self, topic: str, partition: int) -> PartitionLog | None:
        """The partition's future replica while it moves to another log dir."""
        return self._logs.future(topic, partition)

    def alter_log_dir(self, topic: str, partition: int, path: str) -> ErrorCode | None:
        """AlterReplicaLogDirs for one partition, with Kafka's checks in Kafka's order
        (ReplicaManager.alterReplicaLogDirs); None when this broker does not host it (the
        caller tells an unknown partition from one hosted elsewhere). A move to the dir the
        partition is in succeeds and changes nothing, except cancelling a move elsewhere;
        a move already under way to the same dir goes on."""
        if not self._logs.can_move(topic, partition):
            return ErrorCode.invalid_topic_exception
        log_dir = self._logs.resolve_dir(path)
        if log_dir is None:
            return ErrorCode.log_dir_not_found
        if self._logs.is_offline(log_dir):
            return ErrorCode.kafka_storage_error
        hosted = self._partitions.get((topic, partition))
        if hosted is None:
            self._logs.prefer_dir(topic, partition, log_dir)
            return None
        if hosted.offline:
            return ErrorCode.kafka_storage_error
        future = self._logs.future(topic, partition)
        if future is not None and future.directory.parent != log_dir:
            log.info("%s-%d: move to %s cancelled", topic, partition, future.directory.parent)
            self.mover.cancel(hosted.key)
            self._logs.discard_future(topic, partition)
            future = None
        if self._logs.dir_of(topic, partition) == log_dir:
            return ErrorCode.none
        if future is None:
            # As Kafka: no future while a dir is offline, or one could be left in two dirs.
            if len(self._logs.online_dirs()) < len(self._logs.log_dirs):
                return ErrorCode.kafka_storage_error
            try:
                self._logs.create_future(topic, partition, log_dir)
            except StorageError:
                return ErrorCode.kafka_storage_error
        self.mover.start(hosted)
        return ErrorCode.none

    def is_offline(self, log_dir: Path) -> bool:
        return self._logs.is_offline(log_dir)

    # -- waiting -----------------------------------------------------------------------------

    async def wait_for_acks(self, waits: Sequence[tuple[Partition, int]],
                            timeout_s: float) -> list[ErrorCode]:
        """Wait until each partition's high watermark reaches its end offset (acks=all), at
        most ``timeout_s``; the answer per partition, REQUEST_TIMED_OUT for those that did
        not get there in time (their records are written and may still be replicated)."""
        futures = [partition.wait_for_acks(end) for partition, end in waits]
        pending = [f for f in futures if not f.done()]
        if pending:
            await asyncio.wait(pending, timeout=max(timeout_s, 0))
        codes = []
        for future in futures:
            if future.done():
                codes.append(future.result())
            else:
                future.cancel()
                codes.append(ErrorCode.request_timed_out)
        return codes

    async def wait_for_data(self, keys: Iterable[TopicPartition], needed: int,
                            timeout_s: float, read_committed: bool = False) -> None:
        """Park a fetch until ``needed`` more bytes are visible on ``keys`` (below the last
        stable offset for ``read_committed``) or time is up."""
        await self.fetch_purgatory.wait(keys, needed, timeout_s, read_committed)

    # -- chores ------------------------------------------------------------------------------

    def high_watermarks(self) -> HighWatermarks:
        """What :meth:`checkpoint_high_watermarks` writes, per online dir (owner thread)."""
        return {log_dir: {(p.topic, p.partition): p.high_watermark for p in plogs}
                for log_dir, plogs in self._logs.online_logs_by_dir().items()}

    @staticmethod
    def write_high_watermarks(contents: HighWatermarks) -> dict[Path, OSError | None]:
        """Write each dir's ``replication-offset-checkpoint`` (atomically: write, fsync,
        rename); safe on any thread. Each dir's error, None when written."""
        errors: dict[Path, OSError | None] = {}
        for log_dir, offsets in contents.items():
            try:
                write_offsets(log_dir / REPLICATION_OFFSET_CHECKPOINT, offsets)
            except OSError as exc:
                errors[log_dir] = exc
            else:
                errors[log_dir] = None
        return errors

    def report_high_watermark_errors(self, errors: dict[Path, OSError | None]) -> None:
        """Tell the failure channel how writing each dir's checkpoint went (owner thread):
        a dir that cannot be written goes offline, a full disk is logged once."""
        failures = self._logs.failures
        for log_dir, exc in errors.items():
            subject = f"high watermark checkpoint of {log_dir}"
            if exc is not None:
                failures.io_failed(log_dir, subject, exc)
            else:
                failures.io_succeeded(subject)

    def checkpoint_high_watermarks(self) -> None:
        """Write every dir's high watermarks now (a clean stop; the broker's chore writes
        them off the loop every ``replica.high.watermark.checkpoint.interval.ms``)."""
        self.report_high_watermark_errors(self.write_high_watermarks(self.high_watermarks()))

    def shrink_isrs(self, now_ms: int, max_lag_ms: int) -> int:
        """Drop lagging followers from every led partition's ISR (``replica.lag.time.max.ms``);
        the number of partitions whose ISR shrank."""
        shrunk = 0
        for partition in self._partitions.values():
            if len(partition.isr) > 1 and partition.maybe_shrink_isr(now_ms, max_lag_ms):
                shrunk += 1
        return shrunk
