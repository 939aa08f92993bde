"""Topic configs: validation, broker defaults through synonyms, DescribeConfigs view, LogConfig."""

from __future__ import annotations

import dataclasses

import pytest

from moldau.config import (
    LONG_MAX,
    TOPIC_KEYS,
    TOPIC_SYNONYMS,
    BrokerConfig,
    ConfigError,
    ConfigSource,
    ConfigType,
    UnknownConfigError,
    effective_topic_config,
    to_log_config,
    validate_topic_configs,
)
from moldau.config.broker_keys import BROKER_KEYS, DYNAMIC_KEYS
from moldau.log.config import LogConfig


def test_validate_accepts_and_trims() -> None:
    assert validate_topic_configs({
        "retention.ms": " -1 ",
        "cleanup.policy": "compact,delete",
        "segment.bytes": "14",
        "compression.type": "zstd",
        "min.cleanable.dirty.ratio": "0.1",
        "preallocate": "TRUE",
    }) == {
        "retention.ms": "-1",
        "cleanup.policy": "compact,delete",
        "segment.bytes": "14",
        "compression.type": "zstd",
        "min.cleanable.dirty.ratio": "0.1",
        "preallocate": "TRUE",
    }


def test_validate_drops_none_values() -> None:
    assert validate_topic_configs({"retention.ms": None, "segment.ms": "10"}) == {
        "segment.ms": "10"
    }


def test_unknown_topic_key() -> None:
    with pytest.raises(UnknownConfigError) as info:
        validate_topic_configs({"foo": "1"})
    assert str(info.value) == "Unknown topic config name: foo"
    with pytest.raises(UnknownConfigError):
        validate_topic_configs({"log.retention.ms": "1"})  # a broker key, not a topic key


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("retention.ms", "abc", "Invalid value abc for configuration retention.ms: "
                                "Not a number of type LONG"),
        ("retention.ms", "-2", "Invalid value -2 for configuration retention.ms: "
                               "Value must be at least -1"),
        ("segment.bytes", "13", "Value must be at least 14"),
        ("segment.bytes", "2147483648", "Not a number of type INT"),
        ("segment.ms", "0", "Value must be at least 1"),
        ("max.message.bytes", "-1", "Value must be at least 0"),
        ("cleanup.policy", "compact,shred", "Invalid value shred for configuration "
                                            "cleanup.policy: String must be one of: compact, "
                                            "delete"),
        ("compression.type", "brotli", "String must be one of: uncompressed, zstd, lz4, "
                                       "snappy, gzip, producer"),
        ("message.timestamp.type", "Now", "String must be one of: CreateTime, LogAppendTime"),
        ("min.cleanable.dirty.ratio", "1.5", "Value must be no more than 1"),
        ("min.insync.replicas", "0", "Value must be at least 1"),
        ("unclean.leader.election.enable", "maybe", "Expected value to be either true or "
                                                    "false"),
        ("flush.messages", "0", "Value must be at least 1"),
        ("leader.replication.throttled.replicas", "x", "must be the literal '*'"),
    ],
)
def test_invalid_topic_values(key: str, value: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        validate_topic_configs({key: value})
    assert message in str(info.value)
    assert info.value.key == key


def test_retention_bytes_may_be_negative_and_throttles_accept_pairs() -> None:
    validate_topic_configs({"retention.bytes": "-5"})
    validate_topic_configs({"leader.replication.throttled.replicas": "0:1,1:2"})
    validate_topic_configs({"follower.replication.throttled.replicas": "*"})


def test_compaction_lag_conflict() -> None:
    with pytest.raises(ConfigError, match=r"min.compaction.lag.ms \(10\) > "
                                          r"max.compaction.lag.ms \(5\)"):
        validate_topic_configs({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"})
    broker = BrokerConfig({"log.cleaner.max.compaction.lag.ms": "5"})
    with pytest.raises(ConfigError, match="conflict"):
        effective_topic_config(broker, {"min.compaction.lag.ms": "10"})


def test_every_synonym_is_a_defined_broker_key_of_compatible_type() -> None:
    for topic_key, chain in TOPIC_SYNONYMS.items():
        assert topic_key in TOPIC_KEYS
        for synonym in chain:
            broker_key = BROKER_KEYS[synonym.name]
            topic_type = TOPIC_KEYS[topic_key].type
            if topic_type in (ConfigType.INT, ConfigType.LONG):
                assert broker_key.type in (ConfigType.INT, ConfigType.LONG), synonym
            else:
                assert broker_key.type is topic_type, synonym
        assert chain[0].name in DYNAMIC_KEYS or chain[0].name == "log.message.format.version"


def test_defaults_match_kafka_topic_defaults() -> None:
    eff = effective_topic_config(BrokerConfig(), {})
    for name, key in TOPIC_KEYS.items():
        expected = key.default
        attr = getattr(eff, name.replace(".", "_"))
        assert attr == expected, name


def test_effective_defaults_come_from_broker_synonyms() -> None:
    broker = BrokerConfig({
        "log.retention.minutes": "2",
        "log.roll.hours": "1",
        "log.segment.bytes": "100",
        "message.max.bytes": "777",
        "log.cleanup.policy": "compact",
        "log.message.timestamp.type": "LogAppendTime",
        "log.flush.scheduler.interval.ms": "900",
        "min.insync.replicas": "2",
    })
    eff = effective_topic_config(broker, {"segment.bytes": "50"})
    assert eff.retention_ms == 120_000
    assert eff.segment_ms == 3_600_000
    assert eff.segment_bytes == 50
    assert eff.max_message_bytes == 777
    assert eff.cleanup_policy == ("compact",)
    assert eff.compact and not eff.delete
    assert eff.message_timestamp_type == "LogAppendTime"
    assert eff.flush_ms == 900
    assert eff.min_insync_replicas == 2


def test_negative_broker_retention_means_forever() -> None:
    eff = effective_topic_config(BrokerConfig({"log.retention.hours": "-3"}), {})
    assert eff.retention_ms == -1


def test_timestamp_difference_fills_unset_before_after() -> None:
    eff = effective_topic_config(
        BrokerConfig(),
        {"message.timestamp.difference.max.ms": "1000", "message.timestamp.after.max.ms": "5"},
    )
    assert eff.message_timestamp_before_max_ms == 1000
    assert eff.message_timestamp_after_max_ms == 5
    assert eff.describe(["message.timestamp.before.max.ms"])[0].value == str(LONG_MAX)


def test_entry_sources_and_synonyms() -> None:
    broker = BrokerConfig({"log.retention.hours": "24", "log.segment.bytes": "2000"})
    broker = broker.with_dynamic({"log.segment.bytes": "3000"}, cluster_default=True)
    eff = effective_topic_config(broker, {"retention.ms": "1000"})
    entries = {e.name: e for e in eff.describe()}
    assert set(entries) == set(TOPIC_KEYS)

    retention = entries["retention.ms"]
    assert retention.value == "1000"
    assert retention.source is ConfigSource.TOPIC_CONFIG
    assert retention.source == 1
    assert retention.config_type is ConfigType.LONG
    assert retention.read_only is False and retention.is_sensitive is False
    assert [(s.name, s.value, s.source) for s in retention.synonyms] == [
        ("retention.ms", "1000", ConfigSource.TOPIC_CONFIG),
        ("log.retention.hours", "24", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG),
    ]

    segment = entries["segment.bytes"]
    assert segment.value == "3000"
    assert segment.source is ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    assert [s.source for s in segment.synonyms] == [
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
        ConfigSource.STATIC_BROKER_CONFIG,
        ConfigSource.DEFAULT_CONFIG,
    ]

    policy = entries["cleanup.policy"]
    assert policy.value == "delete"
    assert policy.source is ConfigSource.DEFAULT_CONFIG
    assert policy.is_default
    assert policy.config_type is ConfigType.LIST

    throttled = entries["leader.replication.throttled.replicas"]
    assert throttled.value == "" and throttled.synonyms == ()
    assert throttled.source is ConfigSource.DEFAULT_CONFIG
    assert entries["min.cleanable.dirty.ratio"].value == "0.5"
    assert entries["preallocate"].value == "false"
    assert all(e.documentation for e in entries.values())


def test_numeric_source_codes_are_kafkas() -> None:
    assert [s.value for s in (
        ConfigSource.UNKNOWN, ConfigSource.DYNAMIC_TOPIC_CONFIG,
        ConfigSource.DYNAMIC_BROKER_CONFIG, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
        ConfigSource.STATIC_BROKER_CONFIG, ConfigSource.DEFAULT_CONFIG,
        ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG, ConfigSource.CLIENT_METRICS_CONFIG,
        ConfigSource.GROUP_CONFIG,
    )] == list(range(9))
    assert [t.value for t in ConfigType] == list(range(10))
    assert DYNAMIC_KEYS.issubset(BROKER_KEYS)
    assert ConfigType.LIST.name == "LIST"


def test_to_log_config() -> None:
    broker = BrokerConfig({"log.flush.interval.messages": "10", "log.flush.interval.ms": "20"})
    eff = effective_topic_config(broker, {
        "segment.bytes": "1024", "segment.ms": "60000", "segment.jitter.ms": "5",
        "retention.ms": "-1", "retention.bytes": "4096", "max.message.bytes": "2048",
        "index.interval.bytes": "128", "segment.index.bytes": "800",
        "message.timestamp.type": "LogAppendTime", "cleanup.policy": "compact,delete",
        "file.delete.delay.ms": "0", "min.insync.replicas": "2",
    })
    lc = to_log_config(eff)
    assert isinstance(lc, LogConfig)
    expected = {
        "segment_bytes": 1024, "segment_ms": 60000, "segment_jitter_ms": 5,
        "retention_ms": -1, "retention_bytes": 4096, "max_message_bytes": 2048,
        "index_interval_bytes": 128, "segment_index_bytes": 800,
        "message_timestamp_type": "LogAppendTime", "flush_interval_messages": 10,
        "flush_interval_ms": 20, "cleanup_policy": ("compact", "delete"),
        "file_delete_delay_ms": 0,
    }
    actual = dataclasses.asdict(lc)
    for name, value in expected.items():
        assert actual[name] == value, name
    if "min_insync_replicas" in actual:
        assert actual["min_insync_replicas"] == 2
