"""Kafka 4.1/4.2 protocol versions: what clients infer from ApiVersions, and topic-id requests.

kafka-python reads the broker's release off the highest versions it advertises (ListOffsets v11
means 4.2) and uses the newest versions both sides speak, so its producer, consumer and admin
calls exercise the bumped versions. The topic-id versions (Produce v13, OffsetCommit and
OffsetFetch v10) are also driven with raw kio requests, to check unknown ids get Kafka's
UNKNOWN_TOPIC_ID and that the broker keeps serving.
"""

from __future__ import annotations

import base64
import datetime
import importlib
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata
from kio.schema.errors import ErrorCode

from tests.integration.clients import create_topic, unique
from tests.integration.wire import WireClient, request_class
from tests.unit.batchgen import simple_batch

PRODUCE, LIST_OFFSETS, METADATA, OFFSET_COMMIT, OFFSET_FETCH = 0, 2, 3, 8, 9
DESCRIBE_GROUPS, DESCRIBE_CLUSTER = 15, 60


@pytest.fixture
def admin(broker: Any) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=15000)
    yield client
    client.close()


def _module(api_key: int, version: int) -> Any:
    """kio's module of this request version (the request class and its nested classes)."""
    return importlib.import_module(request_class(api_key, version).__module__)


def topic_id(wire: WireClient, name: str) -> uuid.UUID:
    """The topic's id, from Metadata v13 (which must answer with a top-level error code)."""
    m = _module(METADATA, 13)
    resp = wire.request(m.MetadataRequest(
        topics=(m.MetadataRequestTopic(topic_id=None, name=name),),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False))
    assert resp.error_code == ErrorCode.none
    (topic,) = resp.topics
    assert topic.error_code == ErrorCode.none and topic.topic_id is not None
    return topic.topic_id


def produce_v13(wire: WireClient, tid: uuid.UUID | None, count: int = 1) -> Any:
    m = _module(PRODUCE, 13)
    return wire.request(m.ProduceRequest(
        transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=10),
        topic_data=(m.TopicProduceData(topic_id=tid, partition_data=(
            m.PartitionProduceData(index=0, records=simple_batch(count)),)),)))


def test_kafka_python_infers_kafka_4_2(admin: KafkaAdminClient) -> None:
    """kafka-python reads ListOffsets v11 as Kafka 4.2 (it read 4.0 before the bump)."""
    (node,) = admin.describe_cluster()["brokers"]
    data = admin.get_broker_version_data(node["broker_id"])
    assert tuple(data.broker_version) == (4, 2)
    versions = admin.api_versions()
    expected = {"Produce": 13, "Fetch": 18, "ListOffsets": 11, "Metadata": 13,
                "OffsetCommit": 10, "OffsetFetch": 10, "DescribeGroups": 6,
                "DescribeCluster": 2, "DescribeTopicPartitions": 0,
                "ListConfigResources": 1}
    got = {key.name: versions[key][1] for key in versions if key.name in expected}
    assert got == expected
    # DescribeQuorum has no meaning without KRaft: never advertised.
    assert all(key.name != "DescribeQuorum" for key in versions)


def test_kafka_python_round_trip_on_newest_versions(broker: Any,
                                                    admin: KafkaAdminClient) -> None:
    """Producer (Produce v13: by topic id), consumer (Fetch v18, ListOffsets v11) and offset
    commit/fetch (v10: by topic id) of kafka-python against the 4.2 versions."""
    topic, group = unique("p42-rt"), unique("p42-g")
    create_topic(broker.bootstrap, topic)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    try:
        for i in range(5):
            producer.send(topic, key=b"k", value=f"v{i}".encode()).get(timeout=15)
    finally:
        producer.close()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group,
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             consumer_timeout_ms=15000)
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        values = []
        for record in consumer:
            values.append(record.value)
            if len(values) == 5:
                break
        assert values == [f"v{i}".encode() for i in range(5)]
        assert consumer.end_offsets([tp]) == {tp: 5}
        assert consumer.beginning_offsets([tp]) == {tp: 0}
        consumer.commit({tp: OffsetAndMetadata(3, "meta", -1)})
        assert consumer.committed(tp) == 3
    finally:
        consumer.close()
    offsets = admin.list_group_offsets(group)[group]
    assert offsets[TopicPartition(topic, 0)].offset == 3


def test_produce_v13_by_topic_id(broker: Any) -> None:
    topic = unique("p42-produce")
    create_topic(broker.bootstrap, topic)
    with WireClient.to(broker.bootstrap) as wire:
        tid = topic_id(wire, topic)
        resp = produce_v13(wire, tid, count=3)
        (t,) = resp.responses
        assert t.topic_id == tid
        (p,) = t.partition_responses
        assert (p.error_code, p.base_offset) == (ErrorCode.none, 0)
        # An id that names no topic, and the zero id: UNKNOWN_TOPIC_ID, nothing appended.
        for bad in (uuid.uuid4(), None):
            (t,) = produce_v13(wire, bad).responses
            assert t.topic_id == bad
            assert [q.error_code for q in t.partition_responses] == [ErrorCode.unknown_topic_id]
        # Still serving: the next append lands right after the first three records.
        (t,) = produce_v13(wire, tid).responses
        assert t.partition_responses[0].base_offset == 3


def test_list_offsets_v11_earliest_pending_upload(broker: Any) -> None:
    """-6 (KIP-1023) has no answer without tiered storage; -1 still answers the end."""
    topic = unique("p42-lo")
    create_topic(broker.bootstrap, topic)
    m = _module(LIST_OFFSETS, 11)
    with WireClient.to(broker.bootstrap) as wire:
        produce_v13(wire, topic_id(wire, topic), count=2)
        resp = wire.request(m.ListOffsetsRequest(
            replica_id=-1, isolation_level=0, timeout=datetime.timedelta(seconds=1),
            topics=(m.ListOffsetsTopic(
                name=topic, partitions=tuple(
                    m.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1,
                                           timestamp=ts) for ts in (-6, -1))),)))
    pending, latest = resp.topics[0].partitions
    assert (pending.error_code, pending.offset) == (ErrorCode.none, -1)
    assert (latest.error_code, latest.offset) == (ErrorCode.none, 2)


def test_offset_commit_and_fetch_v10_by_topic_id(broker: Any) -> None:
    topic, group = unique("p42-oc"), unique("p42-ocg")
    create_topic(broker.bootstrap, topic)
    c, f = _module(OFFSET_COMMIT, 10), _module(OFFSET_FETCH, 10)
    unknown = uuid.uuid4()
    with WireClient.to(broker.bootstrap) as wire:
        tid = topic_id(wire, topic)
        resp = wire.request(c.OffsetCommitRequest(
            group_id=group, generation_id_or_member_epoch=-1, member_id="",
            group_instance_id=None, topics=tuple(
                c.OffsetCommitRequestTopic(topic_id=t, partitions=(
                    c.OffsetCommitRequestPartition(partition_index=0, committed_offset=7,
                                                   committed_leader_epoch=-1,
                                                   committed_metadata="m"),))
                for t in (tid, unknown))))
        assert [(t.topic_id, [p.error_code for p in t.partitions]) for t in resp.topics] == [
            (tid, [ErrorCode.none]), (unknown, [ErrorCode.unknown_topic_id])]

        def fetch(topics: Any) -> Any:
            (g,) = wire.request(f.OffsetFetchRequest(require_stable=False, groups=(
                f.OffsetFetchRequestGroup(group_id=group, member_id=None, member_epoch=-1,
                                          topics=topics),))).groups
            assert g.error_code == ErrorCode.none
            return [(t.topic_id, [(p.partition_index, p.committed_offset, p.error_code)
                                  for p in t.partitions]) for t in g.topics]

        asked = tuple(f.OffsetFetchRequestTopics(topic_id=t, partition_indexes=(0,))
                      for t in (tid, unknown))
        assert fetch(asked) == [(tid, [(0, 7, ErrorCode.none)]),
                                (unknown, [(0, -1, ErrorCode.unknown_topic_id)])]
        assert fetch(None) == [(tid, [(0, 7, ErrorCode.none)])]  # all of the group's


def test_describe_groups_v6_unknown_group(broker: Any) -> None:
    """v6 (KIP-1043) answers an unknown group GROUP_ID_NOT_FOUND; v5 a Dead group, no error."""
    group = unique("p42-nogroup")
    with WireClient.to(broker.bootstrap) as wire:
        for version, code in ((5, ErrorCode.none), (6, ErrorCode.group_id_not_found)):
            m = _module(DESCRIBE_GROUPS, version)
            (g,) = wire.request(m.DescribeGroupsRequest(
                groups=(group,), include_authorized_operations=False)).groups
            assert (g.error_code, g.group_state) == (code, "Dead")


def test_describe_cluster_v2(broker: Any) -> None:
    m = _module(DESCRIBE_CLUSTER, 2)
    with WireClient.to(broker.bootstrap) as wire:
        resp = wire.request(m.DescribeClusterRequest(
            include_cluster_authorized_operations=False, endpoint_type=1,
            include_fenced_brokers=True))
    assert resp.error_code == ErrorCode.none
    assert [b.is_fenced for b in resp.brokers] == [False]


# -- DescribeTopicPartitions (KIP-966) ---------------------------------------------------------


def test_describe_topic_partitions_pages(broker: Any, admin: KafkaAdminClient) -> None:
    """kafka-python's describe_topic_partitions, 3 partitions per page over 5 + 2 partitions
    and an unknown topic: the cursor walks every partition once, in order."""
    a, b, missing = unique("p42-dtp-a"), unique("p42-dtp-b"), unique("p42-dtp-none")
    create_topic(broker.bootstrap, a, partitions=5)
    create_topic(broker.bootstrap, b, partitions=2)
    seen: list[tuple[str, int]] = []
    cursor = None
    pages = 0
    unknown = []
    while pages < 10:
        pages += 1
        page = admin.describe_topic_partitions([a, b, missing], response_partition_limit=3,
                                               cursor=cursor)
        for t in page["topics"]:
            if t["name"] == missing:
                unknown.append(t["error_code"])
                continue
            assert t["error_code"] == 0 and t["topic_id"] is not None
            for p in t["partitions"]:
                assert p["leader_id"] == p["replica_nodes"][0] and p["isr_nodes"]
                seen.append((t["name"], p["partition_index"]))
        cursor = page["next_cursor"]
        if cursor is None:
            break
    expected = sorted([(a, i) for i in range(5)] + [(b, i) for i in range(2)])
    assert seen == expected
    assert pages == 3
    assert unknown and set(unknown) == {ErrorCode.unknown_topic_or_partition.value}


def test_describe_topic_partitions_all_topics(broker: Any, admin: KafkaAdminClient) -> None:
    """No topics named: every topic, by name, from the cursor's topic on."""
    name = unique("p42-dtp-all")
    create_topic(broker.bootstrap, name, partitions=2)
    page = admin.describe_topic_partitions([], cursor={"topic_name": name,
                                                       "partition_index": 1})
    names = [t["name"] for t in page["topics"]]
    assert names == sorted(names) and names[0] == name
    assert [p["partition_index"] for p in page["topics"][0]["partitions"]] == [1]


def test_describe_topic_partitions_bad_cursor(broker: Any) -> None:
    """A cursor outside the requested topics, or with a negative partition: INVALID_REQUEST
    on every requested topic (as Kafka), and the connection keeps serving."""
    name = unique("p42-dtp-bad")
    create_topic(broker.bootstrap, name)
    m = _module(75, 0)
    with WireClient.to(broker.bootstrap) as wire:
        for cursor in (m.Cursor(topic_name="elsewhere", partition_index=0),
                       m.Cursor(topic_name=name, partition_index=-1)):
            resp = wire.request(m.DescribeTopicPartitionsRequest(
                topics=(m.TopicRequest(name=name),), cursor=cursor))
            assert [(t.name, t.error_code) for t in resp.topics] == [
                (name, ErrorCode.invalid_request)]
            assert resp.next_cursor is None
        resp = wire.request(m.DescribeTopicPartitionsRequest(
            topics=(m.TopicRequest(name=name),), response_partition_limit=1))
        assert [(t.name, t.error_code, len(t.partitions)) for t in resp.topics] == [
            (name, ErrorCode.none, 1)]


# -- ListConfigResources (Kafka 4.1+) ------------------------------------------------------------


def test_list_config_resources(broker: Any, admin: KafkaAdminClient) -> None:
    """kafka-python's list_config_resources: topics, the broker and its logger, and groups."""
    topic, group = unique("p42-lcr"), unique("p42-lcr-g")
    create_topic(broker.bootstrap, topic)
    admin.alter_group_offsets(group, {TopicPartition(topic, 0): OffsetAndMetadata(1, "", -1)})
    everything = admin.list_config_resources()
    assert topic in everything["topic"]
    assert group in everything["group"]
    (node,) = admin.describe_cluster()["brokers"]
    assert everything["broker"] == [str(node["broker_id"])]
    assert everything["broker_logger"] == [str(node["broker_id"])]
    assert not everything.get("client_metrics")
    only_topics = admin.list_config_resources(["TOPIC"])
    assert set(only_topics) == {"topic"} and topic in only_topics["topic"]


def test_list_config_resources_unsupported_type(broker: Any) -> None:
    """A type v1 does not list (1 is UNKNOWN): UNSUPPORTED_VERSION, as Kafka; v0 lists the
    client-metrics resources only."""
    with WireClient.to(broker.bootstrap) as wire:
        m = _module(74, 1)
        resp = wire.request(m.ListConfigResourcesRequest(resource_types=(2, 1)))
        assert (resp.error_code, resp.config_resources) == (ErrorCode.unsupported_version, ())
        m0 = _module(74, 0)
        resp = wire.request(m0.ListConfigResourcesRequest())
        assert (resp.error_code, resp.config_resources) == (ErrorCode.none, ())


# -- ListPartitionReassignments and ElectLeaders on one node ---------------------------------------


def test_single_node_reassignments_and_elections(broker: Any, admin: KafkaAdminClient) -> None:
    """kafka-python's admin calls: nothing is being reassigned, and nothing is to elect (the
    only replica leads: ELECTION_NOT_NEEDED per partition, as Kafka answers)."""
    preferred = 0
    topic = unique("p42-elect")
    create_topic(broker.bootstrap, topic, partitions=2)
    assert admin.list_partition_reassignments() == {}
    assert admin.list_partition_reassignments([TopicPartition(topic, 0)]) == {}
    # kafka-python treats ELECTION_NOT_NEEDED as success (raise_errors stays on).
    result = admin.elect_leaders(preferred, {topic: [0, 1]})
    assert result.error_code == 0
    assert [(r.topic, [(p.partition_id, p.error_code) for p in r.partition_result])
            for r in result.replica_election_results] == [
        (topic, [(0, ErrorCode.election_not_needed.value),
                 (1, ErrorCode.election_not_needed.value)])]


def test_kafka_python_alter_replica_log_dirs_on_one_dir(broker: Any,
                                                      admin: KafkaAdminClient) -> None:
    """kafka-python's alter_replica_log_dirs (AlterReplicaLogDirs v2): the shared broker has one
    log dir, so a move there is a no-op success; a path outside log.dirs is LOG_DIR_NOT_FOUND
    and an unknown partition UNKNOWN_TOPIC_OR_PARTITION (moves between two dirs:
    tests/faults/test_alter_replica_log_dirs.py)."""
    topic = unique("p42-logdirs")
    create_topic(broker.bootstrap, topic)
    with WireClient.to(broker.bootstrap) as wire:
        described = wire.request(request_class(35, 4)(topics=None))
    (log_dir,) = [r.log_dir for r in described.results]
    result = admin.alter_replica_log_dirs({
        (topic, 0, 0): log_dir,
        (topic, 5, 0): log_dir,
        (unique("p42-none"), 0, 0): "/no/such/dir",
    })
    assert sorted((tpr.topic == topic, tpr.partition, err.__name__)
                  for tpr, err in result.items()) == [
        (False, 0, "LogDirNotFoundError"), (True, 0, "NoError"),
        (True, 5, "UnknownTopicOrPartitionError")]


def test_confluent_describe_topics(broker: Any) -> None:
    """confluent-kafka's describe_topics (librdkafka picks its request from the advertised
    versions) sees every partition with its leader, and the topic id Metadata reports."""
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AdminClient

    topic = unique("p42-cdt")
    create_topic(broker.bootstrap, topic, partitions=3)
    client = AdminClient({"bootstrap.servers": broker.bootstrap})
    (description,) = [f.result(15) for f in
                      client.describe_topics(TopicCollection([topic])).values()]
    assert description.name == topic
    assert [p.id for p in description.partitions] == [0, 1, 2]
    assert all(p.leader is not None and p.leader.id == p.replicas[0].id
               for p in description.partitions)
    with WireClient.to(broker.bootstrap) as wire:
        expected = topic_id(wire, topic)
    # librdkafka prints topic ids in base64, without padding.
    assert str(description.topic_id) == \
        base64.b64encode(expected.bytes).decode().rstrip("=")
