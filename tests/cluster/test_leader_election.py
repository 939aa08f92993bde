"""Preferred and requested leader elections on three real brokers and a real ZooKeeper.

A killed preferred leader restarts, truncates, catches up and rejoins the ISR without taking
leadership back by itself (test brokers run with ``auto.leader.rebalance.enable=false``);
ElectLeaders through confluent-kafka's AdminClient, ``moldau cluster elect-leaders`` and the
/admin/preferred_replica_election znode then move it back, with nothing acknowledged lost by
an acks=all producer writing all along. Kafka's per-partition errors, NOT_CONTROLLER from
other brokers, UNCLEAN elections, and the automatic rebalance on a cluster of its own.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from confluent_kafka import (
    ElectionType,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.elect_leaders.v2.request import ElectLeadersRequest, TopicPartitions
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8, i32, i32Timedelta

from tests.conftest import TEST_BROKER_OVERRIDES, MakeBroker
from tests.helpers import BrokerProcess, unique_topic_name
from tests.helpers.cli import run_moldau
from tests.helpers.zookeeper import ZooKeeperServer
from tests.integration.wire import WireClient

from .helpers import eventually, raw_client, read_to_end
from .test_cluster_brokers import SESSION_TIMEOUT_MS, describe, start_cluster

Assignment = list[list[int]]


@pytest.fixture(scope="module")
def cluster(zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[tuple[list[BrokerProcess], str]]:
    """Three brokers (without automatic rebalance, as every test broker), and their
    ``zookeeper.connect``."""
    connect = zookeeper.connect_string("/" + unique_topic_name("moldau-elect"))
    base: Path = tmp_path_factory.mktemp("elect")
    brokers = [BrokerProcess(base / f"broker-{i}", overrides=(
        *TEST_BROKER_OVERRIDES, f"node.id={i}", f"zookeeper.connect={connect}",
        f"zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}", "min.insync.replicas=2"))
        for i in (1, 2, 3)]
    try:
        for b in brokers:
            b.start()
        eventually(lambda: describe(brokers[0], "-")[0] == [1, 2, 3], what="three brokers")
        yield brokers, connect
    finally:
        for b in brokers:
            b.stop()


def up(brokers: list[BrokerProcess]) -> list[BrokerProcess]:
    return [b for b in brokers if b.is_running()]


def create(brokers: list[BrokerProcess], topics: dict[str, Assignment]) -> None:
    admin = AdminClient({"bootstrap.servers": up(brokers)[0].bootstrap})
    futures = admin.create_topics([NewTopic(name, len(assignment),
                                            replica_assignment=assignment)
                                   for name, assignment in topics.items()])
    for f in futures.values():
        f.result(timeout=30)
    for name, assignment in topics.items():
        eventually(lambda n=name, a=assignment: all(
            describe(b, n)[2].get(p, (-1, (), ()))[0] == replicas[0]
            and len(describe(b, n)[2][p][2]) == len(replicas)
            for b in up(brokers) for p, replicas in enumerate(a)),
            what=f"{name}: preferred leaders and full ISRs everywhere")


def leader(brokers: list[BrokerProcess], topic: str, partition: int = 0) -> int:
    return int(describe(up(brokers)[0], topic)[2][partition][0])


def isr(brokers: list[BrokerProcess], topic: str, partition: int = 0) -> list[int]:
    return sorted(describe(up(brokers)[0], topic)[2][partition][2])


def elect(brokers: list[BrokerProcess], election_type: ElectionType,
          partitions: list[TopicPartition] | None) -> dict[tuple[str, int], int | None]:
    """AdminClient.elect_leaders: {(topic, partition): None or the error code}."""
    # confluent-kafka 2.16 refuses elect_leaders' timeout keywords; socket.timeout.ms sets both.
    admin = AdminClient({"bootstrap.servers": ",".join(b.bootstrap for b in up(brokers)),
                         "socket.timeout.ms": 20_000})
    result = admin.elect_leaders(election_type, partitions).result(timeout=40)
    # Each value is None or a KafkaError (2.16 documents a KafkaException).
    return {(tp.topic, tp.partition): None if err is None else
            (err.args[0] if isinstance(err, KafkaException) else err).code()
            for tp, err in result.items()}

class AckedProducer:
    """An idempotent acks=all producer writing to one partition on a thread of its own."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.acked: list[bytes] = []
        self.failed: list[KafkaError] = []
        self._stop = threading.Event()
        self._producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                   "enable.idempotence": True, "linger.ms": 5,
                                   "message.timeout.ms": 120_000})
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _report(self, err: KafkaError | None, msg: object) -> None:
        if err is None:
            self.acked.append(msg.value())  # type: ignore[attr-defined]
        else:
            self.failed.append(err)

    def _run(self) -> None:
        deadline = time.monotonic() + 110  # bounded, whatever the test does
        i = 0
        while not self._stop.is_set() and time.monotonic() < deadline and i < 100_000:
            self._producer.produce(self.topic, b"v%06d" % i, partition=0,
                                   on_delivery=self._report)
            i += 1
            self._producer.poll(0.01)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        assert self._producer.flush(90) == 0

    def check(self, bootstrap: str) -> None:
        assert not self.failed, self.failed[:3]
        got = read_to_end(bootstrap, self.topic)
        assert set(self.acked) <= set(got), \
            f"lost {len(set(self.acked) - set(got))} acknowledged records"
        # A batch in flight when leadership moves is retried by librdkafka; the new leader
        # recognises it (idempotent producer state), so every record is there exactly once.
        assert len(got) == len(set(got)), f"{len(got) - len(set(got))} duplicates read"
        assert got == sorted(got), "out of order"
        print(f"{len(self.acked)} acknowledged, {len(got)} read")


def test_killed_leader_rejoins_and_elections_move_leadership_back(
        cluster: tuple[list[BrokerProcess], str]) -> None:
    brokers, connect = cluster
    controller = describe(brokers[0], "-")[1]
    x = next(b for b in (1, 2, 3) if b != controller)  # the broker killed: preferred leader
    y, z = (b for b in (1, 2, 3) if b != x)
    name = unique_topic_name("elect")
    a, b_, d, r = name + "-a", name + "-b", name + "-d", name + "-r"
    create(brokers, {a: [[x, y, z]], b_: [[x, y, z], [y, z, x]], d: [[x, y, z]], r: [[x]]})
    producer = AckedProducer(",".join(b.bootstrap for b in brokers), a)
    eventually(lambda: len(producer.acked) > 100, what="acks before the kill")

    brokers[x - 1].kill9()
    eventually(lambda: leader(brokers, a) in (y, z) and leader(brokers, b_) in (y, z)
               and leader(brokers, d) in (y, z), timeout=30, what="failover")
    # The preferred replica is down: Kafka's errors, for each election type.
    down = elect(brokers, ElectionType.PREFERRED, [TopicPartition(a, 0), TopicPartition(r, 0),
                                                   TopicPartition(a, 5),
                                                   TopicPartition(name + "-nope", 0)])
    assert down == {(a, 0): KafkaError.PREFERRED_LEADER_NOT_AVAILABLE,
                    (r, 0): KafkaError.PREFERRED_LEADER_NOT_AVAILABLE,
                    (a, 5): KafkaError.UNKNOWN_TOPIC_OR_PART,
                    (name + "-nope", 0): KafkaError.UNKNOWN_TOPIC_OR_PART}
    assert elect(brokers, ElectionType.UNCLEAN, [TopicPartition(r, 0), TopicPartition(a, 0)]) \
        == {(r, 0): KafkaError.ELIGIBLE_LEADERS_NOT_AVAILABLE,
            (a, 0): KafkaError.ELECTION_NOT_NEEDED}
    acked_while_down = len(producer.acked)

    # It comes back, truncates, catches up and rejoins the ISR, but does not lead yet.
    brokers[x - 1].restart()
    eventually(lambda: isr(brokers, a) == [1, 2, 3] and isr(brokers, b_) == [1, 2, 3]
               and isr(brokers, d) == [1, 2, 3], timeout=60,
               what="the restarted broker back in every ISR")
    eventually(lambda: leader(brokers, r) == x,  # its only replica: the controller's failover
               what="the RF 1 topic led by its replica again")
    assert leader(brokers, a) != x and leader(brokers, b_) != x and leader(brokers, d) != x

    # ElectLeaders through the AdminClient, while acks=all produces go on.
    started = time.monotonic()
    assert elect(brokers, ElectionType.PREFERRED, [TopicPartition(a, 0)]) == {(a, 0): None}
    print(f"ElectLeaders answered in {time.monotonic() - started:.2f} s")
    # The answer waited for the controller's own view; the other brokers follow their watches.
    assert leader([brokers[describe(brokers[0], a)[1] - 1]], a) == x
    eventually(lambda: all(leader([b], a) == x for b in brokers),
               what="every broker naming the new leader")
    assert elect(brokers, ElectionType.PREFERRED, [TopicPartition(a, 0)]) == {
        (a, 0): KafkaError.ELECTION_NOT_NEEDED}

    # The CLI, for one topic: partition 0 moves, partition 1 already had its preferred leader.
    bootstrap = ",".join(b.bootstrap for b in brokers)
    started = time.monotonic()
    done = run_moldau("cluster", "elect-leaders", "-b", bootstrap, "--topic", b_)
    print(f"moldau cluster elect-leaders took {time.monotonic() - started:.2f} s")
    assert done.returncode == 0, done.stderr
    rows = {tuple(line.split()[:2]): line for line in done.stdout.splitlines()
            if line.startswith(b_)}
    assert "elected" in rows[(b_, "0")] and "not needed" in rows[(b_, "1")], done.stdout
    eventually(lambda: leader(brokers, b_, 0) == x and leader(brokers, b_, 1) == y,
               what="the CLI's election seen by the first broker")

    # Kafka's ZooKeeper tools: /admin/preferred_replica_election, done and deleted.
    from moldau.cluster import znodes
    with raw_client(connect) as zk:
        zk.create(znodes.PREFERRED_REPLICA_ELECTION,
                  znodes.encode_preferred_replica_election([(d, 0)]))
        eventually(lambda: zk.exists(znodes.PREFERRED_REPLICA_ELECTION) is None,
                   what="the controller to delete the request")
    eventually(lambda: leader(brokers, d) == x, what="the znode's election")

    # Every partition: ours are balanced now, and null reports only what needed an election.
    assert [k for k in elect(brokers, ElectionType.PREFERRED, None) if k[0].startswith(name)] \
        == []

    eventually(lambda: len(producer.acked) > acked_while_down + 100, what="acks after")
    producer.stop()
    producer.check(brokers[x - 1].bootstrap)
    print(f"{len(producer.acked)} records acknowledged through kill -9, restart and elections")


def wire_elect(broker: BrokerProcess, election_type: int,
               partitions: dict[str, list[int]] | None) -> object:
    request = ElectLeadersRequest(
        election_type=i8(election_type),
        topic_partitions=None if partitions is None else tuple(
            TopicPartitions(topic=t, partitions=tuple(i32(p) for p in ps))
            for t, ps in partitions.items()),
        timeout=i32Timedelta.parse(timedelta(seconds=10)))
    with WireClient.to(broker.bootstrap) as client:
        return client.request(request)


def results(response: object) -> dict[tuple[str, int], ErrorCode]:
    return {(t.topic, int(p.partition_id)): p.error_code
            for t in response.replica_election_results  # type: ignore[attr-defined]
            for p in t.partition_result}


def test_only_the_controller_elects_and_bad_types_fail(
        cluster: tuple[list[BrokerProcess], str]) -> None:
    brokers, _ = cluster
    name = unique_topic_name("elect-nc")
    create(brokers, {name: [[1, 2, 3], [2, 3, 1]]})
    controller = describe(brokers[0], name)[1]
    other = brokers[next(b for b in (1, 2, 3) if b != controller) - 1]
    response = wire_elect(other, 0, {name: [0, 1]})
    assert response.error_code == ErrorCode.none  # type: ignore[attr-defined]
    assert results(response) == {(name, 0): ErrorCode.not_controller,
                                 (name, 1): ErrorCode.not_controller}
    everything = results(wire_elect(other, 1, None))  # null: every partition, each refused
    assert everything[(name, 0)] == everything[(name, 1)] == ErrorCode.not_controller
    assert set(everything.values()) == {ErrorCode.not_controller}
    response = wire_elect(brokers[controller - 1], 0, {name: [0, 1, 1]})
    assert results(response) == {(name, 0): ErrorCode.election_not_needed,
                                 (name, 1): ErrorCode.election_not_needed}
    response = wire_elect(brokers[controller - 1], 2, {name: [0]})  # no such election type
    assert response.error_code == ErrorCode.unknown_server_error  # type: ignore[attr-defined]
    assert results(response) == {(name, 0): ErrorCode.unknown_server_error}
    everything = results(wire_elect(brokers[controller - 1], 1, None))  # all led: nothing
    assert [k for k in everything if k[0] == name] == []


def test_unclean_election_makes_an_out_of_sync_replica_lead(
        cluster: tuple[list[BrokerProcess], str]) -> None:
    """Replicas [y, z]: z dies and leaves the ISR, then y dies; z comes back out of sync.
    Without unclean.leader.election.enable nobody leads until an UNCLEAN ElectLeaders."""
    brokers, _ = cluster
    name = unique_topic_name("elect-unclean")
    controller = describe(brokers[0], "-")[1]
    y, z = (b for b in (1, 2, 3) if b != controller)  # keep the controller alive
    create(brokers, {name: [[y, z]]})
    brokers[z - 1].kill9()
    eventually(lambda: isr(brokers, name) == [y], timeout=30, what="z out of the ISR")
    brokers[y - 1].kill9()
    eventually(lambda: leader(brokers, name) == -1, timeout=30, what="no leader")
    brokers[z - 1].start()
    eventually(lambda: z in describe(brokers[controller - 1], "-")[0], timeout=30,
               what="z registered")
    assert elect(brokers, ElectionType.PREFERRED, [TopicPartition(name, 0)]) == {
        (name, 0): KafkaError.PREFERRED_LEADER_NOT_AVAILABLE}
    assert leader(brokers, name) == -1
    assert elect(brokers, ElectionType.UNCLEAN, [TopicPartition(name, 0)]) == {(name, 0): None}
    assert describe(brokers[controller - 1], name)[2][0][::2] == (z, (z,))
    brokers[y - 1].start()
    eventually(lambda: isr(brokers, name) == sorted((y, z)), timeout=60,
               what="y truncated and back in the ISR")


def test_auto_rebalance_moves_leadership_back(make_broker: MakeBroker, zk_connect: str,
                                              topic_name: str) -> None:
    brokers = start_cluster(make_broker, zk_connect, 3, "min.insync.replicas=2",
                            "auto.leader.rebalance.enable=true",  # tests turn it off
                            "leader.imbalance.check.interval.seconds=1")
    eventually(lambda: describe(brokers[0], "-")[0] == [1, 2, 3], what="three brokers")
    controller = describe(brokers[0], "-")[1]
    x = next(b for b in (1, 2, 3) if b != controller)
    y, z = (b for b in (1, 2, 3) if b != x)
    create(brokers, {topic_name: [[x, y, z]]})
    producer = AckedProducer(",".join(b.bootstrap for b in brokers), topic_name)
    eventually(lambda: len(producer.acked) > 100, what="acks before the kill")
    brokers[x - 1].kill9()
    eventually(lambda: leader(brokers, topic_name) in (y, z), timeout=30, what="failover")
    brokers[x - 1].restart()
    started = time.monotonic()
    eventually(lambda: leader(brokers, topic_name) == x, timeout=60,
               what="leadership back on the preferred replica by itself")
    print(f"preferred leader back {time.monotonic() - started:.1f} s after the restart")
    assert isr(brokers, topic_name) == [1, 2, 3]
    acked = len(producer.acked)
    eventually(lambda: len(producer.acked) > acked + 100, what="acks after")
    producer.stop()
    producer.check(brokers[x - 1].bootstrap)
    log = brokers[controller - 1].stdout_text() + brokers[controller - 1].stderr_text()
    assert "auto rebalance" in log


def test_single_node_has_nothing_to_elect(broker: BrokerProcess, topic_name: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic_name, 2, 1)])[topic_name].result(timeout=30)
    assert elect([broker], ElectionType.PREFERRED,
                 [TopicPartition(topic_name, 0), TopicPartition(topic_name, 2)]) == {
        (topic_name, 0): KafkaError.ELECTION_NOT_NEEDED,
        (topic_name, 2): KafkaError.UNKNOWN_TOPIC_OR_PART}


def test_cli_elect_leaders_on_a_single_node_and_its_errors(broker: BrokerProcess,
                                                           topic_name: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic_name, 2, 1)])[topic_name].result(timeout=30)
    done = run_moldau("cluster", "elect-leaders", "--topic", topic_name, "--type", "PREFERRED",
                      bootstrap=broker.bootstrap)
    assert done.returncode == 0, done.stderr
    assert [line.split()[:2] for line in done.stdout.splitlines()
            if "not needed" in line] == [[topic_name, "0"], [topic_name, "1"]], done.stdout
    everything = run_moldau("cluster", "elect-leaders", bootstrap=broker.bootstrap)
    assert everything.returncode == 0, everything.stderr
    assert everything.stdout.strip() == "No partition needed a preferred leader election."
    missing = run_moldau("cluster", "elect-leaders", "--topic", topic_name, "--partition", "7",
                         "--type", "unclean", bootstrap=broker.bootstrap)
    assert missing.returncode == 1
    assert "does not host this topic-partition" in missing.stdout.lower() or \
        "UNKNOWN_TOPIC_OR_PART" in missing.stdout, missing.stdout
    assert missing.stderr.strip() == "Error: 1 of 1 partitions could not be elected"
    for args, error in (
            (["--partition", "0"], "Error: --partition needs --topic"),
            (["--topic", topic_name + "-nope"],
             f"Error: topic '{topic_name}-nope' does not exist"),
            (["-b", "127.0.0.1:1"], "Error: cannot reach a broker at 127.0.0.1:1")):
        result = run_moldau("cluster", "elect-leaders", *args, bootstrap=broker.bootstrap)
        assert result.returncode == 1 and result.stdout == "", result
        assert len(result.stderr.strip().splitlines()) == 1 and error in result.stderr, result
    for args, error in ((["--type", "dirty"], "'dirty' is not one of"),
                        (["--election-type", "PREFERRED"], "takes --type preferred|unclean")):
        result = run_moldau("cluster", "elect-leaders", *args, bootstrap=broker.bootstrap)
        assert result.returncode == 2, result
        assert error in result.stderr.strip().splitlines()[-1], result
