"""Idempotent producers on three brokers (RF 3): retries are written once, failover included.

Real brokers on a real ZooKeeper, a real confluent-kafka idempotent producer. The test-only
hook ``moldau.test.drop.produce.response.after.append`` makes a leader close the producer's
connection after its records were appended and replicated instead of answering. With
``moldau.test.stop.after.dropped.response`` the leader also stops itself right then, the
test kills it (-9), and the producer's retry goes to the new leader, which must recognise
the batch from the state it built while following. Before the broker checked sequence
numbers each of these retries was written a second time.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic

from tests.conftest import MakeBroker
from tests.helpers.broker_process import BrokerProcess
from tests.integration.clients import DeliveryLog, producer, read_partition, watermarks

from .helpers import eventually
from .test_cluster_brokers import SESSION_TIMEOUT_MS, describe

DROP = "moldau.test.drop.produce.response.after.append"


def _start(make_broker: MakeBroker, zk_connect: str, extra: dict[int, tuple[str, ...]]
           ) -> list[BrokerProcess]:
    return [make_broker(f"node.id={i}", f"zookeeper.connect={zk_connect}",
                        f"zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}",
                        *extra.get(i, ())) for i in (1, 2, 3)]


def _create(broker: BrokerProcess, topic: str, assignment: list[list[int]]) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = admin.create_topics([NewTopic(topic, len(assignment),
                                            replica_assignment=assignment,
                                            config={"min.insync.replicas": "2"})],
                                  operation_timeout=10)
    futures[topic].result(timeout=30)
    eventually(lambda: all(len(p[2]) == 3 for p in describe(broker, topic)[2].values())
               and len(describe(broker, topic)[2]) == len(assignment), what="full ISRs")


def _produce(bootstrap: str, topic: str, partitions: int, per_partition: int,
             reports: DeliveryLog, pause_s: float = 0.0) -> Any:
    p = producer(bootstrap, **{"enable.idempotence": True, "acks": "all", "linger.ms": 2,
                               "batch.num.messages": 10, "message.timeout.ms": 90_000,
                               "request.timeout.ms": 10_000})
    for i in range(per_partition):
        for part in range(partitions):
            p.produce(topic, value=f"{part}-{i}".encode(), partition=part, on_delivery=reports)
        p.poll(0)
        if pause_s:
            time.sleep(pause_s)
    assert p.flush(120) == 0
    return p


def _assert_exactly_once_in_order(bootstrap: str, topic: str, partitions: int,
                                  per_partition: int) -> None:
    for part in range(partitions):
        low, high = watermarks(bootstrap, topic, part)
        got = [m.value().decode() for m in read_partition(bootstrap, topic, part, low,
                                                          high - low, timeout=60)]
        assert got == [f"{part}-{i}" for i in range(per_partition)], \
            f"partition {part}: {len(got)} records, {len(got) - len(set(got))} duplicated"


def test_dropped_answers_on_rf3_leaders_are_written_once(
        make_broker: MakeBroker, zk_connect: str, topic_name: str) -> None:
    brokers = _start(make_broker, zk_connect, {i: (f"{DROP}=3",) for i in (1, 2, 3)})
    _create(brokers[0], topic_name, [[1, 2, 3], [2, 3, 1], [3, 1, 2]])
    reports = DeliveryLog()
    _produce(brokers[0].bootstrap, topic_name, 3, 100, reports)
    assert not reports.failed, reports.failed[:3]
    dropped = sum(b.stderr_text().count("test fault hook: dropping") for b in brokers)
    print(f"{dropped} answers dropped")
    assert dropped >= 6
    _assert_exactly_once_in_order(brokers[0].bootstrap, topic_name, 3, 100)


def test_a_retry_after_failover_is_deduplicated_by_the_new_leader(
        make_broker: MakeBroker, zk_connect: str, topic_name: str) -> None:
    # Broker 1 leads (first in the assignment); it appends and replicates a batch, drops the
    # answer, stops itself and is killed: the retry can only go to broker 2 or 3.
    brokers = _start(make_broker, zk_connect, {1: (f"{DROP}=20",
                                                   "moldau.test.stop.after.dropped.response=true")})
    _create(brokers[1], topic_name, [[1, 2, 3]])
    assert describe(brokers[1], topic_name)[2][0][0] == 1
    reports = DeliveryLog()
    done = threading.Event()

    def run() -> None:
        try:
            _produce(brokers[1].bootstrap, topic_name, 1, 200, reports, pause_s=0.01)
        finally:
            done.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    eventually(lambda: "stopping the broker (SIGSTOP)" in brokers[0].stderr_text(),
               timeout=60, what="the leader dropping an answer and stopping")
    brokers[0].kill9()
    eventually(lambda: describe(brokers[1], topic_name)[2][0][0] in (2, 3), timeout=60,
               what="a new leader")
    thread.join(150)
    assert done.is_set()
    assert not reports.failed, reports.failed[:3]
    new_leader = brokers[describe(brokers[1], topic_name)[2][0][0] - 1]
    _assert_exactly_once_in_order(new_leader.bootstrap, topic_name, 1, 200)
