"""A group consumer in its own process, for tests that must ``kill -9`` a member.

Run as ``python group_worker.py '<json>'`` with bootstrap, topic, group and extra consumer
config. It subscribes, and for every record it processes it commits that record's offset + 1
synchronously before polling again: the correct way to commit by hand. A commit refused
during a rebalance (REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION) is retried while the partition
is still assigned, because a cooperative-sticky member keeps its partitions through the
rebalance and nobody else will commit those records; a later successful commit of the same
partition covers it as well. Everything it sees is printed as one JSON object per line, flushed
at once, so the test knows every commit that succeeded even if the process is killed right
after:

- ``{"event": "assign" | "revoke" | "lost", "partitions": [...]}`` from the rebalance callbacks
  (the whole assignment with eager assignors, the increment with cooperative-sticky);
- ``{"event": "committed" | "commit_failed", "partition": p, "offset": o}`` per record (a
  record whose commit failed gets its ``committed`` event when a retry or a later commit of
  its partition succeeds);
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

    # Records processed whose commit failed, by partition, still to be committed.
    uncommitted: dict[int, list[int]] = {}

    def callback(name: str) -> Any:
        def report(_consumer: Consumer, partitions: list[TopicPartition]) -> None:
            if name != "assign":  # the next owner reads these records again and commits them
                for p in partitions:
                    uncommitted.pop(p.partition, None)
            emit(event=name, partitions=sorted(p.partition for p in partitions))
        return report

    def commit(partition: int, offset: int) -> None:
        """Commit ``offset`` + 1; on success report it and every earlier record it covers."""
        try:
            consumer.commit(offsets=[TopicPartition(topic, partition, offset + 1)],
                            asynchronous=False)
        except KafkaException as exc:
            emit(event="commit_failed", error=str(exc), partition=partition, offset=offset)
            pending = uncommitted.setdefault(partition, [])
            if offset not in pending:
                pending.append(offset)
            return
        for earlier in uncommitted.pop(partition, []):
            if earlier != offset:
                emit(event="committed", partition=partition, offset=earlier)
        emit(event="committed", partition=partition, offset=offset)

    topic = settings["topic"]
    consumer.subscribe([topic], on_assign=callback("assign"),
                       on_revoke=callback("revoke"), on_lost=callback("lost"))
    emit(event="started")
    while not stopping:
        msg = consumer.poll(0.1)
        if msg is None:
            # Idle: retry refused commits of partitions this member still owns. Nothing after
            # the latest of them was processed, so committing it never moves an offset back.
            owned = {p.partition for p in consumer.assignment()}
            for partition in [p for p in uncommitted if p in owned]:
                commit(partition, max(uncommitted[partition]))
            continue
        if msg.error() is not None:
            emit(event="error", error=str(msg.error()))
            continue
        commit(msg.partition(), msg.offset())
    consumer.close()
    emit(event="closed")


if __name__ == "__main__":
    main()
