"""Replication on three real brokers: followers copy their leader, acks=all waits for the ISR,
and a kill -9 of a leader loses nothing that was acknowledged."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from tests.conftest import MakeBroker

from .helpers import eventually
from .test_cluster_brokers import create_topic, describe, start_cluster


def read_all(bootstrap: str, topic: str, partitions: int, expected: int,
             timeout: float = 60.0) -> dict[int, list[bytes]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    deadline = time.monotonic() + timeout
    while sum(map(len, got.values())) < expected and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got[msg.partition()].append(msg.value())
    consumer.close()
    return got


def test_rf3_acks_all_survives_leader_kill9(make_broker: MakeBroker, zk_connect: str,
                                           topic_name: str) -> None:
    brokers = start_cluster(make_broker, zk_connect, 3, "min.insync.replicas=2")
    eventually(lambda: describe(brokers[0], topic_name)[0] == [1, 2, 3], what="three brokers")
    create_topic(brokers[0], topic_name, 1, rf=3)
    eventually(lambda: len(describe(brokers[0], topic_name)[2].get(0, (-1, (), ()))[2]) == 3,
               what="ISR of three")
    leader = describe(brokers[0], topic_name)[2][0][0]
    bootstrap = ",".join(b.bootstrap for b in brokers)
    acked: list[bytes] = []
    failed: list[bytes] = []

    def report(err: KafkaError | None, msg: object) -> None:
        (failed if err is not None else acked).append(msg.value())  # type: ignore[attr-defined]

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 5,
                         "message.timeout.ms": 60000})
    for i in range(2000):
        producer.produce(topic_name, value=b"v%05d" % i, partition=0, on_delivery=report)
        if i == 1000:
            producer.flush(30)
            brokers[leader - 1].kill9()
            killed_at = time.monotonic()
        producer.poll(0)
    assert producer.flush(90) == 0
    print(f"acked {len(acked)}, failed {len(failed)}, "
          f"{time.monotonic() - killed_at:.1f} s from kill -9 to the last ack")
    survivors = [b for i, b in enumerate(brokers, 1) if i != leader]
    new_leader = describe(survivors[0], topic_name)[2][0][0]
    assert new_leader not in (leader, -1)
    got = read_all(survivors[0].bootstrap, topic_name, 1, len(acked))[0]
    assert len(got) == len(set(got)), "duplicates"
    assert set(acked) <= set(got), f"lost {len(set(acked) - set(got))} acknowledged records"
    assert got == sorted(got), "out of order"
    # The killed broker comes back, truncates what it must, catches up and rejoins the ISR.
    brokers[leader - 1].restart()
    eventually(lambda: sorted(describe(survivors[0], topic_name)[2][0][2]) == [1, 2, 3],
               timeout=60, what="the restarted broker back in the ISR")


def test_paused_follower_leaves_the_isr_and_min_isr_refuses(
        make_broker: MakeBroker, zk_connect: str, topic_name: str) -> None:
    brokers = start_cluster(make_broker, zk_connect, 3, "replica.lag.time.max.ms=2000")
    eventually(lambda: describe(brokers[0], topic_name)[0] == [1, 2, 3], what="three brokers")
    strict = topic_name + "-strict"
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": brokers[0].bootstrap})
    futures = admin.create_topics([
        NewTopic(topic_name, 1, 3, config={"min.insync.replicas": "2"}),
        NewTopic(strict, 1, 3, config={"min.insync.replicas": "3"})])
    for f in futures.values():
        f.result(timeout=30)
    for name in (topic_name, strict):
        eventually(lambda n=name: len(describe(brokers[0], n)[2].get(0, (-1, (), ()))[2]) == 3,
                   what="ISR of three")
    leader, replicas, _ = describe(brokers[0], topic_name)[2][0]
    follower = next(r for r in replicas if r != leader)
    # Produce goes through the leader; the paused follower is the one to leave the ISR.
    if describe(brokers[0], strict)[2][0][0] == follower:
        follower = next(r for r in replicas if r not in (leader, follower))
    bootstrap = brokers[leader - 1].bootstrap
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                         "message.timeout.ms": 30000})
    producer.produce(topic_name, b"before")
    assert producer.flush(30) == 0
    brokers[follower - 1].pause()
    try:
        started = time.monotonic()
        errors: list[KafkaError | None] = []
        producer.produce(topic_name, b"during", on_delivery=lambda e, m: errors.append(e))
        assert producer.flush(30) == 0 and errors == [None]
        print(f"acks=all with a paused follower completed after "
              f"{time.monotonic() - started:.1f} s")
        eventually(lambda: follower not in describe(brokers[leader - 1], topic_name)[2][0][2],
                   timeout=30, what="the paused follower out of the ISR")
        eventually(lambda: follower not in describe(brokers[leader - 1], strict)[2][0][2],
                   timeout=30, what="the paused follower out of the strict topic's ISR")
        strict_producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                    "message.timeout.ms": 3000, "retries": 0})
        strict_errors: list[KafkaError | None] = []
        strict_producer.produce(strict, b"x", on_delivery=lambda e, m: strict_errors.append(e))
        strict_producer.flush(30)
        assert strict_errors and strict_errors[0] is not None
        assert strict_errors[0].code() == KafkaError.NOT_ENOUGH_REPLICAS, strict_errors
    finally:
        brokers[follower - 1].resume()
    eventually(lambda: follower in describe(brokers[leader - 1], topic_name)[2][0][2],
               timeout=30, what="the follower back in the ISR")


def test_committed_offsets_survive_a_coordinator_kill9(make_broker: MakeBroker, zk_connect: str,
                                                       topic_name: str) -> None:
    brokers = start_cluster(make_broker, zk_connect, 3, "default.replication.factor=3",
                            "offsets.topic.num.partitions=1", "min.insync.replicas=2")
    eventually(lambda: describe(brokers[0], topic_name)[0] == [1, 2, 3], what="three brokers")
    create_topic(brokers[0], topic_name, 1, rf=3)
    bootstrap = ",".join(b.bootstrap for b in brokers)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(20):
        producer.produce(topic_name, value=b"%d" % i, partition=0)
    assert producer.flush(30) == 0
    group = topic_name + "-g"
    config = {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
              "auto.offset.reset": "earliest", "session.timeout.ms": 6000}
    consumer = Consumer(config)
    consumer.subscribe([topic_name])
    seen = 0
    deadline = time.monotonic() + 60
    while seen < 10 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            seen += 1
            if seen == 10:
                consumer.commit(message=msg, asynchronous=False)
    consumer.close()
    eventually(lambda: len(describe(brokers[0], "__consumer_offsets")[2].get(
        0, (-1, (), ()))[2]) == 3, what="__consumer_offsets in sync on three brokers")
    coordinator = describe(brokers[0], "__consumer_offsets")[2][0][0]
    brokers[coordinator - 1].kill9()
    survivors = [b for i, b in enumerate(brokers, 1) if i != coordinator]
    eventually(lambda: describe(survivors[0], "__consumer_offsets")[2][0][0] not in (
        coordinator, -1), timeout=30, what="a new coordinator")
    # A new member of the group starts where the group committed: at offset 10.
    consumer = Consumer({**config, "bootstrap.servers": survivors[0].bootstrap})
    consumer.subscribe([topic_name])
    first = None
    deadline = time.monotonic() + 60
    while first is None and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            first = msg.offset()
    consumer.close()
    assert first == 10


def test_unclean_leader_election_only_when_enabled(make_broker: MakeBroker, zk_connect: str,
                                                   topic_name: str) -> None:
    """Replicas [1, 2]: 2 dies and leaves the ISR, then 1 dies; when 2 comes back only the
    topic with unclean.leader.election.enable lets the out-of-sync replica lead."""
    from confluent_kafka.admin import AdminClient, NewTopic

    brokers = start_cluster(make_broker, zk_connect, 3)
    eventually(lambda: describe(brokers[0], topic_name)[0] == [1, 2, 3], what="three brokers")
    clean, unclean = topic_name + "-clean", topic_name + "-unclean"
    admin = AdminClient({"bootstrap.servers": brokers[2].bootstrap})
    futures = admin.create_topics([
        NewTopic(clean, 1, replica_assignment=[[1, 2]]),
        NewTopic(unclean, 1, replica_assignment=[[1, 2]],
                 config={"unclean.leader.election.enable": "true"})])
    for f in futures.values():
        f.result(timeout=30)
    for name in (clean, unclean):
        eventually(lambda n=name: describe(brokers[2], n)[2].get(0, (-1, (), ()))[::2] == (
            1, (1, 2)), what="leader 1 with ISR [1, 2]")
    brokers[1].kill9()  # broker 2
    for name in (clean, unclean):
        eventually(lambda n=name: describe(brokers[2], n)[2][0][2] == (1,), timeout=30,
                   what="broker 2 out of the ISR")
    brokers[0].kill9()  # broker 1: no in-sync replica is left
    for name in (clean, unclean):
        eventually(lambda n=name: describe(brokers[2], n)[2][0][0] == -1, timeout=30,
                   what="no leader")
    brokers[1].restart()
    eventually(lambda: describe(brokers[2], unclean)[2][0][:1] == (2,), timeout=30,
               what="broker 2 leads the unclean topic")
    assert describe(brokers[2], unclean)[2][0][2] == (2,)
    time.sleep(2)  # the controller had every chance to elect 2 for the clean topic too
    assert describe(brokers[2], clean)[2][0][0] == -1
