"""Throttling by real clients' traffic: a producer limited to 1 MB/s gets 1 MB/s (± 10 % over
20 s) while an unlimited producer on the same broker keeps its throughput, and a consumer
over its quota is slowed down and sees the throttle time (librdkafka's statistics).

The rate is Kafka's: measured over ``quota.window.num`` windows, at least ``num - 1`` of
them long. A client with a backlog therefore moves in bursts of up to ``num - 1`` windows'
worth, then waits: with Kafka's default of 11 windows the average is the quota, but a 20 s
span holds one or two such bursts (measured 0.74 to 1.34 of the quota). These brokers
measure over 2 windows of 1 s (bursts of at most 2 s's worth), after a 4 s warm-up.

Every loop is bounded in time and in records.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.conftest import TEST_BROKER_OVERRIDES
from tests.helpers import BrokerProcess, ok, run_moldau

QUOTA = 1_048_576
VALUE = b"x" * 10_000
MEASURE_S = 20.0
WARM_UP_S = 4.0
WINDOWS = "quota.window.num=2"


@dataclass
class Throughput:
    """Bytes acknowledged before the deadline, and the largest throttle time reported."""

    acked_bytes: int = 0
    errors: list[str] = field(default_factory=list)
    max_throttle_ms: float = 0.0

    def stats(self, text: str) -> None:
        for broker in json.loads(text).get("brokers", {}).values():
            self.max_throttle_ms = max(self.max_throttle_ms,
                                       broker.get("throttle", {}).get("max", 0))


def produce_for(bootstrap: str, topic: str, client_id: str, seconds: float,
                warm_up: float = 0.0) -> Throughput:
    """Produce as fast as the broker lets ``client_id`` for ``warm_up + seconds``; count
    what is acked in the last ``seconds``."""
    result = Throughput()
    producer = Producer({"bootstrap.servers": bootstrap, "client.id": client_id,
                         "linger.ms": 5, "queue.buffering.max.kbytes": 4096,
                         "statistics.interval.ms": 1000, "stats_cb": result.stats})
    counting_from = time.monotonic() + warm_up
    deadline = counting_from + seconds

    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            result.errors.append(str(err))
        elif counting_from <= time.monotonic() <= deadline:
            result.acked_bytes += len(msg.value())

    sent = 0
    while time.monotonic() < deadline and sent < 1_000_000:
        try:
            producer.produce(topic, VALUE, on_delivery=delivered)
            sent += 1
            producer.poll(0)
        except BufferError:
            producer.poll(0.05)
    producer.flush(30)
    return result


@pytest.fixture(scope="module")
def throttle_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path_factory.mktemp("throttle"),
                            overrides=(*TEST_BROKER_OVERRIDES, WINDOWS)).start()
    try:
        yield process
    finally:
        process.stop()


#: The unlimited producer writes 300-1,000 MB/s for 15 s. Unbounded, that is several GB of
#: dirty page cache, and once the kernel's dirty limit is reached every writer is held to the
#: disk's speed: the "alone" rates then fell run by run (577, 369, 285 MB/s) and the rate
#: beside the limited producer measured 0.59 of them. Small segments with retention by size
#: unlink the data before it is written back, so the rates compare the broker, not the disk.
BOUNDED_LOG = {"retention.bytes": str(256 << 20), "segment.bytes": str(32 << 20)}


def create(bootstrap: str, *topics: str, config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = [NewTopic(t, 1, 1, config=config or {}) for t in topics]
    for future in admin.create_topics(new).values():
        future.result(timeout=30)


def test_limited_producer_gets_its_quota_and_the_other_keeps_its_throughput(
        throttle_broker: BrokerProcess, topic_name: str) -> None:
    b = throttle_broker.bootstrap
    create(b, topic_name + "-free", topic_name + "-limited", config=BOUNDED_LOG)
    ok(run_moldau("quota", "set", "--client-id", "limited", "--add-config",
                  f"producer_byte_rate={QUOTA}", bootstrap=b))
    alone = produce_for(b, topic_name + "-free", "free", 5.0)
    assert not alone.errors and alone.acked_bytes > 0
    baseline = alone.acked_bytes / 5.0

    results: dict[str, Throughput] = {}

    def run(name: str, seconds: float, warm_up: float = 0.0) -> None:
        results[name] = produce_for(b, f"{topic_name}-{name}", name, seconds, warm_up)

    limited = threading.Thread(target=run, args=("limited", MEASURE_S, WARM_UP_S))
    limited.start()
    time.sleep(WARM_UP_S + 5.0)
    run("free", 5.0)  # the unlimited producer beside the limited one
    limited.join(timeout=MEASURE_S + WARM_UP_S + 60)
    assert not limited.is_alive()
    # Alone again afterwards: the baseline is the mean of both (the machine is shared).
    after = produce_for(b, topic_name + "-free", "free", 5.0)
    baseline = (baseline + after.acked_bytes / 5.0) / 2
    limited_rate = results["limited"].acked_bytes / MEASURE_S
    free_rate = results["free"].acked_bytes / 5.0
    print(f"limited {limited_rate / QUOTA:.3f} of its quota; unlimited {free_rate / 1e6:.1f} "
          f"MB/s beside it, {baseline / 1e6:.1f} MB/s alone; max throttle "
          f"{results['limited'].max_throttle_ms} ms")
    assert not results["limited"].errors and not results["free"].errors
    assert 0.9 * QUOTA <= limited_rate <= 1.1 * QUOTA, limited_rate / QUOTA
    assert results["limited"].max_throttle_ms > 0
    assert results["free"].max_throttle_ms == 0
    # Not starved. The rate beside the limited producer was 0.98-1.2x the alone rate on the
    # idle machine and 0.78-1.1x with a cluster and Spark tests running beside this one;
    # `make test`'s other worker shares the two cores, hence the margin.
    assert free_rate >= 0.6 * baseline, (free_rate, baseline)


def test_consumer_over_its_quota_is_throttled(make_broker: Any, topic_name: str) -> None:
    """Over 2 windows of 1 s: a first burst of at most one window's worth, then the rate."""
    broker = make_broker(WINDOWS)
    b = broker.bootstrap
    create(b, topic_name)
    producer = Producer({"bootstrap.servers": b, "linger.ms": 5})
    for _ in range(1200):  # 12 MB
        while True:
            try:
                producer.produce(topic_name, VALUE)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(60) == 0
    quota = 512 * 1024
    ok(run_moldau("quota", "set", "--client-id", "slow-reader", "--add-config",
                  f"consumer_byte_rate={quota}", bootstrap=b))
    stats = Throughput()
    consumer = Consumer({"bootstrap.servers": b, "group.id": topic_name,
                         "client.id": "slow-reader", "auto.offset.reset": "earliest",
                         "statistics.interval.ms": 1000, "stats_cb": stats.stats})
    consumer.subscribe([topic_name])
    received, started, first = 0, 0.0, None
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (first is None or
                                               time.monotonic() - first < 8.0):
            msg = consumer.poll(0.2)
            if msg is None or msg.error() is not None:
                continue
            if first is None:
                first = time.monotonic()
            received += len(msg.value())
        started = first or time.monotonic()
        elapsed = time.monotonic() - started
        # let the statistics of the last interval arrive
        for _ in range(10):
            consumer.poll(0.2)
    finally:
        consumer.close()
    rate = received / elapsed
    print(f"consumer {rate / quota:.2f} of its quota, max throttle {stats.max_throttle_ms} ms")
    assert received < 12 * 1024 * 1024  # it did not get everything
    assert 0.5 * quota <= rate <= 1.5 * quota
    assert stats.max_throttle_ms > 0


def test_acks0_producer_over_its_quota_is_muted(throttle_broker: BrokerProcess,
                                                topic_name: str) -> None:
    """acks=0 has no response to carry a throttle time: the broker stops reading from the
    connection instead (as Kafka mutes the channel), so TCP holds the producer back."""
    b = throttle_broker.bootstrap
    create(b, topic_name)
    quota = 256 * 1024
    ok(run_moldau("quota", "set", "--client-id", "fire-and-forget", "--add-config",
                  f"producer_byte_rate={quota}", bootstrap=b))
    producer = Producer({"bootstrap.servers": b, "client.id": "fire-and-forget", "acks": 0,
                         "linger.ms": 5, "queue.buffering.max.kbytes": 4096})
    seconds = 6.0
    started = time.monotonic()
    sent = 0
    while time.monotonic() - started < seconds and sent < 200_000:
        try:
            producer.produce(topic_name, VALUE)
            sent += 1
            producer.poll(0)
        except BufferError:
            producer.poll(0.05)
    elapsed = time.monotonic() - started
    producer.purge()  # what is still queued in the client is not the broker's doing
    producer.flush(5)
    consumer = Consumer({"bootstrap.servers": b, "group.id": topic_name})
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic_name, 0), timeout=10)
    finally:
        consumer.close()
    written = high * len(VALUE)
    print(f"acks=0: {written / elapsed / quota:.2f} of its quota over {elapsed:.1f} s "
          f"({sent} records queued by the client)")
    assert written > 0
    # The rate allows about quota x (elapsed + 2 windows); what was already in the socket's
    # buffers and the connection's frame queue when it was muted comes on top (a few MB).
    # Unmuted, the same loop wrote over 1,000x the quota (about 2 GB in 5.5 s).
    assert written <= quota * (elapsed + 2) + 4 * 1024 * 1024, written / quota
