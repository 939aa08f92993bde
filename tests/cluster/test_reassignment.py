"""Partition reassignments on three real brokers: moving replicas under load, listing,
cancelling, Kafka's errors, replication throttles, and DescribeLogDirs on every broker.

One cluster for the module (brokers 1, 2, 3 on the session's ZooKeeper); every test uses
topics of its own. Clients are real: kafka-python's admin client sends
AlterPartitionReassignments / ListPartitionReassignments to the controller (confluent-kafka
has no such call), confluent-kafka produces, reads and alters configs; malformed or
version-specific requests go through a raw socket with kio.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)
from kafka import KafkaAdminClient
from kafka import TopicPartition as KTopicPartition
from kafka import errors as kafka_errors
from kio.schema.alter_partition_reassignments.v1.request import (
    AlterPartitionReassignmentsRequest,
    ReassignablePartition,
    ReassignableTopic,
)
from kio.schema.errors import ErrorCode
from kio.schema.list_partition_reassignments.v0.request import (
    ListPartitionReassignmentsRequest,
)

from tests.conftest import TEST_BROKER_OVERRIDES
from tests.helpers.broker_process import BrokerProcess
from tests.helpers.cli import Result, ok, one_line_error, run_moldau
from tests.helpers.names import unique_topic_name
from tests.helpers.zookeeper import ZooKeeperServer
from tests.integration.wire import WireClient

from .helpers import eventually, read_to_end
from .test_cluster_brokers import SESSION_TIMEOUT_MS, describe

BROKERS = (1, 2, 3)


class Cluster:
    def __init__(self, brokers: dict[int, BrokerProcess]) -> None:
        self.brokers = brokers
        self.bootstrap = ",".join(b.bootstrap for b in brokers.values())
        self.admin = AdminClient({"bootstrap.servers": self.bootstrap})
        self.kadmin = KafkaAdminClient(bootstrap_servers=self.bootstrap,
                                       request_timeout_ms=30000)

    def controller(self) -> int:
        return describe(self.brokers[1], "-")[1]

    def view(self, topic: str, partition: int = 0) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
        """(leader, replicas, ISR) as broker 1 reports them."""
        return describe(self.brokers[1], topic)[2].get(partition, (-1, (), ()))

    def create(self, topic: str, assignment: list[list[int]], **configs: str) -> None:
        futures = self.admin.create_topics([NewTopic(
            topic, len(assignment), replica_assignment=assignment, config=dict(configs))])
        futures[topic].result(timeout=30)
        eventually(lambda: all(sorted(self.view(topic, p)[2]) == sorted(r)
                               for p, r in enumerate(assignment)),
                   what=f"{topic}: every replica in the ISR")

    def reassign(self, moves: dict[tuple[str, int], list[int] | None]) -> dict:
        return self.kadmin.alter_partition_reassignments(
            {KTopicPartition(t, p): r for (t, p), r in moves.items()})

    def ongoing(self, topic: str | None = None) -> dict[tuple[str, int], dict]:
        found = self.kadmin.list_partition_reassignments(
            None if topic is None else {topic: [0]})
        return {(tp.topic, tp.partition): v for tp, v in found.items()}

    def partition_dir(self, broker: int, topic: str, partition: int = 0) -> Path:
        return self.brokers[broker].data_dir / f"{topic}-{partition}"

    def log_bytes(self, broker: int, topic: str, partition: int = 0) -> bytes:
        files = sorted(self.partition_dir(broker, topic, partition).glob("*.log"))
        return b"".join(f.read_bytes() for f in files)

    def alter_broker_configs(self, configs: dict[str, str | None],
                             brokers: tuple[int, ...] = BROKERS) -> None:
        for b in brokers:
            entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
                       if v is not None else
                       ConfigEntry(k, "", incremental_operation=AlterConfigOpType.DELETE)
                       for k, v in configs.items()]
            resource = ConfigResource(ConfigResource.Type.BROKER, str(b),
                                      incremental_configs=entries)
            for f in self.admin.incremental_alter_configs([resource]).values():
                f.result(timeout=30)

    def alter_topic_configs(self, topic: str, configs: dict[str, str]) -> None:
        entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
                   for k, v in configs.items()]
        resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=entries)
        for f in self.admin.incremental_alter_configs([resource]).values():
            f.result(timeout=30)

    def fill(self, topic: str, count: int, size: int = 1000) -> list[bytes]:
        values = [b"%s-%06d-" % (topic.encode(), i) + b"x" * size for i in range(count)]
        # 16 KiB batches (the Java client's default; librdkafka's is 1 MB): a throttled
        # read still takes one whole batch, so small ones show the budget at work.
        producer = Producer({"bootstrap.servers": self.bootstrap, "acks": "all",
                             "linger.ms": 5, "compression.type": "none",
                             "batch.size": 16384})
        for v in values:
            producer.produce(topic, v, partition=0)
            producer.poll(0)
        assert producer.flush(60) == 0
        return values

    def wait_done(self, topic: str, target: list[int], timeout: float = 90) -> None:
        eventually(lambda: not self.ongoing(topic)
                   and self.view(topic)[1] == tuple(target)
                   and sorted(self.view(topic)[2]) == sorted(target)
                   and self.view(topic)[0] in target,
                   timeout=timeout, what=f"{topic} reassigned to {target}")


@pytest.fixture(scope="module")
def cluster(zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[Cluster]:
    connect = zookeeper.connect_string("/" + unique_topic_name("moldau-reassign"))
    root = tmp_path_factory.mktemp("reassign")
    brokers = {i: BrokerProcess(root / f"broker-{i}", overrides=(
        *TEST_BROKER_OVERRIDES, f"node.id={i}", f"zookeeper.connect={connect}",
        f"zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}")) for i in BROKERS}
    try:
        for b in brokers.values():
            b.start()
        made = Cluster(brokers)
        eventually(lambda: describe(brokers[1], "-")[0] == [1, 2, 3], what="three brokers")
        yield made
        made.kadmin.close()
    finally:
        for b in brokers.values():
            b.stop()

def test_move_rf2_partition_under_acks_all_load(cluster: Cluster) -> None:
    topic = unique_topic_name("move")
    cluster.create(topic, [[1, 2]], **{"min.insync.replicas": "2"})
    before = cluster.fill(topic, 300)
    acked: list[bytes] = []
    failed: list[KafkaError] = []
    stop = threading.Event()

    def produce() -> None:
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                             "enable.idempotence": True, "linger.ms": 2,
                             "compression.type": "none", "message.timeout.ms": 60000})

        def report(err: KafkaError | None, msg: object) -> None:
            if err is None:
                acked.append(msg.value())  # type: ignore[attr-defined]
            else:
                failed.append(err)

        for i in range(20_000):  # bounded: about 5 s at most after the move completes
            if stop.is_set():
                break
            producer.produce(topic, b"live-%06d" % i, partition=0, on_delivery=report)
            producer.poll(0.002)
        producer.flush(60)

    thread = threading.Thread(target=produce)
    thread.start()
    try:
        eventually(lambda: len(acked) > 200, what="the producer running")
        assert cluster.reassign({(topic, 0): [2, 3]}) == {KTopicPartition(topic, 0): None}
        started = time.monotonic()
        cluster.wait_done(topic, [2, 3])
        took = time.monotonic() - started
        at_done = len(acked)
        eventually(lambda: len(acked) > at_done + 200, what="acks after the move")
    finally:
        stop.set()
        thread.join(90)
    print(f"moved {topic} from [1, 2] to [2, 3] in {took:.1f} s under load; "
          f"{len(acked)} acked, {len(failed)} failed")
    assert not failed, failed[:3]
    leader = cluster.view(topic)[0]
    got = read_to_end(cluster.brokers[leader].bootstrap, topic)
    # The leader moved: produces waiting for acks on the old one were answered
    # NOT_LEADER_OR_FOLLOWER and retried on the new one, which recognises a batch the old
    # leader had replicated (idempotent producer state): nothing lost, nothing twice.
    assert len(got) == len(set(got)), f"{len(got) - len(set(got))} duplicated by retries"
    assert set(before) | set(acked) <= set(got), "acknowledged records lost"
    # The new replica has every record: its segment bytes are the leader's.
    eventually(lambda: cluster.log_bytes(3, topic) == cluster.log_bytes(2, topic),
               what="broker 3's log identical to broker 2's")
    data = cluster.log_bytes(3, topic)
    assert all(v in data for v in acked[:: max(1, len(acked) // 200)])
    # The removed replica's log is deleted.
    eventually(lambda: not cluster.partition_dir(1, topic).exists(),
               what="broker 1's log of the partition deleted")


def test_reassignment_errors(cluster: Cluster) -> None:
    topic = unique_topic_name("errors")
    cluster.create(topic, [[1, 2]])
    tp = KTopicPartition(topic, 0)
    results = cluster.reassign({(topic, 0): [2, 2]})
    assert results[tp] is kafka_errors.InvalidReplicationAssignmentError
    results = cluster.reassign({(topic, 0): [1, 9]})
    assert results[tp] is kafka_errors.InvalidReplicationAssignmentError
    results = cluster.reassign({(topic, 0): [1, -1]})
    assert results[tp] is kafka_errors.InvalidReplicationAssignmentError
    results = cluster.reassign({(topic + "-none", 0): [1, 2]})
    assert results[KTopicPartition(topic + "-none", 0)] is \
        kafka_errors.UnknownTopicOrPartitionError
    results = cluster.reassign({(topic, 5): [1, 2]})
    assert results[KTopicPartition(topic, 5)] is kafka_errors.UnknownTopicOrPartitionError
    results = cluster.reassign({(topic, 0): None})
    assert results[tp] is kafka_errors.NoReassignmentInProgressError
    assert cluster.view(topic)[1] == (1, 2) and not cluster.ongoing(topic)

    controller = cluster.controller()
    other = next(b for b in BROKERS if b != controller)

    def alter(broker: int, replicas: tuple[int, ...] | None, allow_rf_change: bool = True
              ) -> object:
        with WireClient.to(cluster.brokers[broker].bootstrap) as wire:
            return wire.request(AlterPartitionReassignmentsRequest(
                allow_replication_factor_change=allow_rf_change,
                topics=(ReassignableTopic(name=topic, partitions=(
                    ReassignablePartition(partition_index=0, replicas=replicas),)),)))

    empty = alter(controller, ())
    assert empty.error_code == ErrorCode.none  # type: ignore[attr-defined]
    part = empty.responses[0].partitions[0]  # type: ignore[attr-defined]
    assert part.error_code == ErrorCode.invalid_replica_assignment
    assert part.error_message == "Empty replica list specified in partition reassignment."
    refused = alter(controller, (1, 2, 3), allow_rf_change=False)
    assert refused.responses[0].partitions[0].error_code == \
        ErrorCode.invalid_replication_factor  # type: ignore[attr-defined]
    elsewhere = alter(other, (2, 3))
    assert elsewhere.error_code == ErrorCode.not_controller  # type: ignore[attr-defined]
    assert elsewhere.responses == ()  # type: ignore[attr-defined]
    with WireClient.to(cluster.brokers[other].bootstrap) as wire:
        listed = wire.request(ListPartitionReassignmentsRequest(topics=None))
    assert listed.error_code == ErrorCode.not_controller
    assert cluster.view(topic)[1] == (1, 2) and not cluster.ongoing(topic)


def test_throttle_slows_catch_up_list_shows_progress_and_cancel_reverts(
        cluster: Cluster) -> None:
    free, slow, cancelled = (unique_topic_name(n) for n in ("free", "slow", "cancel"))
    for topic in (free, slow, cancelled):
        cluster.create(topic, [[1, 2]])
        cluster.fill(topic, 1500)  # about 1.5 MB each
    # Without a throttle the new replica catches up as fast as it can.
    started = time.monotonic()
    cluster.reassign({(free, 0): [2, 3]})
    cluster.wait_done(free, [2, 3])
    unthrottled = time.monotonic() - started

    rate = 150_000
    cluster.alter_broker_configs({"leader.replication.throttled.rate": str(rate),
                                  "follower.replication.throttled.rate": str(rate)})
    try:
        for topic in (slow, cancelled):  # what kafka-reassign-partitions --throttle sets
            cluster.alter_topic_configs(topic, {
                "leader.replication.throttled.replicas": "0:1,0:2",
                "follower.replication.throttled.replicas": "0:3"})
        # Cancel: back to the original replicas, the added replica's log deleted.
        cluster.reassign({(cancelled, 0): [2, 3]})
        assert cluster.ongoing(cancelled) == {(cancelled, 0): {
            "replicas": [2, 3, 1], "adding_replicas": [3], "removing_replicas": [1]}}
        eventually(lambda: cluster.partition_dir(3, cancelled).exists(),
                   what="the added replica's log made")
        assert cluster.reassign({(cancelled, 0): None}) == \
            {KTopicPartition(cancelled, 0): None}
        assert not cluster.ongoing(cancelled)
        # Kafka reverts to RS minus the adding replicas, in RS order: [2, 1].
        eventually(lambda: cluster.view(cancelled)[1] == (2, 1)
                   and sorted(cluster.view(cancelled)[2]) == [1, 2],
                   what="the cancelled partition back on brokers 1 and 2")
        eventually(lambda: not cluster.partition_dir(3, cancelled).exists(),
                   what="the cancelled replica's log deleted")

        started = time.monotonic()
        cluster.reassign({(slow, 0): [2, 3]})
        time.sleep(2)
        assert cluster.ongoing() [(slow, 0)] == {
            "replicas": [2, 3, 1], "adding_replicas": [3], "removing_replicas": [1]}
        assert 3 not in cluster.view(slow)[2]
        cluster.wait_done(slow, [2, 3], timeout=110)
        throttled = time.monotonic() - started
    finally:
        cluster.alter_broker_configs({"leader.replication.throttled.rate": None,
                                      "follower.replication.throttled.rate": None})
    size = len(cluster.log_bytes(2, slow))
    print(f"{size} bytes: catch-up {unthrottled:.1f} s unthrottled, {throttled:.1f} s at "
          f"{rate} B/s")
    # Generous: the budget allows about size / rate seconds (plus a second's burst).
    assert throttled >= 0.5 * size / rate
    assert throttled > 2 * unthrottled


def test_describe_log_dirs_on_every_broker(cluster: Cluster) -> None:
    topic = unique_topic_name("dirs")
    assignment = [[1, 2], [2, 3], [3, 1]]
    futures = cluster.admin.create_topics(
        [NewTopic(topic, len(assignment), replica_assignment=assignment)])
    futures[topic].result(timeout=30)
    eventually(lambda: all(len(cluster.view(topic, p)[2]) == 2 for p in range(3)),
               what="every ISR full")
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for p in range(3):
        for i in range(10 * (p + 1)):
            producer.produce(topic, b"%d" % i, partition=p)
    assert producer.flush(30) == 0
    sizes: dict[int, dict[int, int]] = {}

    def described() -> bool:
        for b in BROKERS:
            answers = cluster.kadmin.describe_log_dirs(brokers=[b])
            (answer,) = answers
            (log_dir,) = answer["log_dirs"]
            assert log_dir["error_code"] == 0
            assert log_dir["log_dir"] == str(cluster.brokers[b].data_dir.resolve())
            parts = {p["partition_index"]: p for t in log_dir["topics"] if t["name"] == topic
                     for p in t["partitions"]}
            assert set(parts) == {p for p, r in enumerate(assignment) if b in r}
            assert all(p["offset_lag"] == 0 and not p["is_future_key"] for p in parts.values())
            sizes[b] = {p: v["partition_size"] for p, v in parts.items()}
        # Replicas of one partition hold the same bytes on both brokers.
        return all(sizes[r[0]][p] == sizes[r[1]][p] > 0 for p, r in enumerate(assignment))

    eventually(described, what="every broker describing its own replicas")
    assert sizes[1][0] < sizes[2][1] < sizes[3][2]


def test_cli_reassign_list_cancel_verify_and_bad_input(cluster: Cluster, tmp_path: Path) -> None:
    moving, planned = unique_topic_name("cli"), unique_topic_name("plan")
    cluster.create(moving, [[1, 2]])
    cluster.create(planned, [[1, 2]])
    cluster.fill(moving, 300)
    cluster.fill(planned, 50)

    def moldau(*args: str) -> Result:
        return run_moldau("cluster", "reassign", *args, bootstrap=cluster.bootstrap)

    out = ok(moldau("--topic", moving, "--partition", "0", "--replicas", "2,3",
                    "--throttle", "20000")).stdout
    assert f"Reassigning {moving}-0: 1,2 -> 2,3." in out
    assert "Throttle: 20000 bytes/s on brokers 1,2,3" in out
    listed = ok(moldau("--list")).stdout
    row = next(line.split() for line in listed.splitlines() if line.startswith(moving))
    assert row == [moving, "0", "2,3,1", "3", "1"]
    configs = cluster.admin.describe_configs(
        [ConfigResource(ConfigResource.Type.TOPIC, moving)])
    (entries,) = [f.result(timeout=30) for f in configs.values()]
    assert entries["leader.replication.throttled.replicas"].value == "0:1,0:2"
    assert entries["follower.replication.throttled.replicas"].value == "0:3"
    out = ok(moldau("--cancel", "--topic", moving, "--partition", "0")).stdout
    assert f"Cancelled the reassignment of {moving}-0." in out
    assert not cluster.ongoing(moving)
    broker_configs = cluster.admin.describe_configs(
        [ConfigResource(ConfigResource.Type.BROKER, "3")])
    (entries,) = [f.result(timeout=30) for f in broker_configs.values()]
    assert entries["leader.replication.throttled.rate"].value == str(2**63 - 1)

    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": planned, "partition": 0, "replicas": [3, 1], "log_dirs": ["any", "any"]}]}))
    assert f"Reassigning {planned}-0: 1,2 -> 3,1." in ok(moldau("--file", str(plan))).stdout
    eventually(lambda: "is complete" in moldau("--verify", "--file", str(plan)).stdout,
               what="the plan complete")
    assert cluster.view(planned)[1] == (3, 1)

    # One clear line for bad input (the parsing itself: tests/unit/test_cli_reassign.py).
    one_line_error(moldau("--topic", moving, "--partition", "0", "--replicas", "a,b"),
                   "invalid --replicas 'a,b'")
    one_line_error(moldau("--topic", moving, "--partition", "0", "--replicas", "1,9"),
                   f"{moving}-0: Replica assignment has brokers that are not alive",
                   "(INVALID_REPLICA_ASSIGNMENT)")
    one_line_error(moldau("--cancel", "--topic", moving, "--partition", "0"),
                   "(NO_REASSIGNMENT_IN_PROGRESS)")


def test_reassignment_survives_a_controller_kill9(cluster: Cluster) -> None:
    """Recorded in ZooKeeper, a move in progress is finished by the next controller."""
    controller = cluster.controller()
    source, target = (b for b in BROKERS if b != controller)
    topic = unique_topic_name("failover")
    cluster.create(topic, [[source]])
    values = cluster.fill(topic, 300)
    cluster.alter_broker_configs({"leader.replication.throttled.rate": "20000",
                                  "follower.replication.throttled.rate": "20000"},
                                 brokers=(source, target))
    try:
        cluster.alter_topic_configs(topic, {"leader.replication.throttled.replicas": "*",
                                            "follower.replication.throttled.replicas": "*"})
        cluster.reassign({(topic, 0): [target]})
        assert cluster.ongoing(topic)
        cluster.brokers[controller].kill9()
        eventually(lambda: describe(cluster.brokers[source], "-")[1] not in (controller, -1),
                   what="another controller")
        # A new admin client: kafka-python keeps asking the dead controller otherwise.
        cluster.kadmin.close()
        cluster.kadmin = KafkaAdminClient(bootstrap_servers=",".join(
            cluster.brokers[b].bootstrap for b in (source, target)))
        assert (topic, 0) in cluster.ongoing(topic)  # the new controller knows the move
    finally:
        cluster.alter_broker_configs({"leader.replication.throttled.rate": None,
                                      "follower.replication.throttled.rate": None},
                                     brokers=(source, target))
    eventually(lambda: not cluster.ongoing(topic)
               and describe(cluster.brokers[source], topic)[2][0][:2] == (target, (target,)),
               timeout=60, what="the move completed by the new controller")
    eventually(lambda: not cluster.partition_dir(source, topic).exists(),
               what="the source's log deleted")
    got = read_to_end(cluster.brokers[target].bootstrap, topic)
    assert got == values
    cluster.brokers[controller].restart()
    eventually(lambda: describe(cluster.brokers[source], "-")[0] == [1, 2, 3],
               what="the killed broker back")
    cluster.kadmin.close()
    cluster.kadmin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
