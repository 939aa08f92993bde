"""``moldau transaction list|describe|abort``: find and end hanging transactions.

What Kafka's ``kafka-transactions.sh`` does, through the Kafka protocol only (so it works
against Kafka too). confluent-kafka has no call for these APIs, so the requests are sent raw
(cli/raw_requests.py) to the broker that must answer, found through confluent-kafka's
metadata:

- ``list``: ListTransactions to every broker (each coordinates a share of the transactional
  ids) and the union of the answers.
- ``describe ID``: FindCoordinator (transaction key) and DescribeTransactions at the
  coordinator; then DescribeProducers at each partition's leader, which shows the offset the
  transaction is open at on each partition (the leader's view, which is what keeps consumers
  waiting).
- ``abort``: a transaction left open on a partition (its producer died and no coordinator
  knows it any more, so nobody will ever write its marker) stops the partition's last stable
  offset and every read_committed consumer behind it. Given the partition and the
  transaction's first offset there, DescribeProducers at the leader names the producer, its
  epoch and the coordinator epoch of its last marker, and WriteTxnMarkers (ABORT) to the
  leader closes the transaction, as an aborting coordinator would. The producer can be named
  directly instead (``--producer-id``, ``--producer-epoch``, ``--coordinator-epoch``).

On TLS or SASL listeners every command takes ``--command-config FILE`` and ``-X KEY=VALUE``
(librdkafka keys, as ``moldau acl``): the metadata comes through confluent-kafka with them,
the raw requests authenticate themselves (:mod:`.client_security`).

Every failure is one line: which broker refused which request, with Kafka's error name.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import click
from confluent_kafka import KafkaException
from kio.schema.describe_producers.v0.request import DescribeProducersRequest, TopicRequest
from kio.schema.describe_transactions.v0 import response as describe_transactions_v0
from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v3.request import FindCoordinatorRequest
from kio.schema.list_transactions.v0.request import ListTransactionsRequest
from kio.schema.write_txn_markers.v1.request import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
)
from kio.static.primitive import i64

from ..protocol.codec import build
from . import raw_requests
from .admin_client import secured_admin_options
from .connection import Connection
from .errors import CliError, as_cli_error
from .output import print_line, print_table, stdout_console, table


def _derive(cls: type, changes: dict[str, tuple[Any, dict[str, str]]]) -> type:
    """A copy of kio's response class ``cls`` with some fields retyped."""
    fields: list[tuple[str, Any, Any]] = []
    for f in dataclasses.fields(cls):
        if f.name in changes:
            typ, metadata = changes[f.name]
            fields.append((f.name, typ, dataclasses.field(metadata=metadata)))
            continue
        extra: dict[str, Any] = {"metadata": f.metadata}
        if f.default is not dataclasses.MISSING:
            extra["default"] = f.default
        fields.append((f.name, f.type, dataclasses.field(**extra)))
    namespace = {k: getattr(cls, k) for k in
                 ("__type__", "__version__", "__flexible__", "__api_key__", "__header_schema__")}
    return dataclasses.make_dataclass(cls.__name__, fields, namespace=namespace, frozen=True,
                                      slots=True, kw_only=True)


# DescribeTransactions answers a start time of -1 for a transaction that has none (Empty, or
# an error), which kio's datetime reader refuses: read it as a plain int64.
_TxnState = _derive(describe_transactions_v0.TransactionState,
                    {"transaction_start_time": (i64, {"kafka_type": "int64"})})
_STATES = tuple[_TxnState, ...]  # type: ignore[valid-type]
DescribeTransactionsResponse = _derive(describe_transactions_v0.DescribeTransactionsResponse,
                                       {"transaction_states": (_STATES, {})})

#: FindCoordinator's key type of a transactional id.
TRANSACTION_KEY = 1
NO_OFFSET = -1

STATES = ("Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit",
          "CompleteAbort", "PrepareEpochFence", "Dead")


@dataclass(frozen=True)
class Brokers:
    """Where each broker listens and who leads each partition (from Metadata), and the
    connection settings to send them requests with."""

    addresses: dict[int, tuple[str, int]]
    leaders: dict[tuple[str, int], int]
    topics: dict[str, int]  # partition counts
    conn: Connection

    def address(self, broker_id: int) -> tuple[str, int]:
        try:
            return self.addresses[broker_id]
        except KeyError:
            raise CliError(f"broker {broker_id} is not in the cluster's metadata") from None

    def leader(self, topic: str, partition: int) -> int:
        if topic not in self.topics:
            raise CliError(f"topic {topic!r} does not exist")
        if not 0 <= partition < self.topics[topic]:
            raise CliError(f"topic {topic!r} has no partition {partition} "
                           f"(it has {self.topics[topic]})")
        leader = self.leaders.get((topic, partition), -1)
        if leader < 0:
            raise CliError(f"{topic}-{partition} has no leader right now; try again shortly")
        return leader


def _brokers(conn: Connection) -> Brokers:
    _ = conn.security  # bad TLS/SASL settings: one line before any connection is tried
    admin = conn.admin()
    try:
        metadata = admin.list_topics(timeout=conn.timeout)
    except KafkaException as exc:
        raise as_cli_error(exc, "cannot read the cluster's metadata") from exc
    addresses = {b.id: (str(b.host), int(b.port)) for b in metadata.brokers.values()}
    leaders = {(name, p.id): p.leader for name, t in metadata.topics.items()
               for p in t.partitions.values()}
    topics = {name: len(t.partitions) for name, t in metadata.topics.items() if t.error is None}
    return Brokers(addresses, leaders, topics, conn)


def _send(brokers: Brokers, broker_id: int, obj: Any, what: str,
          response_cls: type | None = None) -> Any:
    return raw_requests.ask(brokers.conn, brokers.address(broker_id), obj, f"broker {broker_id}",
                            what, response_cls)


def _code(code: ErrorCode) -> str:
    return code.name.upper()


def _refused(what: str, broker_id: int, code: ErrorCode, message: str | None = None) -> CliError:
    detail = f"{message} " if message else ""
    return CliError(f"{what}: broker {broker_id} refused: {detail}({_code(code)})")


# -- list ---------------------------------------------------------------------------------------


@click.group("transaction")
def transaction_group() -> None:
    """Inspect transactions and abort hanging ones (like kafka-transactions.sh)."""


@transaction_group.command("list")
@click.option("--state", "states", multiple=True, type=click.Choice(STATES),
              help="Only transactions in this state (repeatable).")
@click.option("--producer-id", "producer_ids", multiple=True, type=click.IntRange(min=0),
              help="Only this producer id (repeatable).")
@secured_admin_options
def list_transactions(conn: Connection, states: tuple[str, ...],
                      producer_ids: tuple[int, ...]) -> None:
    """List the transactional ids every coordinator knows, with their state."""
    brokers = _brokers(conn)
    request = build(ListTransactionsRequest, state_filters=states,
                    producer_id_filters=producer_ids)
    rows = table("TransactionalId", "Coordinator", "ProducerId", "State")
    found = []
    for broker_id in sorted(brokers.addresses):
        response = _send(brokers, broker_id, request, "cannot list transactions")
        if response.error_code is not ErrorCode.none:
            raise _refused("cannot list transactions", broker_id, response.error_code)
        for t in response.transaction_states:
            found.append((t.transactional_id, broker_id, t.producer_id, t.transaction_state))
    for txn_id, broker_id, producer_id, state in sorted(found):
        rows.add_row(txn_id, str(broker_id), str(producer_id), state)
    console = stdout_console()
    if not found:
        print_line(console, "No transactions.")
        return
    print_table(console, rows)


# -- describe -----------------------------------------------------------------------------------


def _coordinator(brokers: Brokers, transactional_id: str) -> int:
    request = build(FindCoordinatorRequest, key=transactional_id, key_type=TRANSACTION_KEY)
    what = f"cannot find the coordinator of {transactional_id!r}"
    for broker_id in sorted(brokers.addresses):
        try:
            response = raw_requests.request(brokers.address(broker_id), request,
                                            brokers.conn.timeout,
                                            security=brokers.conn.security)
        except raw_requests.SaslRefused as exc:
            raise CliError(f"{what}: broker {broker_id} refused us: {exc}") from None
        except OSError:
            continue  # any broker answers FindCoordinator
        if response.error_code is not ErrorCode.none:
            raise _refused(what, broker_id, response.error_code, response.error_message)
        return int(response.node_id)
    raise CliError(f"{what}: no broker answered")


def _describe_producers(brokers: Brokers, partitions: list[tuple[str, int]]
                        ) -> dict[tuple[str, int], tuple[int, Any]]:
    """(leader, DescribeProducers partition answer) of each partition, asked at its leader."""
    by_leader: dict[int, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    for topic, partition in partitions:
        by_leader[brokers.leader(topic, partition)][topic].append(partition)
    answers = {}
    for leader, topics in by_leader.items():
        request = build(DescribeProducersRequest, topics=tuple(
            build(TopicRequest, name=t, partition_indexes=tuple(ps)) for t, ps in topics.items()))
        response = _send(brokers, leader, request, "cannot describe producers")
        for t in response.topics:
            for p in t.partitions:
                answers[(t.name, p.partition_index)] = (leader, p)
    return answers


def _time(ms: int) -> str:
    if ms < 0:
        return "-"
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).isoformat(
        timespec="milliseconds")


@transaction_group.command("describe")
@click.argument("transactional_id")
@secured_admin_options
def describe(conn: Connection, transactional_id: str) -> None:
    """Show a transaction's state, producer and partitions, and where it is open on each."""
    brokers = _brokers(conn)
    coordinator = _coordinator(brokers, transactional_id)
    what = f"cannot describe {transactional_id!r}"
    response = _send(brokers, coordinator,
                     build(DescribeTransactionsRequest, transactional_ids=(transactional_id,)),
                     what, DescribeTransactionsResponse)
    (state,) = response.transaction_states
    if state.error_code is ErrorCode.transactional_id_not_found:
        raise CliError(f"no transaction with id {transactional_id!r} at its coordinator, broker "
                       f"{coordinator} (TRANSACTIONAL_ID_NOT_FOUND)")
    if state.error_code is not ErrorCode.none:
        raise _refused(what, coordinator, state.error_code)
    console = stdout_console()
    for label, value in (
            ("TransactionalId", transactional_id), ("Coordinator", str(coordinator)),
            ("State", state.transaction_state), ("ProducerId", str(state.producer_id)),
            ("ProducerEpoch", str(state.producer_epoch)),
            ("TimeoutMs", str(int(state.transaction_timeout.total_seconds() * 1000))),
            ("StartTime", _time(state.transaction_start_time))):
        print_line(console, f"{label + ':':<17}{value}")
    partitions = sorted((t.topic, p) for t in state.topics for p in t.partitions)
    if not partitions:
        return
    rows = table("Topic", "Partition", "Leader", "OpenAtOffset")
    known = {p for p in partitions if p[0] in brokers.topics}
    producers = _describe_producers(brokers, sorted(known)) if known else {}
    for topic, partition in partitions:
        leader, answer = producers.get((topic, partition), (-1, None))
        if answer is None:
            where = "topic gone"
        elif answer.error_code is not ErrorCode.none:
            where = _code(answer.error_code)
        else:
            where = next((str(a.current_txn_start_offset) for a in answer.active_producers
                          if a.producer_id == state.producer_id
                          and a.current_txn_start_offset != NO_OFFSET), "-")
        rows.add_row(topic, str(partition), str(leader) if leader >= 0 else "-", where)
    print_table(console, rows)


# -- abort --------------------------------------------------------------------------------------


def _producer_at(brokers: Brokers, topic: str, partition: int, start_offset: int) -> Any:
    """The active producer whose transaction on the partition starts at ``start_offset``."""
    ((leader, answer),) = _describe_producers(brokers, [(topic, partition)]).values()
    if answer.error_code is not ErrorCode.none:
        raise _refused(f"cannot describe the producers of {topic}-{partition}", leader,
                       answer.error_code, answer.error_message)
    for producer in answer.active_producers:
        if producer.current_txn_start_offset == start_offset:
            return producer
    open_ones = sorted(p.current_txn_start_offset for p in answer.active_producers
                       if p.current_txn_start_offset != NO_OFFSET)
    listed = ", ".join(map(str, open_ones)) if open_ones else "none"
    raise CliError(f"no transaction starts at offset {start_offset} in {topic}-{partition} "
                   f"(open transactions start at: {listed})")


@transaction_group.command("abort")
@click.option("--topic", required=True, help="The partition's topic.")
@click.option("--partition", required=True, type=click.IntRange(min=0),
              help="The partition the transaction is open on.")
@click.option("--start-offset", type=click.IntRange(min=0),
              help="The transaction's first offset on the partition (see `describe`).")
@click.option("--producer-id", type=click.IntRange(min=0),
              help="Name the producer instead of --start-offset.")
@click.option("--producer-epoch", type=click.IntRange(min=0, max=32767),
              help="With --producer-id.")
@click.option("--coordinator-epoch", type=click.IntRange(min=0),
              help="With --producer-id.")
@secured_admin_options
def abort(conn: Connection, topic: str, partition: int, start_offset: int | None,
          producer_id: int | None, producer_epoch: int | None,
          coordinator_epoch: int | None) -> None:
    """Abort a transaction left open on a partition (write its ABORT marker there)."""
    direct = (producer_id, producer_epoch, coordinator_epoch)
    if start_offset is None and None in direct:
        raise CliError("give --start-offset, or all of --producer-id, --producer-epoch and "
                       "--coordinator-epoch")
    if start_offset is not None and any(v is not None for v in direct):
        raise CliError("give either --start-offset or --producer-id/--producer-epoch/"
                       "--coordinator-epoch, not both")
    brokers = _brokers(conn)
    leader = brokers.leader(topic, partition)
    if start_offset is not None:
        producer = _producer_at(brokers, topic, partition, start_offset)
        producer_id, producer_epoch = producer.producer_id, producer.producer_epoch
        # A producer whose transaction was never ended has no coordinator epoch (-1); Kafka's
        # tool sends 0 then.
        coordinator_epoch = max(producer.coordinator_epoch, 0)
    assert producer_id is not None and producer_epoch is not None
    assert coordinator_epoch is not None
    request = build(WriteTxnMarkersRequest, markers=(build(
        WritableTxnMarker, producer_id=producer_id, producer_epoch=producer_epoch,
        transaction_result=False, coordinator_epoch=coordinator_epoch,
        topics=(build(WritableTxnMarkerTopic, name=topic, partition_indexes=(partition,)),)),))
    what = f"cannot abort the transaction of producer {producer_id} in {topic}-{partition}"
    response = _send(brokers, leader, request, what)
    codes = [p.error_code for m in response.markers for t in m.topics for p in t.partitions]
    if codes != [ErrorCode.none]:
        raise _refused(what, leader, codes[0] if codes else ErrorCode.unknown_server_error)
    where = f" starting at offset {start_offset}" if start_offset is not None else ""
    print_line(stdout_console(),
               f"Aborted the transaction of producer {producer_id} (epoch {producer_epoch}) "
               f"in {topic}-{partition}{where}.")
