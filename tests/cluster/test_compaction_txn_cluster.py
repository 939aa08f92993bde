"""Transaction markers on a compacted topic across replicas (three real brokers on a real
ZooKeeper): the leader's cleaner removes an aborted transaction's data, but keeps its ABORT
marker until every assigned replica has fetched past it, however long ago
``delete.retention.ms`` passed. A follower that had the transaction's data when it went away
therefore still gets the marker when it returns. Without it, the follower's copy of the
transaction stays open until that producer's next COMMIT marker closes it, so the aborted
record turns committed there and read_committed consumers read it once that replica leads
(seen with the bound left out of the marker rule). Kafka, which removes markers on a timer on
each replica, has this hole.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as Tp
from confluent_kafka.admin import AdminClient, NewTopic

from tests.conftest import MakeBroker
from tests.helpers import BrokerProcess
from tests.integration.clients import consumer, unique
from tests.integration.test_compaction_txn import markers

from .helpers import eventually
from .test_cluster_brokers import describe, start_cluster
from .test_txn_cluster import txn_coordinator

pytestmark = pytest.mark.timeout(180)

DELETE_RETENTION_MS = 2_000
ABORT = 0


def read(broker: BrokerProcess, topic: str, isolation: str,
         timeout: float = 30) -> list[tuple[bytes, bytes]]:
    """(key, value) of every record ``broker`` serves up to its end (its LSO for
    read_committed)."""
    c = consumer(broker.bootstrap, **{"isolation.level": isolation,
                                      "enable.partition.eof": True})
    got: list[tuple[bytes, bytes]] = []
    try:
        c.assign([Tp(topic, 0, 0)])
        deadline = time.monotonic() + timeout
        while True:
            assert time.monotonic() < deadline, f"no end of partition after {got[-3:]}"
            for msg in c.consume(num_messages=1000, timeout=0.2):
                err = msg.error()
                if err is not None and err.code() == KafkaError._PARTITION_EOF:
                    return got
                if err is not None and not err.retriable():
                    raise KafkaException(err)
                if err is None:
                    got.append((msg.key(), msg.value()))
    finally:
        c.close()


def abort_markers(broker: BrokerProcess, topic: str) -> list[int] | None:
    """Offsets of the ABORT markers in ``broker``'s copy of the partition (None when a
    cleaner swap replaced a file while it was read: ask again)."""
    try:
        return [o for o, kind in markers(broker.data_dir / f"{topic}-0") if kind == ABORT]
    except FileNotFoundError:
        return None


def test_an_abort_marker_stays_until_every_replica_fetched_past_it(
        make_broker: MakeBroker, zk_connect: str, topic_name: str) -> None:
    brokers = start_cluster(make_broker, zk_connect, 3, "log.cleaner.backoff.ms=100",
                            "transaction.state.log.num.partitions=3")
    leader, other, away = brokers  # replicas [1, 2, 3]: 1 leads, 3 goes away
    eventually(lambda: describe(leader, topic_name)[0] == [1, 2, 3], what="three brokers")
    admin = AdminClient({"bootstrap.servers": leader.bootstrap})
    admin.create_topics([NewTopic(topic_name, 1, replica_assignment=[[1, 2, 3]], config={
        "cleanup.policy": "compact", "segment.ms": "200", "segment.bytes": "1024",
        "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": str(DELETE_RETENTION_MS),
        "min.insync.replicas": "2"})])[topic_name].result(timeout=30)
    eventually(lambda: describe(leader, topic_name)[2].get(0, (-1, (), ()))[::2] == (
        1, (1, 2, 3)), what="leader 1 with ISR [1, 2, 3]")
    # A transactional id whose coordinator stays up (not on broker 3).
    tid = next(t for t in (unique("tid") for _ in range(50))
               if txn_coordinator(brokers, t) != 3)
    bootstrap = f"{leader.bootstrap},{other.bootstrap}"
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 0,
                  "transaction.timeout.ms": 60_000})
    p.init_transactions(60)

    def commit(key: bytes, value: bytes) -> None:
        p.begin_transaction()
        p.produce(topic_name, key=key, value=value, partition=0)
        p.commit_transaction(30)

    commit(b"k", b"committed")
    # The transaction's data reaches all three replicas (acks=all, ISR [1, 2, 3]); broker 3
    # goes away before its ABORT marker is written.
    p.begin_transaction()
    p.produce(topic_name, key=b"k", value=b"aborted", partition=0)
    assert p.flush(30) == 0
    away.kill9()
    eventually(lambda: describe(leader, topic_name)[2][0][2] == (1, 2), timeout=30,
               what="broker 3 out of the ISR")
    p.abort_transaction(30)
    aborted_at = time.monotonic()
    # Committed fillers roll segments (segment.ms) and keep the cleaner busy, well past
    # delete.retention.ms, while broker 3 is away.
    n = 0
    while time.monotonic() < aborted_at + DELETE_RETENTION_MS / 1000 + 3:
        commit(b"filler", b"%d" % n)
        n += 1
        time.sleep(0.2)

    def aborted_data_gone() -> bool:
        return (b"k", b"aborted") not in read(leader, topic_name, "read_uncommitted")
    eventually(aborted_data_gone, timeout=30, what="the leader's cleaner to remove the data")
    # Checked at the end, so that the failover below shows the consequence first.
    found: list[list[int]] = []
    eventually(lambda: (m := abort_markers(leader, topic_name)) is not None and
               not found.append(m), what="a readable copy of the leader's log")
    kept_while_away = found[0]

    away.restart()
    eventually(lambda: describe(leader, topic_name)[2][0][2] == (1, 2, 3), timeout=60,
               what="broker 3 back in the ISR")
    # Every replica has fetched past the marker: now it goes (no new writes needed).
    eventually(lambda: abort_markers(leader, topic_name) == [], timeout=30,
               what="the ABORT marker to go once every replica has it")
    leader.kill9()
    other.kill9()
    eventually(lambda: describe(away, topic_name)[2].get(0, (-1,))[0] == 3, timeout=60,
               what="broker 3 leading")
    # Broker 3's copy of the transaction is closed: read_committed reads past it.
    seen: dict[bytes, Any] = dict(read(away, topic_name, "read_committed"))
    assert seen == {b"k": b"committed", b"filler": b"%d" % (n - 1)}
    assert abort_markers(away, topic_name), "broker 3 never got the ABORT marker"
    assert kept_while_away, ("the leader removed the ABORT marker while broker 3 had not "
                             "fetched it")
