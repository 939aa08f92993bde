"""The exactly-once streaming sink (``writeStream.format("moldau").option("exactlyOnce",
"true")``): a two-phase commit of Kafka transactions, driven by Spark's batch commit.

Phase one, on the executors: the task of Spark partition ``p`` in micro-batch ``b`` of query
``q`` (the query id survives restarts: it is kept in the checkpoint) opens a transaction
with ``transactional.id = <prefix><q>-<p>``. ``init_transactions`` fences any earlier
producer of that id (a failed or zombie attempt, or the run before a driver crash) and aborts
its open transaction. The task produces its rows, plus one record ``<q>/<p> -> b`` to the
compacted commits topic (``__moldau_spark_commits``), flushes, and returns WITHOUT
committing: its commit message carries the transactional id, producer id and epoch (read
from librdkafka's statistics, the producer's own view).

Phase two, on the driver: ``commit(messages, b)`` reads the commits topic (read_committed)
and, for each message, sends EndTxn itself (``txn_completion.py``): commit, unless the
commits topic already holds a committed record ``<q>/<p>`` for batch ``b`` or later, in
which case the transaction is a replay of data a previous run committed (the driver died
after EndTxn but before Spark wrote its commit log) and is aborted instead. Since the data
and its commit record are in one transaction, either both are visible or neither. Spark
writes its commit log only after ``commit()`` returned, so every EndTxn has finished by
then; a batch whose commit did not finish is replayed on restart and its tasks fence the
old transactions.

What Spark's Python data source API cannot express, and what is done instead: a task cannot
commit in the driver's name, nor can librdkafka resume a transaction by producer id and
epoch, hence the raw EndTxn; and the batch id and query id reach the task only as the local
properties Spark sets for every micro-batch (``streaming.sql.batchId``,
``sql.streaming.queryId``).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from .options import ExactlyOnce, SinkOptions, client_logger, consumer_config
from .txn_completion import TransactionEndError, end_transaction
from .writers import DeliveryError, _TaskProducer

QUERY_ID_PROPERTY = "sql.streaming.queryId"
BATCH_ID_PROPERTY = "streaming.sql.batchId"
STATS_INTERVAL_MS = 50
CLIENT_TIMEOUT_S = 60.0


class FaultInjected(RuntimeError):
    """A test-only fault (``moldau.test.*`` option) fired."""


@dataclass
class PreparedTransaction(WriterCommitMessage):
    """A task's open transaction, for the driver to commit or abort.

    ``transactional_id`` is None when the task had no rows (nothing was opened)."""

    records: int
    query_id: str
    partition: int
    batch_id: int
    transactional_id: str | None
    producer_id: int
    producer_epoch: int

    @property
    def commit_key(self) -> str:
        return commit_key(self.query_id, self.partition)


def commit_key(query_id: str, partition: int) -> str:
    return f"{query_id}/{partition}"


def _fire_once(marker: str | None) -> bool:
    """True the first time for ``marker`` (a file path), which is created then."""
    if not marker:
        return False
    try:
        with open(marker, "x"):
            return True
    except FileExistsError:
        return False


class _ProducerStats:
    """The last ``eos`` object of librdkafka's statistics: the producer id and epoch."""

    def __init__(self) -> None:
        self.eos: dict[str, Any] | None = None

    def __call__(self, stats_json: str) -> None:
        self.eos = json.loads(stats_json).get("eos")

    def producer_id_and_epoch(self, producer: Any) -> tuple[int, int]:
        self.eos = None
        deadline = time.monotonic() + CLIENT_TIMEOUT_S
        while time.monotonic() < deadline:
            producer.poll(STATS_INTERVAL_MS / 1000)
            eos = self.eos
            if eos and eos.get("txn_state") == "InTransaction" and eos["producer_id"] >= 0:
                return int(eos["producer_id"]), int(eos["producer_epoch"])
        raise DeliveryError("the producer reported no producer id within "
                            f"{CLIENT_TIMEOUT_S:g} s")


def _task_identity(eos: ExactlyOnce) -> tuple[str, int, int]:
    context = TaskContext.get()
    if context is not None and eos.query_id is not None and eos.batch_id is not None:
        return eos.query_id, eos.batch_id, context.partitionId()  # a write in foreachBatch
    query_id = context.getLocalProperty(QUERY_ID_PROPERTY) if context else None
    batch_id = context.getLocalProperty(BATCH_ID_PROPERTY) if context else None
    if context is None or query_id is None or batch_id is None:
        raise RuntimeError("the exactly-once sink only runs in a streaming micro-batch "
                           "query, or in foreachBatch with the options queryId and batchId")
    return query_id, int(batch_id), context.partitionId()


def write_transaction(options: SinkOptions, batches: Iterator[pa.RecordBatch]
                      ) -> PreparedTransaction:
    """Phase one: produce every row in a transaction left open for the driver."""
    eos = options.exactly_once
    assert eos is not None
    query_id, batch_id, partition = _task_identity(eos)
    transactional_id = f"{eos.transactional_id_prefix}{query_id}-{partition}"
    stats = _ProducerStats()
    task = _TaskProducer(options, {"transactional.id": transactional_id,
                                   "statistics.interval.ms": STATS_INTERVAL_MS,
                                   "stats_cb": stats})
    producer = task.producer
    assert producer is not None
    try:
        # Fences every earlier producer of this id and aborts its open transaction.
        producer.init_transactions(CLIENT_TIMEOUT_S)
        first = next(batches, None)
        if first is None:
            return PreparedTransaction(0, query_id, partition, batch_id, None, -1, -1)
        producer.begin_transaction()
        sent = 0
        for batch in _chain(first, batches):
            task.produce_batch(batch)
            sent += batch.num_rows
        producer.produce(eos.commits_topic, key=commit_key(query_id, partition).encode(),
                         value=json.dumps({"batch": batch_id}).encode())
        task.flush_and_check(sent + 1)
        producer_id, epoch = stats.producer_id_and_epoch(producer)
    except KafkaException as exc:
        raise DeliveryError(f"cannot produce: {exc}") from exc
    finally:
        task.producer = None  # destroyed without ending the transaction: the driver ends it
    if _fire_once(eos.fail_task_once):
        raise FaultInjected(f"test fault: task {partition} of batch {batch_id} fails after "
                            "writing its transaction")
    return PreparedTransaction(sent, query_id, partition, batch_id, transactional_id,
                               producer_id, epoch)


def _chain(first: pa.RecordBatch, rest: Iterator[pa.RecordBatch]
           ) -> Iterator[pa.RecordBatch]:
    yield first
    yield from rest


def ensure_commits_topic(options: SinkOptions) -> None:
    """Create the compacted commits topic unless it exists (on the driver, when the query
    starts), so no task depends on topic auto-creation."""
    eos = options.exactly_once
    assert eos is not None
    admin_config: dict[str, Any] = {**options.client_config, "logger": client_logger()}
    admin = AdminClient(admin_config)
    topics = admin.list_topics(eos.commits_topic, timeout=CLIENT_TIMEOUT_S).topics
    known = topics.get(eos.commits_topic)
    if known is not None and known.error is None:
        return
    future = admin.create_topics([NewTopic(eos.commits_topic, 1, -1,
                                           config={"cleanup.policy": "compact"})])
    try:
        future[eos.commits_topic].result(CLIENT_TIMEOUT_S)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise


def committed_batches(options: SinkOptions) -> dict[str, int]:
    """``<query>/<partition> -> last committed batch id``, read from the commits topic with
    read_committed up to its last stable offset (the current batch's own open transactions
    stop it there, after every record of a committed one)."""
    eos = options.exactly_once
    assert eos is not None
    config = consumer_config(options.client_config, "commits")
    config.update({"isolation.level": "read_committed", "enable.partition.eof": True})
    consumer = Consumer(config)
    try:
        metadata = consumer.list_topics(eos.commits_topic, timeout=CLIENT_TIMEOUT_S)
        partitions = list(metadata.topics[eos.commits_topic].partitions)
        consumer.assign([TopicPartition(eos.commits_topic, p, 0) for p in partitions])
        pending = set(partitions)
        found: dict[str, int] = {}
        deadline = time.monotonic() + CLIENT_TIMEOUT_S
        while pending:
            if time.monotonic() > deadline:
                raise TransactionEndError(f"cannot read {eos.commits_topic!r} to its end")
            message = consumer.poll(1.0)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    pending.discard(message.partition())
                    continue
                raise TransactionEndError(f"cannot read {eos.commits_topic!r}: {error.str()}")
            key, value = message.key(), message.value()
            if key is None or value is None:
                continue
            batch = int(json.loads(value)["batch"])
            name = key.decode()
            found[name] = max(batch, found.get(name, -1))
        return found
    finally:
        consumer.close()


def commit_prepared(options: SinkOptions, messages: Sequence[WriterCommitMessage | None],
                    batch_id: int) -> None:
    """Phase two: end every task's transaction; return only when all have been decided."""
    prepared = [m for m in messages
                if isinstance(m, PreparedTransaction) and m.transactional_id is not None]
    if not prepared:
        return
    eos = options.exactly_once
    assert eos is not None
    done = committed_batches(options)
    bootstrap = str(options.client_config["bootstrap.servers"])
    for message in prepared:
        assert message.transactional_id is not None
        replay = done.get(message.commit_key, -1) >= batch_id
        end_transaction(bootstrap, message.transactional_id, message.producer_id,
                        message.producer_epoch, commit=not replay)
    if _fire_once(eos.die_after_commit_once):
        # The worst moment for the driver to die: transactions committed, Spark's commit
        # log not yet written. The test's driver leads its own session (and process group);
        # Spark's Python workers may sit in a group of their own, so end both.
        os.killpg(os.getsid(0), signal.SIGKILL)
        os.killpg(os.getpgid(0), signal.SIGKILL)


def abort_prepared(options: SinkOptions, messages: Sequence[WriterCommitMessage | None]
                   ) -> None:
    """Abort what the tasks that did finish left open; a fenced one is aborted already."""
    bootstrap = str(options.client_config["bootstrap.servers"])
    for message in messages:
        if isinstance(message, PreparedTransaction) and message.transactional_id is not None:
            with contextlib.suppress(TransactionEndError):
                end_transaction(bootstrap, message.transactional_id, message.producer_id,
                                message.producer_epoch, commit=False)


class MoldauExactlyOnceStreamWriter(DataSourceStreamArrowWriter):
    """``writeStream.format("moldau").option("exactlyOnce", "true")``."""

    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> PreparedTransaction:
        return write_transaction(self.options, iterator)

    def commit(self, messages: Sequence[WriterCommitMessage | None], batchId: int) -> None:
        commit_prepared(self.options, messages, batchId)

    def abort(self, messages: Sequence[WriterCommitMessage | None], batchId: int) -> None:
        abort_prepared(self.options, messages)


class MoldauExactlyOnceBatchWriter(DataSourceArrowWriter):
    """``df.write.format("moldau").option("exactlyOnce", "true")`` inside ``foreachBatch``,
    with ``queryId`` (a stable name of the stream) and ``batchId`` (foreachBatch's id): the
    same two phases, the batch id coming from the options instead of the task."""

    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> PreparedTransaction:
        return write_transaction(self.options, iterator)

    def commit(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        assert self.options.exactly_once is not None
        assert self.options.exactly_once.batch_id is not None
        commit_prepared(self.options, messages, self.options.exactly_once.batch_id)

    def abort(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        abort_prepared(self.options, messages)
