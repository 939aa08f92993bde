"""KIP-848 consumer groups with real librdkafka consumers (``group.protocol=consumer``).

That protocol forbids ``session.timeout.ms`` and ``partition.assignment.strategy`` on the
client: the broker owns both. The broker here hands out a short heartbeat interval so that
reconciliation (which advances on heartbeats) is quick.
"""

from __future__ import annotations

import time
import uuid

from confluent_kafka import Consumer, ConsumerGroupType, TopicPartition
from confluent_kafka.admin import AdminClient

from .clients import consume, create_topic, produce_all, producer

PARTITIONS = 4
FAST = ("group.consumer.heartbeat.interval.ms=300",)


def _consumer(bootstrap: str, group: str) -> Consumer:
    return Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "group.protocol": "consumer",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "fetch.wait.max.ms": 100,
    })


def _wait_assignment(consumers: list[Consumer], predicate, seen: dict[str, int] | None = None,
                     timeout: float = 30.0) -> None:
    """Poll every consumer until ``predicate`` holds for their assignments, counting the
    records polled meanwhile in ``seen``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for c in consumers:
            msg = c.poll(0.05)
            if msg is not None and msg.error() is None and seen is not None:
                seen[msg.value().decode()] = seen.get(msg.value().decode(), 0) + 1
        if predicate([{(tp.topic, tp.partition) for tp in c.assignment()} for c in consumers]):
            return
    raise AssertionError(f"assignments {[c.assignment() for c in consumers]} never settled")


def test_two_consumers_share_then_one_takes_over(make_broker, topic_name):
    broker = make_broker(*FAST)
    create_topic(broker.bootstrap, topic_name, partitions=PARTITIONS)
    p = producer(broker.bootstrap)
    produce_all(p, topic_name, ({"value": f"v{i}".encode(), "partition": i % PARTITIONS}
                                for i in range(400)))
    group = f"kip848-{uuid.uuid4().hex[:8]}"
    a, b = _consumer(broker.bootstrap, group), _consumer(broker.bootstrap, group)
    a.subscribe([topic_name])
    b.subscribe([topic_name])
    everything = {(topic_name, i) for i in range(PARTITIONS)}

    def shared(assignments: list[set[tuple[str, int]]]) -> bool:
        return (all(len(x) == 2 for x in assignments)
                and assignments[0] | assignments[1] == everything)

    # Between them they read every record (a partition a consumer revoked before committing
    # is read again by its new owner, so duplicates are allowed).
    seen: dict[str, int] = {}
    _wait_assignment([a, b], shared, seen)
    assert not (set(a.assignment()) & set(b.assignment()))
    deadline = time.monotonic() + 30
    while len(seen) < 400 and time.monotonic() < deadline:
        for c in (a, b):
            for msg in c.consume(num_messages=500, timeout=0.1):
                if msg.error() is None:
                    value = msg.value().decode()
                    seen[value] = seen.get(value, 0) + 1
    assert len(seen) == 400

    b.close()  # leaves the group (member epoch -1)
    _wait_assignment([a], lambda xs: xs[0] == everything)
    a.close()


def test_committed_offsets_resume_in_a_new_consumer_after_restart(make_broker, topic_name):
    broker = make_broker(*FAST)
    create_topic(broker.bootstrap, topic_name, partitions=PARTITIONS)
    p = producer(broker.bootstrap)
    produce_all(p, topic_name, ({"value": f"v{i}".encode(), "partition": i % PARTITIONS}
                                for i in range(200)))
    group = f"kip848-{uuid.uuid4().hex[:8]}"
    first = _consumer(broker.bootstrap, group)
    first.subscribe([topic_name])
    got = consume(first, 200, timeout=30)
    first.commit(asynchronous=False)
    committed = first.committed([TopicPartition(topic_name, i) for i in range(PARTITIONS)])
    assert sorted(tp.offset for tp in committed) == [50] * PARTITIONS
    first.close()
    assert len(got) == 200
    # Membership is in memory only; the offsets are in __consumer_offsets and survive.
    broker.restart()

    produce_all(p, topic_name, ({"value": b"late", "partition": i} for i in range(PARTITIONS)))
    second = _consumer(broker.bootstrap, group)
    second.subscribe([topic_name])
    late = consume(second, PARTITIONS, timeout=30)
    assert {m.value() for m in late} == {b"late"}
    second.close()


def test_admin_lists_and_describes_consumer_groups(make_broker, topic_name):
    broker = make_broker(*FAST)
    create_topic(broker.bootstrap, topic_name, partitions=PARTITIONS)
    group = f"kip848-{uuid.uuid4().hex[:8]}"
    c = _consumer(broker.bootstrap, group)
    c.subscribe([topic_name])
    _wait_assignment([c], lambda xs: len(xs[0]) == PARTITIONS)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})

    def listed(types: set[ConsumerGroupType]) -> dict[str, object]:
        result = admin.list_consumer_groups(types=types).result(timeout=15)
        return {g.group_id: g for g in result.valid}

    assert listed({ConsumerGroupType.CONSUMER})[group].type == ConsumerGroupType.CONSUMER
    assert group not in listed({ConsumerGroupType.CLASSIC})
    described = admin.describe_consumer_groups([group])[group].result(timeout=15)
    assert str(described.state).endswith("STABLE")
    assert len(described.members) == 1
    member = described.members[0]
    assert sorted(tp.partition for tp in member.assignment.topic_partitions) == [0, 1, 2, 3]
    c.close()
