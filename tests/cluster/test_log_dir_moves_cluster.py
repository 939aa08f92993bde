"""AlterReplicaLogDirs on three real brokers, each with two log dirs.

A follower's replica moves to its broker's other dir while an idempotent acks=all producer
writes (the follower keeps replicating and stays in the ISR; afterwards its segments equal
the leader's); a broker without a replica answers REPLICA_NOT_AVAILABLE and remembers the
dir, so a reassignment that then adds a replica there creates it in that dir (Kafka's
preferred log dir). kafka-python's admin client sends each request to the broker named in
the replica, as Kafka's tools do.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient
from kafka import TopicPartition as KTopicPartition
from kafka.errors import NoError, ReplicaNotAvailableError
from kio.schema.describe_log_dirs.v4.request import DescribeLogDirsRequest

from tests.conftest import TEST_BROKER_OVERRIDES
from tests.helpers.broker_process import BrokerProcess
from tests.helpers.cli import ok, one_line_error, run_moldau
from tests.helpers.names import unique_topic_name
from tests.helpers.zookeeper import ZooKeeperServer
from tests.integration.wire import WireClient

from .helpers import eventually, read_to_end
from .test_cluster_brokers import SESSION_TIMEOUT_MS, describe

pytestmark = pytest.mark.timeout(180)

BROKERS = (1, 2, 3)


class Cluster:
    def __init__(self, root: Path, brokers: dict[int, BrokerProcess]) -> None:
        self.root = root
        self.brokers = brokers
        self.bootstrap = ",".join(b.bootstrap for b in brokers.values())
        self.admin = AdminClient({"bootstrap.servers": self.bootstrap})
        self.kadmin = KafkaAdminClient(bootstrap_servers=self.bootstrap,
                                       request_timeout_ms=30000)

    def dirs(self, broker: int) -> tuple[Path, Path]:
        return self.root / f"broker-{broker}" / "d1", self.root / f"broker-{broker}" / "d2"

    def where(self, broker: int, topic: str) -> set[tuple[Path, bool]]:
        """(log dir, is future) of each replica of partition 0 on ``broker``."""
        with WireClient.to(self.brokers[broker].bootstrap) as c:
            resp = c.request(DescribeLogDirsRequest(topics=None))
        return {(Path(r.log_dir), p.is_future_key) for r in resp.results for t in r.topics
                if t.name == topic for p in t.partitions if p.partition_index == 0}

    def view(self, topic: str) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
        return describe(self.brokers[1], topic)[2].get(0, (-1, (), ()))


@pytest.fixture(scope="module")
def cluster(zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[Cluster]:
    connect = zookeeper.connect_string("/" + unique_topic_name("moldau-logdirs"))
    root = tmp_path_factory.mktemp("logdirs")
    brokers = {i: BrokerProcess(root / f"broker-{i}", overrides=(
        *TEST_BROKER_OVERRIDES, f"node.id={i}", f"zookeeper.connect={connect}",
        f"zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}",
        f"log.dirs={root / f'broker-{i}' / 'd1'},{root / f'broker-{i}' / 'd2'}",
        "replica.alter.log.dirs.io.max.bytes.per.second=1000000")) for i in BROKERS}
    try:
        for b in brokers.values():
            b.start()
        made = Cluster(root, brokers)
        eventually(lambda: describe(brokers[1], "-")[0] == [1, 2, 3], what="three brokers")
        yield made
        made.kadmin.close()
    finally:
        for b in brokers.values():
            b.stop()


def _create(cluster: Cluster, topic: str, replicas: list[int]) -> None:
    futures = cluster.admin.create_topics([NewTopic(
        topic, 1, replica_assignment=[replicas], config={"min.insync.replicas": "2"})])
    futures[topic].result(timeout=30)
    eventually(lambda: sorted(cluster.view(topic)[2]) == sorted(replicas),
               what=f"{topic}: every replica in the ISR")


def test_follower_moves_while_replicating(cluster: Cluster) -> None:
    topic = unique_topic_name("fmove")
    _create(cluster, topic, [1, 2, 3])
    leader = cluster.view(topic)[0]
    follower = next(b for b in BROKERS if b != leader)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 10,
                         "compression.type": "none"})
    for i in range(1500):  # about 1.5 MB: a move at 1 MB/s takes over a second
        producer.produce(topic, b"pre-%06d-" % i + b"x" * 1000, partition=0)
    assert producer.flush(60) == 0
    (source,) = cluster.where(follower, topic)
    d1, d2 = cluster.dirs(follower)
    target = d2.resolve() if source[0] == d1.resolve() else d1.resolve()

    acked: list[bytes] = []
    failed: list[KafkaError] = []
    stop = threading.Event()

    def produce() -> None:
        def report(err: KafkaError | None, msg: object) -> None:
            if err is None:
                acked.append(msg.value())  # type: ignore[attr-defined]
            else:
                failed.append(err)

        for i in range(10_000):  # bounded: stopped once the move is done
            if stop.is_set():
                break
            producer.produce(topic, b"live-%06d" % i, partition=0, on_delivery=report)
            producer.poll(0.002)
        producer.flush(60)

    thread = threading.Thread(target=produce)
    thread.start()
    seen: set[tuple[Path, bool]] = set()
    try:
        eventually(lambda: len(acked) > 100, what="the producer running")
        result = cluster.kadmin.alter_replica_log_dirs({(topic, 0, follower): str(target)})
        assert list(result.values()) == [NoError], result

        def moved() -> bool:
            now = cluster.where(follower, topic)
            seen.update(now)
            return now == {(target, False)}

        eventually(moved, timeout=60, what=f"the replica on broker {follower} moved")
        at_done = len(acked)
        eventually(lambda: len(acked) > at_done + 100, what="acks after the move")
    finally:
        stop.set()
        thread.join(90)
    assert (target, True) in seen, seen
    assert not failed, failed[:3]
    eventually(lambda: sorted(cluster.view(topic)[2]) == [1, 2, 3], what="ISR of three")
    data = cluster.dirs(follower)
    assert not [p for d in data for p in d.iterdir() if p.name.startswith(topic)
                and p.name.endswith("-future")]

    def segments(broker: int) -> bytes:
        (directory,) = [d / f"{topic}-0" for d in cluster.dirs(broker)
                        if (d / f"{topic}-0").is_dir()]
        return b"".join(f.read_bytes() for f in sorted(directory.glob("*.log")))

    eventually(lambda: segments(follower) == segments(leader),
               what="the moved replica equal to the leader's")
    got = read_to_end(cluster.brokers[leader].bootstrap, topic)
    assert set(acked) <= set(got) and len(got) == len(set(got))


def test_replica_not_available_then_created_in_the_preferred_dir(cluster: Cluster) -> None:
    topic = unique_topic_name("pref")
    _create(cluster, topic, [1, 3])
    d1, d2 = cluster.dirs(2)

    def partitions(d: Path) -> int:
        return sum(1 for p in d.iterdir() if p.is_dir())

    # Left alone, a new partition goes to the dir with fewer partitions (d1 on a tie); ask
    # for that one first, then for the other, which must win.
    usual, preferred = (d1, d2) if partitions(d1) <= partitions(d2) else (d2, d1)
    for target in (usual, preferred):
        result = cluster.kadmin.alter_replica_log_dirs({(topic, 0, 2): str(target.resolve())})
        assert list(result.values()) == [ReplicaNotAvailableError], result
    cluster.kadmin.alter_partition_reassignments({KTopicPartition(topic, 0): [1, 3, 2]})
    eventually(lambda: cluster.where(2, topic) == {(preferred.resolve(), False)},
               what=f"broker 2's new replica in {preferred.name}")
    eventually(lambda: sorted(cluster.view(topic)[2]) == [1, 2, 3], what="ISR of three")


def test_reassign_plan_with_log_dirs(cluster: Cluster, tmp_path: Path) -> None:
    """Kafka's plan JSON with ``log_dirs``: ``moldau cluster reassign --file`` places the new
    replica on broker 2 in the dir named, and moves broker 1's existing replica too."""
    topic = unique_topic_name("plan")
    _create(cluster, topic, [1, 3])
    ((b1_now, _),) = cluster.where(1, topic)
    b1_target = next(d.resolve() for d in cluster.dirs(1) if d.resolve() != b1_now)
    b2_target = cluster.dirs(2)[1].resolve()
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{
        "topic": topic, "partition": 0, "replicas": [1, 3, 2],
        "log_dirs": [str(b1_target), "any", str(b2_target)]}]}))
    ok(run_moldau("cluster", "reassign", "--file", str(plan), bootstrap=cluster.bootstrap))
    eventually(lambda: cluster.where(2, topic) == {(b2_target, False)}
               and cluster.where(1, topic) == {(b1_target, False)},
               what="both replicas in the dirs of the plan")
    eventually(lambda: sorted(cluster.view(topic)[2]) == [1, 2, 3], what="ISR of three")
    # A dir a broker does not have: refused in one line, nothing reassigned.
    plan.write_text(json.dumps({"version": 1, "partitions": [{
        "topic": topic, "partition": 0, "replicas": [1, 3],
        "log_dirs": ["/no/such/dir", "any"]}]}))
    one_line_error(run_moldau("cluster", "reassign", "--file", str(plan),
                              bootstrap=cluster.bootstrap), "LOG_DIR_NOT_FOUND")
    assert cluster.view(topic)[1] == (1, 3, 2)
