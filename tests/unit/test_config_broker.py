"""BrokerConfig: Kafka's key names, defaults, synonyms, layers and error messages."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from moldau.config import (
    BROKER_KEYS,
    LONG_MAX,
    BrokerConfig,
    ConfigError,
    ConfigSource,
    ConfigType,
    Listener,
    UnknownConfigError,
    describe_broker_configs,
)
from moldau.config import broker as broker_module
from moldau.config.inter_broker import inter_broker_security
from tests.helpers.logs import lines_of


def test_defaults() -> None:
    cfg = BrokerConfig()
    assert cfg.node_id == 0
    assert cfg.listeners == [Listener("PLAINTEXT", "127.0.0.1", 9092)]
    assert cfg.advertised_listeners == cfg.listeners
    assert cfg.log_dirs == [Path("./data")]
    assert cfg.num_partitions == 1
    assert cfg.default_replication_factor == 1
    assert cfg.log_segment_bytes == 1073741824
    assert cfg.log_roll_ms == 168 * 3_600_000
    assert cfg.log_retention_ms == 168 * 3_600_000
    assert cfg.log_retention_bytes == -1
    assert cfg.log_retention_check_interval_ms == 300_000
    assert cfg.log_index_interval_bytes == 4096
    assert cfg.log_index_size_max_bytes == 10485760
    assert cfg.log_flush_interval_messages == LONG_MAX
    assert cfg.log_flush_interval_ms == LONG_MAX
    assert cfg.log_flush_scheduler_interval_ms == LONG_MAX
    assert cfg.log_flush_offset_checkpoint_interval_ms == 60_000
    assert cfg.log_cleanup_policy == ("delete",)
    assert cfg.log_message_timestamp_type == "CreateTime"
    assert cfg.message_max_bytes == 1048588
    assert cfg.auto_create_topics_enable is True
    assert cfg.delete_topic_enable is True
    assert cfg.socket_request_max_bytes == 104857600
    assert cfg.group_initial_rebalance_delay_ms == 3000
    assert cfg.offsets_topic_num_partitions == 50
    assert cfg.offsets_topic_replication_factor == 3
    assert cfg.offsets_retention_ms == 10080 * 60_000
    assert cfg.min_insync_replicas == 1
    assert cfg.unclean_leader_election_enable is False
    assert cfg.log_cleaner_enable is True
    assert cfg.log_cleaner_delete_retention_ms == 86_400_000
    assert cfg.log_cleaner_min_cleanable_ratio == 0.5
    assert cfg.log_cleaner_min_compaction_lag_ms == 0
    assert cfg.log_cleaner_max_compaction_lag_ms == LONG_MAX
    assert cfg.log_scrubber_enable is False
    assert cfg.log_scrubber_bytes_per_second == 1_048_576
    assert cfg.log_scrubber_backoff_ms == 60_000
    assert cfg.log_segment_delete_delay_ms == 60_000
    assert cfg.zookeeper_connect is None
    assert cfg.zookeeper_session_timeout_ms == 18_000
    assert cfg.zookeeper_connection_timeout_ms == 18_000
    assert cfg.connections_max_idle_ms == 600_000
    assert cfg.transaction_state_log_num_partitions == 50
    assert cfg.source("num.partitions") is ConfigSource.DEFAULT_CONFIG


def test_every_property_reads_without_error() -> None:
    cfg = BrokerConfig()
    names = [n for n, v in vars(BrokerConfig).items() if isinstance(v, property)]
    assert len(names) > 60
    for name in names:
        getattr(cfg, name)


def test_load_file_and_overrides_win(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text(
        "broker.id=1\nnum.partitions=3\nlog.dirs=/a,/b\nauto.create.topics.enable=FALSE\n"
    )
    cfg = BrokerConfig.load(path, ["num.partitions=5", "message.max.bytes=2000"])
    assert cfg.node_id == 1
    assert cfg.num_partitions == 5
    assert cfg.message_max_bytes == 2000
    assert cfg.log_dirs == [Path("/a"), Path("/b")]
    assert cfg.auto_create_topics_enable is False
    assert cfg.source("num.partitions") is ConfigSource.STATIC_BROKER_CONFIG
    assert cfg.get("num.partitions") == 5


@pytest.mark.parametrize(
    ("props", "expected"),
    [
        ({"log.retention.hours": "1"}, 3_600_000),
        ({"log.retention.hours": "1", "log.retention.minutes": "2"}, 120_000),
        ({"log.retention.hours": "1", "log.retention.minutes": "2", "log.retention.ms": "5"}, 5),
        ({"log.retention.ms": "-5"}, -1),
        ({"log.retention.hours": "-1"}, -1),
    ],
)
def test_retention_synonyms(props: dict[str, str], expected: int) -> None:
    assert BrokerConfig(props).log_retention_ms == expected


def test_roll_and_flush_synonyms() -> None:
    cfg = BrokerConfig({"log.roll.hours": "2", "log.flush.scheduler.interval.ms": "700"})
    assert cfg.log_roll_ms == 7_200_000
    assert cfg.log_flush_interval_ms == 700
    cfg = BrokerConfig({"log.roll.hours": "2", "log.roll.ms": "99", "log.flush.interval.ms": "5"})
    assert cfg.log_roll_ms == 99
    assert cfg.log_flush_interval_ms == 5


def test_log_dirs_beats_log_dir() -> None:
    assert BrokerConfig({"log.dir": "/one"}).log_dirs == [Path("/one")]
    assert BrokerConfig({"log.dir": "/one", "log.dirs": "/two"}).log_dirs == [Path("/two")]
    with pytest.raises(ConfigError, match="At least one log directory"):
        BrokerConfig({"log.dirs": ""})


def test_node_id_and_broker_id() -> None:
    assert BrokerConfig({"node.id": "4"}).node_id == 4
    assert BrokerConfig({"broker.id": "7"}).node_id == 7
    assert BrokerConfig({"node.id": "7", "broker.id": "7"}).node_id == 7
    with pytest.raises(ConfigError, match="must be the same"):
        BrokerConfig({"node.id": "1", "broker.id": "2"})
    with pytest.raises(ConfigError, match="Value must be at least 0"):
        BrokerConfig({"broker.id": "-1"})


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("num.partitions", "abc", "Invalid value abc for configuration num.partitions: "
                                  "Not a number of type INT"),
        ("log.retention.ms", "1.5", "Invalid value 1.5 for configuration log.retention.ms: "
                                    "Not a number of type LONG"),
        ("num.partitions", "0", "Invalid value 0 for configuration num.partitions: "
                                "Value must be at least 1"),
        ("num.partitions", "3000000000", "Not a number of type INT"),
        ("num.partitions", "1_0", "Not a number of type INT"),
        ("auto.create.topics.enable", "yes", "Invalid value yes for configuration "
                                             "auto.create.topics.enable: Expected value to "
                                             "be either true or false"),
        ("log.cleaner.min.cleanable.ratio", "2", "Value must be no more than 1"),
        ("log.cleaner.min.cleanable.ratio", "x", "Not a number of type DOUBLE"),
        ("log.scrubber.bytes.per.second", "0", "Value must be at least 1"),
        ("log.scrubber.enable", "on", "Expected value to be either true or false"),
        ("log.cleanup.policy", "delete,shred", "String must be one of: compact, delete"),
        ("log.message.timestamp.type", "createtime", "String must be one of: CreateTime, "
                                                     "LogAppendTime"),
        ("log.segment.bytes", "13", "Value must be at least 14"),
        ("num.io.threads", "many", "Not a number of type INT"),
    ],
)
def test_invalid_values_give_kafka_messages(key: str, value: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        BrokerConfig({key: value})
    assert message in str(info.value)
    assert "\n" not in str(info.value)
    assert info.value.key == key


def test_values_are_trimmed_and_booleans_case_insensitive() -> None:
    cfg = BrokerConfig({"num.partitions": " 3 ", "delete.topic.enable": " False"})
    assert cfg.num_partitions == 3
    assert cfg.delete_topic_enable is False


def test_unknown_key_warns_and_unused_key_logs_info(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "server.properties"
    path.write_text(
        "num.network.threads=3\nssl.provider=x\nfoo.bar=1\nnum.partitions=2\n"
    )
    with caplog.at_level(logging.INFO, logger="moldau.config.broker"):
        cfg = BrokerConfig.load(path)
    assert cfg.num_partitions == 2
    warnings = lines_of(caplog, "moldau.config.broker", logging.WARNING)
    assert warnings == ["The configuration 'foo.bar' was supplied but isn't a known config; "
                        "ignored"]
    infos = lines_of(caplog, "moldau.config.broker", logging.INFO)
    assert any("num.network.threads" in m for m in infos)
    assert any("ssl.provider" in m for m in infos)
    assert not any("num.partitions" in m for m in infos)
    assert cfg.get("ssl.provider") == "x"
    with pytest.raises(UnknownConfigError):
        cfg.get("foo.bar")


def test_listeners_parsing() -> None:
    cfg = BrokerConfig({
        "listeners": "PLAINTEXT://:9092,INTERNAL://10.0.0.1:9093,EXT://[::1]:9094",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT,"
                                          "EXT:PLAINTEXT",
        "advertised.listeners": "PLAINTEXT://host.example:9092",
    })
    assert cfg.listeners == [
        Listener("PLAINTEXT", "", 9092),
        Listener("INTERNAL", "10.0.0.1", 9093),
        Listener("EXT", "::1", 9094),
    ]
    assert str(cfg.listeners[2]) == "EXT://[::1]:9094"
    assert cfg.advertised_listeners == [Listener("PLAINTEXT", "host.example", 9092)]
    assert cfg.inter_broker_listener_name == "PLAINTEXT"


def test_inter_broker_listener_from_security_protocol() -> None:
    cfg = BrokerConfig({"listeners": "PLAINTEXT://h:1,SASL_SSL://h:2",
                        "security.inter.broker.protocol": "SASL_SSL",
                        "zookeeper.connect": "z:2181",
                        "sasl.enabled.mechanisms": "PLAIN",
                        "sasl.mechanism.inter.broker.protocol": "PLAIN",
                        "listener.name.sasl_ssl.plain.sasl.jaas.config":
                            'org.apache.kafka.common.security.plain.PlainLoginModule required '
                            'username="b" password="p" user_b="p";'})
    assert cfg.inter_broker_listener_name == "SASL_SSL"
    security = inter_broker_security(cfg)
    assert (security.protocol, security.mechanism, security.option("username")) == \
        ("SASL_SSL", "PLAIN", "b")


def test_wildcard_listener_advertises_canonical_hostname(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(broker_module, "canonical_hostname", lambda: "box.example")
    for host in ("", "0.0.0.0"):
        cfg = BrokerConfig({"listeners": f"PLAINTEXT://{host}:9092"})
        assert cfg.listeners[0].host == host
        assert cfg.advertised_listeners == [Listener("PLAINTEXT", "box.example", 9092)]


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"listeners": "nonsense"}, "Unable to parse nonsense to a broker endpoint"),
        ({"listeners": "PLAINTEXT://h:99999"}, "out of range"),
        ({"listeners": "FOO://h:1"}, "No security protocol defined for listener FOO"),
        ({"listeners": "X://h:1", "listener.security.protocol.map": "X:GSSAPI"},
         "listener X uses GSSAPI; moldau serves"),
        ({"listeners": "A://h:1", "listener.security.protocol.map": "A:PLAINTEXT",
          "inter.broker.listener.name": "B"}, "must be a listener name"),
        ({"listeners": "SASL_PLAINTEXT://h:1"}, "offers none of the SASL mechanisms"),
        ({"listeners": "SASL_SSL://h:1", "zookeeper.connect": "z:2181",
          "sasl.enabled.mechanisms": "SCRAM-SHA-512"},
         "sasl.mechanism.inter.broker.protocol must be a mechanism the listener enables"),
        ({"listeners": "SASL_SSL://h:1", "zookeeper.connect": "z:2181",
          "sasl.enabled.mechanisms": "SCRAM-SHA-512",
          "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512"},
         r"listener\.name\.sasl_ssl\.scram-sha-512\.sasl\.jaas\.config\) needs username "
         "and password"),
        ({"listeners": "A://h:1,SSL://h:2", "listener.security.protocol.map": "A:PLAINTEXT,SSL:SSL",
          "inter.broker.listener.name": "A", "security.inter.broker.protocol": "SSL"},
         "Only one of inter.broker.listener.name and security.inter.broker.protocol"),
        ({"listeners": "A://h:1", "listener.security.protocol.map": "A:PLAINTEXT",
          "security.inter.broker.protocol": "SSL"}, "no listener named SSL"),
        ({"listeners": "PLAINTEXT://h:1,PLAINTEXT://h:2"}, "different name"),
        ({"listeners": "PLAINTEXT://h:1,SSL://h:1"}, "different port"),
        ({"advertised.listeners": "PLAINTEXT://0.0.0.0:9092"}, "nonroutable"),
        ({"advertised.listeners": "SSL://h:9092"}, "not among the names in listeners"),
        ({"listeners": ""}, "At least one listener"),
    ],
)
def test_bad_listeners(props: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        BrokerConfig(props)


def test_dynamic_layers_and_precedence() -> None:
    cfg = BrokerConfig({"log.segment.bytes": "1000", "message.max.bytes": "500"})
    changed = cfg.with_dynamic({"log.segment.bytes": "2000"}, cluster_default=True)
    assert cfg.log_segment_bytes == 1000  # the original is untouched
    assert changed.log_segment_bytes == 2000
    assert changed.source("log.segment.bytes") is ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    per_broker = changed.with_dynamic({"log.segment.bytes": "3000"})
    assert per_broker.log_segment_bytes == 3000
    assert per_broker.source("log.segment.bytes") is ConfigSource.DYNAMIC_BROKER_CONFIG
    assert per_broker.dynamic_broker_configs == {"log.segment.bytes": "3000"}
    assert per_broker.dynamic_default_configs == {"log.segment.bytes": "2000"}
    synonyms = per_broker.synonyms("log.segment.bytes")
    assert [(s.value, s.source) for s in synonyms] == [
        ("3000", ConfigSource.DYNAMIC_BROKER_CONFIG),
        ("2000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("1000", ConfigSource.STATIC_BROKER_CONFIG),
        ("1073741824", ConfigSource.DEFAULT_CONFIG),
    ]
    removed = per_broker.with_dynamic({"log.segment.bytes": None})
    assert removed.log_segment_bytes == 2000
    assert removed.message_max_bytes == 500


def test_dynamic_layers_merge_before_synonyms_resolve() -> None:
    # As in Kafka, a static log.retention.ms beats a (restored) dynamic log.retention.hours:
    # layers merge key by key, then the ms > minutes > hours order applies.
    cfg = BrokerConfig({"log.retention.ms": "1000"}, dynamic_broker={"log.retention.hours": "1"})
    assert cfg.log_retention_ms == 1000
    # Only the highest-priority member of a unit chain is dynamic, as in Kafka.
    with pytest.raises(ConfigError, match=r"Cannot update these configs dynamically: "
                                          r"log\.retention\.hours"):
        cfg.with_dynamic({"log.retention.hours": "1"})
    assert cfg.with_dynamic({"log.retention.ms": "5"}).log_retention_ms == 5


def test_dynamic_validation() -> None:
    cfg = BrokerConfig()
    with pytest.raises(ConfigError, match="Not a number of type INT"):
        cfg.with_dynamic({"message.max.bytes": "big"})
    with pytest.raises(ConfigError,
                       match=r"dynamically: listeners, node\.id$"):
        cfg.with_dynamic({"node.id": "3", "listeners": "PLAINTEXT://:1", "num.io.threads": "2"})
    with pytest.raises(ConfigError, match="Cannot update these configs dynamically: foo"):
        cfg.with_dynamic({"foo": "1"})
    restored = BrokerConfig(dynamic_broker={"num.partitions": "1"}, dynamic_default={})
    assert restored.source("num.partitions") is ConfigSource.DYNAMIC_BROKER_CONFIG


def test_describe_broker_configs() -> None:
    cfg = BrokerConfig({"log.retention.hours": "24", "ssl.keystore.password": "secret",
                        "process.roles": "broker"})
    cfg = cfg.with_dynamic({"log.retention.ms": "1000"})
    entries = {e.name: e for e in describe_broker_configs(cfg)}
    assert set(BROKER_KEYS) <= set(entries)
    ms = entries["log.retention.ms"]
    assert ms.value == "1000"
    assert ms.source is ConfigSource.DYNAMIC_BROKER_CONFIG
    assert ms.read_only is False
    assert ms.config_type is ConfigType.LONG
    assert [(s.name, s.value, s.source) for s in ms.synonyms] == [
        ("log.retention.ms", "1000", ConfigSource.DYNAMIC_BROKER_CONFIG),
        ("log.retention.hours", "24", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG),
    ]
    hours = entries["log.retention.hours"]
    assert hours.value == "24"
    assert hours.read_only is True
    assert hours.source is ConfigSource.STATIC_BROKER_CONFIG
    assert [s.name for s in hours.synonyms] == ["log.retention.hours", "log.retention.hours"]
    minutes = entries["log.retention.minutes"]
    assert minutes.value is None and minutes.source is ConfigSource.DEFAULT_CONFIG
    assert entries["num.partitions"].is_default
    assert entries["num.partitions"].read_only is True
    assert entries["listeners"].value == "PLAINTEXT://127.0.0.1:9092"
    assert entries["log.cleaner.min.cleanable.ratio"].value == "0.5"
    # Doubles render like Java's Double.toString.
    assert entries["log.cleaner.io.max.bytes.per.second"].value == "1.7976931348623157E308"
    secret = entries["ssl.keystore.password"]
    # A PASSWORD Kafka lets change at run time (per listener): never shown, not read-only.
    assert secret.value is None and secret.is_sensitive and not secret.read_only
    assert secret.config_type is ConfigType.PASSWORD
    assert [s.value for s in secret.synonyms] == [None]
    assert entries["process.roles"].value == "broker"
    assert all(e.documentation for e in entries.values())


def test_connection_limit_keys() -> None:
    cfg = BrokerConfig({
        "max.connections": "100", "max.connections.per.ip": "0",
        "max.connections.per.ip.overrides": " 127.0.0.1:3 , ::1:4,host-a.example:0",
        "queued.max.request.bytes": "209715200",
    })
    assert cfg.max_connections == 100 and cfg.max_connections_per_ip == 0
    # As Kafka, the last ':' splits host and count, so IPv6 addresses need no brackets.
    assert cfg.max_connections_per_ip_overrides == {"127.0.0.1": 3, "::1": 4,
                                                    "host-a.example": 0}
    assert cfg.queued_max_request_bytes == 209_715_200
    assert BrokerConfig().queued_max_request_bytes == -1  # Kafka's default: no limit
    assert BrokerConfig().max_connections_per_ip_overrides == {}


def test_connection_limits_are_checked_on_dynamic_changes() -> None:
    cfg = BrokerConfig()
    with pytest.raises(ConfigError, match="can be set to zero only if"):
        cfg.with_dynamic({"max.connections.per.ip": "0"})
    with pytest.raises(ConfigError, match="contains invalid addresses : a/b"):
        cfg.with_dynamic({"max.connections.per.ip.overrides": "a/b:1"})
    changed = cfg.with_dynamic({"max.connections.per.ip.overrides": "10.0.0.1:5"})
    assert changed.max_connections_per_ip_overrides == {"10.0.0.1": 5}
