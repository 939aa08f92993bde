"""Incremental fetch sessions (KIP-227) between real brokers: what a leader answers a follower's
session requests on the wire, and that replication through sessions loses nothing."""

from __future__ import annotations

import datetime
import time
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic, ForgottenTopic

from tests.conftest import MakeBroker
from tests.integration.wire import WireClient

from .helpers import eventually, read_to_end
from .test_cluster_brokers import describe, start_cluster


def _fetch(client: WireClient, session_id: int, epoch: int, topic: str,
           offsets: dict[int, int], *, replica: int = 2, forget: tuple[int, ...] = (),
           wait_ms: int = 200) -> Any:
    partitions = tuple(FetchPartition(partition=p, current_leader_epoch=-1, fetch_offset=o,
                                      last_fetched_epoch=-1, log_start_offset=-1,
                                      partition_max_bytes=1 << 20)
                       for p, o in offsets.items())
    return client.request(FetchRequest(
        cluster_id=None, replica_id=replica, max_wait=datetime.timedelta(milliseconds=wait_ms),
        min_bytes=1, max_bytes=10 << 20, isolation_level=0, session_id=session_id,
        session_epoch=epoch,
        topics=(FetchTopic(topic=topic, partitions=partitions),) if partitions else (),
        forgotten_topics_data=(ForgottenTopic(topic=topic, partitions=forget),)
        if forget else (),
        rack_id=""))


def _carried(response: Any) -> dict[int, Any]:
    return {p.partition_index: p for t in response.responses for p in t.partitions}


def _produce(bootstrap: str, topic: str, partition: int, count: int, acks: str = "1") -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks})
    for i in range(count):
        producer.produce(topic, b"r%d" % i, partition=partition)
    assert producer.flush(30) == 0


def test_a_leader_answers_a_followers_session_with_news_only(
        make_broker: MakeBroker, zk_connect: str, topic_name: str) -> None:
    brokers = start_cluster(make_broker, zk_connect, 3)
    eventually(lambda: describe(brokers[0], topic_name)[0] == [1, 2, 3], what="three brokers")
    admin = AdminClient({"bootstrap.servers": brokers[0].bootstrap})
    admin.create_topics([NewTopic(topic_name, 2, replica_assignment=[[1, 2], [1, 2]])])[
        topic_name].result(30)
    eventually(lambda: all(len(p[2]) == 2 and p[0] == 1
                           for p in describe(brokers[0], topic_name)[2].values())
               and len(describe(brokers[0], topic_name)[2]) == 2, what="leader 1, ISR of two")
    with WireClient.to(brokers[0].bootstrap) as leader:
        # Broker 2's point of view: a full request opens the session and is answered in full.
        opened = _fetch(leader, 0, 0, topic_name, {0: 0, 1: 0})
        assert opened.error_code == ErrorCode.none and opened.session_id > 0
        session = opened.session_id
        assert sorted(_carried(opened)) == [0, 1]
        # Nothing changed: an incremental request naming nothing gets nothing back.
        quiet = _fetch(leader, session, 1, topic_name, {})
        assert quiet.error_code == ErrorCode.none and quiet.session_id == session
        assert _carried(quiet) == {}
        # Records on partition 1: the answer carries partition 1 only, with its records,
        # although the request named no partition (the session remembers offset 0).
        _produce(brokers[0].bootstrap, topic_name, 1, 3)
        news = _fetch(leader, session, 2, topic_name, {})
        assert list(_carried(news)) == [1]
        assert _carried(news)[1].records, "partition 1's records"
        # A wrong epoch, an unknown id, and the id on another connection: session errors.
        assert _fetch(leader, session, 9, topic_name, {}).error_code == \
            ErrorCode.invalid_fetch_session_epoch
        assert _fetch(leader, session + 777, 3, topic_name, {}).error_code == \
            ErrorCode.fetch_session_id_not_found
        with WireClient.to(brokers[0].bootstrap) as other:
            assert _fetch(other, session, 3, topic_name, {}).error_code == \
                ErrorCode.fetch_session_id_not_found
            # A consumer's request to open a session is answered in full, without one.
            consumer = _fetch(other, 0, 0, topic_name, {0: 0, 1: 0}, replica=-1, wait_ms=0)
            assert consumer.error_code == ErrorCode.none and consumer.session_id == 0
            assert sorted(_carried(consumer)) == [0, 1]
        # The session is intact after the errors: forget partition 1, then records there
        # are not carried any more; records on partition 0 are.
        forgot = _fetch(leader, session, 3, topic_name, {}, forget=(1,))
        assert forgot.error_code == ErrorCode.none
        _produce(brokers[0].bootstrap, topic_name, 1, 2)
        assert 1 not in _carried(_fetch(leader, session, 4, topic_name, {}))
        _produce(brokers[0].bootstrap, topic_name, 0, 2)
        assert list(_carried(_fetch(leader, session, 5, topic_name, {}))) == [0]


def test_replication_through_sessions_keeps_every_partition(
        make_broker: MakeBroker, zk_connect: str, topic_name: str) -> None:
    """A partition left out of a follower's incremental requests for seconds (only another
    one is written) still reaches every replica when it is written again, with acks=all and
    min.insync.replicas=3, and survives its leader's kill -9."""
    # A lag time long enough that a follower starved of CPU on a loaded machine stays in.
    brokers = start_cluster(make_broker, zk_connect, 3, "replica.lag.time.max.ms=5000")
    eventually(lambda: describe(brokers[0], topic_name)[0] == [1, 2, 3], what="three brokers")
    busy, still = topic_name + "-busy", topic_name + "-still"
    admin = AdminClient({"bootstrap.servers": brokers[0].bootstrap})
    for future in admin.create_topics([
            NewTopic(busy, 1, 3),
            NewTopic(still, 1, 3, config={"min.insync.replicas": "3"})]).values():
        future.result(30)
    eventually(lambda: all(len(describe(brokers[0], t)[2].get(0, (-1, (), ()))[2]) == 3
                           for t in (busy, still)), what="ISRs of three")
    bootstrap = ",".join(b.bootstrap for b in brokers)
    _produce(bootstrap, still, 0, 1, acks="all")
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 1})
    isr_sizes = set()
    deadline = time.monotonic() + 6
    sent = 0
    while time.monotonic() < deadline and sent < 200_000:
        for _ in range(100):
            producer.produce(busy, b"b", partition=0)
            sent += 1
        producer.flush(30)
        isr_sizes.add(len(describe(brokers[0], still)[2][0][2]))
    assert isr_sizes == {3}, f"ISR sizes of the still partition: {isr_sizes}"
    _produce(bootstrap, still, 0, 10, acks="all")
    leader = describe(brokers[0], still)[2][0][0]
    brokers[leader - 1].kill9()
    survivor = next(b for i, b in enumerate(brokers, 1) if i != leader)
    eventually(lambda: describe(survivor, still)[2][0][0] not in (leader, -1), timeout=60,
               what="a new leader of the still partition")
    # The new leader's high watermark reaches 11 once the other follower fetched from it.
    eventually(lambda: _end(survivor.bootstrap, still) == 11, timeout=60,
               what="all 11 records visible on the new leader")
    assert read_to_end(survivor.bootstrap, still) == [b"r0"] + [b"r%d" % i for i in range(10)]


def _end(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused"})
    try:
        return int(consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1])
    finally:
        consumer.close()
