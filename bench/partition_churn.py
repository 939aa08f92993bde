"""Creating and deleting many partitions while other clients are being served.

A broker must not stop answering everyone else while one admin request creates or deletes
thousands of partitions. This starts a broker, keeps a well-behaved confluent-kafka producer
(acks=all, linger 0, one small record every 5 ms) and a probe (a raw ApiVersions v0 request
every 2 ms on its own connection) running, then creates one topic with ``--partitions``
partitions and deletes it again. Per phase (idle, create, delete) it prints, as JSON:

- the producer's produce-to-ack latency p50 / p99 / max and how many records were acked;
- the probe's longest round trip, which bounds the longest event-loop pause from outside
  (a tiny request waits exactly as long as the loop is busy with something else);
- how long the CreateTopics and DeleteTopics requests took, and their result.

    PYTHONPATH=src python -m bench.partition_churn --partitions 10000
"""

from __future__ import annotations

import argparse
import json
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from tests.helpers.sockets import read_exact

from .broker_proc import BenchBroker

_API_VERSIONS_V0 = struct.pack(">hhih", 18, 0, 1, 5) + b"probe"


@dataclass
class Samples:
    """(completion time, latency seconds) pairs, appended from client threads; a phase counts
    every answer that arrived during it, so a stall is charged to the phase that caused it."""

    points: list[tuple[float, float]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, sent: float, latency: float) -> None:
        with self.lock:
            self.points.append((sent + latency, latency))

    def between(self, start: float, end: float) -> list[float]:
        with self.lock:
            return sorted(lat for at, lat in self.points if start <= at < end)


def _quantile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    return values[min(len(values) - 1, int(q * len(values)))]


def _ms(value: float | None) -> float | None:
    return None if value is None else round(value * 1000, 2)



def probe(port: int, stop: threading.Event, samples: Samples) -> None:
    """ApiVersions v0 round trips, one at a time, 2 ms apart."""
    frame = struct.pack(">i", len(_API_VERSIONS_V0)) + _API_VERSIONS_V0
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        while not stop.is_set():
            sent = time.monotonic()
            sock.sendall(frame)
            (size,) = struct.unpack(">i", read_exact(sock, 4))
            read_exact(sock, size)
            done = time.monotonic()
            samples.add(sent, done - sent)
            time.sleep(0.002)


def produce(bootstrap: str, topic: str, stop: threading.Event, samples: Samples) -> None:
    """One 100-byte record every 5 ms, acks=all, linger 0; ack latency per record."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                         "enable.idempotence": False})
    value = b"x" * 100

    def on_delivery(err: Any, msg: Any) -> None:
        if err is None:
            sent = float(msg.key())
            samples.add(sent, time.monotonic() - sent)

    next_at = time.monotonic()
    while not stop.is_set():
        now = time.monotonic()
        if now >= next_at:
            producer.produce(topic, value, key=repr(now).encode(), on_delivery=on_delivery)
            next_at += 0.005
        producer.poll(max(0.0, min(0.005, next_at - time.monotonic())))
    producer.flush(30)


def _phase(name: str, start: float, end: float, acks: Samples, probes: Samples,
           extra: dict[str, Any]) -> dict[str, Any]:
    ack = acks.between(start, end)
    rtt = probes.between(start, end)
    return {
        "phase": name,
        "seconds": round(end - start, 2),
        "acked": len(ack),
        "ack_p50_ms": _ms(_quantile(ack, 0.5)),
        "ack_p99_ms": _ms(_quantile(ack, 0.99)),
        "ack_max_ms": _ms(ack[-1] if ack else None),
        "probe_p99_ms": _ms(_quantile(rtt, 0.99)),
        "longest_loop_pause_ms": _ms(rtt[-1] if rtt else None),
        **extra,
    }


def _admin_call(futures: dict[str, Any]) -> str:
    try:
        for future in futures.values():
            future.result()
        return "ok"
    except KafkaException as exc:
        return str(exc.args[0])


def run(partitions: int, settle: float) -> list[dict[str, Any]]:
    broker = BenchBroker("group.initial.rebalance.delay.ms=0")
    stop = threading.Event()
    acks, probes = Samples(), Samples()
    threads: list[threading.Thread] = []
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        _admin_call(admin.create_topics([NewTopic("load", 1)]))
        threads = [
            threading.Thread(target=produce, args=(broker.bootstrap, "load", stop, acks)),
            threading.Thread(target=probe, args=(broker.port, stop, probes)),
        ]
        for thread in threads:
            thread.start()
        time.sleep(settle)
        results = []
        start = time.monotonic()
        time.sleep(settle)
        results.append(_phase("idle", start, time.monotonic(), acks, probes, {}))
        start = time.monotonic()
        outcome = _admin_call(admin.create_topics(
            [NewTopic("churn", partitions)], request_timeout=600, operation_timeout=600))
        results.append(_phase("create", start, time.monotonic(), acks, probes,
                              {"partitions": partitions, "result": outcome,
                               "rss_mb": round(broker.rss_bytes() / 2**20)}))
        time.sleep(settle)
        start = time.monotonic()
        outcome = _admin_call(admin.delete_topics(["churn"], request_timeout=600,
                                                  operation_timeout=600))
        results.append(_phase("delete", start, time.monotonic(), acks, probes,
                              {"partitions": partitions, "result": outcome}))
        time.sleep(settle)
        return results
    finally:
        stop.set()
        for thread in threads:
            thread.join(60)
        broker.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--settle", type=float, default=2.0,
                        help="seconds of steady state before, between and after (default 2)")
    args = parser.parse_args(argv)
    for row in run(args.partitions, args.settle):
        print(json.dumps(row))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
