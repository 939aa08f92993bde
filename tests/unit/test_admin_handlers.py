"""Admin handlers called directly on a Broker, for every advertised version of each API.

Clients exercise one version each; these tests make sure every advertised version builds a
response kio can encode, and check the edge cases clients rarely send (duplicates, manual
assignments, topic ids, epochs, broker loggers).
"""

from __future__ import annotations

import asyncio
import datetime
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from moldau.broker.broker import Broker, RequestContext
from moldau.broker.handlers import (
    admin_topics,
    cluster_info,
    configs,
    producer_ids,
    records,
)
from moldau.config import BrokerConfig, ConfigSource
from moldau.protocol import apis, codec
from moldau.protocol.codec import build

SECOND, MINUTE = datetime.timedelta(seconds=1), datetime.timedelta(minutes=1)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    b = Broker(BrokerConfig({"log.dirs": str(tmp_path / "data"), "num.partitions": "2"}))
    yield b
    b.close()


def versions(key: int) -> range:
    api = apis.SUPPORTED[key]
    return range(api.min_version, api.max_version + 1)


def call(broker: Broker, key: int, version: int, handler: Any, make: Any) -> Any:
    """Build a request with ``make(module)``, run ``handler`` and encode its response."""
    request = make(codec.request_module(key, version))
    ctx = RequestContext(broker, None, version, codec.response_module(key, version))
    response = asyncio.run(handler(request, ctx))
    codec.encode_body(key, version, response)
    return response


def create_request(m: Any, *topics: Any, validate_only: bool = False) -> Any:
    return build(m.CreateTopicsRequest, topics=tuple(topics), timeout=SECOND,
                 validate_only=validate_only)


def creatable(m: Any, name: str, partitions: int = -1, factor: int = -1,
              assignments: tuple[tuple[int, ...], ...] = (),
              **cfg: str) -> Any:
    return build(
        m.CreatableTopic, name=name, num_partitions=partitions, replication_factor=factor,
        assignments=tuple(build(m.CreatableReplicaAssignment, partition_index=i, broker_ids=ids)
                          for i, ids in enumerate(assignments)),
        configs=tuple(build(m.CreatableTopicConfig, name=k.replace("_", "."), value=v)
                      for k, v in cfg.items()),
    )


@pytest.mark.parametrize("version", versions(apis.CREATE_TOPICS))
def test_create_topics_every_version(broker: Broker, version: int) -> None:
    def make(m: Any) -> Any:
        return create_request(
            m,
            creatable(m, "plain"),
            creatable(m, "tuned", 3, 1, retention_ms="1000"),
            creatable(m, "dup", 1), creatable(m, "dup", 1),
            creatable(m, "rf", 1, 3),
            creatable(m, "manual", assignments=((0,), (0,))),
            creatable(m, "manual-bad", assignments=((0,), (1,))),
            creatable(m, "bad-config", 1, cleanup_policy="sometimes"),
            creatable(m, "bad name"),
        )

    resp = call(broker, apis.CREATE_TOPICS, version, admin_topics.handle_create_topics, make)
    by_name = {t.name: t for t in resp.topics}
    assert len(resp.topics) == len(by_name) == 8
    assert by_name["plain"].error_code == ErrorCode.none
    assert by_name["dup"].error_code == ErrorCode.invalid_request
    assert by_name["rf"].error_code == ErrorCode.invalid_replication_factor
    assert by_name["rf"].error_message == "Replication factor: 3 larger than available brokers: 1."
    assert by_name["manual-bad"].error_code == ErrorCode.invalid_replica_assignment
    assert by_name["bad-config"].error_code == ErrorCode.invalid_config
    assert "cleanup.policy" in by_name["bad-config"].error_message
    assert by_name["bad name"].error_code == ErrorCode.invalid_topic_exception
    topics = broker.metadata.topics()
    assert topics["plain"].partitions == 2  # num.partitions
    assert topics["manual"].partitions == 2
    assert "dup" not in topics
    if version >= 5:
        tuned = by_name["tuned"]
        assert (tuned.num_partitions, tuned.replication_factor) == (3, 1)
        retention = next(c for c in tuned.configs if c.name == "retention.ms")
        assert (retention.value, retention.config_source) == ("1000", ConfigSource.TOPIC_CONFIG)
    if version >= 7:
        assert by_name["plain"].topic_id == topics["plain"].topic_id


def test_create_validate_only_and_existing(broker: Broker) -> None:
    def make(m: Any) -> Any:
        return create_request(m, creatable(m, "v", 4), validate_only=True)

    resp = call(broker, apis.CREATE_TOPICS, 7, admin_topics.handle_create_topics, make)
    assert resp.topics[0].error_code == ErrorCode.none
    assert resp.topics[0].num_partitions == 4
    assert "v" not in broker.metadata.topics()
    broker.create_topic("v", 1, {})
    resp = call(broker, apis.CREATE_TOPICS, 7, admin_topics.handle_create_topics, make)
    assert resp.topics[0].error_code == ErrorCode.topic_already_exists


@pytest.mark.parametrize("version", versions(apis.DELETE_TOPICS))
def test_delete_topics_every_version(broker: Broker, version: int) -> None:
    broker.create_topic("a", 1, {})
    by_id = broker.create_topic("b", 1, {})

    def make(m: Any) -> Any:
        if version >= 6:
            states = (build(m.DeleteTopicState, name="a", topic_id=None),
                      build(m.DeleteTopicState, name=None, topic_id=by_id.topic_id),
                      build(m.DeleteTopicState, name=None, topic_id=uuid.uuid4()),
                      build(m.DeleteTopicState, name="ghost", topic_id=None))
            return build(m.DeleteTopicsRequest, topics=states, timeout=SECOND)
        return build(m.DeleteTopicsRequest, topic_names=("a", "b", "ghost"), timeout=SECOND)

    resp = call(broker, apis.DELETE_TOPICS, version, admin_topics.handle_delete_topics, make)
    codes = [r.error_code for r in resp.responses]
    if version >= 6:
        assert codes == [ErrorCode.none, ErrorCode.none, ErrorCode.unknown_topic_id,
                         ErrorCode.unknown_topic_or_partition]
        assert resp.responses[1].name == "b"
    else:
        assert codes == [ErrorCode.none, ErrorCode.none, ErrorCode.unknown_topic_or_partition]
    assert broker.metadata.topics() == {}


@pytest.mark.parametrize("version", versions(apis.CREATE_PARTITIONS))
def test_create_partitions_every_version(broker: Broker, version: int) -> None:
    broker.create_topic("grow", 1, {})
    broker.create_topic("manual", 1, {})
    broker.create_topic("bad", 1, {})

    def make(m: Any) -> Any:
        def topic(name: str, count: int, assignments: Any = None) -> Any:
            if assignments is not None:
                assignments = tuple(build(m.CreatePartitionsAssignment, broker_ids=ids)
                                    for ids in assignments)
            return build(m.CreatePartitionsTopic, name=name, count=count, assignments=assignments)

        return build(m.CreatePartitionsRequest, timeout=SECOND, validate_only=False, topics=(
            topic("grow", 3), topic("manual", 2, ((0,),)), topic("bad", 2, ((5,),)),
            topic("ghost", 2), topic("grow-shrink", 1)))

    broker.create_topic("grow-shrink", 2, {})
    resp = call(broker, apis.CREATE_PARTITIONS, version, admin_topics.handle_create_partitions,
                make)
    codes = {r.name: r.error_code for r in resp.results}
    assert codes == {
        "grow": ErrorCode.none,
        "manual": ErrorCode.none,
        "bad": ErrorCode.invalid_replica_assignment,
        "ghost": ErrorCode.unknown_topic_or_partition,
        "grow-shrink": ErrorCode.invalid_partitions,
    }
    topics = broker.metadata.topics()
    assert (topics["grow"].partitions, topics["manual"].partitions) == (3, 2)
    assert broker.partition("grow", 2) is not None


def test_oversized_requests_are_policy_violations(broker: Broker) -> None:
    """More than 10,000 partitions in one request: Kafka refuses the whole request before
    creating anything (the old broker created 4,996 and died at EMFILE)."""
    def make_create(m: Any) -> Any:
        return create_request(m, creatable(m, "huge", 10_000), creatable(m, "small", 1),
                              creatable(m, "small", 1))

    resp = call(broker, apis.CREATE_TOPICS, 7, admin_topics.handle_create_topics, make_create)
    assert [(t.name, t.error_code, t.error_message) for t in resp.topics] == [
        (name, ErrorCode.policy_violation, "Excessively large number of partitions per request.")
        for name in ("huge", "small")]
    assert broker.metadata.topics() == {}
    assert not any((broker.config.log_dirs[0]).glob("huge-*"))

    broker.create_topic("grow", 1, {})

    def make_grow(m: Any) -> Any:
        return build(m.CreatePartitionsRequest, timeout=SECOND, validate_only=False, topics=(
            build(m.CreatePartitionsTopic, name="grow", count=10_002, assignments=None),))

    resp = call(broker, apis.CREATE_PARTITIONS, 3, admin_topics.handle_create_partitions,
                make_grow)
    assert [(r.error_code, r.error_message) for r in resp.results] == [
        (ErrorCode.policy_violation, "Unable to perform excessively large batch operation.")]
    assert broker.metadata.topics()["grow"].partitions == 1


def test_create_at_the_limit_then_delete(broker: Broker) -> None:
    """Exactly 10,000 partitions per request are allowed; creation and deletion in several
    batches of file work leave disk and metadata in agreement."""
    def at_limit(m: Any) -> Any:
        return create_request(m, creatable(m, "big", 9_999), creatable(m, "one", 1),
                              validate_only=True)

    resp = call(broker, apis.CREATE_TOPICS, 7, admin_topics.handle_create_topics, at_limit)
    assert [t.error_code for t in resp.topics] == [ErrorCode.none, ErrorCode.none]

    def make(m: Any) -> Any:
        return create_request(m, creatable(m, "big", 1_200))

    resp = call(broker, apis.CREATE_TOPICS, 7, admin_topics.handle_create_topics, make)
    assert [t.error_code for t in resp.topics] == [ErrorCode.none]
    data = broker.config.log_dirs[0]
    assert len(list(data.glob("big-*"))) == 1_200
    assert broker.partition("big", 1_199) is not None

    def delete(m: Any) -> Any:
        return build(m.DeleteTopicsRequest, topic_names=("big",), timeout=SECOND)

    resp = call(broker, apis.DELETE_TOPICS, 5, admin_topics.handle_delete_topics, delete)
    assert resp.responses[0].error_code == ErrorCode.none
    assert "big" not in broker.metadata.topics()
    assert broker.partition("big", 0) is None
    # Renamed to big-<n>.<uuid>-delete before the answer; removed in the background.
    assert [p.name for p in data.glob("big-*") if not p.name.endswith("-delete")] == []


def describe(broker: Broker, version: int, *resources: tuple[int, str, tuple[str, ...] | None],
             synonyms: bool = True, documentation: bool = True) -> Any:
    def make(m: Any) -> Any:
        return build(
            m.DescribeConfigsRequest, include_synonyms=synonyms,
            include_documentation=documentation,
            resources=tuple(build(m.DescribeConfigsResource, resource_type=t, resource_name=n,
                                  configuration_keys=k) for t, n, k in resources))

    return call(broker, apis.DESCRIBE_CONFIGS, version, configs.handle_describe_configs, make)


@pytest.mark.parametrize("version", versions(apis.DESCRIBE_CONFIGS))
def test_describe_configs_every_version(broker: Broker, version: int) -> None:
    broker.create_topic("t", 1, {"retention.ms": "5000"})
    resp = describe(broker, version, (2, "t", None), (2, "ghost", None),
                    (4, "0", ("num.partitions", "log.retention.hours")), (4, "7", None),
                    (4, "", None), (8, "0", None), (3, "x", None))
    topic, ghost, node, other, default, loggers, unknown = resp.results
    entries = {c.name: c for c in topic.configs}
    assert entries["retention.ms"].value == "5000"
    assert entries["retention.ms"].config_source == ConfigSource.TOPIC_CONFIG
    assert entries["retention.ms"].synonyms[0].source == ConfigSource.TOPIC_CONFIG
    assert entries["segment.bytes"].config_source == ConfigSource.DEFAULT_CONFIG
    assert ghost.error_code == ErrorCode.unknown_topic_or_partition
    assert {c.name for c in node.configs} == {"num.partitions", "log.retention.hours"}
    assert next(c for c in node.configs if c.name == "num.partitions").value == "2"
    assert other.error_code == ErrorCode.invalid_request
    assert default.error_code == ErrorCode.none and default.configs == ()
    assert "root" in {c.name for c in loggers.configs}
    assert unknown.error_code == ErrorCode.invalid_request
    if version >= 3:
        assert entries["retention.ms"].documentation
        assert entries["retention.ms"].config_type == 5  # LONG
    resp = describe(broker, version, (2, "t", ("retention.ms",)), synonyms=False,
                    documentation=False)
    (entry,) = resp.results[0].configs
    assert entry.synonyms == ()
    assert getattr(entry, "documentation", None) is None


def incremental(broker: Broker, version: int, *resources: tuple[int, str, list[Any]],
                validate_only: bool = False) -> list[Any]:
    def make(m: Any) -> Any:
        return build(m.IncrementalAlterConfigsRequest, validate_only=validate_only, resources=tuple(
            build(m.AlterConfigsResource, resource_type=t, resource_name=n, configs=tuple(
                build(m.AlterableConfig, name=k, config_operation=op, value=v)
                for k, op, v in ops)) for t, n, ops in resources))

    resp = call(broker, apis.INCREMENTAL_ALTER_CONFIGS, version,
                configs.handle_incremental_alter_configs, make)
    return list(resp.responses)


@pytest.mark.parametrize("version", versions(apis.INCREMENTAL_ALTER_CONFIGS))
def test_incremental_alter_topic(broker: Broker, version: int) -> None:
    broker.create_topic("t", 1, {"retention.ms": "5000"})
    (r,) = incremental(broker, version, (2, "t", [("cleanup.policy", 2, "compact")]))
    assert r.error_code == ErrorCode.none
    assert broker.metadata.topics()["t"].configs == {
        "retention.ms": "5000", "cleanup.policy": "delete,compact"}
    (r,) = incremental(broker, version, (2, "t", [("cleanup.policy", 3, "delete"),
                                                  ("retention.ms", 1, None)]))
    assert r.error_code == ErrorCode.none
    assert broker.metadata.topics()["t"].configs == {"cleanup.policy": "compact"}
    log = broker.partition("t", 0)
    assert log is not None and log.config.cleanup_policy == ("compact",)
    errors = incremental(
        broker, version,
        (2, "t", [("retention.ms", 2, "1")]),
        (2, "t2", [("retention.ms", 0, "1")]),
        (2, "t", [("retention.ms", 0, "1")]),
    )
    assert [e.error_code for e in errors] == [ErrorCode.invalid_request,
                                              ErrorCode.unknown_topic_or_partition]
    (r,) = incremental(broker, version, (2, "t", [("retention.ms", 2, "1")]))
    assert r.error_code == ErrorCode.invalid_config
    (r,) = incremental(broker, version, (2, "t", [("retention.ms", 0, "1")]),
                       validate_only=True)
    assert r.error_code == ErrorCode.none
    assert "retention.ms" not in broker.metadata.topics()["t"].configs


def test_incremental_alter_broker_reaches_topics(broker: Broker, tmp_path: Path) -> None:
    broker.create_topic("follows", 1, {})
    broker.create_topic("pinned", 1, {"retention.ms": "5000"})
    (r,) = incremental(broker, 1, (4, "0", [("log.retention.ms", 0, "1234")]))
    assert r.error_code == ErrorCode.none
    follows, pinned = broker.partition("follows", 0), broker.partition("pinned", 0)
    assert follows is not None and follows.config.retention_ms == 1234
    assert pinned is not None and pinned.config.retention_ms == 5000
    (r,) = incremental(broker, 1, (4, "", [("log.retention.bytes", 0, "999")]))
    assert r.error_code == ErrorCode.none
    assert follows.config.retention_bytes == 999
    (r,) = incremental(broker, 1, (4, "0", [("log.dirs", 0, "/elsewhere")]))
    assert r.error_code == ErrorCode.invalid_request
    assert r.error_message == "Cannot update these configs dynamically: log.dirs"
    (r,) = incremental(broker, 1, (4, "0", [("log.retention.ms", 0, "soon")]))
    assert r.error_code == ErrorCode.invalid_request
    resp = describe(broker, 4, (4, "0", ("log.retention.ms",)), (4, "", None))
    (entry,) = resp.results[0].configs
    assert (entry.value, entry.config_source) == ("1234", ConfigSource.DYNAMIC_BROKER_CONFIG)
    (default,) = resp.results[1].configs
    assert (default.name, default.value) == ("log.retention.bytes", "999")

    # The dynamic layers survive a restart.
    broker.close()
    again = Broker(BrokerConfig({"log.dirs": str(tmp_path / "data")}))
    try:
        assert again.config.dynamic_broker_configs == {"log.retention.ms": "1234"}
        assert again.config.dynamic_default_configs == {"log.retention.bytes": "999"}
        log = again.partition("follows", 0)
        assert log is not None and log.config.retention_ms == 1234
    finally:
        again.close()


def test_incremental_alter_broker_logger(broker: Broker) -> None:
    import logging

    name = "moldau.test.admin"
    logging.getLogger(name)
    (r,) = incremental(broker, 1, (8, "0", [(name, 0, "DEBUG")]))
    assert r.error_code == ErrorCode.none
    assert logging.getLogger(name).level == logging.DEBUG
    (r,) = incremental(broker, 1, (8, "0", [(name, 1, None)]))
    assert r.error_code == ErrorCode.none
    assert logging.getLogger(name).level == logging.NOTSET
    (r,) = incremental(broker, 1, (8, "0", [(name, 0, "LOUD")]))
    assert r.error_code == ErrorCode.invalid_config
    (r,) = incremental(broker, 1, (8, "0", [("root", 1, None)]))
    assert r.error_code == ErrorCode.invalid_request


@pytest.mark.parametrize("version", versions(apis.ALTER_CONFIGS))
def test_legacy_alter_configs(broker: Broker, version: int) -> None:
    broker.create_topic("t", 1, {"retention.ms": "5000"})

    def make(resources: tuple[tuple[int, str, dict[str, str]], ...]) -> Any:
        def inner(m: Any) -> Any:
            return build(m.AlterConfigsRequest, validate_only=False, resources=tuple(
                build(m.AlterConfigsResource, resource_type=t, resource_name=n, configs=tuple(
                    build(m.AlterableConfig, name=k, value=v) for k, v in cfg.items()))
                for t, n, cfg in resources))
        return inner

    resp = call(broker, apis.ALTER_CONFIGS, version, configs.handle_alter_configs,
                make(((2, "t", {"segment.ms": "60000"}), (4, "0", {"log.retention.ms": "99"}),
                      (8, "0", {}))))
    assert [r.error_code for r in resp.responses] == [ErrorCode.none, ErrorCode.none,
                                                      ErrorCode.invalid_request]
    assert broker.metadata.topics()["t"].configs == {"segment.ms": "60000"}
    assert broker.config.dynamic_broker_configs == {"log.retention.ms": "99"}


@pytest.mark.parametrize("version", versions(apis.DELETE_RECORDS))
def test_delete_records(broker: Broker, version: int) -> None:
    broker.create_topic("t", 1, {})
    broker.create_topic("c", 1, {"cleanup.policy": "compact"})

    def make(m: Any) -> Any:
        def topic(name: str, *offsets: tuple[int, int]) -> Any:
            return build(m.DeleteRecordsTopic, name=name, partitions=tuple(
                build(m.DeleteRecordsPartition, partition_index=p, offset=o) for p, o in offsets))
        return build(m.DeleteRecordsRequest, timeout=SECOND, topics=(
            topic("t", (0, -1), (1, 0)), topic("c", (0, 0)), topic("ghost", (0, 0))))

    resp = call(broker, apis.DELETE_RECORDS, version, records.handle_delete_records, make)
    results = [(p.low_watermark, p.error_code) for t in resp.topics for p in t.partitions]
    assert results == [(0, ErrorCode.none), (-1, ErrorCode.unknown_topic_or_partition),
                       (-1, ErrorCode.policy_violation),
                       (-1, ErrorCode.unknown_topic_or_partition)]


@pytest.mark.parametrize("version", versions(apis.OFFSET_FOR_LEADER_EPOCH))
def test_offset_for_leader_epoch(broker: Broker, version: int) -> None:
    broker.create_topic("t", 1, {})
    epoch = 3  # so that an older epoch is not -1 ("do not check")
    hosted = broker.partition("t", 0)
    assert hosted is not None
    hosted.make_leader(epoch, (broker.node_id,))

    def make(m: Any) -> Any:
        parts = tuple(build(m.OffsetForLeaderPartition, partition=p, current_leader_epoch=c,
                            leader_epoch=e)
                      for p, c, e in ((0, -1, epoch), (0, epoch + 1, epoch),
                                      (0, epoch - 1, epoch), (3, -1, epoch)))
        return build(m.OffsetForLeaderEpochRequest, replica_id=-1, topics=(
            build(m.OffsetForLeaderTopic, topic="t", partitions=parts),))

    resp = call(broker, apis.OFFSET_FOR_LEADER_EPOCH, version,
                records.handle_offset_for_leader_epoch, make)
    codes = [p.error_code for p in resp.topics[0].partitions]
    assert codes[1:] == [ErrorCode.unknown_leader_epoch, ErrorCode.fenced_leader_epoch,
                         ErrorCode.unknown_topic_or_partition]
    assert codes[0] == ErrorCode.none


@pytest.mark.parametrize("version", versions(apis.DESCRIBE_LOG_DIRS))
def test_describe_log_dirs(broker: Broker, version: int) -> None:
    broker.create_topic("t", 2, {})
    broker.create_topic("u", 1, {})

    def make(topics: Any) -> Any:
        def inner(m: Any) -> Any:
            if topics is None:
                return build(m.DescribeLogDirsRequest, topics=None)
            return build(m.DescribeLogDirsRequest, topics=tuple(
                build(m.DescribableLogDirTopic, topic=t, partitions=ps) for t, ps in topics))
        return inner

    resp = call(broker, apis.DESCRIBE_LOG_DIRS, version, cluster_info.handle_describe_log_dirs,
                make(None))
    (result,) = resp.results
    assert Path(result.log_dir).is_absolute()
    assert {(t.name, p.partition_index) for t in result.topics for p in t.partitions} == {
        ("t", 0), ("t", 1), ("u", 0)}
    if version >= 4:
        assert result.total_bytes > 0
    resp = call(broker, apis.DESCRIBE_LOG_DIRS, version, cluster_info.handle_describe_log_dirs,
                make((("t", (1,)),)))
    assert [(t.name, [p.partition_index for p in t.partitions])
            for t in resp.results[0].topics] == [("t", [1])]


@pytest.mark.parametrize("version", versions(apis.DESCRIBE_CLUSTER))
def test_describe_cluster(broker: Broker, version: int) -> None:
    def make(m: Any) -> Any:
        return build(m.DescribeClusterRequest, include_cluster_authorized_operations=False,
                     endpoint_type=1, include_fenced_brokers=True)

    resp = call(broker, apis.DESCRIBE_CLUSTER, version, cluster_info.handle_describe_cluster,
                make)
    assert resp.error_code == ErrorCode.none
    assert resp.controller_id == broker.node_id
    assert [b.broker_id for b in resp.brokers] == [broker.node_id]
    assert resp.cluster_id == broker.metadata.cluster_id


@pytest.mark.parametrize("version", versions(apis.INIT_PRODUCER_ID))
def test_init_producer_id(broker: Broker, version: int) -> None:
    def make(txn: str | None = None, pid: int = -1, epoch: int = -1) -> Any:
        def inner(m: Any) -> Any:
            return build(m.InitProducerIdRequest, transactional_id=txn,
                         transaction_timeout=MINUTE, producer_id=pid,
                         producer_epoch=epoch)
        return inner

    def init(**kw: Any) -> Any:
        return call(broker, apis.INIT_PRODUCER_ID, version, producer_ids.handle, make(**kw))

    first, second = init(), init()
    assert first.error_code == second.error_code == ErrorCode.none
    assert first.producer_id != second.producer_id
    assert first.producer_epoch == 0
    # A transactional id goes to its coordinator; before FindCoordinator created
    # __transaction_state, no broker coordinates it (the client looks it up again).
    assert init(txn="tx").error_code == ErrorCode.not_coordinator
    if version >= 3:
        bumped = init(pid=first.producer_id, epoch=0)
        assert (bumped.producer_id, bumped.producer_epoch) == (first.producer_id, 1)
        exhausted = init(pid=first.producer_id, epoch=32766)
        assert exhausted.producer_id != first.producer_id
        assert exhausted.producer_epoch == 0
        assert init(pid=first.producer_id).error_code == ErrorCode.invalid_request
