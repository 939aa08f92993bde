"""The group coordinator on three real brokers: what it answers is on every in-sync replica,
so a consumer group carries on through a kill -9 of its coordinator.

Kafka's coordinator appends its records to ``__consumer_offsets`` with acks=all and answers
only once the ISR has them: a SyncGroup assignment (with the group's members), a static
member's new id, commits, DeleteGroups' tombstones. A paused follower of the offsets partition
(still in the ISR) therefore holds a SyncGroup and a DeleteGroups back until it resumes; and a
consumer that commits every record keeps consuming through the coordinator's kill -9 without
losing a commit or reading again anything it had committed.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.conftest import MakeBroker
from tests.helpers.broker_process import BrokerProcess

from .helpers import eventually
from .test_cluster_brokers import create_topic, describe, start_cluster

OFFSETS = "__consumer_offsets"
RECORDS = 240
PARTITIONS = 2


def _cluster(make_broker: MakeBroker, zk_connect: str, topic: str,
             *extra: str) -> list[BrokerProcess]:
    brokers = start_cluster(make_broker, zk_connect, 3, "default.replication.factor=3",
                            "offsets.topic.num.partitions=1", "min.insync.replicas=2", *extra)
    eventually(lambda: describe(brokers[0], topic)[0] == [1, 2, 3], what="three brokers")
    create_topic(brokers[0], topic, PARTITIONS, rf=3)
    producer = Producer({"bootstrap.servers": brokers[0].bootstrap, "acks": "all"})
    for i in range(RECORDS):
        producer.produce(topic, value=b"%d" % i, partition=i % PARTITIONS)
    assert producer.flush(30) == 0
    # __consumer_offsets exists, in sync on all three, before the test starts.
    warm = Consumer({"bootstrap.servers": brokers[0].bootstrap, "group.id": topic + "-warm"})
    warm.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)
    warm.close()
    eventually(lambda: len(describe(brokers[0], OFFSETS)[2].get(0, (-1, (), ()))[2]) == 3,
               what=f"{OFFSETS} in sync on three brokers")
    return brokers


def _consumer(bootstrap: str, group: str, protocol: str) -> Consumer:
    config = {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
              "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100}
    if protocol == "consumer":
        config["group.protocol"] = "consumer"
    else:
        # Longer than the failover takes: the member's session outlives the dead coordinator.
        config.update({"session.timeout.ms": 30000, "heartbeat.interval.ms": 1000})
    return Consumer(config)


def test_sync_group_and_delete_groups_wait_for_the_isr(make_broker: MakeBroker, zk_connect: str,
                                                        topic_name: str) -> None:
    # The paused follower stays in the ISR for the whole test: it neither lags long enough
    # nor loses its ZooKeeper session (the controller would then drop it from every ISR).
    brokers = _cluster(make_broker, zk_connect, topic_name, "replica.lag.time.max.ms=60000",
                       "zookeeper.session.timeout.ms=60000", "offsets.commit.timeout.ms=60000")
    leader, replicas, _ = describe(brokers[0], OFFSETS)[2][0]
    follower = next(r for r in replicas if r != leader)
    bootstrap = brokers[leader - 1].bootstrap
    group = topic_name + "-g"
    consumer = _consumer(bootstrap, group, "classic")
    brokers[follower - 1].pause()
    try:
        consumer.subscribe([topic_name])
        deadline = time.monotonic() + 4
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            assert msg is None or msg.error() is not None, \
                "assigned before the ISR had the group's assignment"
        assert consumer.assignment() == []
        brokers[follower - 1].resume()
        deadline = time.monotonic() + 30
        msg = None
        while time.monotonic() < deadline and (msg is None or msg.error() is not None):
            msg = consumer.poll(0.2)
        assert msg is not None and msg.error() is None
    finally:
        brokers[follower - 1].resume()
    consumer.close()
    # DeleteGroups is answered once its tombstones are on every replica in the ISR.
    admin = AdminClient({"bootstrap.servers": bootstrap})
    eventually(lambda: not admin.describe_consumer_groups([group])[group].result(10).members,
               what="the group empty")
    brokers[follower - 1].pause()
    try:
        future = admin.delete_consumer_groups([group], request_timeout=30)[group]
        time.sleep(3)
        assert not future.done(), "DeleteGroups answered before the ISR had the tombstones"
        brokers[follower - 1].resume()
        future.result(timeout=30)
    finally:
        brokers[follower - 1].resume()


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_group_consumes_through_a_coordinator_kill9(make_broker: MakeBroker, zk_connect: str,
                                                    topic_name: str, protocol: str) -> None:
    brokers = _cluster(make_broker, zk_connect, topic_name)
    coordinator = describe(brokers[0], OFFSETS)[2][0][0]
    bootstrap = ",".join(b.bootstrap for b in brokers)
    group = topic_name + "-g"
    consumer = _consumer(bootstrap, group, protocol)
    consumer.subscribe([topic_name])
    seen: dict[int, set[int]] = {p: set() for p in range(PARTITIONS)}
    #: Per partition, the offset the group committed last (the next one to read).
    committed = dict.fromkeys(range(PARTITIONS), 0)
    member_before = None
    failed_commits = 0
    killed_at = None
    deadline = time.monotonic() + 90
    while sum(map(len, seen.values())) < RECORDS and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is None or msg.error() is not None:
            continue
        p, offset = msg.partition(), msg.offset()
        assert offset >= committed[p], (
            f"partition {p} offset {offset} read again after offset {committed[p]} was "
            f"committed")
        seen[p].add(offset)
        try:
            consumer.commit(message=msg, asynchronous=False)
            committed[p] = offset + 1
        except KafkaException:
            failed_commits += 1  # during the failover; the next commit covers this one
        if killed_at is None and sum(map(len, seen.values())) >= RECORDS // 3:
            member_before = consumer.memberid()
            brokers[coordinator - 1].kill9()
            killed_at = time.monotonic()
    assert killed_at is not None
    assert {p: len(s) for p, s in seen.items()} == dict.fromkeys(range(PARTITIONS),
                                                                 RECORDS // PARTITIONS)
    print(f"{protocol}: every record read {time.monotonic() - killed_at:.1f} s after the "
          f"kill -9, {failed_commits} commits failed meanwhile")
    # The last commits made it: the group's committed offsets are at the end everywhere.
    final = consumer.committed([TopicPartition(topic_name, p) for p in range(PARTITIONS)],
                               timeout=30)
    assert [tp.offset for tp in final] == [RECORDS // PARTITIONS] * PARTITIONS
    survivors = [b for i, b in enumerate(brokers, 1) if i != coordinator]
    assert describe(survivors[0], OFFSETS)[2][0][0] not in (coordinator, -1)
    if protocol == "classic":
        # The new coordinator loaded the group (members and assignment) from the replicated
        # log: the member carried on in its generation without having to join again.
        assert consumer.memberid() == member_before
        admin = AdminClient({"bootstrap.servers": survivors[0].bootstrap})
        described = admin.describe_consumer_groups([group])[group].result(timeout=30)
        assert [m.member_id for m in described.members] == [member_before]
        assigned = described.members[0].assignment.topic_partitions
        assert sorted(tp.partition for tp in assigned) == list(range(PARTITIONS))
    consumer.close()
