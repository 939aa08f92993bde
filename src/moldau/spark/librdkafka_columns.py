"""The sink's columnar write path: produce an Arrow batch column by column.

Spark hands the writer Arrow record batches (``DataSourceArrowWriter``). The row path
(``writePath=rows``) turns every row into a dict of keyword arguments and checks for
delivery errors before each record; here each column becomes one Python list in one C call
(``to_pylist``), the loop is specialised for the columns the DataFrame actually has (most
jobs have only key and value and a topic option), and the producer reports only failed
deliveries (``delivery.report.only.error``), so no Python callback runs per record.
Acknowledgement stays exact: a flush that leaves nothing queued means every record was
either acknowledged or reported as failed, and any failure fails the task.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
from confluent_kafka import Producer

# Producer settings of the columnar path (the row path keeps a callback per record).
COLUMNAR_CONFIG: dict[str, Any] = {"delivery.report.only.error": True}

# How long to let librdkafka drain its queue when it is full, before producing again.
_QUEUE_FULL_WAIT_S = 0.002


def column(batch: pa.RecordBatch, name: str) -> pa.Array | None:
    """The column ``name`` (any case), or None."""
    for i, column_name in enumerate(batch.schema.names):
        if column_name.lower() == name:
            return batch.column(i)
    return None


def as_binary(data: pa.Array) -> pa.Array:
    """Text re-typed as binary, not re-encoded: Arrow strings are already UTF-8 bytes."""
    if pa.types.is_string(data.type):
        return data.cast(pa.binary())
    if pa.types.is_large_string(data.type):
        return data.cast(pa.large_binary())
    return data


def _bytes_list(data: pa.Array | None, rows: int) -> list[Any]:
    """Keys or values as bytes (or None)."""
    if data is None:
        return [None] * rows
    return as_binary(data).to_pylist()


def _header_list(headers: pa.Array | None, rows: int) -> list[Any] | None:
    """Headers as confluent-kafka takes them, or None when no row has any."""
    if headers is None or headers.null_count == len(headers):
        return None
    result: list[Any] = []
    for entry in headers.to_pylist():
        if not entry:
            result.append(None)
            continue
        result.append([(h["key"], h["value"].encode() if isinstance(h["value"], str)
                        else h["value"]) for h in entry])
    return result


def produce_columns(producer: Producer, batch: pa.RecordBatch, default_topic: str | None,
                    check: Callable[[], None]) -> None:
    """Hand every row of ``batch`` to ``producer``; ``check`` raises on delivery errors
    seen so far (called once per batch and whenever the queue is full)."""
    rows = batch.num_rows
    if rows == 0:
        return
    check()
    values = _bytes_list(column(batch, "value"), rows)
    keys = _bytes_list(column(batch, "key"), rows)
    topic_column = None if default_topic else column(batch, "topic")
    if topic_column is not None and topic_column.null_count:
        raise ValueError("null topic: set the topic column or the topic option")
    partition_column = column(batch, "partition")
    headers = _header_list(column(batch, "headers"), rows)
    produce = producer.produce

    def send(topic: str, value: Any, key: Any, **extra: Any) -> None:
        while True:
            try:
                produce(topic, value, key, **extra)
                return
            except BufferError:
                check()
                producer.poll(_QUEUE_FULL_WAIT_S)

    if topic_column is None and partition_column is None and headers is None:
        # The common case, kept free of per-row branches.
        assert default_topic is not None
        topic = default_topic
        for key, value in zip(keys, values, strict=True):
            try:
                produce(topic, value, key)
            except BufferError:
                send(topic, value, key)
    else:
        topics: list[Any] = (topic_column.to_pylist() if topic_column is not None
                             else [default_topic] * rows)
        partitions = (partition_column.to_pylist() if partition_column is not None
                      else [None] * rows)
        all_headers = headers if headers is not None else [None] * rows
        for i in range(rows):
            extra: dict[str, Any] = {}
            if partitions[i] is not None:
                extra["partition"] = partitions[i]
            if all_headers[i]:
                extra["headers"] = all_headers[i]
            send(topics[i], values[i], keys[i], **extra)
    producer.poll(0)
