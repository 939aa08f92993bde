"""Authorized operations (KIP-430): with no authorizer, every operation of the resource.

Clients ask for them in Metadata (v8-v10 for the cluster, v8+ for topics), DescribeCluster,
DescribeGroups and ConsumerGroupDescribe; without the flag Kafka sends Integer.MIN_VALUE.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicCollection
from confluent_kafka.admin import AclOperation, AdminClient
from kio.schema.consumer_group_describe.v0.request import ConsumerGroupDescribeRequest
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v10.request import MetadataRequest as MetadataV10
from kio.schema.metadata.v10.request import MetadataRequestTopic as TopicV10
from kio.schema.metadata.v12.request import MetadataRequest as MetadataV12
from kio.schema.metadata.v12.request import MetadataRequestTopic as TopicV12

from .clients import create_topic
from .wire import WireClient

pytestmark = pytest.mark.timeout(60)

TIMEOUT = 15
NOT_REQUESTED = -(2**31)
# Kafka's AclOperation codes of what each resource type supports.
CLUSTER = {"CREATE": 5, "ALTER": 7, "DESCRIBE": 8, "CLUSTER_ACTION": 9,
           "DESCRIBE_CONFIGS": 10, "ALTER_CONFIGS": 11, "IDEMPOTENT_WRITE": 12}
TOPIC = {"READ": 3, "WRITE": 4, "CREATE": 5, "DELETE": 6, "ALTER": 7, "DESCRIBE": 8,
         "DESCRIBE_CONFIGS": 10, "ALTER_CONFIGS": 11}
GROUP = {"READ": 3, "DELETE": 6, "DESCRIBE": 8}


def bits(operations: dict[str, int]) -> int:
    return sum(1 << code for code in operations.values())


def names(operations: list[AclOperation] | None) -> set[str]:
    assert operations is not None
    return {op.name for op in operations}


def test_admin_client_topics_and_cluster(broker: Any, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topics = admin.describe_topics(TopicCollection([topic_name]),
                                   include_authorized_operations=True)
    assert names(topics[topic_name].result(TIMEOUT).authorized_operations) == set(TOPIC)
    cluster = admin.describe_cluster(include_authorized_operations=True).result(TIMEOUT)
    assert names(cluster.authorized_operations) == set(CLUSTER)
    plain = admin.describe_topics(TopicCollection([topic_name]))[topic_name].result(TIMEOUT)
    assert not plain.authorized_operations


def test_metadata_v10_cluster_and_topic_fields(broker: Any, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name)
    missing = f"missing-{uuid.uuid4().hex[:8]}"

    def ask(flag: bool) -> Any:
        with WireClient.to(broker.bootstrap) as wire:
            return wire.request(MetadataV10(
                topics=(TopicV10(name=topic_name, topic_id=None),
                        TopicV10(name=missing, topic_id=None)),
                allow_auto_topic_creation=False,
                include_cluster_authorized_operations=flag,
                include_topic_authorized_operations=flag,
            ))

    asked = ask(True)
    assert asked.cluster_authorized_operations == bits(CLUSTER)
    found, unknown = asked.topics
    assert found.error_code == ErrorCode.none and found.topic_authorized_operations == bits(TOPIC)
    # Kafka answers for a name it may describe, even one that does not exist.
    assert unknown.error_code == ErrorCode.unknown_topic_or_partition
    assert unknown.topic_authorized_operations == bits(TOPIC)
    plain = ask(False)
    assert plain.cluster_authorized_operations == NOT_REQUESTED
    assert [t.topic_authorized_operations for t in plain.topics] == [NOT_REQUESTED] * 2


def test_metadata_v12_topics(broker: Any, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name)
    with WireClient.to(broker.bootstrap) as wire:
        response = wire.request(MetadataV12(
            topics=(TopicV12(name=topic_name, topic_id=None),),
            allow_auto_topic_creation=False, include_topic_authorized_operations=True))
    assert response.topics[0].topic_authorized_operations == bits(TOPIC)


def test_described_groups(make_broker: Any, topic_name: str) -> None:
    broker = make_broker("group.consumer.heartbeat.interval.ms=300")
    create_topic(broker.bootstrap, topic_name)
    classic, kip848 = f"classic-{uuid.uuid4().hex[:8]}", f"kip848-{uuid.uuid4().hex[:8]}"
    consumers = [
        Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                  "group.protocol": protocol, "auto.offset.reset": "earliest"})
        for group, protocol in ((classic, "classic"), (kip848, "consumer"))
    ]
    try:
        for c in consumers:
            c.subscribe([topic_name])
        deadline = time.monotonic() + 30
        while not all(c.assignment() for c in consumers):
            assert time.monotonic() < deadline, "the consumers never got their partition"
            for c in consumers:
                c.poll(0.05)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        described = admin.describe_consumer_groups(
            [classic], include_authorized_operations=True)[classic].result(TIMEOUT)
        assert names(described.authorized_operations) == set(GROUP)
        with WireClient.to(broker.bootstrap) as wire:
            asked = wire.request(ConsumerGroupDescribeRequest(
                group_ids=(kip848, "no-such-group"), include_authorized_operations=True))
            plain = wire.request(ConsumerGroupDescribeRequest(
                group_ids=(kip848,), include_authorized_operations=False))
        group, missing = asked.groups
        assert group.error_code == ErrorCode.none
        assert group.authorized_operations == bits(GROUP)
        assert missing.error_code == ErrorCode.group_id_not_found
        assert missing.authorized_operations == NOT_REQUESTED
        assert plain.groups[0].authorized_operations == NOT_REQUESTED
    finally:
        for c in consumers:
            c.close()
