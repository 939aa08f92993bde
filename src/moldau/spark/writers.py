"""Batch and streaming writers: each task produces its rows with an idempotent producer.

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
from confluent_kafka import KafkaError, KafkaException, Producer
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

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
        config["enable.idempotence"] = True  # implies acks=all and in-order retries
        config["on_delivery"] = self.deliveries
        self.producer: Producer | None = Producer(config)
        self.default_topic = options.topic

    def produce_batch(self, batch: pa.RecordBatch) -> None:
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
        if errors:
            raise DeliveryError(f"{len(errors)} record(s) refused by the broker, first: "
                                f"{errors[0].str()}")
        if remaining or acked != expected:
            raise DeliveryError(f"{expected - acked} of {expected} record(s) were not "
                                f"acknowledged within {FLUSH_TIMEOUT_S:g} s")
        return WriteResult(acked)


def write_batches(options: SinkOptions, batches: Iterator[pa.RecordBatch]) -> WriteResult:
    """Produce every row of ``batches``; return only once all are acknowledged."""
    task = _TaskProducer(options)
    sent = 0
    try:
        for batch in batches:
            task.produce_batch(batch)
            sent += batch.num_rows
    except KafkaException as exc:
        raise DeliveryError(f"cannot produce: {exc}") from exc
    return task.finish(sent)


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
