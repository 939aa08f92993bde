"""The I/O around the group coordinator: parked requests, ``__consumer_offsets``, one timer.

:class:`~moldau.coordinator.manager.GroupCoordinator` decides; this service carries the
decisions out on the event loop:

- JoinGroup and SyncGroup wait on an asyncio future under a *waiter token*; the
  coordinator's replies resolve them, whichever event produced the reply.
- Writes are appended to the group's ``__consumer_offsets`` partition as ordinary record
  batches (``AppendOrigin.COORDINATOR``), through the partition's leader in the replica
  manager, with ``acks=all`` as Kafka's coordinator appends them: a committed offset, a
  SyncGroup assignment, a static member's new id, DeleteGroups' and OffsetDelete's tombstones
  are answered only once every replica in the ISR has them (at most
  ``offsets.commit.timeout.ms``), so an answer survives the loss of the coordinator. On a
  single broker the ISR is {self}, and that is at once. Other writes (a group that became
  Empty, expired offsets) are appended the same way without anyone waiting.
- One task sleeps until the coordinator's next deadline (sessions, rebalance timeouts,
  offset expiry) and is woken early when an event brings that deadline forward. No polling.
- TxnOffsetCommit appends the offsets as a transactional batch of the committing producer
  (its id and epoch, base sequence 0 as Kafka writes it), acks=all; they are pending in the
  coordinator until the marker writer (``handlers/txn_markers.write_marker``) calls
  :meth:`GroupService.complete_transaction` once the producer's COMMIT or ABORT marker is on
  the group's partition. Replay reads markers with ``log/control_batch.marker_of``.
- At start-up every ``__consumer_offsets`` partition is replayed into the coordinator,
  synchronously, before the broker listens; requests in the meantime are impossible, but the
  ``loading`` flag is kept so handlers answer COORDINATOR_LOAD_IN_PROGRESS should loading
  ever move off the start-up path.

Members stored in the group metadata are restored as members after a restart, as Kafka does:
clients that kept running carry on in their generation, the others' sessions expire.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import logging
import time
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from ..cluster.metadata import TopicMetadata
from ..coordinator.consumer_group import (
    ConsumerGroup,
    ConsumerGroupConfig,
    HeartbeatRequest,
    HeartbeatResponse,
)
from ..coordinator.effects import Completion, Effects, JoinResponse, SyncResponse, Write
from ..coordinator.group import Group, GroupLimits, JoinRequest
from ..coordinator.hashing import partition_for
from ..coordinator.manager import (
    CommittedOffset,
    CoordinatorConfig,
    GroupCoordinator,
    GroupLoader,
)
from ..coordinator.offsets import OffsetAndMetadata, TopicPartition
from ..coordinator.records import RecordFormatError
from ..log.control_batch import ControlType, marker_of
from ..log.errors import (
    InvalidProducerEpochError,
    LogError,
    RecordListTooLargeError,
    RecordTooLargeError,
    StorageError,
)
from ..log.partition_log import AppendOrigin, PartitionLog
from ..log.producer_state import ProducerState
from ..log.records_reader import iter_batch_records, iter_log_batches
from ..log.records_writer import encode_batch
from ..replica import ReplicaError
from .errors import ApiError

if TYPE_CHECKING:
    from .broker import Broker

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"

#: What a parked JoinGroup or SyncGroup is eventually answered with.
Answer = JoinResponse | SyncResponse


def now_ms() -> int:
    return time.time_ns() // 1_000_000


#: Kafka writes every transactional offset commit batch with base sequence 0.
_TXN_OFFSET_COMMIT_SEQUENCE = 0


def _fenced(producers: ProducerState, producer_id: int, producer_epoch: int) -> bool:
    """Whether the offsets partition knows a newer epoch of the producer (a marker of its
    fencing, or a newer transaction's offsets): Kafka's producer-state check refuses such a
    TxnOffsetCommit with INVALID_PRODUCER_EPOCH."""
    entry = producers.producers.get(producer_id)
    return entry is not None and entry.epoch > producer_epoch


def _coordinator_error(code: ErrorCode, timed_out: ErrorCode) -> ErrorCode | None:
    """What a coordinator answers when its acks=all append ended with ``code`` (Kafka's
    GroupMetadataManager mapping); None for success."""
    if code is ErrorCode.none:
        return None
    if code in (ErrorCode.not_leader_or_follower, ErrorCode.kafka_storage_error):
        return ErrorCode.not_coordinator
    if code is ErrorCode.request_timed_out:
        return timed_out
    return ErrorCode.coordinator_not_available


class GroupService:
    """The broker's group coordinator; see the module docstring."""

    def __init__(self, broker: Broker, now: int) -> None:
        self.broker = broker
        config = broker.config
        limits = GroupLimits(
            min_session_timeout_ms=config.group_min_session_timeout_ms,
            max_session_timeout_ms=config.group_max_session_timeout_ms,
            max_size=config.group_max_size,
            initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
        )
        self.coordinator = GroupCoordinator(
            CoordinatorConfig(
                limits=limits,
                offset_metadata_max_bytes=config.offset_metadata_max_bytes,
                offsets_retention_ms=config.offsets_retention_ms,
                offsets_retention_check_interval_ms=config.offsets_retention_check_interval_ms,
            ),
            now,
        )
        self.loading = True
        #: Rebalances begun since start-up (a counter for the metrics endpoint): classic
        #: groups' and KIP-848 groups' (each new target assignment epoch) together.
        self.rebalances = 0
        #: Completions waiting for their writes to reach the ISR (held so they are not lost).
        self._completing: set[asyncio.Task[None]] = set()
        self._waiters: dict[int, asyncio.Future[Answer]] = {}
        self._tokens = itertools.count(1)
        self._wake: asyncio.Event | None = None
        self._sleeping_until: int | None = None
        self._timer: asyncio.Task[None] | None = None
        #: KIP-848 groups, in memory only: members rejoin after a restart (their committed
        #: offsets live in the classic coordinator's ``__consumer_offsets`` state).
        self.consumer_groups: dict[str, ConsumerGroup] = {}
        self.consumer_config = ConsumerGroupConfig(
            heartbeat_interval_ms=config.group_consumer_heartbeat_interval_ms,
            session_timeout_ms=config.group_consumer_session_timeout_ms,
        )

    # -- __consumer_offsets -------------------------------------------------------------------

    def offsets_topic(self, *, create: bool) -> TopicMetadata | None:
        """The internal topic, created on first use with Kafka's settings for it (in a
        cluster with ``offsets.topic.replication.factor`` replicas: committed offsets must
        survive a broker, and their writes wait for ``min.insync.replicas``)."""
        topic = self.broker.metadata.topic(OFFSETS_TOPIC)
        if topic is None and create:
            config = self.broker.config
            topic = self.broker.create_topic(OFFSETS_TOPIC, config.offsets_topic_num_partitions, {
                "cleanup.policy": "compact",
                "segment.bytes": str(config.offsets_topic_segment_bytes),
                "compression.type": "producer",
            }, replication_factor=config.offsets_topic_replication_factor)
        return topic

    def partition_of(self, group_id: str) -> int | None:
        """The ``__consumer_offsets`` partition of a group (None before the topic exists)."""
        topic = self.offsets_topic(create=False)
        return None if topic is None else partition_for(group_id, topic.partitions)

    def load(self, now: int) -> None:
        """Replay ``__consumer_offsets`` into the coordinator (start-up, before serving).

        In a cluster nothing is led yet at start-up: each partition is replayed when this
        broker becomes its leader (``load_partition``)."""
        topic = self.offsets_topic(create=False)
        partitions = range(topic.partitions) if topic is not None and \
            self.broker.cluster is None else range(0)
        self._replay(partitions, now)

    def load_partition(self, partition: int, now: int) -> None:
        """This broker now leads ``partition`` of ``__consumer_offsets``: replay its groups."""
        self.unload_partition(partition)
        self._replay(range(partition, partition + 1), now)

    def unload_partition(self, partition: int) -> None:
        """Another broker leads ``partition`` now: forget the groups it holds (their parked
        JoinGroup and SyncGroup requests are answered NOT_COORDINATOR)."""
        topic = self.offsets_topic(create=False)
        if topic is None:
            return
        effects = self.coordinator.unload(
            g for g in list(self.coordinator.groups)
            if partition_for(g, topic.partitions) == partition)
        self._apply(effects, now_ms())

    def _replay(self, partitions: range, now: int) -> None:
        loader = GroupLoader()
        records = 0
        if partitions:
            for partition in partitions:
                hosted = self.broker.partition(OFFSETS_TOPIC, partition)
                if hosted is None:
                    continue
                records += self._replay_partition(loader, partition, hosted.log)
        self._apply(self.coordinator.load(loader, now), now)
        self.loading = False
        if records:
            log.info("loaded %d groups from %d records of %s", len(self.coordinator.groups),
                     records, OFFSETS_TOPIC)

    @staticmethod
    def _replay_partition(loader: GroupLoader, partition: int, plog: PartitionLog) -> int:
        """Feed one partition's batches to ``loader``: records with their batch's producer
        and position, markers as the end of that producer's transaction. Returns the
        number of records read."""
        records = 0
        start = plog.log_start_offset
        for header, batch in iter_log_batches(plog):
            try:
                if header.is_control:
                    if header.producer_id >= 0:
                        control, _epoch = marker_of(batch)
                        loader.apply_marker(header.producer_id, control is ControlType.COMMIT)
                    continue
                for record in iter_batch_records(batch):
                    if record.offset < start:
                        continue
                    records += 1
                    loader.apply(record.key, record.value, position=header.base_offset,
                                 producer_id=header.producer_id,
                                 transactional=header.is_transactional)
            except (RecordFormatError, UnicodeDecodeError, LogError) as exc:
                log.error("%s-%d batch at offset %d: skipping an unreadable record: %s",
                          OFFSETS_TOPIC, partition, header.base_offset, exc)
        return records

    def _append(self, write: Write, now: int, *, required_acks: int = 1
                ) -> tuple[ErrorCode | None, asyncio.Future[ErrorCode] | None]:
        """Append one write to its group's partition.

        Returns the error code to answer with (None when written) and, for
        ``required_acks=-1``, a future that says when the ISR has the records (see
        :meth:`_replicated`).
        """
        error, acks, _position = self._append_at(write, now, required_acks=required_acks)
        return error, acks

    def _append_at(self, write: Write, now: int, *, required_acks: int = 1
                   ) -> tuple[ErrorCode | None, asyncio.Future[ErrorCode] | None, int]:
        """:meth:`_append`, also returning the batch's base offset (-1 when not written)."""
        broker = self.broker
        try:
            topic = self.offsets_topic(create=True)
            assert topic is not None
            partition = partition_for(write.group_id, topic.partitions)
            hosted = broker.partition(OFFSETS_TOPIC, partition)
            if hosted is None:
                return ErrorCode.coordinator_not_available, None, -1
            if write.producer is None:
                batch = encode_batch(write.records, now)
            elif _fenced(hosted.log.producers, *write.producer):
                log.info("group %s: refused the offsets of producer %d: epoch %d is fenced",
                         write.group_id, *write.producer)
                return ErrorCode.invalid_producer_epoch, None, -1
            else:
                batch = encode_batch(write.records, now, producer_id=write.producer[0],
                                     producer_epoch=write.producer[1],
                                     base_sequence=_TXN_OFFSET_COMMIT_SEQUENCE,
                                     transactional=True)
            result = hosted.append_as_leader(batch, AppendOrigin.COORDINATOR, required_acks, now)
            if required_acks == -1:
                return None, hosted.wait_for_acks(result.last_offset + 1), result.base_offset
            return None, None, result.base_offset
        except ReplicaError as exc:
            # Kafka's coordinators: NOT_COORDINATOR when this broker lost the partition's
            # leadership (clients look the coordinator up again), else COORDINATOR_NOT_AVAILABLE.
            log.info("group %s: cannot write %s: %s", write.group_id, OFFSETS_TOPIC, exc)
            if exc.code is ErrorCode.not_leader_or_follower:
                return ErrorCode.not_coordinator, None, -1
            return ErrorCode.coordinator_not_available, None, -1
        except (RecordTooLargeError, RecordListTooLargeError) as exc:
            log.error("group %s: cannot store %d records: %s", write.group_id,
                      len(write.records), exc)
            return ErrorCode.invalid_commit_offset_size, None, -1  # Kafka's mapping
        except StorageError:
            # Logged once per event by the failure channel. Kafka's coordinators answer a
            # storage error with NOT_COORDINATOR, which clients retry after a lookup.
            return ErrorCode.not_coordinator, None, -1
        except ApiError as exc:
            if exc.code is ErrorCode.kafka_storage_error:  # creating the topic failed
                return ErrorCode.coordinator_not_available, None, -1
            log.error("group %s: cannot write %s: %s", write.group_id, OFFSETS_TOPIC, exc)
            return ErrorCode.coordinator_not_available, None, -1
        except InvalidProducerEpochError as exc:
            # A transactional commit of a fenced producer (an older epoch than the log's).
            log.info("group %s: %s", write.group_id, exc)
            return ErrorCode.invalid_producer_epoch, None, -1
        except LogError as exc:
            log.error("group %s: cannot write %s: %s", write.group_id, OFFSETS_TOPIC, exc)
            return ErrorCode.coordinator_not_available, None, -1
        except OSError as exc:  # not through the log: should not happen, but never crash
            log.error("group %s: cannot write %s: %s", write.group_id, OFFSETS_TOPIC, exc)
            return ErrorCode.not_coordinator, None, -1

    async def _replicated(self, acks: asyncio.Future[ErrorCode], *,
                          timed_out: ErrorCode = ErrorCode.coordinator_not_available
                          ) -> ErrorCode | None:
        """Wait, at most ``offsets.commit.timeout.ms``, until the ISR has a write's records;
        None when it has, else the error to answer with.

        The answers follow Kafka's GroupMetadataManager: a lost leadership or a failed log
        dir is NOT_COORDINATOR; too few in-sync replicas is COORDINATOR_NOT_AVAILABLE; a
        timeout is ``timed_out`` (COORDINATOR_NOT_AVAILABLE for offsets, REBALANCE_IN_PROGRESS
        for group metadata, as Kafka's storeGroup answers it).
        """
        timeout = self.broker.config.offsets_commit_timeout_ms / 1000
        try:
            code = await asyncio.wait_for(asyncio.shield(acks), timeout)
        except TimeoutError:
            return timed_out
        return _coordinator_error(code, timed_out)

    async def _all_replicated(self, waits: Sequence[asyncio.Future[ErrorCode]]
                              ) -> ErrorCode | None:
        """:meth:`_replicated` for several writes: the first error, or None."""
        for acks in waits:
            error = await self._replicated(acks)
            if error is not None:
                return error
        return None

    def _complete_when_replicated(self, completion: Completion,
                                  acks: asyncio.Future[ErrorCode]) -> None:
        """Feed ``completion`` back to the coordinator once the ISR has its write (or it
        failed): the SyncGroup or JoinGroup waiting for it is answered then."""
        async def complete() -> None:
            error = await self._replicated(acks, timed_out=ErrorCode.rebalance_in_progress)
            now = now_ms()
            self._apply(self.coordinator.write_completed(completion, error, now), now)

        task = asyncio.get_running_loop().create_task(complete())
        self._completing.add(task)
        task.add_done_callback(self._completing.discard)

    # -- effects and the timer ----------------------------------------------------------------

    def _apply(self, effects: Effects, now: int) -> list[asyncio.Future[ErrorCode]]:
        """Carry out writes, then resolve parked requests.

        Every write is appended with acks=all. A write with a completion is fed back to the
        coordinator once the ISR has it (at once when it already has, as on a single broker);
        the waits of the other writes that are still replicating are returned, for callers
        that answer only once those are replicated (DeleteGroups, OffsetDelete).
        """
        replicating: list[asyncio.Future[ErrorCode]] = []
        queue = collections.deque([effects])
        while queue:
            current = queue.popleft()
            self.rebalances += current.rebalances
            for note in current.notes:
                log.info("%s", note)
            for write in current.writes:
                error, acks = self._append(write, now, required_acks=-1)
                if acks is not None and acks.done():
                    error = _coordinator_error(acks.result(), ErrorCode.rebalance_in_progress)
                    acks = None
                if acks is not None:
                    if write.completion is not None:
                        self._complete_when_replicated(write.completion, acks)
                    else:
                        replicating.append(acks)
                elif write.completion is not None:
                    queue.append(self.coordinator.write_completed(write.completion, error, now))
            for reply in current.replies:
                future = self._waiters.pop(reply.token, None)
                if future is not None and not future.done():
                    future.set_result(reply.response)
        deadline = self._next_deadline()
        if (self._wake is not None and self._sleeping_until is not None
                and deadline < self._sleeping_until):
            self._wake.set()
        return replicating

    def _park(self) -> tuple[int, asyncio.Future[Answer]]:
        token = next(self._tokens)
        future: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
        self._waiters[token] = future
        return token, future

    async def _await(self, token: int, future: asyncio.Future[Answer]) -> Answer:
        try:
            return await future
        finally:
            self._waiters.pop(token, None)

    def start(self) -> None:
        """Start the deadline timer on the running loop."""
        self._wake = asyncio.Event()
        self._timer = asyncio.get_running_loop().create_task(self._run_timer(self._wake))

    async def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            await asyncio.gather(self._timer, return_exceptions=True)
            self._timer = None
        self._wake = None

    async def _run_timer(self, wake: asyncio.Event) -> None:
        while True:
            deadline = self._next_deadline()
            self._sleeping_until = deadline
            delay = max(deadline - now_ms(), 0) / 1000
            wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), timeout=min(delay, 86_400))
            self._sleeping_until = None
            now = now_ms()
            self._expire_consumer_groups(now)
            if now >= self.coordinator.next_deadline():
                try:
                    self._apply(self.coordinator.on_timer(now), now)
                except Exception:
                    log.exception("group coordinator timer failed")
                    await asyncio.sleep(1)  # a deadline that keeps failing must not spin

    def _next_deadline(self) -> int:
        deadline = self.coordinator.next_deadline()
        for group in self.consumer_groups.values():
            own = group.next_deadline()
            if own is not None:
                deadline = min(deadline, own)
        return deadline

    def _expire_consumer_groups(self, now: int) -> None:
        for group in self.consumer_groups.values():
            before = group.rebalances
            for member_id in group.expire(now):
                log.info("consumer group %s: member %s fenced (session or revocation timeout)",
                         group.group_id, member_id)
            self.rebalances += group.rebalances - before

    # -- KIP-848 consumer groups ---------------------------------------------------------------

    def _has_classic_members(self, group_id: str) -> bool:
        classic = self.coordinator.groups.get(group_id)
        return classic is not None and bool(classic.members)

    def consumer_heartbeat(
        self, group_id: str, request: HeartbeatRequest, now: int
    ) -> HeartbeatResponse:
        """ConsumerGroupHeartbeat. A classic group with members owns the id: GROUP_ID_NOT_FOUND,
        as Kafka answers when the group is of the other type."""
        group = self.consumer_groups.get(group_id)
        if (group is None or not group.members) and self._has_classic_members(group_id):
            return HeartbeatResponse(ErrorCode.group_id_not_found,
                                     f"Group {group_id} is not a consumer group.")
        if group is None:
            if request.member_epoch != 0:
                return HeartbeatResponse(ErrorCode.unknown_member_id,
                                         f"Member {request.member_id} is not a member.")
            group = self.consumer_groups[group_id] = ConsumerGroup(group_id, self.consumer_config)
        topics = {name: t.partitions for name, t in self.broker.metadata.topics().items()}
        before = group.rebalances
        response = group.heartbeat(request, topics, now, lambda: str(uuid.uuid4()))
        self.rebalances += group.rebalances - before
        self._apply(Effects(), now)
        return response

    def active_consumer_group(self, group_id: str) -> ConsumerGroup | None:
        """The consumer group with this id if it has members (so classic use must wait)."""
        group = self.consumer_groups.get(group_id)
        return group if group is not None and group.members else None

    # -- the API the handlers use ----------------------------------------------------------

    async def join_group(self, group_id: str, request: JoinRequest, now: int) -> JoinResponse:
        if self.active_consumer_group(group_id) is not None:
            return JoinResponse(ErrorCode.inconsistent_group_protocol)
        token, future = self._park()
        self._apply(self.coordinator.join_group(group_id, request, token, now), now)
        response = await self._await(token, future)
        assert isinstance(response, JoinResponse)
        return response

    async def sync_group(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
        now: int,
    ) -> SyncResponse:
        token, future = self._park()
        self._apply(self.coordinator.sync_group(
            group_id, member_id, group_instance_id, generation_id, protocol_type,
            protocol_name, assignments, token, now), now)
        response = await self._await(token, future)
        assert isinstance(response, SyncResponse)
        return response

    def heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None,
                  generation_id: int, now: int) -> ErrorCode:
        code = self.coordinator.heartbeat(group_id, member_id, group_instance_id,
                                          generation_id, now)
        self._apply(Effects(), now)
        return code

    def leave_group(self, group_id: str, members: Sequence[tuple[str, str | None]],
                    now: int) -> tuple[ErrorCode, list[ErrorCode]]:
        top, codes, effects = self.coordinator.leave_group(group_id, members, now)
        self._apply(effects, now)
        return top, codes

    def _partition_exists(self, topic: str, partition: int) -> bool:
        found = self.broker.metadata.topic(topic)
        return found is not None and 0 <= partition < found.partitions

    async def commit_offsets(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets: Sequence[CommittedOffset],
        now: int,
        *,
        retention_ms: int = -1,
        unknown_group_error: ErrorCode = ErrorCode.illegal_generation,
    ) -> dict[TopicPartition, ErrorCode]:
        """OffsetCommit: answered only once the offsets are in ``__consumer_offsets`` on every
        replica in the ISR (Kafka's coordinator appends commits with acks=all), so a commit
        that was answered survives the loss of the coordinator."""
        unknown = {(o.topic, o.partition): ErrorCode.unknown_topic_or_partition
                   for o in offsets if not self._partition_exists(o.topic, o.partition)}
        valid = [o for o in offsets if (o.topic, o.partition) not in unknown]
        consumer = self.consumer_groups.get(group_id)
        if consumer is not None and (consumer.members or generation_id >= 0):
            # A KIP-848 group: the member epoch stands in for the generation. Once accepted,
            # the offsets are stored as a simple (memberless) commit of the classic state,
            # which persists them in __consumer_offsets like any other commit.
            code = consumer.validate_offset_commit(member_id, generation_id)
            if code is not ErrorCode.none:
                return {**unknown, **{(o.topic, o.partition): code for o in valid}}
            member_id, group_instance_id, generation_id = "", None, -1
        plan = self.coordinator.prepare_commit(
            group_id, member_id, group_instance_id, generation_id, valid, now,
            retention_ms=retention_ms, unknown_group_error=unknown_group_error)
        error: ErrorCode | None = None
        try:
            if plan.write is not None:
                error, replicated, plan.position = self._append_at(plan.write, now,
                                                                   required_acks=-1)
                if replicated is not None:
                    error = await self._replicated(replicated)
                    now = now_ms()
        except BaseException:
            # Cancelled while waiting (the client went away): the commit is no longer in
            # flight; its record, should the ISR get it, counts after a reload.
            self.coordinator.complete_commit(plan, ErrorCode.request_timed_out, now_ms())
            raise
        errors = self.coordinator.complete_commit(plan, error, now)
        self._apply(Effects(), now)
        return {**unknown, **errors}

    async def commit_txn_offsets(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        producer_id: int,
        producer_epoch: int,
        offsets: Sequence[CommittedOffset],
        now: int,
    ) -> dict[TopicPartition, ErrorCode]:
        """TxnOffsetCommit: the offsets go to ``__consumer_offsets`` as a transactional batch
        of the producer (acks=all) and are pending from the moment it is appended (so a
        marker written meanwhile finds them) until :meth:`complete_transaction`."""
        unknown = {(o.topic, o.partition): ErrorCode.unknown_topic_or_partition
                   for o in offsets if not self._partition_exists(o.topic, o.partition)}
        valid = [o for o in offsets if (o.topic, o.partition) not in unknown]
        consumer = self.consumer_groups.get(group_id)
        if consumer is not None and (consumer.members or generation_id >= 0):
            code = consumer.validate_offset_commit(member_id, generation_id)
            if code is not ErrorCode.none:
                return {**unknown, **{(o.topic, o.partition): code for o in valid}}
            member_id, group_instance_id, generation_id = "", None, -1
        plan = self.coordinator.prepare_txn_commit(
            group_id, member_id, group_instance_id, generation_id, producer_id, producer_epoch,
            valid, now)
        error: ErrorCode | None = None
        if plan.write is not None:
            error, replicated, position = self._append_at(plan.write, now, required_acks=-1)
            if error is None:
                self.coordinator.txn_commit_appended(plan, position)
            if replicated is not None:
                error = await self._replicated(replicated)
                now = now_ms()
        errors = self.coordinator.complete_commit(plan, error, now)
        self._apply(Effects(), now)
        return {**unknown, **errors}

    def complete_transaction(self, offsets_partition: int, producer_id: int,
                             commit: bool) -> None:
        """The producer's COMMIT or ABORT marker is on ``offsets_partition`` of
        ``__consumer_offsets`` (called by the marker writer once the ISR has it):
        materialise or drop that producer's pending offsets of the groups there."""
        topic = self.offsets_topic(create=False)
        if topic is None:
            return
        count = topic.partitions
        now = now_ms()
        self._apply(self.coordinator.complete_transaction(
            producer_id, commit, lambda g: partition_for(g, count) == offsets_partition, now),
            now)

    def unstable_partitions(self, group_id: str) -> set[TopicPartition]:
        """Partitions of the group with pending transactional offsets."""
        return self.coordinator.unstable_partitions(group_id)

    def validate_consumer_fetch(
        self, group_id: str, member_id: str | None, member_epoch: int
    ) -> ErrorCode:
        """OffsetFetch v9 names the member of a KIP-848 group: it must be current."""
        consumer = self.consumer_groups.get(group_id)
        if member_id is None or consumer is None:
            return ErrorCode.none
        return consumer.validate_offset_fetch(member_id, member_epoch)

    def fetch_offsets(
        self, group_id: str, partitions: Sequence[TopicPartition] | None
    ) -> list[tuple[TopicPartition, OffsetAndMetadata | None]]:
        return self.coordinator.fetch_offsets(group_id, partitions)

    async def delete_offsets(
        self, group_id: str, partitions: Sequence[TopicPartition], now: int
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        """OffsetDelete: answered once the ISR has the tombstones."""
        unknown = {tp: ErrorCode.unknown_topic_or_partition
                   for tp in partitions if not self._partition_exists(*tp)}
        top, errors, effects = self.coordinator.delete_offsets(
            group_id, [tp for tp in partitions if tp not in unknown], now)
        error = await self._all_replicated(self._apply(effects, now))
        if error is not None:
            return error, {}
        if top is not ErrorCode.none:
            return top, {}
        return top, {**unknown, **errors}

    def topic_deleted(self, topic: str, now: int) -> None:
        self._apply(self.coordinator.remove_topic(topic, now), now)

    def list_groups(self, states: Sequence[str] = (), types: Sequence[str] = ()) -> list[Group]:
        return self.coordinator.list_groups(states, types)

    def describe_group(self, group_id: str) -> Group | None:
        return self.coordinator.describe_group(group_id)

    async def delete_groups(self, group_ids: Sequence[str], now: int) -> dict[str, ErrorCode]:
        """DeleteGroups: answered once the ISR has the tombstones. A KIP-848 group with
        members is not empty, even though its classic side (which only holds the offsets)
        is."""
        busy = {g: ErrorCode.non_empty_group for g in group_ids
                if self.active_consumer_group(g) is not None}
        results, effects = self.coordinator.delete_groups(
            [g for g in group_ids if g not in busy], now)
        error = await self._all_replicated(self._apply(effects, now))
        if error is not None:
            results = {g: error if code is ErrorCode.none else code
                       for g, code in results.items()}
        for group_id in group_ids:
            if group_id not in busy and results.get(group_id) is ErrorCode.none:
                self.consumer_groups.pop(group_id, None)
        return {**results, **busy}
