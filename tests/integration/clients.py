"""Small confluent-kafka helpers shared by the integration and fault tests.

Consumers here use ``assign`` with explicit offsets, never group subscription, so that these
tests exercise produce/fetch/list-offsets and not the group coordinator.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def create_topic(bootstrap: str, name: str, partitions: int = 1,
                 config: dict[str, str] | None = None, timeout: float = 15.0) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1, config=config or {})],
        operation_timeout=timeout, request_timeout=timeout,
    )
    futures[name].result(timeout=timeout)


def producer(bootstrap: str, **config: Any) -> Producer:
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap, "linger.ms": 5}
    conf.update({k.replace("_", "."): v for k, v in config.items()})
    return Producer(conf)


def consumer(bootstrap: str, **config: Any) -> Consumer:
    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": f"tests-{uuid.uuid4().hex[:12]}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "error",
        "fetch.wait.max.ms": 100,
    }
    conf.update({k.replace("_", "."): v for k, v in config.items()})
    return Consumer(conf)


class DeliveryLog:
    """Collects delivery reports: which messages were acknowledged, where, and the failures."""

    def __init__(self) -> None:
        self.acked: list[Message] = []
        self.failed: list[tuple[Message, KafkaError]] = []

    def __call__(self, err: KafkaError | None, msg: Message) -> None:
        if err is None:
            self.acked.append(msg)
        else:
            self.failed.append((msg, err))


def produce_all(p: Producer, topic: str, records: Iterable[dict[str, Any]],
                timeout: float = 30.0) -> DeliveryLog:
    """Produce records (kwargs of ``Producer.produce``), flush, and return the delivery log."""
    reports = DeliveryLog()
    count = 0
    for rec in records:
        while True:
            try:
                p.produce(topic, on_delivery=reports, **rec)
                break
            except BufferError:
                p.poll(0.05)
        count += 1
    remaining = p.flush(timeout)
    assert remaining == 0, f"{remaining} messages still queued after {timeout}s"
    assert len(reports.acked) + len(reports.failed) == count
    return reports


def consume(c: Consumer, count: int, timeout: float = 20.0) -> list[Message]:
    """Consume exactly ``count`` records (fails on errors, on a timeout, and on extras)."""
    got: list[Message] = []
    deadline = time.monotonic() + timeout
    while len(got) < count:
        if time.monotonic() > deadline:
            raise AssertionError(f"consumed {len(got)} of {count} records in {timeout}s")
        for msg in c.consume(num_messages=min(count - len(got), 10_000), timeout=0.2):
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    continue
                raise KafkaException(err)
            got.append(msg)
    return got


def assert_no_more(c: Consumer, wait: float = 0.5) -> None:
    """Nothing beyond what was consumed arrives within ``wait`` seconds."""
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        for msg in c.consume(num_messages=100, timeout=0.1):
            err = msg.error()
            if err is not None and err.code() == KafkaError._PARTITION_EOF:
                continue
            raise AssertionError(f"unexpected extra message: {msg.error() or msg.offset()}")


def read_partition(bootstrap: str, topic: str, partition: int, start: int, count: int,
                   timeout: float = 30.0, **config: Any) -> list[Message]:
    c = consumer(bootstrap, **config)
    try:
        c.assign([TopicPartition(topic, partition, start)])
        return consume(c, count, timeout)
    finally:
        c.close()


def watermarks(bootstrap: str, topic: str, partition: int = 0,
               timeout: float = 10.0) -> tuple[int, int]:
    c = consumer(bootstrap)
    try:
        low, high = c.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout,
                                            cached=False)
        return int(low), int(high)
    finally:
        c.close()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"
