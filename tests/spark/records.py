"""Producing known records for the Spark tests and reading back what a topic holds."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition


@dataclass(frozen=True)
class Sent:
    """A record as the broker acknowledged it."""

    key: bytes | None
    value: bytes | None
    partition: int
    offset: int
    timestamp_ms: int
    headers: tuple[tuple[str, bytes], ...] | None


def produce(bootstrap: str, topic: str, records: list[dict[str, Any]]) -> list[Sent]:
    """Produce ``records`` (kwargs for Producer.produce) and return their delivery reports."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "linger.ms": 5})
    sent: list[Sent] = []
    errors: list[Any] = []

    def delivered(headers: Any) -> Any:
        # Delivery reports do not carry headers: take them from what we produced.
        def report(error: Any, message: Any) -> None:
            if error is not None:
                errors.append(error)
                return
            sent.append(Sent(message.key(), message.value(), message.partition(),
                             message.offset(), message.timestamp()[1],
                             tuple(headers) if headers else None))
        return report

    for record in records:
        producer.produce(topic, on_delivery=delivered(record.get("headers")), **record)
    assert producer.flush(30) == 0, "records not acknowledged in time"
    assert not errors, errors
    return sorted(sent, key=lambda s: (s.partition, s.offset))


def consume_all(bootstrap: str, topic: str, partitions: int) -> list[Any]:
    """Every record of ``topic`` from the start to its current end, by partition."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "spark-tests-reader",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
                for p in range(partitions)}
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions) if ends[p]])
        pending = {p for p, end in ends.items() if end}
        result: list[Any] = []
        for _ in range(600):
            if not pending:
                break
            for message in consumer.consume(1000, timeout=0.5):
                if message.error() is not None:
                    continue
                result.append(message)
                if message.offset() >= ends[message.partition()] - 1:
                    pending.discard(message.partition())
        assert not pending, f"could not read partitions {pending} of {topic} to the end"
        return result
    finally:
        consumer.close()


def consume_isolated(bootstrap: str, topic: str, partitions: int, isolation: str) -> list[Any]:
    """Every record of ``topic`` up to each partition's end as ``isolation`` sees it (the last
    stable offset for read_committed); works where commit markers end a partition."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "spark-tests-reader",
                         "isolation.level": isolation, "enable.partition.eof": True,
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        pending, result = set(range(partitions)), []
        deadline = time.monotonic() + 30
        while pending and time.monotonic() < deadline:
            for message in consumer.consume(1000, timeout=0.5):
                error = message.error()
                if error is None:
                    result.append(message)
                elif error.code() == KafkaError._PARTITION_EOF:
                    pending.discard(message.partition())
                else:
                    raise AssertionError(error.str())
        assert not pending, f"could not read partitions {pending} of {topic} to the end"
        return result
    finally:
        consumer.close()
