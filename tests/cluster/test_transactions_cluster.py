"""The transaction coordinator on three real brokers, with confluent-kafka's transactional
Producer: markers reach partition leaders on other brokers (WriteTxnMarkers), and a
transaction carries on through a kill -9 of its coordinator's broker.

``__transaction_state`` has one partition here, so the coordinator is that partition's leader.
Its writes are acks=all (RF 3, min ISR 2): the broker that takes over after the kill -9 loads
the Ongoing transaction from its replica, and the producer's commit, retried against it,
completes the transaction with every record exactly once.
"""

from __future__ import annotations

import re
import time

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition
from kio.schema.list_transactions.v2.request import ListTransactionsRequest

from tests.conftest import MakeBroker
from tests.helpers.broker_process import BrokerProcess
from tests.integration.clients import consumer
from tests.integration.wire import WireClient

from .helpers import eventually
from .test_cluster_brokers import create_topic, describe, start_cluster

TXN_TOPIC = "__transaction_state"
PARTITIONS = 3


def _read(bootstrap: str, topic: str, isolation: str, timeout: float = 60) -> list[str]:
    c = consumer(bootstrap, **{"isolation.level": isolation, "enable.partition.eof": True})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        values: list[str] = []
        ended: set[int] = set()
        deadline = time.monotonic() + timeout
        while len(ended) < PARTITIONS:
            assert time.monotonic() < deadline, f"read {len(values)} values, no end"
            for msg in c.consume(num_messages=1000, timeout=0.2):
                err = msg.error()
                if err is not None and err.code() == KafkaError._PARTITION_EOF:
                    ended.add(msg.partition())
                elif err is not None and not err.retriable():
                    raise KafkaException(err)
                elif err is None:
                    values.append(msg.value().decode())
        return values
    finally:
        c.close()


def _in_sync(brokers: list[BrokerProcess], topic: str, partitions: int) -> bool:
    parts = describe(brokers[0], topic)[2]
    return len(parts) == partitions and all(len(isr) == 3 for _, _, isr in parts.values())


def test_transactions_across_brokers_and_coordinator_failover(
        make_broker: MakeBroker, zk_connect: str, topic_name: str) -> None:
    brokers = start_cluster(make_broker, zk_connect, 3, "default.replication.factor=3",
                            "min.insync.replicas=2", "transaction.state.log.num.partitions=1")
    eventually(lambda: describe(brokers[0], topic_name)[0] == [1, 2, 3], what="three brokers")
    create_topic(brokers[0], topic_name, PARTITIONS, rf=3)
    bootstrap = ",".join(b.bootstrap for b in brokers)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": topic_name + "-t",
                         "transaction.timeout.ms": 60_000, "linger.ms": 2})
    producer.init_transactions(60)
    eventually(lambda: _in_sync(brokers, TXN_TOPIC, 1), timeout=60,
               what=f"{TXN_TOPIC} in sync on three brokers")
    leaders = {leader for leader, _, _ in describe(brokers[0], topic_name)[2].values()}
    coordinator = describe(brokers[0], TXN_TOPIC)[2][0][0]
    assert leaders - {coordinator}, "some partition must be led by another broker"

    # Markers to every leader, local and remote: commit visible, abort hidden.
    producer.begin_transaction()
    for i in range(30):
        producer.produce(topic_name, value=f"c{i}".encode(), partition=i % PARTITIONS)
    producer.commit_transaction(60)
    producer.begin_transaction()
    for i in range(9):
        producer.produce(topic_name, value=f"a{i}".encode(), partition=i % PARTITIONS)
    producer.flush(60)
    producer.abort_transaction(60)
    assert sorted(_read(bootstrap, topic_name, "read_committed")) == \
        sorted(f"c{i}" for i in range(30))

    # kill -9 the coordinator's broker in the middle of a transaction.
    eventually(lambda: _in_sync(brokers, topic_name, PARTITIONS), timeout=60,
               what="the topic in sync on three brokers")
    producer.begin_transaction()
    for i in range(30):
        producer.produce(topic_name, value=f"f{i}".encode(), partition=i % PARTITIONS)
    producer.flush(60)
    brokers[coordinator - 1].kill9()
    for i in range(30, 60):
        producer.produce(topic_name, value=f"f{i}".encode(), partition=i % PARTITIONS)
    producer.commit_transaction(120)
    survivors = [b for b in brokers if b is not brokers[coordinator - 1]]
    new_coordinator = describe(survivors[0], TXN_TOPIC)[2][0][0]
    assert new_coordinator not in (coordinator, -1)
    expected = [f"c{i}" for i in range(30)] + [f"f{i}" for i in range(60)]
    alive = ",".join(b.bootstrap for b in survivors)
    got = _read(alive, topic_name, "read_committed")
    assert sorted(got) == sorted(expected), "lost or duplicated committed records"
    # The next transaction works against the new coordinator.
    producer.begin_transaction()
    producer.produce(topic_name, value=b"after", partition=0)
    producer.commit_transaction(60)
    assert "after" in _read(alive, topic_name, "read_committed")


def _txn_state(broker: BrokerProcess, tid: str) -> str | None:
    """The state ``broker`` reports for ``tid`` (None: not coordinated there)."""
    with WireClient.to(broker.bootstrap) as client:
        response = client.request(ListTransactionsRequest(
            transactional_id_pattern=re.escape(tid)))
    states = [t.transaction_state for t in response.transaction_states]
    return states[0] if states else None


def _txn_leader(brokers: list[BrokerProcess]) -> int:
    return int(describe(brokers[0], TXN_TOPIC)[2][0][0])


@pytest.mark.long_faults
@pytest.mark.timeout(600)
def test_markers_resume_on_the_next_coordinator(make_broker: MakeBroker, zk_connect: str,
                                                topic_name: str) -> None:
    """kill -9 of the coordinator between PrepareCommit and CompleteCommit: the broker that
    takes over ``__transaction_state`` replays the PrepareCommit and writes the markers.

    Every broker starts with ``moldau.test.hold.transaction.markers``, so the commit stops in
    PrepareCommit on the first coordinator, and again on the second (read_committed sees
    nothing meanwhile). The other two are restarted without the hook; killing the second
    coordinator hands the partition to one of them, which completes the commit."""
    hold = "moldau.test.hold.transaction.markers=true"
    brokers = start_cluster(make_broker, zk_connect, 3, "default.replication.factor=3",
                            "min.insync.replicas=2", "transaction.state.log.num.partitions=1",
                            hold)
    eventually(lambda: describe(brokers[0], topic_name)[0] == [1, 2, 3], what="three brokers")
    create_topic(brokers[0], topic_name, PARTITIONS, rf=3)
    tid = topic_name + "-t"
    producer = Producer({"bootstrap.servers": ",".join(b.bootstrap for b in brokers),
                         "transactional.id": tid, "transaction.timeout.ms": 300_000,
                         "linger.ms": 2})
    producer.init_transactions(60)
    eventually(lambda: _in_sync(brokers, TXN_TOPIC, 1), timeout=60, what="state in sync")
    eventually(lambda: _in_sync(brokers, topic_name, PARTITIONS), timeout=60,
               what="topic in sync")
    producer.begin_transaction()
    for i in range(30):
        producer.produce(topic_name, value=f"v{i}".encode(), partition=i % PARTITIONS)
    producer.commit_transaction(60)  # answered once PrepareCommit is on the ISR
    first = _txn_leader(brokers)
    assert _txn_state(brokers[first - 1], tid) == "PrepareCommit"
    brokers[first - 1].kill9()
    alive = [b for b in brokers if b is not brokers[first - 1]]
    eventually(lambda: _txn_leader(alive) not in (first, -1), timeout=60,
               what="a second coordinator")
    second = _txn_leader(alive)
    eventually(lambda: _txn_state(brokers[second - 1], tid) == "PrepareCommit", timeout=30,
               what="the second coordinator loaded the PrepareCommit")
    assert _read(",".join(b.bootstrap for b in alive), topic_name, "read_committed") == []
    third = next(i for i in (1, 2, 3) if i not in (first, second))
    for node in (first, third):
        broker = brokers[node - 1]
        broker.stop()
        broker.overrides.remove(hold)
        broker.start()
        eventually(lambda: _in_sync(brokers, TXN_TOPIC, 1), timeout=90,
                   what="state in sync again")
    brokers[second - 1].kill9()
    survivors = [brokers[first - 1], brokers[third - 1]]
    eventually(lambda: _txn_leader(survivors) in (first, third), timeout=60,
               what="a third coordinator")
    last = brokers[_txn_leader(survivors) - 1]
    eventually(lambda: _txn_state(last, tid) == "CompleteCommit", timeout=60,
               what="the commit completed")
    assert "resuming COMMIT markers on 3 partitions" in last.stderr_text()
    got = _read(",".join(b.bootstrap for b in survivors), topic_name, "read_committed")
    assert sorted(got) == sorted(f"v{i}" for i in range(30))
