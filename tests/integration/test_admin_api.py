"""Admin APIs driven by real clients: confluent-kafka's AdminClient, kafka-python for the rest.

Each test uses its own topic names, so they share the session broker without interfering.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourceType,
)

TIMEOUT = 15


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def admin(broker: Any) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def create(admin: AdminClient, name: str, partitions: int = 1,
           config: dict[str, str] | None = None) -> None:
    futures = admin.create_topics([NewTopic(name, partitions, config=config or {})])
    futures[name].result(TIMEOUT)


def error_of(future: Any) -> KafkaError:
    with pytest.raises(KafkaException) as info:
        future.result(TIMEOUT)
    err = info.value.args[0]
    assert isinstance(err, KafkaError)
    return err


def topic_configs(admin: AdminClient, name: str) -> dict[str, ConfigEntry]:
    resource = ConfigResource(ResourceType.TOPIC, name)
    result: dict[str, ConfigEntry] = admin.describe_configs([resource])[resource].result(TIMEOUT)
    return result


def partition_count(admin: AdminClient, name: str) -> int:
    meta = admin.list_topics(name, timeout=TIMEOUT)
    return len(meta.topics[name].partitions)


def produce(bootstrap: str, topic: str, count: int, **conf: Any) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, **conf})
    failures: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, _msg: Any) -> None:
        if err is not None:
            failures.append(err)

    for i in range(count):
        producer.produce(topic, value=f"m{i}".encode(), partition=0, on_delivery=on_delivery)
    assert producer.flush(TIMEOUT) == 0
    assert failures == []


# -- CreateTopics ---------------------------------------------------------------------------


def test_create_topic_with_defaults_and_configs(admin: AdminClient) -> None:
    name = unique("create")
    futures = admin.create_topics([NewTopic(name, 3, config={"retention.ms": "3600000"})])
    assert futures[name].result(TIMEOUT) is None
    assert partition_count(admin, name) == 3
    assert topic_configs(admin, name)["retention.ms"].value == "3600000"


def test_create_topic_uses_broker_default_partition_count(admin: AdminClient) -> None:
    name = unique("default-partitions")
    admin.create_topics([NewTopic(name)])[name].result(TIMEOUT)  # num_partitions=-1
    assert partition_count(admin, name) >= 1


def test_create_validate_only_creates_nothing(admin: AdminClient) -> None:
    name = unique("validate")
    futures = admin.create_topics([NewTopic(name, 2)], validate_only=True)
    assert futures[name].result(TIMEOUT) is None
    assert name not in admin.list_topics(timeout=TIMEOUT).topics


def test_create_invalid_config_reports_message(admin: AdminClient) -> None:
    name = unique("badconfig")
    futures = admin.create_topics([NewTopic(name, 1, config={"retention.ms": "soon"})])
    err = error_of(futures[name])
    assert err.code() == KafkaError.INVALID_CONFIG
    assert "retention.ms" in err.str()
    futures = admin.create_topics([NewTopic(name, 1, config={"no.such.config": "1"})])
    assert error_of(futures[name]).code() == KafkaError.INVALID_CONFIG
    assert name not in admin.list_topics(timeout=TIMEOUT).topics


def test_create_invalid_name(admin: AdminClient) -> None:
    futures = admin.create_topics([NewTopic("bad name!", 1)])
    assert error_of(futures["bad name!"]).code() == KafkaError.TOPIC_EXCEPTION


def test_create_existing_topic(admin: AdminClient) -> None:
    name = unique("exists")
    create(admin, name)
    err = error_of(admin.create_topics([NewTopic(name, 1)])[name])
    assert err.code() == KafkaError.TOPIC_ALREADY_EXISTS


def test_create_replication_factor_too_large(admin: AdminClient) -> None:
    name = unique("rf")
    err = error_of(admin.create_topics([NewTopic(name, 1, replication_factor=3)])[name])
    assert err.code() == KafkaError.INVALID_REPLICATION_FACTOR
    assert "larger than available brokers: 1" in err.str()


def test_create_manual_assignment(admin: AdminClient, broker: Any) -> None:
    node = admin.describe_cluster().result(TIMEOUT).controller.id
    good, bad = unique("assign"), unique("assign-bad")
    futures = admin.create_topics([
        # librdkafka wants the count too, and sends -1 with the assignment, as Kafka requires.
        NewTopic(good, 2, replica_assignment=[[node], [node]]),
        NewTopic(bad, 2, replica_assignment=[[node], [node + 1]]),
    ])
    futures[good].result(TIMEOUT)
    assert partition_count(admin, good) == 2
    assert error_of(futures[bad]).code() == KafkaError.INVALID_REPLICA_ASSIGNMENT


# -- DeleteTopics ---------------------------------------------------------------------------


def test_delete_topic(admin: AdminClient) -> None:
    name = unique("delete")
    create(admin, name)
    assert admin.delete_topics([name])[name].result(TIMEOUT) is None
    assert name not in admin.list_topics(timeout=TIMEOUT).topics
    # Its name is free again.
    create(admin, name, 2)
    assert partition_count(admin, name) == 2


def test_delete_unknown_topic(admin: AdminClient) -> None:
    name = unique("ghost")
    err = error_of(admin.delete_topics([name])[name])
    assert err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART


# -- CreatePartitions -----------------------------------------------------------------------


def test_create_partitions_grow_and_shrink(admin: AdminClient) -> None:
    name = unique("grow")
    create(admin, name, 2)
    admin.create_partitions([NewPartitions(name, 4)], validate_only=True)[name].result(TIMEOUT)
    assert partition_count(admin, name) == 2
    admin.create_partitions([NewPartitions(name, 4)])[name].result(TIMEOUT)
    assert partition_count(admin, name) == 4
    err = error_of(admin.create_partitions([NewPartitions(name, 3)])[name])
    assert err.code() == KafkaError.INVALID_PARTITIONS
    ghost = unique("ghost")
    err = error_of(admin.create_partitions([NewPartitions(ghost, 3)])[ghost])
    assert err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART


# -- DescribeConfigs ------------------------------------------------------------------------


def test_describe_topic_configs_defaults_and_overrides(admin: AdminClient) -> None:
    name = unique("describe")
    create(admin, name, 1, {"cleanup.policy": "compact", "retention.ms": "123456"})
    configs = topic_configs(admin, name)
    assert configs["cleanup.policy"].value == "compact"
    assert configs["cleanup.policy"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["retention.ms"].value == "123456"
    assert configs["segment.bytes"].value == "1073741824"
    assert configs["segment.bytes"].source in (ConfigSource.DEFAULT_CONFIG.value,
                                               ConfigSource.STATIC_BROKER_CONFIG.value)
    assert configs["max.message.bytes"].is_read_only is False


def test_describe_unknown_topic(admin: AdminClient) -> None:
    resource = ConfigResource(ResourceType.TOPIC, unique("ghost"))
    err = error_of(admin.describe_configs([resource])[resource])
    assert err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_describe_broker_configs(admin: AdminClient) -> None:
    node = admin.describe_cluster().result(TIMEOUT).controller.id
    resource = ConfigResource(ResourceType.BROKER, str(node))
    configs = admin.describe_configs([resource])[resource].result(TIMEOUT)
    assert configs["num.partitions"].value is not None
    assert int(configs["log.retention.hours"].value) > 0
    assert configs["log.dirs"].is_read_only


# -- AlterConfigs ---------------------------------------------------------------------------


def incremental(admin: AdminClient, name: str, key: str, value: str | None,
                op: AlterConfigOpType) -> Any:
    resource = ConfigResource(ResourceType.TOPIC, name, incremental_configs=[
        ConfigEntry(key, value, incremental_operation=op)])
    return admin.incremental_alter_configs([resource])[resource]


def test_incremental_alter_cleanup_policy(admin: AdminClient) -> None:
    name = unique("incremental")
    create(admin, name)
    incremental(admin, name, "cleanup.policy", "compact", AlterConfigOpType.SET).result(TIMEOUT)
    entry = topic_configs(admin, name)["cleanup.policy"]
    assert (entry.value, entry.source) == ("compact", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)

    incremental(admin, name, "cleanup.policy", None, AlterConfigOpType.DELETE).result(TIMEOUT)
    entry = topic_configs(admin, name)["cleanup.policy"]
    assert entry.value == "delete"
    assert entry.source != ConfigSource.DYNAMIC_TOPIC_CONFIG.value

    incremental(admin, name, "cleanup.policy", "compact", AlterConfigOpType.APPEND).result(TIMEOUT)
    assert topic_configs(admin, name)["cleanup.policy"].value == "delete,compact"

    incremental(admin, name, "cleanup.policy", "delete",
                AlterConfigOpType.SUBTRACT).result(TIMEOUT)
    assert topic_configs(admin, name)["cleanup.policy"].value == "compact"

    # APPEND to a key that is not a list is refused.
    err = error_of(incremental(admin, name, "retention.ms", "5", AlterConfigOpType.APPEND))
    assert err.code() == KafkaError.INVALID_CONFIG
    err = error_of(incremental(admin, name, "retention.ms", "x", AlterConfigOpType.SET))
    assert err.code() == KafkaError.INVALID_CONFIG


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")
def test_legacy_alter_configs_replaces_overrides(admin: AdminClient) -> None:
    name = unique("legacy")
    create(admin, name, 1, {"retention.ms": "1000000"})
    resource = ConfigResource(ResourceType.TOPIC, name, set_config={"segment.ms": "7200000"})
    admin.alter_configs([resource])[resource].result(TIMEOUT)
    configs = topic_configs(admin, name)
    assert configs["segment.ms"].value == "7200000"
    # The legacy API replaces the whole set: the earlier override is gone.
    assert configs["retention.ms"].source != ConfigSource.DYNAMIC_TOPIC_CONFIG.value

    resource = ConfigResource(ResourceType.TOPIC, name, set_config={"segment.ms": "-5"})
    assert error_of(admin.alter_configs([resource])[resource]).code() == KafkaError.INVALID_CONFIG


def test_dynamic_broker_config_reaches_topics_and_survives_restart(make_broker: Any) -> None:
    # A broker of its own: a changed broker default would leak into the other tests.
    broker = make_broker()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    node = admin.describe_cluster().result(TIMEOUT).controller.id
    name = unique("follows")
    create(admin, name)
    resource = ConfigResource(ResourceType.BROKER, str(node), incremental_configs=[
        ConfigEntry("log.retention.ms", "4321000", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(TIMEOUT)
    entry = topic_configs(admin, name)["retention.ms"]
    assert (entry.value, entry.source) == ("4321000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)

    # Not a dynamic key: refused with Kafka's code for broker configs, nothing changes.
    resource = ConfigResource(ResourceType.BROKER, str(node), incremental_configs=[
        ConfigEntry("log.dirs", "/elsewhere", incremental_operation=AlterConfigOpType.SET)])
    err = error_of(admin.incremental_alter_configs([resource])[resource])
    assert err.code() == KafkaError.INVALID_REQUEST
    assert "log.dirs" in err.str()

    broker.restart()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    entry = topic_configs(admin, name)["retention.ms"]
    assert (entry.value, entry.source) == ("4321000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)


def test_delete_disabled(make_broker: Any) -> None:
    broker = make_broker("delete.topic.enable=false")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    name = unique("kept")
    create(admin, name)
    err = error_of(admin.delete_topics([name])[name])
    assert err.code() == KafkaError.TOPIC_DELETION_DISABLED
    assert name in admin.list_topics(timeout=TIMEOUT).topics


# -- DeleteRecords --------------------------------------------------------------------------


def test_delete_records_moves_low_watermark(admin: AdminClient, broker: Any) -> None:
    name = unique("records")
    create(admin, name)
    produce(broker.bootstrap, name, 10)
    tp = TopicPartition(name, 0, 4)
    deleted = admin.delete_records([tp])[tp].result(TIMEOUT)
    assert deleted.low_watermark == 4

    spec = TopicPartition(name, 0)
    earliest = admin.list_offsets({spec: OffsetSpec.earliest()})[spec].result(TIMEOUT)
    assert earliest.offset == 4

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": unique("g"),
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(name, 0, OFFSET_BEGINNING)])
        msg = None
        for _ in range(50):
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                break
        assert msg is not None and msg.error() is None
        assert (msg.offset(), msg.value()) == (4, b"m4")
    finally:
        consumer.close()

    beyond = TopicPartition(name, 0, 11)
    err = error_of(admin.delete_records([beyond])[beyond])
    assert err.code() == KafkaError.OFFSET_OUT_OF_RANGE


# -- DescribeCluster, DescribeLogDirs, InitProducerId ---------------------------------------


def test_describe_cluster(admin: AdminClient, broker: Any) -> None:
    result = admin.describe_cluster().result(TIMEOUT)
    assert result.cluster_id
    assert len(result.nodes) == 1
    node = result.nodes[0]
    assert result.controller.id == node.id
    assert f"{node.host}:{node.port}" == broker.bootstrap or node.port == int(
        broker.bootstrap.rsplit(":", 1)[1])


@pytest.fixture
def kafka_python_admin(broker: Any) -> Iterator[Any]:
    from kafka import KafkaAdminClient

    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    yield client
    client.close()


def test_describe_log_dirs(admin: AdminClient, broker: Any, kafka_python_admin: Any) -> None:
    name = unique("logdirs")
    create(admin, name, 2)
    produce(broker.bootstrap, name, 5)
    result = kafka_python_admin.describe_log_dirs()
    text = repr(result)
    assert name in text
    dirs = _log_dirs(result)
    assert dirs, text
    sizes = {(t["name"], p["partition_index"]): p["partition_size"]
             for d in dirs for t in d["topics"] for p in t["partitions"]}
    assert sizes[(name, 0)] > 0
    assert sizes[(name, 1)] == 0


def _log_dirs(result: Any) -> list[dict[str, Any]]:
    """kafka-python returns one response per broker; accept its dict or object forms."""
    found: list[dict[str, Any]] = []
    items = result if isinstance(result, list) else [result]
    for item in items:
        if hasattr(item, "to_object"):
            item = item.to_object()
        if isinstance(item, dict) and "results" in item:
            found.extend(item["results"])
        elif isinstance(item, dict) and "log_dir" in item:
            found.append(item)
        elif isinstance(item, dict):
            for value in item.values():
                found.extend(_log_dirs(value))
    return found


def test_idempotent_producer_gets_producer_id(admin: AdminClient, broker: Any) -> None:
    name = unique("idempotent")
    create(admin, name)
    produce(broker.bootstrap, name, 20, **{"enable.idempotence": True, "acks": "all"})
    spec = TopicPartition(name, 0)
    latest = admin.list_offsets({spec: OffsetSpec.latest()})[spec].result(TIMEOUT)
    assert latest.offset == 20
