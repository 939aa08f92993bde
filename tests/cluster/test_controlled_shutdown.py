"""Controlled shutdown on three real brokers and a real ZooKeeper, with real clients.

A SIGTERMed broker asks the controller (ControlledShutdown) to move its leadership away and
exits only then: under continuous acks=all produce (RF 3, min.insync.replicas=2, idempotent
producers) every acknowledged record is read back exactly once and in order, the partition
states in ZooKeeper name a new leader while the broker is still registered, and the produce
stall is measured. One cluster serves the whole module; every test leaves it with three
running brokers and full ISRs.
"""

from __future__ import annotations

import itertools
import os
import signal
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from kazoo.client import KazooClient

from moldau.cluster import znodes
from moldau.protocol.apis import CONTROLLED_SHUTDOWN
from moldau.protocol.schemas import request_schema
from tests.conftest import TEST_BROKER_OVERRIDES
from tests.helpers.broker_process import BrokerProcess
from tests.helpers.names import unique_topic_name
from tests.helpers.zookeeper import ZooKeeperServer
from tests.integration.wire import WireClient, frame

from .helpers import eventually
from .test_cluster_brokers import SESSION_TIMEOUT_MS, create_topic, describe
from .test_replication import read_all

PARTITIONS = 3


class Cluster:
    def __init__(self, brokers: list[BrokerProcess], zk: KazooClient) -> None:
        self.brokers = brokers
        self.zk = zk

    def broker(self, node_id: int) -> BrokerProcess:
        return self.brokers[node_id - 1]

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers)

    def running(self) -> list[BrokerProcess]:
        return [b for b in self.brokers if b.is_running()]

    def controller(self) -> int:
        data, _ = self.zk.get(znodes.CONTROLLER)
        return znodes.decode_controller(data)

    def state(self, topic: str, partition: int) -> znodes.PartitionState:
        data, stat = self.zk.get(znodes.partition_state_path(topic, partition))
        return znodes.decode_partition_state(data, stat.version)

    def broker_epoch(self, node_id: int) -> int:
        stat = self.zk.exists(znodes.broker_path(node_id))
        assert stat is not None
        return int(stat.czxid)

    def full_isrs(self, topic: str) -> bool:
        try:
            return all(sorted(self.state(topic, p).isr) == [1, 2, 3] for p in range(PARTITIONS))
        except Exception:
            return False

    def wait_healthy(self, topic: str) -> None:
        """All three registered, seen by every broker, every ISR full again."""
        eventually(lambda: all(describe(b, topic)[0] == [1, 2, 3] for b in self.brokers),
                   timeout=60, what="three live brokers on every broker")
        eventually(lambda: self.full_isrs(topic), timeout=60, what="full ISRs")


@pytest.fixture(scope="module")
def cluster(zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[Cluster]:
    connect = zookeeper.connect_string("/" + unique_topic_name("moldau-controlled-shutdown"))
    root: Path = tmp_path_factory.mktemp("controlled-shutdown")
    brokers = [BrokerProcess(root / f"broker-{i}", overrides=(
        *TEST_BROKER_OVERRIDES, f"node.id={i}", f"zookeeper.connect={connect}",
        f"zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}", "min.insync.replicas=2"))
        for i in (1, 2, 3)]
    zk = KazooClient(hosts=connect, timeout=10)
    try:
        for b in brokers:
            b.start()
        zk.start(timeout=30)
        yield Cluster(brokers, zk)
    finally:
        zk.stop()
        zk.close()
        for b in brokers:
            b.stop()


def new_topic(cluster: Cluster, name: str) -> None:
    create_topic(cluster.brokers[0], name, PARTITIONS, rf=3)
    cluster.wait_healthy(name)


class ContinuousProducer:
    """An idempotent acks=all producer sending one record every ``interval`` s round-robin
    over the partitions, on a thread, for at most ``duration`` s; records every ack's time."""

    def __init__(self, bootstrap: str, topic: str, interval: float = 0.004,
                 duration: float = 60.0) -> None:
        self.topic = topic
        self.interval = interval
        self.duration = duration
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                  "enable.idempotence": True, "linger.ms": 2,
                                  "message.timeout.ms": 60000})
        self.acks: dict[int, list[tuple[float, bytes]]] = {p: [] for p in range(PARTITIONS)}
        self.failed: list[tuple[int, bytes, str]] = []
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _report(self, err: KafkaError | None, msg: Any) -> None:
        if err is not None:
            self.failed.append((msg.partition(), msg.value(), str(err)))
        else:
            self.acks[msg.partition()].append((time.monotonic(), msg.value()))

    def _run(self) -> None:
        deadline = time.monotonic() + self.duration
        seq = [0] * PARTITIONS
        while not self._stop.is_set() and time.monotonic() < deadline:
            p = self.sent % PARTITIONS
            self.producer.produce(self.topic, value=b"p%d-%06d" % (p, seq[p]), partition=p,
                                  on_delivery=self._report)
            seq[p] += 1
            self.sent += 1
            self.producer.poll(self.interval)

    def __enter__(self) -> ContinuousProducer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        assert self.producer.flush(90) == 0

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)

    def wait_acked(self, count: int, timeout: float = 30.0) -> None:
        eventually(lambda: sum(map(len, self.acks.values())) >= count, timeout=timeout,
                   what=f"{count} acknowledged records")

    def stall_after(self, t0: float, partition: int) -> tuple[float, float]:
        """(longest gap between two acks of ``partition`` around ``t0``, time from ``t0`` to
        the first ack of a record sent after it)."""
        times = [t for t, _ in self.acks[partition] if t >= t0 - 1.0]
        gaps = [b - a for a, b in itertools.pairwise(times)]
        first_after = next((t for t in times if t > t0), float("inf"))
        return max(gaps, default=float("inf")), first_after - t0


def check_everything_read_back(cluster: Cluster, topic: str, producer: ContinuousProducer
                               ) -> None:
    assert not producer.failed, producer.failed[:5]
    total = sum(map(len, producer.acks.values()))
    assert total == producer.sent
    got = read_all(cluster.bootstrap, topic, PARTITIONS, total)
    for p in range(PARTITIONS):
        acked = [v for _, v in producer.acks[p]]
        assert got[p] == sorted(acked), (p, len(got[p]), len(acked))
        assert len(set(got[p])) == len(got[p])


class ZkEvents:
    """The order in which one ZooKeeper client sees a partition's state and a broker's
    registration change (ZooKeeper delivers a client's watch events in commit order)."""

    def __init__(self, zk: KazooClient, topic: str, partition: int, node_id: int) -> None:
        self.events: list[tuple[str, object, float]] = []
        self._lock = threading.Lock()

        def on_state(data: bytes | None, _stat: object) -> None:
            if data is not None:
                self._add("leader", znodes.decode_partition_state(data, 0).leader)

        def on_registration(data: bytes | None, _stat: object) -> None:
            self._add("registered", data is not None)

        zk.DataWatch(znodes.partition_state_path(topic, partition), on_state)
        zk.DataWatch(znodes.broker_path(node_id), on_registration)

    def _add(self, kind: str, value: object) -> None:
        with self._lock:
            self.events.append((kind, value, time.monotonic()))

    def _find(self, kind: str, predicate: Any) -> int | None:
        with self._lock:
            return next((i for i, (k, v, _) in enumerate(self.events)
                         if k == kind and predicate(v)), None)

    def first(self, kind: str, predicate: Any, timeout: float = 10.0) -> int:
        """Index of the first event of ``kind`` whose value satisfies ``predicate``, waiting
        for it: kazoo delivers watch events on its own thread, possibly after the test has
        already read the new state with a plain get."""
        eventually(lambda: self._find(kind, predicate) is not None, timeout=timeout,
                   what=f"a {kind} watch event")
        found = self._find(kind, predicate)
        assert found is not None
        return found

    def time_of(self, index: int) -> float:
        return self.events[index][2]


def sigterm(broker: BrokerProcess) -> float:
    assert broker.pid is not None
    os.kill(broker.pid, signal.SIGTERM)
    return time.monotonic()


def wait_exit(broker: BrokerProcess, timeout: float = 60.0) -> float:
    eventually(lambda: not broker.is_running(), timeout=timeout, what="the broker to exit")
    return time.monotonic()


def test_sigterm_of_a_leader_moves_leadership_first_and_loses_nothing(
        cluster: Cluster) -> None:
    topic = unique_topic_name("controlled-shutdown-leader")
    new_topic(cluster, topic)
    controller = cluster.controller()
    partition, victim = next((p, s.leader) for p in range(PARTITIONS)
                             if (s := cluster.state(topic, p)).leader != controller)
    before = cluster.state(topic, partition)
    events = ZkEvents(cluster.zk, topic, partition, victim)
    with ContinuousProducer(cluster.bootstrap, topic) as producer:
        producer.wait_acked(600)
        t0 = sigterm(cluster.broker(victim))
        exited = wait_exit(cluster.broker(victim))
        producer.wait_acked(sum(map(len, producer.acks.values())) + 600)
        producer.stop()
    moved = events.first("leader", lambda leader: leader != victim)
    deregistered = events.first("registered", lambda present: not present)
    after = cluster.state(topic, partition)
    gap, first_ack = producer.stall_after(t0, partition)
    print(f"controlled shutdown of leader {victim}: leadership moved "
          f"{events.time_of(moved) - t0:.3f} s after SIGTERM, process exited after "
          f"{exited - t0:.3f} s; produce stall on partition {partition}: longest ack gap "
          f"{gap:.3f} s, first ack after SIGTERM {first_ack:.3f} s")
    # The leadership moved while the broker was still registered: before it went away.
    assert moved < deregistered, events.events
    assert after.leader != victim and victim not in after.isr
    assert after.leader_epoch == before.leader_epoch + 1
    log = cluster.broker(victim).stderr_text()
    assert "controlled shutdown: leadership moved away" in log, log[-3000:]
    assert "Traceback" not in log
    assert gap < 10.0
    check_everything_read_back(cluster, topic, producer)
    # Follower partitions lost it from their ISR at the same leader epoch.
    for p in range(PARTITIONS):
        if p != partition:
            assert victim not in cluster.state(topic, p).isr
    # A bounce: it comes back, catches up and rejoins every ISR.
    cluster.broker(victim).start()
    cluster.wait_healthy(topic)
    assert "Traceback" not in cluster.broker(victim).stderr_text()


def test_sigterm_of_the_controller_elects_another_and_loses_nothing(cluster: Cluster) -> None:
    topic = unique_topic_name("controlled-shutdown-controller")
    new_topic(cluster, topic)
    controller = cluster.controller()
    epoch_before = znodes.decode_controller_epoch(cluster.zk.get(znodes.CONTROLLER_EPOCH)[0])
    led = [p for p in range(PARTITIONS) if cluster.state(topic, p).leader == controller]
    with ContinuousProducer(cluster.bootstrap, topic) as producer:
        producer.wait_acked(300)
        t0 = sigterm(cluster.broker(controller))
        wait_exit(cluster.broker(controller))

        def another_controller() -> bool:
            try:
                return cluster.controller() != controller
            except Exception:
                return False

        eventually(another_controller, timeout=30, what="a new controller")
        elected = time.monotonic()
        producer.wait_acked(sum(map(len, producer.acks.values())) + 300)
        producer.stop()
    epoch_after = znodes.decode_controller_epoch(cluster.zk.get(znodes.CONTROLLER_EPOCH)[0])
    print(f"controller {controller} SIGTERMed: controller {cluster.controller()} (epoch "
          f"{epoch_after}) {elected - t0:.3f} s later")
    assert epoch_after > epoch_before
    for p in led:
        assert cluster.state(topic, p).leader != controller
    log = cluster.broker(controller).stderr_text()
    assert "resigned as controller" in log, log[-3000:]
    assert "Traceback" not in log
    check_everything_read_back(cluster, topic, producer)
    cluster.broker(controller).start()
    cluster.wait_healthy(topic)


def test_controlled_shutdown_disabled_keeps_the_old_behaviour(cluster: Cluster) -> None:
    victim = next(i for i in (1, 2, 3) if i != cluster.controller())
    broker = cluster.broker(victim)
    original = list(broker.overrides)
    broker.overrides = [*original, "controlled.shutdown.enable=false"]
    topic = unique_topic_name("controlled-shutdown-disabled")
    try:
        broker.restart()
        new_topic(cluster, topic)  # created now, so that the victim leads one partition
        partition = next(p for p in range(PARTITIONS)
                         if cluster.state(topic, p).leader == victim)
        events = ZkEvents(cluster.zk, topic, partition, victim)
        eventually(lambda: len(events.events) >= 2, what="both watches set")
        sigterm(broker)
        wait_exit(broker)
        eventually(lambda: cluster.state(topic, partition).leader not in (victim, -1),
                   timeout=30, what="a failover")
        moved = events.first("leader", lambda leader: leader != victim)
        deregistered = events.first("registered", lambda present: not present)
        # The old way: leadership moves only once the broker's registration is gone.
        assert deregistered < moved, events.events
        assert "controlled shutdown" not in broker.stderr_text()
    finally:
        broker.overrides = original
        if not broker.is_running():
            broker.start()
    cluster.wait_healthy(topic)


def _v2_request(broker_id: int, broker_epoch: int, correlation: int) -> bytes:
    """ControlledShutdown v2 by hand (request header v1, then broker id and epoch)."""
    client = b"raw-test"
    head = struct.pack(">hhih", CONTROLLED_SHUTDOWN, 2, correlation, len(client)) + client
    return frame(head + struct.pack(">iq", broker_id, broker_epoch))


def _v2_answer(client: WireClient, correlation: int) -> tuple[int, int]:
    """(error code, number of remaining partitions) of a v2 response."""
    payload = client.read_frame()
    got, code, count = struct.unpack_from(">ihi", payload, 0)
    assert got == correlation
    return code, count


def test_controlled_shutdown_errors(cluster: Cluster) -> None:
    controller = cluster.controller()
    other = next(i for i in (1, 2, 3) if i != controller)
    epoch = cluster.broker_epoch(other)
    not_controller, stale_broker_epoch, broker_not_available = 41, 77, 8
    with WireClient.to(cluster.broker(other).bootstrap) as client:
        client.send_raw(_v2_request(other, epoch, 1))
        assert _v2_answer(client, 1) == (not_controller, 0)
    with WireClient.to(cluster.broker(controller).bootstrap) as client:
        client.send_raw(_v2_request(other, epoch - 1, 2))
        assert _v2_answer(client, 2) == (stale_broker_epoch, 0)
        client.send_raw(_v2_request(99, -1, 3))
        assert _v2_answer(client, 3) == (broker_not_available, 0)
        # The flexible version through kio's writer and reader.
        v3 = request_schema(CONTROLLED_SHUTDOWN, 3)
        answer = client.request(v3(broker_id=other, broker_epoch=0))
        assert int(answer.error_code) == stale_broker_epoch
        assert answer.remaining_partitions == ()
    # Nothing moved: every broker still registered and serving.
    assert all(b.is_running() for b in cluster.brokers)
    assert cluster.broker_epoch(other) == epoch


def test_a_lone_broker_advertises_it_and_answers_for_itself(broker: BrokerProcess) -> None:
    from kio.schema.api_versions.v3.request import ApiVersionsRequest

    with WireClient.to(broker.bootstrap) as client:
        versions = client.request(ApiVersionsRequest(client_software_name="t",
                                                     client_software_version="1"))
        advertised = {int(k.api_key): (int(k.min_version), int(k.max_version))
                      for k in versions.api_keys}
        assert advertised[CONTROLLED_SHUTDOWN] == (1, 3)
        client.send_raw(_v2_request(0, -1, 7))  # its own id (node.id 0): nothing to move
        assert _v2_answer(client, 7) == (0, 0)
        client.send_raw(_v2_request(5, -1, 8))
        assert _v2_answer(client, 8) == (8, 0)  # BROKER_NOT_AVAILABLE
    assert broker.is_running()
