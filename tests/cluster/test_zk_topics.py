"""Topics, configs, partition states and producer ids in a real ZooKeeper, Kafka's bytes."""

from __future__ import annotations

import threading
import uuid

import pytest

from moldau.cluster import znodes
from moldau.cluster.assignment import AssignmentError
from moldau.cluster.controller_election import ControllerElection
from moldau.cluster.metadata import TopicMetadata
from moldau.cluster.zookeeper import ControllerMovedError, StaleVersionError, TopicExistsError
from tests.helpers.tcp_proxy import TcpProxy
from tests.helpers.zookeeper import ZooKeeperServer

from .helpers import Stores, eventually, raw_client, registration

TOPIC_ID = uuid.UUID("5d2c81a3-a851-46c0-88af-96f3930b5d7f")


def cluster(stores: Stores, *racks: str | None) -> list:
    opened = []
    for broker_id, rack in enumerate(racks, start=1):
        store = stores.open(broker_id)
        store.register_broker(registration(broker_id, rack))
        opened.append(store)
    return opened


def test_created_topic_is_kafkas_bytes_and_every_broker_sees_it(stores: Stores,
                                                                zk_connect: str) -> None:
    one, two = cluster(stores, None, None)
    one.create_topic(TopicMetadata("orders", TOPIC_ID, 2, {"retention.ms": "1000"}),
                     {0: [1, 2], 1: [2, 1]})
    with raw_client(zk_connect) as zk:
        assert zk.get("/brokers/topics/orders")[0] == (
            b'{"partitions":{"0":[1,2],"1":[2,1]},"topic_id":"XSyBo6hRRsCIr5bzkwtdfw",'
            b'"adding_replicas":{},"removing_replicas":{},"version":3}')
        assert zk.get("/config/topics/orders")[0] == (
            b'{"version":1,"config":{"retention.ms":"1000"}}')
    assert one.topic("orders") is not None and one.assignment("orders") == {0: [1, 2],
                                                                              1: [2, 1]}
    eventually(lambda: two.topic("orders") is not None, what="broker 2 sees the topic")
    seen = two.topic_by_id(TOPIC_ID)
    assert seen is not None and seen.partitions == 2 and seen.configs == {"retention.ms": "1000"}
    with pytest.raises(TopicExistsError):
        two.create_topic(TopicMetadata("orders", uuid.uuid4(), 1))


def test_placement_is_rack_aware_over_live_brokers(stores: Stores) -> None:
    one, *_ = cluster(stores, "a", "a", "b", "b")
    one.create_topic(TopicMetadata("placed", uuid.uuid4(), 8), replication_factor=2)
    racks = {1: "a", 2: "a", 3: "b", 4: "b"}
    for replicas in one.assignment("placed").values():
        assert {racks[b] for b in replicas} == {"a", "b"}


def test_configs_partitions_and_deletion_reach_the_other_broker(stores: Stores,
                                                                zk_connect: str) -> None:
    one, two = cluster(stores, None, None)
    one.create_topic(TopicMetadata("t", uuid.uuid4(), 1), {0: [1]})
    eventually(lambda: two.topic("t") is not None, what="topic on broker 2")
    held = two.topic("t")

    one.set_topic_configs("t", {"cleanup.policy": "compact"})
    eventually(lambda: two.topic("t").configs == {"cleanup.policy": "compact"},  # type: ignore[union-attr]
               what="config change on broker 2")
    one.set_partitions("t", 3)
    eventually(lambda: two.topic("t").partitions == 3,  # type: ignore[union-attr]
               what="new partitions on broker 2")
    assert two.topic("t") is held  # updated in place: the broker keeps references
    assert sorted(two.assignment("t")) == [0, 1, 2]
    with raw_client(zk_connect) as zk:
        changes = sorted(zk.get_children("/config/changes"))
        assert changes == ["config_change_0000000000"]
        assert zk.get("/config/changes/" + changes[0])[0] == (
            b'{"version":2,"entity_path":"topics/t"}')

    two.request_topic_deletion("t")
    assert one.pending_deletions() == ["t"]
    one.complete_topic_deletion("t")
    eventually(lambda: two.topic("t") is None, what="deletion seen by broker 2")
    assert one.pending_deletions() == []
    with raw_client(zk_connect) as zk:
        assert zk.exists("/config/topics/t") is None


def test_dynamic_broker_configs_per_broker_and_default(stores: Stores, zk_connect: str) -> None:
    (one,) = cluster(stores, None)
    one.set_broker_configs({"log.cleaner.threads": "2"})
    one.set_broker_configs({"max.connections": "100"}, entity=znodes.DEFAULT_BROKER)
    assert one.broker_configs() == {"log.cleaner.threads": "2"}
    assert one.broker_configs(znodes.DEFAULT_BROKER) == {"max.connections": "100"}
    with raw_client(zk_connect) as zk:
        assert zk.get("/config/brokers/<default>")[0] == (
            b'{"version":1,"config":{"max.connections":"100"}}')


def test_partition_state_writes_are_fenced_by_version_and_controller_epoch(
        stores: Stores, zk_connect: str) -> None:
    one, two = cluster(stores, None, None)
    one.create_topic(TopicMetadata("p", uuid.uuid4(), 1), {0: [1, 2]})
    first = ControllerElection(one)
    first.start()
    assert first.wait(lambda e: e.is_controller, 30)
    lease = first.lease
    assert lease is not None
    one.create_partition_states("p", {0: znodes.PartitionState(1, 0, (1, 2), lease.epoch)},
                                lease.epoch_zk_version)
    state = one.partition_state("p", 0)
    assert state == znodes.PartitionState(1, 0, (1, 2), lease.epoch, zk_version=0)
    with raw_client(zk_connect) as zk:
        assert zk.get("/brokers/topics/p/partitions/0/state")[0] == (
            b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2]}')

    # The leader shrinks the ISR over the version it read; a second write over the same
    # version is a stale writer and fails.
    shrunk = znodes.PartitionState(1, 0, (1,), lease.epoch)
    assert two.update_partition_state("p", 0, shrunk, expected_zk_version=0) == 1
    with pytest.raises(StaleVersionError):
        one.update_partition_state("p", 0, znodes.PartitionState(1, 0, (1, 2), lease.epoch),
                                   expected_zk_version=0)

    # A new controller is elected: the old lease's writes fail even at the right version.
    one.close()
    second = ControllerElection(two)
    second.start()
    assert second.wait(lambda e: e.is_controller, 30)
    with pytest.raises(ControllerMovedError):
        two.update_partition_state("p", 0, znodes.PartitionState(2, 1, (2,), lease.epoch),
                                   expected_zk_version=1,
                                   controller_epoch_zk_version=lease.epoch_zk_version)
    new = second.lease
    assert new is not None and new.epoch == lease.epoch + 1
    assert two.update_partition_state("p", 0, znodes.PartitionState(2, 1, (2,), new.epoch),
                                      expected_zk_version=1,
                                      controller_epoch_zk_version=new.epoch_zk_version) == 2
    assert two.partition_state("p", 0) == znodes.PartitionState(2, 1, (2,), new.epoch, 2)


def test_producer_id_blocks_never_overlap_across_brokers_threads_and_restarts(
        stores: Stores) -> None:
    brokers = cluster(stores, None, None, None)
    blocks: list[znodes.ProducerIdBlock] = []
    lock = threading.Lock()

    def allocate(store: object) -> None:
        for _ in range(5):
            block = store.allocate_producer_id_block()  # type: ignore[attr-defined]
            with lock:
                blocks.append(block)

    threads = [threading.Thread(target=allocate, args=(b,)) for b in brokers for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(blocks) == 30
    starts = sorted(b.first for b in blocks)
    assert starts == [i * znodes.PRODUCER_ID_BLOCK_SIZE for i in range(30)]

    pids = {brokers[0].next_producer_id(), brokers[1].next_producer_id()}
    assert len(pids) == 2 and min(pids) >= 30 * znodes.PRODUCER_ID_BLOCK_SIZE
    brokers[0].close()
    again = stores.open(1)
    assert again.next_producer_id() >= 32 * znodes.PRODUCER_ID_BLOCK_SIZE


def test_reads_what_kafka_wrote(stores: Stores, zk_connect: str) -> None:
    """Znodes written byte for byte as a Kafka 3.9 cluster leaves them are understood."""
    (store,) = cluster(stores, None)
    with raw_client(zk_connect) as zk:
        zk.create("/brokers/ids/7", (
            b'{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},'
            b'"endpoints":["PLAINTEXT://kafka7:9092"],"rack":"eu-1a","jmx_port":-1,"port":9092,'
            b'"host":"kafka7","version":5,"timestamp":"1700000000000"}'), ephemeral=True)
        zk.create("/config/topics/legacy", b'{"version":1,"config":{"retention.ms":"5"}}')
        zk.create("/brokers/topics/legacy", (
            b'{"partitions":{"0":[7,1]},"topic_id":"XSyBo6hRRsCIr5bzkwtdfw",'
            b'"adding_replicas":{},"removing_replicas":{},"version":3}'))
        zk.create("/brokers/topics/legacy/partitions/0/state",
                  b'{"controller_epoch":3,"leader":7,"version":1,"leader_epoch":5,"isr":[7,1]}',
                  makepath=True)
        zk.set("/latest_producer_id_block",
               b'{"version":1,"broker":7,"block_start":"4000","block_end":"4999"}')
        brokers = store.live_brokers()
        assert brokers[7].rack == "eu-1a"
        assert brokers[7].endpoint() == znodes.Endpoint("PLAINTEXT", "kafka7", 9092)
        eventually(lambda: store.topic("legacy") is not None, what="Kafka's topic in the cache")
        legacy = store.topic_by_id(TOPIC_ID)
        assert legacy is not None and legacy.configs == {"retention.ms": "5"}
        assert store.assignment("legacy") == {0: [7, 1]}
        assert store.partition_state("legacy", 0) == znodes.PartitionState(7, 5, (7, 1), 3, 0)
        assert store.next_producer_id() == 5000


def test_explicit_assignments_name_only_live_brokers(stores: Stores) -> None:
    one, _ = cluster(stores, None, None)
    with pytest.raises(AssignmentError, match="broker 3, but no such broker"):
        one.create_topic(TopicMetadata("bad", uuid.uuid4(), 1), {0: [1, 3]})
    assert one.topic("bad") is None
    one.create_topic(TopicMetadata("good", uuid.uuid4(), 1), {0: [1, 2]})
    with pytest.raises(AssignmentError, match="no such broker"):
        one.set_partitions("good", 2, {1: [5]})
    with pytest.raises(AssignmentError, match="already has 1 partitions"):
        one.set_partitions("good", 1)
    one.set_partitions("good", 2, {1: [2, 1]})
    assert one.assignment("good") == {0: [1, 2], 1: [2, 1]}


def test_changes_made_while_cut_off_are_seen_after_reconnecting(
        stores: Stores, zookeeper: ZooKeeperServer, zk_connect: str) -> None:
    chroot = zk_connect[len(zookeeper.address):]
    proxy = TcpProxy(zookeeper.port)
    try:
        one = stores.open(1)
        one.register_broker(registration(1))
        one.create_topic(TopicMetadata("before", uuid.uuid4(), 1), {0: [1]})
        cut_off = stores.open(2, connect=f"127.0.0.1:{proxy.port}{chroot}",
                              session_timeout_ms=20_000)
        eventually(lambda: cut_off.topic("before") is not None, what="topic before the cut")
        session = cut_off.session.session_id
        proxy.cut()
        eventually(lambda: not cut_off.client.connected, what="broker 2 disconnected")
        one.create_topic(TopicMetadata("during", uuid.uuid4(), 1), {0: [1]})
        one.set_topic_configs("before", {"retention.ms": "7"})
        one.complete_topic_deletion("during")
        one.create_topic(TopicMetadata("during", TOPIC_ID, 2), {0: [1], 1: [1]})
        two = stores.open(3)
        two.register_broker(registration(3))
        proxy.heal()
        eventually(lambda: cut_off.client.connected, what="broker 2 reconnected")
        assert cut_off.session.session_id == session  # the same session: no expiry
        eventually(lambda: 3 in cut_off.brokers(), what="broker 3 seen")
        eventually(lambda: cut_off.topic_by_id(TOPIC_ID) is not None, what="new topic seen")
        assert cut_off.topic("during").partitions == 2  # type: ignore[union-attr]
        eventually(lambda: cut_off.topic("before").configs == {"retention.ms": "7"},  # type: ignore[union-attr]
                   what="config change seen")
    finally:
        proxy.close()
