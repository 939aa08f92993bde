"""The I/O around the transaction coordinator: ``__transaction_state``, markers, one timer.

:class:`~moldau.coordinator.transactions.TransactionCoordinator` decides; this service
carries the decisions out on the event loop, as ``group_service`` does for groups:

- Every state change is appended to the transactional id's ``__transaction_state``
  partition (Kafka's TransactionLogKey/Value records) with acks=all, and counts, and is
  answered, only once the ISR has it (at most ``REQUEST_TIMEOUT_S``): a commit decision the
  client was told about survives the loss of the coordinator's broker.
- After PrepareCommit/PrepareAbort the markers are written to every partition of the
  transaction: through the partition side's ``write_marker`` for partitions this broker leads,
  with WriteTxnMarkers (v1) to the other leaders (``peer_clients``), retried with a backoff
  until every leader has written it (a deleted topic is dropped), then CompleteCommit/
  CompleteAbort is written. EndTxn is answered when the Prepare* is written, as in Kafka.
- A coordinator loads a ``__transaction_state`` partition when it becomes its leader (the
  cluster link calls :meth:`TransactionService.load_partition`; a lone broker loads every
  partition at start-up) and resumes the markers of transactions found in Prepare*. It
  forgets them when it stops leading; the writes it still had in flight then fail with
  NOT_COORDINATOR and its marker tasks stop, the new coordinator resumes them.
- One task sleeps until the coordinator's next deadline (a transaction's timeout, an id's
  expiry) and is woken early when a change brings it forward. No polling.

The coordinator epoch sent with markers is the leader epoch of the ``__transaction_state``
partition, as Kafka's.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode
from kio.schema.write_txn_markers.v1.request import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
)

from ..cluster.metadata import TopicMetadata
from ..coordinator.hashing import partition_for
from ..coordinator.transactions import (
    Decision,
    Marker,
    TopicPartition,
    TransactionCoordinator,
    TransactionMetadata,
    TxnConfig,
    TxnSnapshot,
    TxnState,
)
from ..coordinator.transactions.records import (
    RecordFormatError,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from ..log.errors import LogError, RecordListTooLargeError, RecordTooLargeError, StorageError
from ..log.partition_log import AppendOrigin
from ..log.records_reader import iter_log_records
from ..log.records_writer import encode_batch
from ..protocol.codec import build
from ..replica import ReplicaError

if TYPE_CHECKING:
    from .broker import Broker
    from .peer_clients import PeerClients


async def write_marker(broker: Broker, topic: str, partition: int, producer_id: int,
                       producer_epoch: int, commit: bool, coordinator_epoch: int) -> ErrorCode:
    """The partition side's marker append (imported late: the handlers import this module)."""
    from .handlers.txn_markers import write_marker as append

    return await append(broker, topic, partition, producer_id, producer_epoch, commit,
                        coordinator_epoch)

log = logging.getLogger(__name__)

TXN_TOPIC = "__transaction_state"
#: How long a state write may wait for the ISR (Kafka uses request.timeout.ms, 30 s).
WRITE_TIMEOUT_S = 30.0
#: A timer's write (abort of a timed-out transaction, tombstone of an expired id) that
#: failed is tried again after this long.
TIMER_RETRY_MS = 1000
#: How long a request told CONCURRENT_TRANSACTIONS waits for the write or markers under way
#: to end before it is answered so.
CONCURRENT_WAIT_S = 1.0
#: Marker retries back off from the first to the last value, doubling.
MARKER_BACKOFF_S = (0.05, 1.0)
#: Marker write errors after which the leader is asked again (it may move, come back, or
#: catch up its ISR). Anything else is final for that partition (logged).
_RETRIABLE_MARKER_ERRORS = frozenset({
    ErrorCode.not_leader_or_follower, ErrorCode.unknown_topic_or_partition,
    ErrorCode.not_enough_replicas, ErrorCode.not_enough_replicas_after_append,
    ErrorCode.request_timed_out, ErrorCode.kafka_storage_error,
    ErrorCode.leader_not_available, ErrorCode.coordinator_load_in_progress,
    ErrorCode.unknown_server_error, ErrorCode.network_exception,
})


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def _write_error(code: ErrorCode) -> ErrorCode:
    """What the coordinator answers when its append ended with ``code`` (Kafka's
    TransactionStateManager mapping)."""
    if code in (ErrorCode.not_leader_or_follower, ErrorCode.kafka_storage_error):
        return ErrorCode.not_coordinator
    if code in (ErrorCode.unknown_topic_or_partition, ErrorCode.not_enough_replicas,
                ErrorCode.not_enough_replicas_after_append, ErrorCode.request_timed_out):
        return ErrorCode.coordinator_not_available
    return ErrorCode.unknown_server_error


class TransactionService:
    """The broker's transaction coordinator; see the module docstring."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.coordinator = TransactionCoordinator(self._config())
        #: A lone broker: True until the start-up load is done.
        self.loading = True
        #: ``__transaction_state`` partitions this broker coordinates, with the coordinator
        #: epoch (the partition's leader epoch when it was loaded).
        self.owned: dict[int, int] = {}
        #: Each transactional id's partition, for the ids in memory.
        self._partition_of: dict[str, int] = {}
        self._markers: dict[str, asyncio.Task[None]] = {}
        #: Requests waiting for an id's state to change (see :meth:`_decide`).
        self._watchers: dict[str, list[asyncio.Future[None]]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._wake: asyncio.Event | None = None
        self._sleeping_until: int | None = None
        self._timer: asyncio.Task[None] | None = None
        self._started = False

    @property
    def peers(self) -> PeerClients:
        """The broker's pooled peer connections (KIP-890 verification reaches them here)."""
        return self.broker.peers

    def _config(self) -> TxnConfig:
        config = self.broker.config
        return TxnConfig(max_timeout_ms=config.transaction_max_timeout_ms,
                         id_expiration_ms=config.transactional_id_expiration_ms)

    # -- __transaction_state -----------------------------------------------------------------

    def state_topic(self, *, create: bool) -> TopicMetadata | None:
        """The internal topic, created on first use with Kafka's settings for it
        (replicated; ``min.insync.replicas`` capped by the replicas it can have)."""
        broker = self.broker
        topic = broker.metadata.topic(TXN_TOPIC)
        if topic is None and create:
            config = broker.config
            live = len(broker.cluster.store.brokers()) if broker.cluster is not None else 1
            factor = min(config.transaction_state_log_replication_factor, max(live, 1))
            topic = broker.create_topic(TXN_TOPIC, config.transaction_state_log_num_partitions, {
                "cleanup.policy": "compact",
                "segment.bytes": str(config.transaction_state_log_segment_bytes),
                "min.insync.replicas": str(min(config.transaction_state_log_min_isr, factor)),
                "unclean.leader.election.enable": "false",
                "compression.type": "uncompressed",
            }, replication_factor=factor)
            if broker.cluster is None:
                self._own_all()
        return topic

    def partition_of(self, transactional_id: str) -> int | None:
        """The ``__transaction_state`` partition of an id (None before the topic exists)."""
        topic = self.state_topic(create=False)
        return None if topic is None else partition_for(transactional_id, topic.partitions)

    def coordinator_of(self, transactional_id: str) -> int | None:
        """The broker id coordinating ``transactional_id``: the leader of its partition."""
        partition = self.partition_of(transactional_id)
        if partition is None:
            return None
        cluster = self.broker.cluster
        if cluster is None:
            return self.broker.node_id
        leader = cluster.partition_view(TXN_TOPIC, partition).leader
        return None if leader < 0 else leader

    def owner_error(self, transactional_id: str) -> ErrorCode | None:
        """None if this broker coordinates ``transactional_id`` now, else what to answer."""
        if self.loading:
            return ErrorCode.coordinator_load_in_progress
        partition = self.partition_of(transactional_id)
        if partition is not None and partition not in self.owned \
                and self.broker.cluster is None:
            self._own_all()  # a lone broker leads every partition, however the topic was made
        if partition is None or partition not in self.owned:
            return ErrorCode.not_coordinator
        return None

    def _own_all(self) -> None:
        topic = self.broker.metadata.topic(TXN_TOPIC)
        if topic is None:
            return
        for partition in range(topic.partitions):
            hosted = self.broker.partition(TXN_TOPIC, partition)
            if hosted is not None:
                self.owned.setdefault(partition, max(hosted.leader_epoch, 0))

    def load(self) -> None:
        """A lone broker: replay every ``__transaction_state`` partition (start-up, before
        serving). In a cluster partitions are loaded as this broker comes to lead them."""
        if self.broker.cluster is None:
            topic = self.state_topic(create=False)
            for partition in range(topic.partitions if topic is not None else 0):
                self._replay(partition)
        self.loading = False

    def load_partition(self, partition: int, now: int | None = None) -> None:
        """This broker now leads ``partition``: replay it and resume owed markers."""
        self.unload_partition(partition)
        self._replay(partition)
        if self._started:
            self._resume(partition)
            self._poke()

    def unload_partition(self, partition: int) -> None:
        """Another broker leads ``partition`` now: forget its transactions."""
        self.owned.pop(partition, None)
        ids = [t for t, p in self._partition_of.items() if p == partition]
        for transactional_id in ids:
            self._partition_of.pop(transactional_id, None)
            task = self._markers.pop(transactional_id, None)
            if task is not None:
                task.cancel()
        self.coordinator.unload(ids)
        for transactional_id in ids:
            self._notify(transactional_id)  # waiting requests now answer NOT_COORDINATOR

    def _replay(self, partition: int) -> None:
        hosted = self.broker.partition(TXN_TOPIC, partition)
        if hosted is None:
            return
        records = 0
        seen: set[str] = set()
        for record in iter_log_records(hosted.log):
            records += 1
            try:
                if record.key is None:
                    raise RecordFormatError("record without a key")
                transactional_id = decode_key(record.key)
                if transactional_id is None:
                    continue
                snapshot = None if record.value is None else decode_value(record.value)
            except RecordFormatError as exc:
                log.error("%s-%d offset %d: skipping an unreadable record: %s", TXN_TOPIC,
                          partition, record.offset, exc)
                continue
            self.coordinator.replay(transactional_id, snapshot)
            seen.add(transactional_id)
        for transactional_id in seen:
            if transactional_id in self.coordinator.txns:
                self._partition_of[transactional_id] = partition
        self.owned[partition] = max(hosted.leader_epoch, 0)
        if records:
            log.info("%s-%d: loaded %d transactional ids from %d records", TXN_TOPIC,
                     partition, sum(1 for t in seen if t in self.coordinator.txns), records)

    def _resume(self, partition: int) -> None:
        ids = [t for t, p in self._partition_of.items() if p == partition]
        for marker in self.coordinator.pending_markers(ids):
            log.info("transaction %s: resuming %s markers on %d partitions",
                     marker.transactional_id, "COMMIT" if marker.commit else "ABORT",
                     len(marker.partitions))
            self._start_markers(marker)

    # -- writes ------------------------------------------------------------------------------

    async def _write(self, transactional_id: str, snapshot: TxnSnapshot | None, *,
                     fencing: bool = False) -> ErrorCode | None:
        """Append ``snapshot`` (None: a tombstone) for ``transactional_id`` with acks=all;
        it becomes the id's state once the ISR has it. None when written, else the error
        to answer with."""
        partition = self.partition_of(transactional_id)
        epoch = None if partition is None else self.owned.get(partition)
        if partition is None or epoch is None:
            return ErrorCode.not_coordinator
        pending = snapshot if snapshot is not None else TxnSnapshot(
            producer_id=-1, producer_epoch=-1, timeout_ms=0, state=TxnState.DEAD)
        self.coordinator.begin(transactional_id, pending, fencing=fencing)
        self._partition_of[transactional_id] = partition
        error = await self._append(transactional_id, partition, snapshot)
        if error is None and self.owned.get(partition) != epoch:
            error = ErrorCode.not_coordinator  # lost and maybe regained meanwhile
        self.coordinator.finish(transactional_id, pending, error is None)
        if transactional_id not in self.coordinator.txns:
            self._partition_of.pop(transactional_id, None)
        self._notify(transactional_id)
        self._poke()
        return error

    async def _append(self, transactional_id: str, partition: int,
                      snapshot: TxnSnapshot | None) -> ErrorCode | None:
        hosted = self.broker.partition(TXN_TOPIC, partition)
        if hosted is None:
            return ErrorCode.not_coordinator
        now = now_ms()
        value = None if snapshot is None else encode_value(snapshot)
        try:
            batch = encode_batch([(encode_key(transactional_id), value)], now)
            result = hosted.append_as_leader(batch, AppendOrigin.COORDINATOR, -1, now)
            acks = hosted.wait_for_acks(result.last_offset + 1)
        except ReplicaError as exc:
            log.info("transaction %s: cannot write %s: %s", transactional_id, TXN_TOPIC, exc)
            return _write_error(exc.code)
        except (RecordTooLargeError, RecordListTooLargeError, RecordFormatError) as exc:
            log.error("transaction %s: cannot store its state: %s", transactional_id, exc)
            return ErrorCode.unknown_server_error
        except StorageError:
            return ErrorCode.not_coordinator  # logged once by the failure channel
        except (LogError, OSError) as exc:
            log.error("transaction %s: cannot write %s: %s", transactional_id, TXN_TOPIC, exc)
            return ErrorCode.not_coordinator
        try:
            code = await asyncio.wait_for(asyncio.shield(acks), WRITE_TIMEOUT_S)
        except TimeoutError:
            return ErrorCode.coordinator_not_available
        return None if code is ErrorCode.none else _write_error(code)

    async def _carry_out(self, transactional_id: str, decision: Decision
                         ) -> tuple[ErrorCode, int, int]:
        """Write a decision's snapshot, start the markers it owes, and say what to answer:
        (error, producer id, producer epoch)."""
        if decision.write is None:
            return decision.error, decision.producer_id, decision.producer_epoch
        error = await self._write(transactional_id, decision.write, fencing=decision.fencing)
        if error is not None:
            return error, -1, -1
        if decision.write.state.is_prepare:
            marker = self.coordinator.marker(transactional_id)
            if marker is not None:
                self._start_markers(marker)
        if decision.error_after_write is not None:
            return decision.error_after_write, -1, -1
        return ErrorCode.none, decision.producer_id, decision.producer_epoch

    # -- markers -----------------------------------------------------------------------------

    def _start_markers(self, marker: Marker) -> None:
        if self.broker.config.test_hold_transaction_markers:
            log.warning("transaction %s: holding its markers (moldau.test.hold.transaction."
                        "markers)", marker.transactional_id)
            return
        old = self._markers.pop(marker.transactional_id, None)
        if old is not None:
            old.cancel()
        task = asyncio.get_running_loop().create_task(self._complete(marker))
        self._markers[marker.transactional_id] = task

        def forget(done: asyncio.Task[None]) -> None:
            if self._markers.get(marker.transactional_id) is done:
                del self._markers[marker.transactional_id]
            if not done.cancelled() and done.exception() is not None:
                log.error("transaction %s: marker task failed: %s", marker.transactional_id,
                          done.exception())
        task.add_done_callback(forget)

    async def _complete(self, marker: Marker) -> None:
        """Write every marker (retrying), then the Complete* state (retrying), while this
        broker still coordinates the transaction."""
        transactional_id = marker.transactional_id
        partition = self._partition_of.get(transactional_id)
        if partition is None:
            return
        epoch = self.owned.get(partition)
        remaining = set(marker.partitions)
        backoff = MARKER_BACKOFF_S[0]
        while True:
            if self.owned.get(partition) != epoch or epoch is None:
                return  # no longer the coordinator: the new one resumes
            remaining = {tp for tp in remaining if self._exists(tp)}
            if remaining:
                remaining -= await self._send_markers(marker, sorted(remaining), epoch)
            if not remaining:
                snapshot = self.coordinator.complete(transactional_id, now_ms())
                if snapshot is None:
                    return
                error = await self._write(transactional_id, snapshot)
                if error is None:
                    # DEBUG, as Kafka logs it: a busy producer ends hundreds a second.
                    log.debug("transaction %s: %s (producer %d epoch %d, %d partitions)",
                             transactional_id, snapshot.state.display, marker.producer_id,
                             marker.producer_epoch, len(marker.partitions))
                    return
                if error is ErrorCode.not_coordinator:
                    return
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, MARKER_BACKOFF_S[1])

    def _exists(self, tp: TopicPartition) -> bool:
        topic = self.broker.metadata.topic(tp[0])
        return topic is not None and 0 <= tp[1] < topic.partitions

    def _leader_of(self, tp: TopicPartition) -> int | None:
        cluster = self.broker.cluster
        if cluster is None:
            return self.broker.node_id
        leader = cluster.partition_view(*tp).leader
        return None if leader < 0 else leader

    async def _send_markers(self, marker: Marker, partitions: Sequence[TopicPartition],
                            coordinator_epoch: int) -> set[TopicPartition]:
        """One round: the partitions whose leader has the marker now."""
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in partitions:
            leader = self._leader_of(tp)
            if leader is not None:
                by_leader.setdefault(leader, []).append(tp)
        jobs: list[Coroutine[Any, Any, set[TopicPartition]]] = []
        for leader, tps in by_leader.items():
            if leader == self.broker.node_id:
                jobs.extend(self._write_local(marker, tp, coordinator_epoch) for tp in tps)
            else:
                jobs.append(self._write_remote(leader, marker, tps, coordinator_epoch))
        done: set[TopicPartition] = set()
        for result in await asyncio.gather(*jobs):
            done |= result
        return done

    def _accept(self, marker: Marker, tp: TopicPartition, code: ErrorCode) -> bool:
        """Whether the marker is settled on ``tp`` after the leader answered ``code``."""
        if code is ErrorCode.none:
            return True
        if code in _RETRIABLE_MARKER_ERRORS:
            return False
        # Kafka treats the others as fatal for this marker (the producer's epoch moved on,
        # a newer coordinator wrote one): nothing a retry could change.
        log.error("transaction %s: %s marker on %s-%d refused: %s", marker.transactional_id,
                  "COMMIT" if marker.commit else "ABORT", tp[0], tp[1], code.name)
        return True

    async def _write_local(self, marker: Marker, tp: TopicPartition,
                           coordinator_epoch: int) -> set[TopicPartition]:
        try:
            code = await write_marker(
                self.broker, tp[0], tp[1], marker.producer_id, marker.producer_epoch,
                marker.commit, coordinator_epoch)
        except Exception as exc:  # never let one partition stop the others
            log.error("transaction %s: marker on %s-%d failed: %s", marker.transactional_id,
                      tp[0], tp[1], exc)
            return set()
        return {tp} if self._accept(marker, tp, ErrorCode(code)) else set()

    async def _write_remote(self, leader: int, marker: Marker, partitions: list[TopicPartition],
                            coordinator_epoch: int) -> set[TopicPartition]:
        by_topic: dict[str, list[int]] = {}
        for topic, index in partitions:
            by_topic.setdefault(topic, []).append(index)
        request = build(WriteTxnMarkersRequest, markers=(build(
            WritableTxnMarker, producer_id=marker.producer_id,
            producer_epoch=marker.producer_epoch, transaction_result=marker.commit,
            coordinator_epoch=coordinator_epoch,
            topics=tuple(build(WritableTxnMarkerTopic, name=name,
                               partition_indexes=tuple(indexes))
                         for name, indexes in by_topic.items())),))
        try:
            response = await self.broker.peers.request(leader, request)
        except (OSError, ConnectionError, TimeoutError) as exc:
            log.info("transaction %s: cannot reach broker %d for markers: %s",
                     marker.transactional_id, leader, exc)
            return set()
        except Exception as exc:
            # The transaction would stay in Prepare* for good (its producer's InitProducerId
            # answered CONCURRENT_TRANSACTIONS forever): log it and let the round retry.
            log.error("transaction %s: markers to broker %d failed: %r",
                      marker.transactional_id, leader, exc)
            return set()
        done: set[TopicPartition] = set()
        for result in response.markers:
            for topic in result.topics:
                for p in topic.partitions:
                    tp = (str(topic.name), int(p.partition_index))
                    if self._accept(marker, tp, p.error_code):
                        done.add(tp)
        return done

    # -- the timer ---------------------------------------------------------------------------

    def start(self) -> None:
        """Start the deadline timer and the owed markers (on the running loop)."""
        self._started = True
        self._wake = asyncio.Event()
        self._timer = asyncio.get_running_loop().create_task(self._run_timer(self._wake))
        for partition in list(self.owned):
            self._resume(partition)

    async def stop(self) -> None:
        self._started = False
        tasks = [t for t in (self._timer, *self._markers.values(), *self._tasks) if t]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._timer = None
        self._wake = None
        self._markers.clear()

    def _poke(self) -> None:
        deadline = self.coordinator.next_deadline()
        if (self._wake is not None and self._sleeping_until is not None
                and deadline is not None and deadline < self._sleeping_until):
            self._wake.set()

    async def _run_timer(self, wake: asyncio.Event) -> None:
        while True:
            deadline = self.coordinator.next_deadline()
            now = now_ms()
            self._sleeping_until = deadline if deadline is not None else now + 86_400_000
            delay = max(self._sleeping_until - now, 0) / 1000
            wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), timeout=min(delay, 86_400))
            self._sleeping_until = None
            try:
                await self._on_timer(now_ms())
            except Exception:
                log.exception("transaction coordinator timer failed")
                await asyncio.sleep(1)  # a deadline that keeps failing must not spin

    async def _on_timer(self, now: int) -> None:
        self.coordinator.config = self._config()
        jobs: list[Coroutine[Any, Any, object]] = []
        for transactional_id, snapshot in self.coordinator.timed_out(now):
            log.info("transaction %s: timed out after %d ms, aborting (producer %d fenced "
                     "with epoch %d)", transactional_id, snapshot.timeout_ms,
                     snapshot.producer_id, snapshot.producer_epoch)
            jobs.append(self._timer_write(transactional_id, snapshot))
        for transactional_id in self.coordinator.expired(now):
            log.info("transaction %s: expired (idle longer than transactional.id.expiration.ms)",
                     transactional_id)
            jobs.append(self._timer_write(transactional_id, None))
        if jobs:
            # Each job marks its id pending first, so the next deadline moves on at once;
            # the writes themselves run in the background.
            task = asyncio.get_running_loop().create_task(self._gather(jobs))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            await asyncio.sleep(0)

    async def _timer_write(self, transactional_id: str, snapshot: TxnSnapshot | None) -> None:
        """A timeout's abort (``snapshot``) or an expiry's tombstone (None); if it cannot be
        written now, it is tried again after ``TIMER_RETRY_MS``."""
        if snapshot is None:
            error = await self._write(transactional_id, None)
        else:
            error, _, _ = await self._carry_out(transactional_id,
                                                Decision(write=snapshot, fencing=True))
        if error not in (None, ErrorCode.none):
            log.info("transaction %s: %s not written (%s), retrying in %d ms", transactional_id,
                     "abort" if snapshot is not None else "expiry", error.name.upper(),
                     TIMER_RETRY_MS)
            self.coordinator.postpone(transactional_id, now_ms() + TIMER_RETRY_MS)
            self._poke()

    @staticmethod
    async def _gather(jobs: list[Coroutine[Any, Any, object]]) -> None:
        await asyncio.gather(*jobs, return_exceptions=True)

    # -- the API the handlers use ------------------------------------------------------------

    async def init_producer_id(self, transactional_id: str, timeout_ms: int,
                               expected: tuple[int, int] | None) -> tuple[ErrorCode, int, int]:
        error = self.owner_error(transactional_id)
        if error is not None:
            return error, -1, -1
        self.coordinator.config = self._config()

        async def decide() -> Decision:
            decision = await self._decide(transactional_id, lambda: (
                self.coordinator.init_producer_id(transactional_id, timeout_ms, expected,
                                                  now_ms())))
            if decision.need_producer_id:
                fresh = await self._new_producer_id()
                decision = self.coordinator.init_producer_id(transactional_id, timeout_ms,
                                                             expected, now_ms(), fresh)
            return decision

        decision = await decide()
        if not decision.fencing:
            return await self._carry_out(transactional_id, decision)
        meta = self.coordinator.txns.get(transactional_id)
        if meta is not None:
            log.info("transaction %s: fencing producer %d (epoch %d), aborting its transaction",
                     transactional_id, meta.current.producer_id, meta.current.producer_epoch)
        answer = await self._carry_out(transactional_id, decision)
        if answer[0] is not ErrorCode.concurrent_transactions:
            return answer  # the abort could not be written
        # Answer as the caller's retry would be answered once the abort completed (Kafka
        # answers CONCURRENT_TRANSACTIONS here and lets the client come back).
        decision = await decide()
        if decision.fencing or decision.error is ErrorCode.concurrent_transactions:
            return ErrorCode.concurrent_transactions, -1, -1
        return await self._carry_out(transactional_id, decision)

    async def _decide(self, transactional_id: str, decide: Callable[[], Decision]) -> Decision:
        """``decide()``, again each time the id's state changes while the answer is
        CONCURRENT_TRANSACTIONS because a write or the markers are under way (at most
        ``CONCURRENT_WAIT_S``). A client's next AddPartitionsToTxn usually arrives while the
        previous commit's markers are being written; without the wait it is told to retry
        (librdkafka backs off 20 ms), which cost most of the time of small transactions."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CONCURRENT_WAIT_S
        while True:
            decision = decide()
            if decision.error is not ErrorCode.concurrent_transactions \
                    or not self._busy(transactional_id):
                return decision
            remaining = deadline - loop.time()
            if remaining <= 0:
                return decision
            await self._changed(transactional_id, remaining)
            error = self.owner_error(transactional_id)
            if error is not None:
                return Decision(error)

    def _busy(self, transactional_id: str) -> bool:
        """A write or the markers of ``transactional_id`` are under way (and will end)."""
        meta = self.coordinator.txns.get(transactional_id)
        return meta is not None and (meta.pending is not None or (
            meta.current.state.is_prepare and transactional_id in self._markers))

    async def _changed(self, transactional_id: str, timeout_s: float) -> None:
        """Wait until the id's state changes (or ``timeout_s``)."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._watchers.setdefault(transactional_id, []).append(future)
        try:
            await asyncio.wait_for(future, timeout_s)
        except TimeoutError:
            pass
        finally:
            watchers = self._watchers.get(transactional_id)
            if watchers is not None and future in watchers:
                watchers.remove(future)
                if not watchers:
                    del self._watchers[transactional_id]

    def _notify(self, transactional_id: str) -> None:
        for future in self._watchers.pop(transactional_id, []):
            if not future.done():
                future.set_result(None)

    async def _new_producer_id(self) -> int:
        cluster = self.broker.cluster
        if cluster is not None:
            return await cluster.next_producer_id()
        return self.broker.metadata.next_producer_id()

    async def add_partitions(self, transactional_id: str, producer_id: int,
                             producer_epoch: int, partitions: Sequence[TopicPartition], *,
                             verify_only: bool) -> dict[TopicPartition, ErrorCode]:
        """AddPartitionsToTxn for one transaction: an error per partition."""
        error = self.owner_error(transactional_id)
        if error is not None:
            return dict.fromkeys(partitions, error)
        if verify_only:
            return self.coordinator.verify_partitions(transactional_id, producer_id,
                                                      producer_epoch, partitions)
        decision = await self._decide(transactional_id, lambda: self.coordinator.add_partitions(
            transactional_id, producer_id, producer_epoch, partitions, now_ms()))
        code, _, _ = await self._carry_out(transactional_id, decision)
        return dict.fromkeys(partitions, code)

    async def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                      commit: bool, *, version2: bool) -> tuple[ErrorCode, int, int]:
        error = self.owner_error(transactional_id)
        if error is not None:
            return error, -1, -1
        decision = await self._decide(transactional_id, lambda: self.coordinator.end_txn(
            transactional_id, producer_id, producer_epoch, commit, now_ms(),
            version2=version2))
        if decision.need_producer_id:
            fresh = await self._new_producer_id()
            decision = self.coordinator.end_txn(transactional_id, producer_id, producer_epoch,
                                                commit, now_ms(), version2=version2,
                                                fresh_id=fresh)
        return await self._carry_out(transactional_id, decision)

    def describe(self, transactional_id: str) -> tuple[ErrorCode, TransactionMetadata | None]:
        error = self.owner_error(transactional_id)
        if error is not None:
            return error, None
        meta = self.coordinator.txns.get(transactional_id)
        if meta is None or meta.current.state is TxnState.DEAD:
            return ErrorCode.transactional_id_not_found, None
        return ErrorCode.none, meta

    def list(self) -> list[TransactionMetadata]:
        """Every transaction this broker coordinates (ids being created are not shown)."""
        return [m for m in self.coordinator.txns.values() if m.current.state is not TxnState.DEAD]


def start_time(ms: int) -> datetime.datetime:
    """A millisecond timestamp as kio's datetime (-1, none, round-trips as -1)."""
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
