"""KIP-890: the partition leader checks a transactional batch with the transaction coordinator.

Without this check, a transactional batch that reaches a partition the producer never added to
its transaction (a client bug, or a late retry of a batch from a transaction the coordinator
already aborted) opens a transaction there that no coordinator knows about: no marker ever
closes it, the last stable offset stops, and read_committed consumers hang behind it. Kafka
3.6+ therefore verifies, and moldau does as Kafka 4.x:

- Only a batch with the transactional bit, in a Produce naming a ``transactional_id``, whose
  producer has no transaction open on that partition yet (the producer state knows the first
  offset of an open one) is checked: the first batch of each transaction per partition pays
  one round trip, every further batch none, and idempotent or plain produce nothing beyond
  ``request.transactional_id is None``. (Kafka refuses a transactional batch in a Produce
  without a transactional id, TRANSACTIONAL_ID_AUTHORIZATION_FAILED; moldau still appends it
  unverified, which the partition-side tests use to write transactions without a
  coordinator.)
- The partitions of one request are checked together, in one AddPartitionsToTxn: a direct call
  to ``broker.transactions.add_partitions`` when this broker is the coordinator, else an
  AddPartitionsToTxn v5 to the coordinator's broker over the peer connections.
- Produce v12+ (transactions version 2) adds the partition to the transaction itself
  (``verify_only=False``): such clients send no AddPartitionsToTxn for produce partitions.
  Older versions only verify (``verify_only=True``).
- The coordinator's answers are translated to what the producer's version understands, as
  Kafka's AddPartitionsToTxnManager and ReplicaManager do: a partition not in the transaction
  (TRANSACTION_ABORTABLE) is INVALID_TXN_STATE "Partition was not added to the transaction"
  up to v10 and TRANSACTION_ABORTABLE from v11; PRODUCER_FENCED is INVALID_PRODUCER_EPOCH;
  a coordinator that cannot answer now (CONCURRENT_TRANSACTIONS, COORDINATOR_LOAD_IN_PROGRESS,
  COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR) is the retriable NOT_ENOUGH_REPLICAS; a lost
  connection NETWORK_EXCEPTION; a top-level error of the whole AddPartitionsToTxn
  INVALID_TXN_STATE.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from kio.schema.add_partitions_to_txn.v5.request import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTransaction,
)
from kio.schema.errors import ErrorCode

from ..log.batch import (
    BATCH_HEADER_SIZE,
    MAGIC_POS,
    TRANSACTIONAL_BIT,
    read_header,
)
from ..protocol.codec import build

if TYPE_CHECKING:
    from ..log.producer_state import ProducerState
    from .broker import Broker

log = logging.getLogger(__name__)

#: Produce v11 is the first whose clients know TRANSACTION_ABORTABLE; v12 the first of
#: transactions version 2, where the leader adds the partition to the transaction.
ABORTABLE_FROM_VERSION = 11
IMPLICIT_ADD_FROM_VERSION = 12
#: How long the leader waits for a remote coordinator before answering NETWORK_EXCEPTION.
REMOTE_TIMEOUT_S = 10.0

NOT_ADDED_MESSAGE = "Partition was not added to the transaction"
_UNAVAILABLE = frozenset({ErrorCode.concurrent_transactions,
                          ErrorCode.coordinator_load_in_progress,
                          ErrorCode.coordinator_not_available, ErrorCode.not_coordinator})

TopicPartition = tuple[str, int]


class Refusal(NamedTuple):
    """Why a partition's transactional batch is not appended."""

    code: ErrorCode
    message: str | None


#: What a partition knows of a producer (epoch, coordinator epoch, last timestamp, open
#: transaction's first offset), taken before a verification and compared right before the
#: append: a marker written meanwhile (the coordinator ended the transaction while the leader
#: asked about it) changes it, and the batch must not open a transaction nobody will end.
#: Kafka's "verification guard", read off the producer state instead of stored in it.
Stamp = tuple[int, int, int, int] | None


class Candidate(NamedTuple):
    """A partition whose batch must be checked before it is appended."""

    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    stamp: Stamp = None


def producer_stamp(state: ProducerState, producer_id: int) -> Stamp:
    entry = state.producers.get(producer_id)
    if entry is None:
        return None
    return entry.epoch, entry.coordinator_epoch, entry.last_timestamp, entry.txn_first_offset


def guard_broken(broker: Broker, topic: str, index: int, candidate: Candidate
                 ) -> Refusal | None:
    """Right before the append of a verified batch: the refusal when a marker for its
    producer was written on the partition since the verification began."""
    partition = broker.partition(topic, index)
    if partition is None:
        return None  # the append answers it
    if producer_stamp(partition.log.producers, candidate.producer_id) == candidate.stamp:
        return None
    # Retriable: the producer's retry is verified afresh, and the coordinator then says
    # whether this transaction (or the one the marker ended) holds the partition.
    log.info("transactional produce to %s-%d: a marker for producer %d was written while the "
             "batch was verified; answered NOT_ENOUGH_REPLICAS (retry)", topic, index,
             candidate.producer_id)
    return Refusal(ErrorCode.not_enough_replicas,
                   "The producer's transaction state changed while the partition was verified")


def transactional_producer(records: Any) -> tuple[int, int] | None:
    """(producer id, epoch) of a transactional v2 batch at the start of ``records``, else None.

    Only the fixed header is read; anything malformed is left to the append, which refuses
    it with the proper error."""
    if records is None or len(records) < BATCH_HEADER_SIZE or records[MAGIC_POS] != 2:
        return None
    header = read_header(records, 0, 0)
    if not header.attributes & TRANSACTIONAL_BIT or header.producer_id < 0:
        return None
    return header.producer_id, header.producer_epoch


def needs_check(broker: Broker, topic: str, index: int, producer_id: int,
                producer_epoch: int) -> bool:
    """True when the partition is led here and the producer has no transaction open on it
    with this epoch (one opened with an older epoch is a previous transaction whose marker is
    still on its way: transactions version 2 bumps the epoch at every end)."""
    partition = broker.partition(topic, index)
    if partition is None or not partition.is_leader:
        return False  # the append answers NOT_LEADER_OR_FOLLOWER / UNKNOWN_TOPIC_OR_PARTITION
    state = partition.log.producers
    ongoing = getattr(state, "ongoing_transaction", None)
    if ongoing is None or ongoing(producer_id) is None:
        return True
    entry = state.producers.get(producer_id)
    return entry is None or entry.epoch != producer_epoch


def _translate(code: ErrorCode, version: int, verify_only: bool) -> Refusal | None:
    """What the producer is answered for the coordinator's ``code`` about its partition.

    A verification's "not in the transaction" is TRANSACTION_ABORTABLE from a Kafka 4.x
    coordinator; INVALID_TXN_STATE is read the same way, so the producer gets Kafka's answer
    whichever of the two the coordinator uses."""
    if code is ErrorCode.none:
        return None
    if code is ErrorCode.transaction_abortable or (
            verify_only and code is ErrorCode.invalid_txn_state):
        if version >= ABORTABLE_FROM_VERSION:
            return Refusal(ErrorCode.transaction_abortable, None)
        return Refusal(ErrorCode.invalid_txn_state, NOT_ADDED_MESSAGE)
    if code is ErrorCode.invalid_txn_state:
        return Refusal(code, NOT_ADDED_MESSAGE)
    if code is ErrorCode.producer_fenced:
        return Refusal(ErrorCode.invalid_producer_epoch, None)
    if code in _UNAVAILABLE:
        return Refusal(ErrorCode.not_enough_replicas,
                       "Unable to verify the partition has been added to the transaction. "
                       f"Underlying error: {code.name.upper()}")
    return Refusal(code, None)


async def _ask_coordinator(broker: Broker, transactional_id: str, producer_id: int,
                           producer_epoch: int, partitions: Sequence[TopicPartition],
                           verify_only: bool) -> dict[TopicPartition, ErrorCode]:
    """The coordinator's answer per partition (local call or AddPartitionsToTxn v5)."""
    service = getattr(broker, "transactions", None)
    if service is None:
        return dict.fromkeys(partitions, ErrorCode.coordinator_not_available)
    coordinator = service.coordinator_of(transactional_id)
    if coordinator is None:
        return dict.fromkeys(partitions, ErrorCode.coordinator_not_available)
    if coordinator == broker.node_id:
        answer: dict[TopicPartition, ErrorCode] = await service.add_partitions(
            transactional_id, producer_id, producer_epoch, partitions, verify_only=verify_only)
        return answer
    return await _ask_remote(broker, coordinator, transactional_id, producer_id, producer_epoch,
                             partitions, verify_only)


def _peers(broker: Broker) -> Any:
    """The broker's pooled peer connections (broker/peer_clients.py)."""
    peers = getattr(broker, "peers", None)
    return peers if peers is not None else getattr(
        getattr(broker, "transactions", None), "peers", None)


async def _ask_remote(broker: Broker, coordinator: int, transactional_id: str,
                      producer_id: int, producer_epoch: int,
                      partitions: Sequence[TopicPartition],
                      verify_only: bool) -> dict[TopicPartition, ErrorCode]:
    peers = _peers(broker)
    if peers is None:
        return dict.fromkeys(partitions, ErrorCode.coordinator_not_available)
    by_topic: dict[str, list[int]] = defaultdict(list)
    for topic, index in partitions:
        by_topic[topic].append(index)
    request = build(AddPartitionsToTxnRequest, transactions=(build(
        AddPartitionsToTxnTransaction, transactional_id=transactional_id,
        producer_id=producer_id, producer_epoch=producer_epoch, verify_only=verify_only,
        topics=tuple(build(AddPartitionsToTxnTopic, name=t, partitions=tuple(ps))
                     for t, ps in by_topic.items())),))
    try:
        response = await asyncio.wait_for(peers.request(coordinator, request), REMOTE_TIMEOUT_S)
    except (ConnectionError, OSError, TimeoutError) as exc:
        log.info("transaction verification for %r: coordinator %d unreachable: %s",
                 transactional_id, coordinator, exc)
        return dict.fromkeys(partitions, ErrorCode.network_exception)
    if response.error_code is not ErrorCode.none:
        return dict.fromkeys(partitions, ErrorCode.invalid_txn_state)
    answer = dict.fromkeys(partitions, ErrorCode.unknown_server_error)
    for result in response.results_by_transaction:
        for topic in result.topic_results:
            for p in topic.results_by_partition:
                answer[(topic.name, p.partition_index)] = p.partition_error_code
    return answer


async def verify(broker: Broker, version: int, transactional_id: str,
                 candidates: Iterable[Candidate]) -> dict[TopicPartition, Refusal]:
    """Check the candidates with the coordinator; the refused partitions and why."""
    groups: dict[tuple[int, int], list[TopicPartition]] = defaultdict(list)
    for c in candidates:
        groups[(c.producer_id, c.producer_epoch)].append((c.topic, c.partition))
    verify_only = version < IMPLICIT_ADD_FROM_VERSION
    refused: dict[TopicPartition, Refusal] = {}
    for (producer_id, producer_epoch), partitions in groups.items():
        answer = await _ask_coordinator(broker, transactional_id, producer_id, producer_epoch,
                                        partitions, verify_only)
        for tp in partitions:
            refusal = _translate(answer.get(tp, ErrorCode.unknown_server_error), version,
                                 verify_only)
            if refusal is not None:
                refused[tp] = refusal
                log.info("refused transactional produce of %r (producer %d, epoch %d) to "
                         "%s-%d: %s", transactional_id, producer_id, producer_epoch, tp[0],
                         tp[1], refusal.code.name.upper())
    return refused
