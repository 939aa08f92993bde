"""A group consumer in its own process, for tests that must ``kill -9`` a member.

Run as ``python group_worker.py '<json>'`` with bootstrap, topic, group and extra consumer
config. It subscribes, and for every record it processes it commits that record's offset + 1
synchronously before polling again: the correct way to commit by hand. Everything it sees
is printed as one JSON object per line, flushed at once, so the test knows every commit that
succeeded even if the process is killed right after:

- ``{"event": "assign" | "revoke" | "lost", "partitions": [...]}`` from the rebalance callbacks
  (the whole assignment with eager assignors, the increment with cooperative-sticky);
- ``{"event": "committed" | "commit_failed", "partition": p, "offset": o}`` per record;
- ``{"event": "closed"}`` after a clean close (SIGTERM), which sends LeaveGroup.
"""

from __future__ import annotations

import json
import signal
import sys
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition


def emit(**event: Any) -> None:
    print(json.dumps(event), flush=True)


def main() -> None:
    settings = json.loads(sys.argv[1])
    stopping = False

    def stop(_signum: int, _frame: Any) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    consumer = Consumer({
        "bootstrap.servers": settings["bootstrap"],
        "group.id": settings["group"],
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 500,
        "fetch.wait.max.ms": 100,
        **settings.get("config", {}),
    })

    def callback(name: str) -> Any:
        def report(_consumer: Consumer, partitions: list[TopicPartition]) -> None:
            emit(event=name, partitions=sorted(p.partition for p in partitions))
        return report

    consumer.subscribe([settings["topic"]], on_assign=callback("assign"),
                       on_revoke=callback("revoke"), on_lost=callback("lost"))
    emit(event="started")
    while not stopping:
        msg = consumer.poll(0.1)
        if msg is None:
            continue
        if msg.error() is not None:
            emit(event="error", error=str(msg.error()))
            continue
        where = {"partition": msg.partition(), "offset": msg.offset()}
        try:
            consumer.commit(message=msg, asynchronous=False)
        except KafkaException as exc:
            emit(event="commit_failed", error=str(exc), **where)
        else:
            emit(event="committed", **where)
    consumer.close()
    emit(event="closed")


if __name__ == "__main__":
    main()
