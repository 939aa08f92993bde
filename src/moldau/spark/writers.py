"""Batch and streaming writers: each task produces its rows with an idempotent producer.

The option ``writePath`` picks how: ``batches`` (the default) encodes record batches from
the Arrow columns and sends them itself (``direct_produce.py``) when the DataFrame has no
headers column and the client settings are ones that path honours, else it falls back to
``columnar``: librdkafka, fed column by column (``librdkafka_columns.py``); ``rows`` keeps
the original row-by-row loop. All three write the same records (keys, values, headers, partitions).

A task returns only after every record it produced is acknowledged by the broker
(``acks=all``); any delivery error, or records still unacknowledged when the flush time
runs out, raises, so Spark sees a failed task and retries or fails the job. Nothing is ever
dropped silently. As with Spark's Kafka sink the guarantee is at least once: a retried
task produces its rows again.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import KafkaError, KafkaException, Producer
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from . import direct_produce
from .librdkafka_columns import COLUMNAR_CONFIG, as_binary, column, produce_columns
from .options import SinkOptions, client_logger

FLUSH_TIMEOUT_S = 120.0


class DeliveryError(RuntimeError):
    """The broker refused records, or did not acknowledge them in time."""


@dataclass
class WriteResult(WriterCommitMessage):
    """What a task reports back to the driver: how many records the broker acknowledged."""

    records: int


def _text_or_bytes(value: Any) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    return str(value).encode()


def _headers(value: Any) -> list[tuple[str, bytes | None]] | None:
    if not value:
        return None
    return [(h["key"], _text_or_bytes(h["value"])) for h in value]


class _Deliveries:
    """Delivery reports of one producer; kept apart from it so no reference cycle exists."""

    def __init__(self) -> None:
        self.acked = 0
        self.errors: list[KafkaError] = []

    def __call__(self, error: KafkaError | None, _message: Any) -> None:
        if error is None:
            self.acked += 1
        else:
            self.errors.append(error)


class _TaskProducer:
    """One idempotent producer for one Spark task, failing loudly on any lost record."""

    def __init__(self, options: SinkOptions, extra_config: dict[str, Any] | None = None
                 ) -> None:
        self.deliveries = _Deliveries()
        config: dict[str, Any] = {"linger.ms": 5, "batch.size": 1_000_000,
                                  "logger": client_logger()}
        config.update(options.client_config)
        config.update(extra_config or {})
        self.columnar = options.write_path != "rows"
        if self.columnar:
            config.update(COLUMNAR_CONFIG)  # reports failures only: see flush_and_check
        config["enable.idempotence"] = True  # implies acks=all and in-order retries
        config["on_delivery"] = self.deliveries
        self.producer: Producer | None = Producer(config)
        self.default_topic = options.topic

    def produce_batch(self, batch: pa.RecordBatch) -> None:
        if self.columnar:
            assert self.producer is not None, "producer used after finish()"
            produce_columns(self.producer, batch, self.default_topic, self._check_errors)
        else:
            self.produce_rows(batch)

    def _check_errors(self) -> None:
        if self.deliveries.errors:
            errors = self.deliveries.errors
            raise DeliveryError(f"the broker refused a record: {errors[0].str()}")

    def produce_rows(self, batch: pa.RecordBatch) -> None:
        """The row path (``writePath=rows``): one dict of arguments per row."""
        names = batch.schema.names
        columns = {name.lower(): batch.column(i).to_pylist() for i, name in enumerate(names)}
        rows = batch.num_rows
        nothing = [None] * rows
        values = columns["value"]
        keys = columns.get("key", nothing)
        topics = [self.default_topic] * rows if self.default_topic else columns["topic"]
        partitions = columns.get("partition", nothing)
        headers = columns.get("headers", nothing)
        for i in range(rows):
            if self.deliveries.errors:
                errors = self.deliveries.errors
                raise DeliveryError(f"the broker refused a record: {errors[0].str()}")
            topic = topics[i]
            if topic is None:
                raise ValueError("null topic: set the topic column or the topic option")
            kwargs: dict[str, Any] = {"value": _text_or_bytes(values[i]),
                                      "key": _text_or_bytes(keys[i])}
            if partitions[i] is not None:
                kwargs["partition"] = partitions[i]
            if headers[i]:
                kwargs["headers"] = _headers(headers[i])
            self._produce(topic, kwargs)

    def _produce(self, topic: str, kwargs: dict[str, Any]) -> None:
        assert self.producer is not None, "producer used after finish()"
        while True:
            try:
                self.producer.produce(topic, **kwargs)
                self.producer.poll(0)
                return
            except BufferError:
                self.producer.poll(0.05)  # queue full: let deliveries drain

    def finish(self, expected: int) -> WriteResult:
        assert self.producer is not None, "finish() called twice"
        try:
            return self.flush_and_check(expected)
        finally:
            self.producer = None  # destroys the client now, not whenever the worker exits

    def flush_and_check(self, expected: int) -> WriteResult:
        """Wait for every delivery report; raise unless all ``expected`` were acknowledged."""
        assert self.producer is not None, "producer used after finish()"
        deadline = time.monotonic() + FLUSH_TIMEOUT_S
        remaining = self.producer.flush(FLUSH_TIMEOUT_S)
        while remaining and time.monotonic() < deadline:
            remaining = self.producer.flush(1.0)
        acked, errors = self.deliveries.acked, self.deliveries.errors
        if self.columnar and not remaining:
            # Only failures are reported; an empty queue means the rest were acknowledged.
            acked = expected - len(errors)
        if errors:
            raise DeliveryError(f"{len(errors)} record(s) refused by the broker, first: "
                                f"{errors[0].str()}")
        if remaining or acked != expected:
            raise DeliveryError(f"{expected - acked} of {expected} record(s) were not "
                                f"acknowledged within {FLUSH_TIMEOUT_S:g} s")
        return WriteResult(acked)


def write_batches(options: SinkOptions, batches: Iterator[pa.RecordBatch]) -> WriteResult:
    """Produce every row of ``batches``; return only once all are acknowledged."""
    first = next(batches, None)
    if first is None:
        return WriteResult(0)
    if (options.write_path == "batches" and column(first, "headers") is None
            and direct_produce.supports(options.client_config)):
        return _write_direct(options, _chain(first, batches))
    task = _TaskProducer(options)
    sent = 0
    try:
        for batch in _chain(first, batches):
            task.produce_batch(batch)
            sent += batch.num_rows
    except KafkaException as exc:
        raise DeliveryError(f"cannot produce: {exc}") from exc
    return task.finish(sent)


def _chain(first: pa.RecordBatch, rest: Iterator[pa.RecordBatch]
           ) -> Iterator[pa.RecordBatch]:
    yield first
    yield from rest


def _write_direct(options: SinkOptions, batches: Iterator[pa.RecordBatch]) -> WriteResult:
    """The batch path: each Arrow batch is produced, and acknowledged, before the next."""
    try:
        producer = direct_produce.DirectProducer(options.client_config, FLUSH_TIMEOUT_S)
    except (OSError, direct_produce.DirectProduceError) as exc:
        raise DeliveryError(f"cannot produce: {exc}") from exc
    sent = 0
    try:
        for batch in batches:
            if batch.num_rows == 0:
                continue
            value_column = column(batch, "value")
            assert value_column is not None, "the sink schema requires a value column"
            values = as_binary(value_column)
            key_column = column(batch, "key")
            keys = (as_binary(key_column) if key_column is not None
                    else pa.nulls(batch.num_rows, pa.binary()))
            partitions = column(batch, "partition")
            for topic, rows in _rows_by_topic(batch, options.topic):
                if rows is None:
                    producer.send(topic, keys, values, partitions)
                else:
                    producer.send(topic, keys.take(rows), values.take(rows),
                                  partitions.take(rows) if partitions is not None else None)
            sent += batch.num_rows
        producer.flush()
    except (OSError, direct_produce.DirectProduceError) as exc:
        raise DeliveryError(f"cannot produce: {exc}") from exc
    finally:
        producer.close()
    if producer.acked != sent:
        raise DeliveryError(f"{sent - producer.acked} of {sent} record(s) were not "
                            "acknowledged")
    return WriteResult(producer.acked)


def _rows_by_topic(batch: pa.RecordBatch, default_topic: str | None
                   ) -> Iterator[tuple[str, pa.Array | None]]:
    """(topic, row indices) per topic of the batch; None for "all rows"."""
    if default_topic:
        yield default_topic, None
        return
    topics = column(batch, "topic")
    if topics is None or topics.null_count:
        raise ValueError("null topic: set the topic column or the topic option")
    for topic in topics.unique().to_pylist():
        yield topic, pc.indices_nonzero(pc.equal(topics, topic))


class MoldauBatchWriter(DataSourceArrowWriter):
    """``df.write.format("moldau")``."""

    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriteResult:
        return write_batches(self.options, iterator)

    def commit(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        """Records are visible as soon as acknowledged; there is nothing left to commit."""

    def abort(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        """Kafka cannot take back acknowledged records (at-least-once, as Spark's sink)."""


class MoldauStreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("moldau")``: every micro-batch is produced by its tasks."""

    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriteResult:
        return write_batches(self.options, iterator)

    def commit(self, messages: Sequence[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to commit: see :meth:`MoldauBatchWriter.commit`."""

    def abort(self, messages: Sequence[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to undo: see :meth:`MoldauBatchWriter.abort`."""
