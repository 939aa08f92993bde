"""Deletes that stay deleted on every replica (three real brokers on a real ZooKeeper).

- Compaction: a tombstone stays until every assigned replica has fetched past it, so a
  follower that was away longer than ``delete.retention.ms`` gets the delete before the
  tombstone goes, and does not serve the deleted value once it leads (Kafka, which removes
  tombstones on a timer on each replica, does).
- DeleteRecords: the leader answers once every in-sync replica's log start reached the offset
  (REQUEST_TIMED_OUT while a paused follower is still in the ISR), so whoever leads next does
  not serve the deleted records either.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as Tp
from confluent_kafka.admin import AdminClient, NewTopic

from tests.conftest import MakeBroker
from tests.helpers import BrokerProcess

from .helpers import eventually
from .test_cluster_brokers import describe, start_cluster

pytestmark = pytest.mark.timeout(180)

Entry = tuple[int, bytes | None, bytes | None]
KEY = b"deleted-key"
DELETE_RETENTION_MS = 2_000


def read_from_start(broker: BrokerProcess, topic: str, timeout: float = 30.0) -> list[Entry]:
    """Every record a consumer gets from the log start up to the end: (offset, key, value)."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused",
                         "enable.auto.commit": False, "enable.partition.eof": True,
                         "fetch.wait.max.ms": 100})
    got: list[Entry] = []
    try:
        consumer.assign([Tp(topic, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + timeout
        while True:
            assert time.monotonic() < deadline, f"no end of partition after {got[-3:]}"
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    return got
                if err.retriable():
                    continue
                raise KafkaException(err)
            got.append((msg.offset(), msg.key(), msg.value()))
    finally:
        consumer.close()


def of_key(entries: list[Entry], key: bytes = KEY) -> list[bytes | None]:
    return [v for _, k, v in entries if k == key]


def wait_for(check: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while not (result := check()):
        assert time.monotonic() < deadline, f"timed out after {timeout:.0f} s waiting for {what}"
        time.sleep(0.3)
    return result


def test_a_follower_away_past_delete_retention_does_not_bring_a_deleted_key_back(
        make_broker: MakeBroker, zk_connect: str, topic_name: str) -> None:
    brokers = start_cluster(make_broker, zk_connect, 3, "log.cleaner.backoff.ms=100")
    leader, other, away = brokers  # replicas [1, 2, 3]: 1 leads, 3 goes away
    eventually(lambda: describe(leader, topic_name)[0] == [1, 2, 3], what="three brokers")
    admin = AdminClient({"bootstrap.servers": leader.bootstrap})
    admin.create_topics([NewTopic(topic_name, 1, replica_assignment=[[1, 2, 3]], config={
        "cleanup.policy": "compact", "segment.ms": "200", "segment.bytes": "1024",
        "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": str(DELETE_RETENTION_MS),
        "min.insync.replicas": "2"})])[topic_name].result(timeout=30)
    eventually(lambda: describe(leader, topic_name)[2].get(0, (-1, (), ()))[::2] == (
        1, (1, 2, 3)), what="leader 1 with ISR [1, 2, 3]")
    producer = Producer({"bootstrap.servers": leader.bootstrap, "acks": "all",
                         "linger.ms": 0, "message.timeout.ms": 30000})

    def write(key: bytes, value: bytes | None) -> None:
        errors: list[KafkaError | None] = []
        producer.produce(topic_name, key=key, value=value, partition=0,
                         on_delivery=lambda err, _msg: errors.append(err))
        assert producer.flush(30) == 0 and errors == [None], errors

    # acks=all with the ISR [1, 2, 3]: broker 3 has the value when it goes away.
    write(KEY, b"old value")
    away.kill9()
    eventually(lambda: describe(leader, topic_name)[2][0][2] == (1, 2), timeout=30,
               what="broker 3 out of the ISR")
    write(KEY, None)
    deleted_at = time.monotonic()
    # Fillers roll segments (segment.ms) and keep the cleaner busy, well past
    # delete.retention.ms, while broker 3 is away.
    while time.monotonic() < deleted_at + DELETE_RETENTION_MS / 1000 + 3:
        write(b"filler", b"x" * 100)
        time.sleep(0.25)
    on_leader = wait_for(lambda: (e := read_from_start(leader, topic_name)) and
                         of_key(e) != [b"old value", None] and e, 30,
                         "the cleaner to remove the old value on the leader")
    # Checked at the end, so that old code fails first where the issue says it does.
    kept_while_away = of_key(on_leader)

    away.restart()
    eventually(lambda: describe(leader, topic_name)[2][0][2] == (1, 2, 3), timeout=60,
               what="broker 3 back in the ISR")
    # Every replica has fetched past the tombstone: now it may go, and it does.
    wait_for(lambda: of_key(read_from_start(leader, topic_name)) == [], 30,
             "the tombstone to go once every replica has it")
    write(b"filler", b"last")
    eventually(lambda: describe(leader, topic_name)[2][0][2] == (1, 2, 3), timeout=30,
               what="ISR [1, 2, 3]")
    leader.kill9()
    other.kill9()
    eventually(lambda: describe(away, topic_name)[2].get(0, (-1,))[0] == 3, timeout=60,
               what="broker 3 leading")
    values = of_key(read_from_start(away, topic_name))
    assert not values or values[-1] is None, (
        f"broker 3 serves the deleted key again after failover: {values}")
    assert kept_while_away == [None], (
        f"the leader removed the tombstone while broker 3 had not fetched it: "
        f"{kept_while_away}")


def earliest_and_first(broker: BrokerProcess, topic: str) -> tuple[int, int]:
    """(ListOffsets earliest, offset of the first record a consumer from the beginning gets),
    asked of ``broker`` alone."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    try:
        low, _ = consumer.get_watermark_offsets(Tp(topic, 0), timeout=10)
        consumer.assign([Tp(topic, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + 30
        while True:
            assert time.monotonic() < deadline, "nothing to read from the beginning"
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                return low, msg.offset()
    finally:
        consumer.close()


def three_replicas_with_100_records(make_broker: MakeBroker, zk_connect: str,
                                    topic: str) -> tuple[list[BrokerProcess], AdminClient]:
    """Three brokers, ``topic`` with one partition led by broker 1 and all three in its ISR,
    and 100 records acknowledged by all of them."""
    brokers = start_cluster(make_broker, zk_connect, 3)
    eventually(lambda: describe(brokers[0], topic)[0] == [1, 2, 3], what="three brokers")
    admin = AdminClient({"bootstrap.servers": brokers[0].bootstrap})
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[[1, 2, 3]])]
                        )[topic].result(timeout=30)
    eventually(lambda: describe(brokers[0], topic)[2].get(0, (-1, (), ()))[::2] == (
        1, (1, 2, 3)), what="leader 1 with ISR [1, 2, 3]")
    producer = Producer({"bootstrap.servers": brokers[0].bootstrap, "acks": "all",
                         "linger.ms": 5})
    for i in range(100):
        producer.produce(topic, value=b"%d" % i, partition=0)
    assert producer.flush(30) == 0
    return brokers, admin


def test_delete_records_reaches_every_in_sync_replica_before_it_answers(
        make_broker: MakeBroker, zk_connect: str, topic_name: str) -> None:
    brokers, admin = three_replicas_with_100_records(make_broker, zk_connect, topic_name)
    started = time.monotonic()
    [deleted] = admin.delete_records([Tp(topic_name, 0, 60)],
                                     operation_timeout=30).values()
    assert deleted.result(timeout=60).low_watermark == 60, "the low watermark of the ISR"
    print(f"DeleteRecords answered after {time.monotonic() - started:.2f} s")
    # Whoever leads next has deleted them too: kill the leader at once, then the next one.
    for killed, next_leader in ((brokers[0], 2), (brokers[1], 3)):
        killed.kill9()
        survivor = brokers[next_leader - 1]
        eventually(lambda s=survivor, n=next_leader: describe(s, topic_name)[2].get(
            0, (-1,))[0] == n, timeout=60, what=f"broker {next_leader} leading")
        assert earliest_and_first(survivor, topic_name) == (60, 60), (
            f"broker {next_leader} serves deleted records after failover")


def test_delete_records_waits_for_a_paused_in_sync_follower(
        make_broker: MakeBroker, zk_connect: str, topic_name: str) -> None:
    brokers, admin = three_replicas_with_100_records(make_broker, zk_connect, topic_name)
    brokers[2].pause()
    try:
        # Broker 3 is still in the ISR (its session has not expired) and cannot fetch.
        [timed_out] = admin.delete_records([Tp(topic_name, 0, 40)],
                                           operation_timeout=1).values()
        with pytest.raises(KafkaException) as refused:
            timed_out.result(timeout=30)
        assert refused.value.args[0].code() == KafkaError.REQUEST_TIMED_OUT
        eventually(lambda: describe(brokers[0], topic_name)[2][0][2] == (1, 2), timeout=30,
                   what="broker 3 out of the ISR")
        # Out of the ISR it no longer holds the answer back.
        [deleted] = admin.delete_records([Tp(topic_name, 0, 40)],
                                         operation_timeout=30).values()
        assert deleted.result(timeout=60).low_watermark == 40
    finally:
        brokers[2].resume()
    # Back, it takes the leader's log start with its fetches and rejoins the ISR; made leader,
    # it does not serve the deleted records.
    eventually(lambda: describe(brokers[0], topic_name)[2][0][2] == (1, 2, 3), timeout=60,
               what="broker 3 back in the ISR")
    brokers[0].kill9()
    brokers[1].kill9()
    eventually(lambda: describe(brokers[2], topic_name)[2].get(0, (-1,))[0] == 3, timeout=60,
               what="broker 3 leading")
    assert earliest_and_first(brokers[2], topic_name) == (40, 40)
