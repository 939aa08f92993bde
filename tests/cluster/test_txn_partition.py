"""Transactions' partition side on three brokers (RF 3): a new leader has the same LSO and
aborted-transaction list as the old one, built while it followed.

Real brokers on a real ZooKeeper; transactions are written over the wire (a chosen producer
id, transactional batches, WriteTxnMarkers as a coordinator would send them), the leader is
killed with -9, and the new leader must answer ListOffsets(read_committed) and
read_committed fetches exactly as the old one did, then end the open transaction. Before
followers applied replicated markers, the new leader knew no open transaction (its LSO was
its high watermark) and no aborted one (read_committed consumers saw aborted records).
"""

from __future__ import annotations

from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode

from tests.conftest import MakeBroker
from tests.helpers.broker_process import BrokerProcess
from tests.integration.clients import consume, consumer
from tests.integration.txn_wire import fetch, latest, produce_txn, write_markers
from tests.integration.wire import WireClient

from .helpers import eventually
from .test_cluster_brokers import SESSION_TIMEOUT_MS, describe

P1, P2, P3 = 990_001, 990_002, 990_003


def _aborted(client: WireClient, topic: str) -> list[tuple[int, int]]:
    part = fetch(client, topic, 0, isolation=1)
    assert part.error_code == ErrorCode.none, part
    return [(int(t.producer_id), int(t.first_offset)) for t in part.aborted_transactions or ()]


def _state(broker: BrokerProcess, topic: str) -> tuple[int, int, list[tuple[int, int]]]:
    with WireClient.to(broker.bootstrap) as client:
        return (latest(client, topic, isolation=1), latest(client, topic, isolation=0),
                _aborted(client, topic))


def test_new_leader_has_the_same_lso_and_aborted_list(
        make_broker: MakeBroker, zk_connect: str, topic_name: str) -> None:
    brokers = [make_broker(f"node.id={i}", f"zookeeper.connect={zk_connect}",
                           f"zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}")
               for i in (1, 2, 3)]
    admin = AdminClient({"bootstrap.servers": brokers[1].bootstrap})
    admin.create_topics([NewTopic(topic_name, 1, replica_assignment=[[1, 2, 3]],
                                  config={"min.insync.replicas": "2"})],
                        operation_timeout=10)[topic_name].result(timeout=30)
    eventually(lambda: describe(brokers[1], topic_name)[2].get(0, (-1, (), ()))[2] != ()
               and len(describe(brokers[1], topic_name)[2][0][2]) == 3, what="a full ISR")
    assert describe(brokers[1], topic_name)[2][0][0] == 1
    with WireClient.to(brokers[0].bootstrap) as client:
        produce_txn(client, topic_name, P1, 0, ["a1", "a2"])
        b = produce_txn(client, topic_name, P2, 0, ["b1"])
        assert write_markers(client, topic_name, P1, True) == [ErrorCode.none]
        assert write_markers(client, topic_name, P2, False) == [ErrorCode.none]
        c = produce_txn(client, topic_name, P3, 0, ["c1"])
        produce_txn(client, topic_name, -1, -1, ["d1"], transactional=False)
    before = _state(brokers[0], topic_name)
    assert before[0] == c and before[2] == [(P2, b)]

    brokers[0].kill9()
    eventually(lambda: describe(brokers[1], topic_name)[2][0][0] in (2, 3), timeout=60,
               what="a new leader")
    leader = brokers[describe(brokers[1], topic_name)[2][0][0] - 1]
    eventually(lambda: _state(leader, topic_name) == before, timeout=30,
               what=f"the new leader's LSO, HW, aborted list to be {before}")

    with WireClient.to(leader.bootstrap) as client:
        assert write_markers(client, topic_name, P3, False) == [ErrorCode.none]
        lso, hw, aborted = _state(leader, topic_name)
        assert lso == hw and aborted == [(P2, b), (P3, c)]
    reader = consumer(leader.bootstrap, **{"isolation.level": "read_committed"})
    try:
        reader.assign([TopicPartition(topic_name, 0, 0)])
        assert [m.value().decode() for m in consume(reader, 3, 30)] == ["a1", "a2", "d1"]
    finally:
        reader.close()
