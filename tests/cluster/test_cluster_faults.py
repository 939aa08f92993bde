"""Kafka's replication fault tests on three real brokers and a real ZooKeeper.

Each test runs idempotent ``acks=all`` producers on a topic with replication factor 3 and
``min.insync.replicas=2`` while it breaks the cluster (kill -9, SIGSTOP past the ZooKeeper
session, a ZooKeeper restart, a divergent tail), then reads every partition back and lets
``moldau verify``'s checker judge it: every acknowledged record read exactly once, at the
offset it was acknowledged at, in send order per partition, nothing that was never sent.
"""

from __future__ import annotations

import json
import secrets
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.exceptions import NoNodeError

from moldau.verify.history import encode_value
from tests.conftest import MakeBroker
from tests.helpers.broker_process import BrokerProcess
from tests.helpers.zookeeper import ZooKeeperServer

from .acked import Sender, assert_nothing_lost, new_history, replica_batches
from .helpers import eventually, raw_client
from .test_cluster_brokers import SESSION_TIMEOUT_MS, describe, start_cluster

LAG_MS = 2000
CLUSTER_CONFIG = ("min.insync.replicas=2", f"replica.lag.time.max.ms={LAG_MS}")


def rf3_cluster(make_broker: MakeBroker, zk_connect: str, topic: str, partitions: int = 2,
                *extra: str) -> list[BrokerProcess]:
    """Three brokers and ``topic`` with RF 3 on them, every replica in sync."""
    brokers = start_cluster(make_broker, zk_connect, 3, *CLUSTER_CONFIG, *extra)
    eventually(lambda: describe(brokers[0], topic)[0] == [1, 2, 3], what="three brokers")
    admin = AdminClient({"bootstrap.servers": brokers[0].bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 3)])[topic].result(timeout=30)
    eventually(lambda: all_in_sync(brokers, topic, partitions), what="every ISR of three")
    return brokers


def all_in_sync(brokers: list[BrokerProcess], topic: str, partitions: int,
                via: BrokerProcess | None = None) -> bool:
    parts = describe(via or brokers[0], topic)[2]
    return len(parts) == partitions and all(
        leader > 0 and sorted(isr) == [1, 2, 3] for leader, _, isr in parts.values())


def leader_of(broker: BrokerProcess, topic: str, partition: int = 0) -> int:
    return int(describe(broker, topic)[2][partition][0])


def bootstrap_of(brokers: list[BrokerProcess]) -> str:
    return ",".join(b.bootstrap for b in brokers)


def test_leader_bounce_kill9_and_restart(make_broker: MakeBroker, zk_connect: str,
                                         topic_name: str) -> None:
    """kill -9 of a leader, restarted at once: a new leader is elected when its session
    expires, the old one comes back as a follower, truncates, catches up and rejoins."""
    brokers = rf3_cluster(make_broker, zk_connect, topic_name)
    history = new_history(topic_name, 2)
    sender = Sender(bootstrap_of(brokers), history).start()
    sender.wait_acked(100)
    leader = leader_of(brokers[0], topic_name)
    other = brokers[leader % 3]
    sender.quiesce()
    brokers[leader - 1].kill9()
    sender.resume()
    brokers[leader - 1].start()  # registers once its old session expired
    eventually(lambda: leader_of(other, topic_name) != leader, timeout=30,
               what="a new leader of partition 0")
    sender.wait_acked(100)
    eventually(lambda: all_in_sync(brokers, topic_name, 2, via=other), timeout=60,
               what="the bounced broker back in every ISR")
    sender.stop()
    assert_nothing_lost(other.bootstrap, history)


def test_controller_kill9_during_produce(make_broker: MakeBroker, zk_connect: str,
                                         topic_name: str) -> None:
    """kill -9 of the controller while producers run: another broker becomes controller at
    the next epoch and moves the dead broker's leaderships; restarted, it rejoins."""
    brokers = rf3_cluster(make_broker, zk_connect, topic_name, 3)
    history = new_history(topic_name, 3)
    sender = Sender(bootstrap_of(brokers), history).start()
    sender.wait_acked(100)
    with raw_client(zk_connect) as zk:
        def controller_now() -> int:
            try:
                return int(json.loads(zk.get("/controller")[0])["brokerid"])
            except NoNodeError:  # between two controllers
                return -1
        eventually(lambda: controller_now() > 0, what="a controller")
        epoch = int(zk.get("/controller_epoch")[0])
        controller = controller_now()
        sender.quiesce()
        brokers[controller - 1].kill9()
        sender.resume()
        survivor = brokers[controller % 3]
        eventually(lambda: controller_now() not in (controller, -1),
                   timeout=SESSION_TIMEOUT_MS / 1000 + 20, what="a new controller")
        assert int(zk.get("/controller_epoch")[0]) == epoch + 1
    eventually(lambda: all(leader not in (controller, -1) for leader, _, _ in
                           describe(survivor, topic_name)[2].values()), timeout=30,
               what="every partition led by a live broker")
    sender.wait_acked(100)
    brokers[controller - 1].start()
    eventually(lambda: all_in_sync(brokers, topic_name, 3, via=survivor), timeout=60,
               what="the old controller back in every ISR")
    sender.wait_acked(100)
    sender.stop()
    assert_nothing_lost(survivor.bootstrap, history)


def test_broker_paused_past_its_session_rejoins(make_broker: MakeBroker, zk_connect: str,
                                                topic_name: str) -> None:
    """SIGSTOP of a leader for longer than its ZooKeeper session: the others elect a new
    leader; resumed, it finds its session expired, steps down, registers again, catches up
    and rejoins the ISR. What it took while it could not replicate is never acknowledged."""
    brokers = rf3_cluster(make_broker, zk_connect, topic_name)
    history = new_history(topic_name, 2)
    sender = Sender(bootstrap_of(brokers), history).start()
    sender.wait_acked(100)
    leader = leader_of(brokers[0], topic_name)
    paused = brokers[leader - 1]
    other = brokers[leader % 3]
    with raw_client(zk_connect) as zk:
        _, stat = zk.get(f"/brokers/ids/{leader}")
        session = stat.ephemeralOwner
        sender.quiesce()
        paused.pause()
        sender.resume()
        try:
            eventually(lambda: zk.exists(f"/brokers/ids/{leader}") is None,
                       timeout=SESSION_TIMEOUT_MS / 1000 + 20, what="its session expired")
            eventually(lambda: leader_of(other, topic_name) not in (leader, -1), timeout=30,
                       what="a new leader of partition 0")
            sender.wait_acked(100)
        finally:
            paused.resume()
        eventually(lambda: zk.exists(f"/brokers/ids/{leader}") is not None, timeout=30,
                   what="the resumed broker registered again")
        assert zk.get(f"/brokers/ids/{leader}")[1].ephemeralOwner != session
    eventually(lambda: all_in_sync(brokers, topic_name, 2, via=other), timeout=60,
               what="the resumed broker back in every ISR")
    sender.wait_acked(100)
    sender.stop()
    assert_nothing_lost(other.bootstrap, history)
    assert "session lost" in paused.stderr_text()


def test_zookeeper_restart_during_produce(make_broker: MakeBroker, zk_connect: str,
                                          zookeeper: ZooKeeperServer, topic_name: str) -> None:
    """ZooKeeper stops for a few seconds under load, then comes back: the cluster converges
    (every ISR full, one controller), producing works again, nothing acknowledged is lost."""
    brokers = rf3_cluster(make_broker, zk_connect, topic_name)
    history = new_history(topic_name, 2)
    sender = Sender(bootstrap_of(brokers), history).start()
    sender.wait_acked(100)
    zookeeper.stop()
    try:
        time.sleep(3)
    finally:
        zookeeper.start()
    sender.wait_acked(150)
    eventually(lambda: all_in_sync(brokers, topic_name, 2), timeout=60,
               what="every ISR full again")
    eventually(lambda: len({describe(b, topic_name)[1] for b in brokers}) == 1
               and describe(brokers[0], topic_name)[1] in (1, 2, 3), timeout=30,
               what="one controller everyone agrees on")
    sender.stop()
    assert_nothing_lost(brokers[0].bootstrap, history)


@pytest.mark.timeout(180)
def test_follower_far_behind_truncates_catches_up_and_rejoins(
        make_broker: MakeBroker, zk_connect: str, topic_name: str) -> None:
    """A follower killed while ~21 MB are written (and a tail it had but the others never
    committed is possible): restarted, it truncates, copies the rest and rejoins the ISR."""
    brokers = rf3_cluster(make_broker, zk_connect, topic_name, 1)
    history = new_history(topic_name, 1)
    sender = Sender(bootstrap_of(brokers), history, interval=0.0,
                    config={"linger.ms": 20, "batch.size": 1 << 20})
    sender.send(100)
    leader = leader_of(brokers[0], topic_name)
    follower = brokers[leader % 3]
    follower.kill9()
    # ~21 MB while it is gone: big values (verify's header, padded) in big batches.
    sender.value_size = 8 << 10
    sender.send(2600, timeout=90)
    started = time.monotonic()
    follower.start()
    eventually(lambda: all_in_sync(brokers, topic_name, 1, via=brokers[leader - 1]),
               timeout=90, what="the restarted follower back in the ISR")
    print(f"follower rejoined the ISR {time.monotonic() - started:.1f} s after its restart")
    eventually(lambda: replica_batches(follower.data_dir, topic_name, 0)
               == replica_batches(brokers[leader - 1].data_dir, topic_name, 0), timeout=30,
               what="the follower's log equal to the leader's")
    assert_nothing_lost(brokers[leader - 1].bootstrap, history)



def test_divergent_tail_is_truncated_and_every_replica_ends_equal(
        make_broker: MakeBroker, zk_connect: str, topic_name: str) -> None:
    """A leader appends (acks=1) what its paused followers never get, then dies; a follower
    leads at the next epoch and takes other records at the same offsets. The old leader,
    restarted, truncates its tail (OffsetForLeaderEpoch) and every replica ends with the same
    log: no offset has two values, nothing acknowledged with acks=all is lost."""
    # The followers must stay in the ISR while paused, so one of them may be elected.
    brokers = start_cluster(make_broker, zk_connect, 3, "min.insync.replicas=2",
                            "replica.lag.time.max.ms=30000")
    eventually(lambda: describe(brokers[0], topic_name)[0] == [1, 2, 3], what="three brokers")
    admin = AdminClient({"bootstrap.servers": brokers[0].bootstrap})
    admin.create_topics([NewTopic(topic_name, 1, 3)])[topic_name].result(timeout=30)
    eventually(lambda: all_in_sync(brokers, topic_name, 1), what="an ISR of three")
    history = new_history(topic_name, 1)
    sender = Sender(bootstrap_of(brokers), history)
    sender.send(100)
    leader = leader_of(brokers[0], topic_name)
    old = brokers[leader - 1]
    followers = [b for i, b in enumerate(brokers, 1) if i != leader]
    tail_run = secrets.token_hex(4)
    for follower in followers:
        follower.pause()
    try:
        time.sleep(1.0)  # a fetch parked at the leader is answered (empty) before the tail
        lone = Producer({"bootstrap.servers": old.bootstrap, "acks": "1", "linger.ms": 0,
                         "enable.idempotence": False})
        for i in range(50):
            lone.produce(topic_name, encode_value(tail_run, 9, i), partition=0)
        assert lone.flush(10) == 0
        old.kill9()
    finally:
        for follower in followers:
            follower.resume()
    old_log = replica_batches(old.data_dir, topic_name, 0)
    survivor = followers[0]
    eventually(lambda: leader_of(survivor, topic_name) not in (leader, -1), timeout=30,
               what="a follower leading at a new epoch")
    sender.send(100)  # other records, at the offsets of the old leader's tail
    old.start()
    eventually(lambda: all_in_sync(brokers, topic_name, 1, via=survivor), timeout=60,
               what="the old leader back in the ISR")

    def logs() -> list[list[tuple[int, int, int]]]:
        return [replica_batches(b.data_dir, topic_name, 0) for b in brokers]
    eventually(lambda: all(log == logs()[0] for log in logs()), timeout=30,
               what="every replica with the same log")
    final = replica_batches(survivor.data_dir, topic_name, 0)
    gone = [batch for batch in old_log if batch not in final]
    assert gone, "the old leader had no divergent tail: the test proved nothing"
    assert "truncated to" in old.stderr_text()
    verdict = assert_nothing_lost(survivor.bootstrap, history)
    assert verdict.foreign == 0, "a record only the old leader had survived"


def test_replicas_converge_after_unclean_elections_with_interleaved_epochs(
        make_broker: MakeBroker, zk_connect: str, topic_name: str) -> None:
    """A follower whose latest epoch the leader never had must truncate to where their logs
    last agreed, even when the leader answers OffsetForLeaderEpoch with an epoch the
    follower does not know (Kafka then asks again with the follower's epoch before it).

    Replicas [1, 2, 3] (unclean elections on, acks=1): 1 leads and writes a tail that 3
    copies and 2 misses; 2 alone leads next (epoch e1) and writes other records there; 3
    alone leads next (e2 > e1) on its old tail; 2 leads again (e3) and 3 follows. Asked for
    e2, 2 answers e1 ending where e3 starts, past where 3's log and its own differ (3 has
    epoch 0 records where 2 has e1 records). Every replica must end with the same log."""
    brokers = [make_broker(f"node.id={i}", f"zookeeper.connect={zk_connect}",
                           "zookeeper.session.timeout.ms=2000", "replica.lag.time.max.ms=2000",
                           "unclean.leader.election.enable=true")
               for i in (1, 2, 3)]
    one, two, three = brokers
    eventually(lambda: describe(one, topic_name)[0] == [1, 2, 3], what="three brokers")
    admin = AdminClient({"bootstrap.servers": one.bootstrap})
    admin.create_topics([NewTopic(topic_name, 1, replica_assignment=[[1, 2, 3]])])[
        topic_name].result(timeout=30)
    eventually(lambda: all_in_sync(brokers, topic_name, 1), what="an ISR of three")

    def leads(broker: BrokerProcess, broker_id: int) -> None:
        eventually(lambda: leader_of(broker, topic_name) == broker_id, timeout=30,
                   what=f"broker {broker_id} leading")

    def write(broker: BrokerProcess, count: int, tag: bytes) -> None:
        producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "1",
                             "enable.idempotence": False, "linger.ms": 0})
        for i in range(count):
            producer.produce(topic_name, b"%s-%d" % (tag, i), partition=0)
            producer.flush(10)
        assert producer.flush(10) == 0

    write(one, 80, b"committed")
    eventually(lambda: replica_batches(one.data_dir, topic_name, 0)
               == replica_batches(two.data_dir, topic_name, 0)
               == replica_batches(three.data_dir, topic_name, 0),
               what="80 records on every replica")
    two.kill9()
    write(one, 20, b"tail-of-1")  # 3 copies it, 2 is down
    eventually(lambda: replica_batches(three.data_dir, topic_name, 0)
               == replica_batches(one.data_dir, topic_name, 0), what="3 with 1's tail")
    three.kill9()
    one.kill9()
    two.start()  # alone: leads at e1 (unclean), writes where 1's tail was
    leads(two, 2)
    write(two, 40, b"e1-of-2")
    two.kill9()
    three.start()  # alone: leads at e2 on 1's old tail
    leads(three, 3)
    write(three, 30, b"e2-of-3")
    three.kill9()
    two.start()  # leads at e3
    leads(two, 2)
    write(two, 10, b"e3-of-2")
    three.start()
    one.start()

    def logs() -> list[list[tuple[int, int, int]]]:
        return [replica_batches(b.data_dir, topic_name, 0) for b in brokers]
    eventually(lambda: all_in_sync(brokers, topic_name, 1, via=two), timeout=30,
               what="every replica back in the ISR")
    eventually(lambda: logs()[0] == logs()[1] == logs()[2], timeout=30,
               what="every replica with the same log")


def test_group_offsets_are_replicated_by_default(make_broker: MakeBroker, zk_connect: str,
                                                 topic_name: str) -> None:
    """``__consumer_offsets`` gets ``offsets.topic.replication.factor`` (3) replicas, not
    ``default.replication.factor`` (1): with ``min.insync.replicas=2`` a single replica
    refused every offset commit and group assignment (NOT_ENOUGH_REPLICAS), and one broker's
    loss would lose the group's offsets."""
    from confluent_kafka import Consumer, TopicPartition

    brokers = rf3_cluster(make_broker, zk_connect, topic_name, 1)
    sender = Sender(bootstrap_of(brokers), new_history(topic_name, 1))
    sender.send(10)
    consumer = Consumer({"bootstrap.servers": bootstrap_of(brokers), "group.id": topic_name,
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic_name])
        read = 0
        deadline = time.monotonic() + 60
        while read < 10 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                read += 1
        assert read == 10
        committed = consumer.commit(asynchronous=False)
        assert committed is not None and committed[0].offset == 10
        assert consumer.committed([TopicPartition(topic_name, 0)], timeout=30)[0].offset == 10
    finally:
        consumer.close()
    parts = describe(brokers[0], "__consumer_offsets")[2]
    assert parts and all(len(replicas) == 3 for _, replicas, _ in parts.values())
