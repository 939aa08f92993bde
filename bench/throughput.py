"""Produce/consume throughput and produce-to-ack latency of a moldau broker, as JSON lines.

    python -m bench.throughput [--quick] [--bootstrap HOST:PORT]

Without ``--bootstrap`` a broker is started on a free loopback port in a temporary directory.
Workloads (issue 3): produce 1M x 100 B and 200k x 1 KiB with acks=all, consume them back
without a group, and produce-to-ack latency percentiles at a fixed rate with linger 0.
Every loop is bounded in count and in time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
import uuid
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from .broker_proc import BenchBroker

TIME_LIMIT_S = 120.0


def _create_topic(bootstrap: str, partitions: int) -> str:
    name = f"bench-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    return name


def produce(
    bootstrap: str, topic: str, count: int, size: int, linger_ms: int = 5,
    idempotent: bool = False,
) -> dict[str, Any]:
    producer = Producer({
        "bootstrap.servers": bootstrap, "acks": "all", "linger.ms": linger_ms,
        "batch.size": 1_000_000, "queue.buffering.max.messages": 1_000_000,
        "queue.buffering.max.kbytes": 1_048_576, "enable.idempotence": idempotent,
    })
    payload = os.urandom(size)
    failed = 0

    def on_delivery(err: Any, _msg: Any) -> None:
        nonlocal failed
        if err is not None:
            failed += 1

    start = time.perf_counter()
    deadline = start + TIME_LIMIT_S
    sent = 0
    while sent < count and time.perf_counter() < deadline:
        try:
            producer.produce(topic, payload, on_delivery=on_delivery)
            sent += 1
        except BufferError:
            producer.poll(0.01)
    producer.flush(TIME_LIMIT_S)
    elapsed = time.perf_counter() - start
    return {"workload": "produce", "records": sent, "record_bytes": size, "acks": "all",
            "idempotent": idempotent,
            "seconds": round(elapsed, 3), "records_per_s": round(sent / elapsed),
            "mb_per_s": round(sent * size / elapsed / 1e6, 1), "failed": failed}


def consume(bootstrap: str, topic: str, partitions: int, count: int, size: int,
            isolation: str = "read_committed") -> dict[str, Any]:
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
        "fetch.max.bytes": 52_428_800, "max.partition.fetch.bytes": 1_048_576,
        "isolation.level": isolation,
    })
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    start = time.perf_counter()
    deadline = start + TIME_LIMIT_S
    received = 0
    while received < count and time.perf_counter() < deadline:
        for msg in consumer.consume(10_000, 1.0):
            if msg.error() is None:
                received += 1
    elapsed = time.perf_counter() - start
    consumer.close()
    return {"workload": "consume", "records": received, "record_bytes": size,
            "isolation": isolation,
            "seconds": round(elapsed, 3), "records_per_s": round(received / elapsed),
            "mb_per_s": round(received * size / elapsed / 1e6, 1)}


def ack_latency(bootstrap: str, topic: str, rate: int, seconds: float, *,
                idempotent: bool = False, warm_up: bool = False) -> dict[str, Any]:
    """Produce-to-ack percentiles (ms) of 100 B records sent at ``rate`` with linger 0.

    Latency is librdkafka's own per-message figure (``Message.latency()``: from ``produce()``
    to the broker's acknowledgement), so it does not depend on when this loop polls. Between
    sends the loop sleeps rather than spinning on ``poll``: librdkafka's poll timeout is in
    whole milliseconds, so polling the sub-millisecond gaps at 5,000/s spun a whole core,
    which on a small machine was taken from the brokers being measured. ``warm_up`` sends and
    flushes one record first, so that connections and the producer id are in place before the
    clock starts.
    """
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                         "enable.idempotence": idempotent})
    if warm_up:
        producer.produce(topic, b"warm-up")
        producer.flush(30)
    samples: list[float] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is None:
            latency = msg.latency()
            if latency is not None:
                samples.append(latency)

    total = int(rate * seconds)
    start = time.perf_counter()
    for i in range(total):
        delay = start + i / rate - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        producer.produce(topic, b"x" * 100, on_delivery=on_delivery)
        producer.poll(0)
    producer.flush(30)
    samples.sort()

    def pct(p: float) -> float:
        return round(samples[min(len(samples) - 1, int(p * len(samples)))] * 1000, 3)

    return {"rate": rate, "records": len(samples),
            "p50_ms": pct(0.5), "p99_ms": pct(0.99), "p999_ms": pct(0.999),
            "mean_ms": round(statistics.fmean(samples) * 1000, 3) if samples else None}


def latency(bootstrap: str, rate: int, seconds: float) -> dict[str, Any]:
    """Produce-to-ack latency at a fixed rate with linger 0."""
    topic = _create_topic(bootstrap, 1)
    return {"workload": "produce_latency", **ack_latency(bootstrap, topic, rate, seconds)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bootstrap", help="use a running broker instead of starting one")
    parser.add_argument("--quick", action="store_true", help="10x fewer records")
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--idempotent", action="store_true",
                        help="produce with enable.idempotence (the broker checks sequences)")
    parser.add_argument("--isolation", choices=("read_committed", "read_uncommitted"),
                        default="read_committed",
                        help="the consumer's isolation.level (librdkafka's default: "
                             "read_committed, which reads up to the last stable offset)")
    args = parser.parse_args()
    broker = None if args.bootstrap else BenchBroker()
    bootstrap = args.bootstrap or broker.bootstrap  # type: ignore[union-attr]
    scale = 10 if args.quick else 1
    try:
        for count, size in ((1_000_000 // scale, 100), (200_000 // scale, 1024)):
            topic = _create_topic(bootstrap, args.partitions)
            cpu0 = broker.cpu_seconds() if broker else 0.0
            result = produce(bootstrap, topic, count, size, idempotent=args.idempotent)
            if broker:
                result["broker_cpu_s"] = round(broker.cpu_seconds() - cpu0, 2)
            print(json.dumps(result), flush=True)
            cpu0 = broker.cpu_seconds() if broker else 0.0
            result = consume(bootstrap, topic, args.partitions, result["records"], size,
                             args.isolation)
            if broker:
                result["broker_cpu_s"] = round(broker.cpu_seconds() - cpu0, 2)
            print(json.dumps(result), flush=True)
        print(json.dumps(latency(bootstrap, 5000, 10 / scale)), flush=True)
        if broker:
            rss_mb = round(broker.rss_bytes() / 1e6, 1)
            print(json.dumps({"workload": "broker_rss", "rss_mb": rss_mb}))
    finally:
        if broker:
            broker.close()


if __name__ == "__main__":
    main()
