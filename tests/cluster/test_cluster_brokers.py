"""Three real broker processes on one real ZooKeeper: metadata, placement, leadership, failover.

Every broker gets ``zookeeper.connect`` (a chroot of its own per test on the shared server)
and a short session timeout, so a kill -9 is noticed within seconds.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.exceptions import NoNodeError
from kio.schema.heartbeat.v4.request import HeartbeatRequest

from tests.conftest import MakeBroker
from tests.helpers.broker_process import BrokerProcess
from tests.integration.test_bad_input import produce, values_batch
from tests.integration.wire import WireClient

from .helpers import eventually, raw_client

SESSION_TIMEOUT_MS = 4000


def start_cluster(make_broker: MakeBroker, zk_connect: str, count: int = 3,
                  *extra: str) -> list[BrokerProcess]:
    return [make_broker(f"node.id={i}", f"zookeeper.connect={zk_connect}",
                        f"zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}", *extra)
            for i in range(1, count + 1)]


def cluster_metadata(broker: BrokerProcess, topic: str | None = None) -> object:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    return admin.list_topics(topic=topic, timeout=10)


def describe(broker: BrokerProcess, topic: str) -> tuple[list[int], int, dict[int, tuple]]:
    """(live broker ids, controller id, {partition: (leader, replicas, isr)}) from one broker
    alone (librdkafka would otherwise merge what several brokers say)."""
    md = cluster_metadata(broker)  # all topics: naming one would auto-create it
    parts = {p.id: (p.leader, tuple(p.replicas), tuple(p.isrs))
             for p in md.topics[topic].partitions.values()} if topic in md.topics else {}
    return sorted(md.brokers), md.controller_id, parts


def create_topic(broker: BrokerProcess, name: str, partitions: int, rf: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, rf)], operation_timeout=10)
    futures[name].result(timeout=30)


def leaders_known(brokers: list[BrokerProcess], topic: str, partitions: int) -> Callable[[], bool]:
    def check() -> bool:
        views = [describe(b, topic)[2] for b in brokers]
        return all(len(v) == partitions and all(p[0] >= 0 for p in v.values()) for v in views) \
            and all(v == views[0] for v in views)
    return check


def test_metadata_agrees_and_rf1_topics_spread(make_broker: MakeBroker, zk_connect: str,
                                               topic_name: str) -> None:
    brokers = start_cluster(make_broker, zk_connect)
    eventually(lambda: all(describe(b, topic_name)[0] == [1, 2, 3] for b in brokers),
               what="every broker listing all three")
    create_topic(brokers[1], topic_name, 6)
    eventually(leaders_known(brokers, topic_name, 6), what="leaders on every broker")
    _, controller, parts = describe(brokers[0], topic_name)
    assert controller in (1, 2, 3)
    assert all(describe(b, topic_name)[1] == controller for b in brokers)
    for b in brokers:  # DescribeCluster too (cluster status, kafka-cluster tools)
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        described = admin.describe_cluster(request_timeout=10).result(timeout=30)
        assert sorted(n.id for n in described.nodes) == [1, 2, 3]
        assert described.controller.id == controller
    # RF 1 over 3 brokers: every broker leads two partitions, its own single replica.
    assert sorted(leader for leader, _, _ in parts.values()) == [1, 1, 2, 2, 3, 3]
    assert all(replicas == (leader,) == isr for leader, replicas, isr in parts.values())
    # Each broker made the logs of its own partitions only.
    for i, b in enumerate(brokers, start=1):
        own = sorted(p for p, (leader, _, _) in parts.items() if leader == i)
        on_disk = sorted(int(d.name.rsplit("-", 1)[1]) for d in b.data_dir.iterdir()
                         if d.is_dir() and d.name.startswith(topic_name + "-"))
        assert on_disk == own
    # Kafka's znodes: the state of partition 0 as the controller wrote it.
    with raw_client(zk_connect) as zk:
        state = json.loads(zk.get(f"/brokers/topics/{topic_name}/partitions/0/state")[0])
        assert state["leader"] == parts[0][0] and state["isr"] == [parts[0][0]]
        assert json.loads(zk.get("/controller")[0])["brokerid"] == controller


def test_produce_consume_across_brokers_and_not_leader(make_broker: MakeBroker, zk_connect: str,
                                                       topic_name: str) -> None:
    brokers = start_cluster(make_broker, zk_connect)
    eventually(lambda: describe(brokers[0], topic_name)[0] == [1, 2, 3], what="three brokers")
    create_topic(brokers[0], topic_name, 3)
    eventually(leaders_known(brokers, topic_name, 3), what="leaders")
    producer = Producer({"bootstrap.servers": brokers[2].bootstrap, "acks": "all",
                         "enable.idempotence": True})
    for i in range(300):
        producer.produce(topic_name, value=b"v%d" % i, partition=i % 3)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": brokers[1].bootstrap, "group.id": "g",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic_name, p, 0) for p in range(3)])
    got: dict[int, list[bytes]] = {0: [], 1: [], 2: []}
    deadline = time.monotonic() + 30
    while sum(map(len, got.values())) < 300 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got[msg.partition()].append(msg.value())
    consumer.close()
    for p in range(3):
        assert got[p] == [b"v%d" % i for i in range(p, 300, 3)]
    # A broker that does not lead a partition refuses to take produce for it.
    _, _, parts = describe(brokers[0], topic_name)
    leader0 = parts[0][0]
    other = next(b for i, b in enumerate(brokers, start=1) if i != leader0)
    assert produce_error(other, topic_name, 0) == "NOT_LEADER_OR_FOLLOWER"


def produce_error(broker: BrokerProcess, topic: str, partition: int) -> str:
    """The error code name a raw Produce to ``broker`` gets for one partition."""
    with WireClient.to(broker.bootstrap) as client:
        response = client.request(produce(topic, values_batch([b"x"]), partition, acks=1))
    return str(response.responses[0].partition_responses[0].error_code.name).upper()


def test_controller_kill9_elects_another(make_broker: MakeBroker, zk_connect: str,
                                         topic_name: str) -> None:
    brokers = start_cluster(make_broker, zk_connect)
    eventually(lambda: describe(brokers[0], topic_name)[0] == [1, 2, 3], what="three brokers")
    create_topic(brokers[0], topic_name, 3)
    eventually(leaders_known(brokers, topic_name, 3), what="leaders")
    with raw_client(zk_connect) as zk:
        epoch = int(zk.get("/controller_epoch")[0])
        controller = json.loads(zk.get("/controller")[0])["brokerid"]
        killed = brokers[controller - 1]
        killed.kill9()
        started = time.monotonic()
        survivors = [b for b in brokers if b is not killed]

        def moved() -> bool:
            try:  # /controller may go between any two reads: between two controllers
                data = zk.get("/controller")[0]
            except NoNodeError:
                return False
            return json.loads(data)["brokerid"] != controller
        eventually(moved, timeout=SESSION_TIMEOUT_MS / 1000 + 20, what="a new controller")
        assert int(zk.get("/controller_epoch")[0]) == epoch + 1
        # The dead broker's registration is gone and its partition moved off... it had no
        # other replica (RF 1): leader -1 until it comes back.
        assert str(controller) not in zk.get_children("/brokers/ids")
        eventually(lambda: all(describe(b, topic_name)[0] == sorted(
            i for i in (1, 2, 3) if i != controller) for b in survivors), what="broker gone")
        failover = time.monotonic() - started
        _, _, parts = describe(survivors[0], topic_name)
        assert all(leader != controller for leader, _, _ in parts.values())
        print(f"controller failover after kill -9: {failover:.1f} s")
        # Back again: it leads its partitions once more.
        killed.restart()
        eventually(leaders_known(brokers, topic_name, 3), timeout=30, what="leaders again")
        assert sorted(describe(brokers[0], topic_name)[0]) == [1, 2, 3]


def test_without_zookeeper_nothing_changes(make_broker: MakeBroker, topic_name: str) -> None:
    broker = make_broker()
    create_topic(broker, topic_name, 2)
    live, controller, parts = describe(broker, topic_name)
    assert len(live) == 1 and controller == live[0]
    assert [leader for leader, _, _ in parts.values()] == [live[0], live[0]]
    with pytest.raises(KafkaException) as info:
        create_topic(broker, topic_name + "-rf2", 1, rf=2)
    assert info.value.args[0].code() == KafkaError.INVALID_REPLICATION_FACTOR


def test_consumer_group_coordinated_by_the_offsets_partition_leader(
        make_broker: MakeBroker, zk_connect: str, topic_name: str) -> None:
    brokers = start_cluster(make_broker, zk_connect, 3, "offsets.topic.num.partitions=3")
    eventually(lambda: describe(brokers[0], topic_name)[0] == [1, 2, 3], what="three brokers")
    create_topic(brokers[0], topic_name, 3)
    eventually(leaders_known(brokers, topic_name, 3), what="leaders")
    producer = Producer({"bootstrap.servers": brokers[0].bootstrap})
    for i in range(30):
        producer.produce(topic_name, value=b"%d" % i, partition=i % 3)
    assert producer.flush(30) == 0
    group = topic_name + "-g"
    consumer = Consumer({"bootstrap.servers": brokers[0].bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic_name])
    seen = 0
    deadline = time.monotonic() + 60
    while seen < 30 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            seen += 1
    assert seen == 30
    consumer.commit(asynchronous=False)
    consumer.close()
    # Every broker names the same coordinator: the leader of the group's offsets partition.
    coordinators = set()
    for b in brokers:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        result = admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group)])[group].result(timeout=30)
        assert sorted(tp.offset for tp in result.topic_partitions) == [10, 10, 10]
        described = admin.describe_consumer_groups([group])[group].result(timeout=30)
        coordinators.add(described.coordinator.id)
    assert len(coordinators) == 1
    _, _, offsets_parts = describe(brokers[0], "__consumer_offsets")
    assert coordinators <= {leader for leader, _, _ in offsets_parts.values()}
    # A broker that is not the coordinator answers NOT_COORDINATOR to group requests.
    with WireClient.to(next(b for i, b in enumerate(brokers, 1)
                            if i not in coordinators).bootstrap) as client:
        answer = client.request(HeartbeatRequest(group_id=group, generation_id=1,
                                                 member_id="m", group_instance_id=None))
    assert answer.error_code.name.upper() == "NOT_COORDINATOR"


def test_admin_rules_and_deletion_in_a_cluster(make_broker: MakeBroker, zk_connect: str,
                                               topic_name: str) -> None:
    brokers = start_cluster(make_broker, zk_connect)
    eventually(lambda: describe(brokers[0], topic_name)[0] == [1, 2, 3], what="three brokers")
    admin = AdminClient({"bootstrap.servers": brokers[0].bootstrap})
    too_many = admin.create_topics([NewTopic(topic_name + "-rf4", 1, 4)])
    with pytest.raises(KafkaException) as info:
        too_many[topic_name + "-rf4"].result(timeout=30)
    assert info.value.args[0].code() == KafkaError.INVALID_REPLICATION_FACTOR
    assert "larger than available brokers: 3" in info.value.args[0].str()
    unknown = admin.create_topics([NewTopic(topic_name + "-x", 1, replica_assignment=[[1, 9]])])
    with pytest.raises(KafkaException) as info:
        unknown[topic_name + "-x"].result(timeout=30)
    assert info.value.args[0].code() == KafkaError.INVALID_REPLICA_ASSIGNMENT
    explicit = admin.create_topics([NewTopic(topic_name, 2, replica_assignment=[[3, 1], [2, 3]])])
    explicit[topic_name].result(timeout=30)
    eventually(leaders_known(brokers, topic_name, 2), what="leaders")
    parts = describe(brokers[1], topic_name)[2]
    assert parts[0][:2] == (3, (3, 1)) and parts[1][:2] == (2, (2, 3))
    # Deletion: requested on one broker, completed by the controller, logs gone everywhere.
    admin.delete_topics([topic_name], operation_timeout=30)[topic_name].result(timeout=60)

    def gone() -> bool:
        dirs = [d for b in brokers for d in b.data_dir.iterdir()
                if d.name.startswith(topic_name + "-")]
        return not dirs and all(topic_name not in cluster_metadata(b).topics for b in brokers)
    eventually(gone, timeout=30, what="the topic gone from every broker and disk")
    with raw_client(zk_connect) as zk:
        assert not zk.exists(f"/brokers/topics/{topic_name}")
        assert not zk.get_children("/admin/delete_topics")


def test_unreachable_zookeeper_is_one_line(make_broker: MakeBroker) -> None:
    import subprocess

    from tests.helpers.broker_process import free_port

    broker = make_broker(f"zookeeper.connect=127.0.0.1:{free_port()}",
                         "zookeeper.connection.timeout.ms=1000", start=False)
    result = subprocess.run(broker.command(), capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1].startswith(
        "Error: broker stopped: cannot reach ZooKeeper at 127.0.0.1:"), result.stderr[-2000:]
    assert "Traceback" not in result.stderr


def test_a_broker_restarted_at_once_after_kill9_waits_for_its_old_session(
        make_broker: MakeBroker, zk_connect: str, topic_name: str) -> None:
    brokers = start_cluster(make_broker, zk_connect)
    eventually(lambda: describe(brokers[0], topic_name)[0] == [1, 2, 3], what="three brokers")
    brokers[2].kill9()
    brokers[2].restart()  # its registration is still there until the session expires
    eventually(lambda: describe(brokers[0], topic_name)[0] == [1, 2, 3], timeout=30,
               what="broker 3 registered again")
    assert "waiting for its session to expire" in brokers[2].stderr_text()
