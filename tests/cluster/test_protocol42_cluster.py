"""Kafka 4.2's topic-id versions and new admin APIs on three brokers over ZooKeeper.

Topic ids come from the ZooKeeper metadata here, leaders from the controller's state znodes,
and the group coordinator may be any broker: kafka-python's DescribeTopicPartitions,
ListConfigResources and offset commits (v10, by topic id), and raw Produce v13 to the leader.
"""

from __future__ import annotations

from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.structs import OffsetAndMetadata
from kio.schema.errors import ErrorCode

from tests.conftest import MakeBroker
from tests.integration.clients import unique
from tests.integration.test_protocol42 import produce_v13, topic_id
from tests.integration.wire import WireClient

from .helpers import eventually
from .test_cluster_brokers import create_topic, start_cluster


def test_topic_ids_and_new_admin_apis_in_a_cluster(make_broker: MakeBroker,
                                                   zk_connect: str) -> None:
    brokers = start_cluster(make_broker, zk_connect)
    by_id = {i: b for i, b in enumerate(brokers, start=1)}
    topic, group = unique("p42-cl"), unique("p42-cl-g")
    create_topic(brokers[0], topic, partitions=2, rf=3)
    admin = KafkaAdminClient(bootstrap_servers=brokers[1].bootstrap, request_timeout_ms=15000)
    try:
        partitions: list[dict] = []

        def fully_replicated() -> bool:
            (t,) = admin.describe_topic_partitions([topic])["topics"]
            partitions[:] = t["partitions"]
            return t["error_code"] == 0 and len(partitions) == 2 and all(
                len(p["isr_nodes"]) == 3 for p in partitions)

        eventually(fully_replicated, what="both partitions with 3 in-sync replicas")
        assert all(p["leader_id"] in p["replica_nodes"] and sorted(p["replica_nodes"]) ==
                   [1, 2, 3] for p in partitions)
        everything = admin.list_config_resources()
        assert sorted(everything["broker"]) == ["1", "2", "3"]
        assert topic in everything["topic"]

        leader = by_id[partitions[0]["leader_id"]]
        with WireClient.to(leader.bootstrap) as wire:
            tid = topic_id(wire, topic)
            (t,) = produce_v13(wire, tid, count=2).responses
            assert [(p.error_code, p.base_offset) for p in t.partition_responses] == [
                (ErrorCode.none, 0)]
            (t,) = produce_v13(wire, None).responses
            assert t.partition_responses[0].error_code == ErrorCode.unknown_topic_id

        consumer = KafkaConsumer(bootstrap_servers=brokers[2].bootstrap, group_id=group,
                                 enable_auto_commit=False)
        try:
            tp = TopicPartition(topic, 0)
            consumer.commit({tp: OffsetAndMetadata(2, "", -1)})
            assert consumer.committed(tp) == 2
        finally:
            consumer.close()
        assert admin.list_group_offsets(group)[group][TopicPartition(topic, 0)].offset == 2
    finally:
        admin.close()
