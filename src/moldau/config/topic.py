"""Topic configs: validating overrides and computing a topic's effective settings.

A topic stores only its overrides (what CreateTopics/AlterConfigs set). Everything else comes
from the broker at the moment it is needed, so changing a broker default (statically or with a
dynamic broker config) changes every topic that does not override it, as in Kafka.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

from .definitions import (
    LONG_MAX,
    ConfigEntry,
    ConfigError,
    ConfigSource,
    ConfigSynonym,
    ConfigValue,
    UnknownConfigError,
)
from .topic_keys import TOPIC_KEYS, TOPIC_SYNONYMS

if TYPE_CHECKING:
    from ..log.config import LogConfig
    from .broker import BrokerConfig


def validate_topic_configs(configs: Mapping[str, str | None]) -> dict[str, str]:
    """Check topic overrides and return the ones to store.

    Raises :class:`ConfigError` for an unknown key (``Unknown topic config name: foo``) or an
    invalid value. A None value means "no override" and is dropped, so callers can pass the
    result of applying DELETE operations directly. Values are stored trimmed, as given
    otherwise (Kafka stores the strings, not the parsed values).
    """
    clean: dict[str, str] = {}
    for name, raw in configs.items():
        key = TOPIC_KEYS.get(name)
        if key is None:
            raise UnknownConfigError(name, f"Unknown topic config name: {name}")
        if raw is None:
            continue
        key.parse(raw)
        clean[name] = raw.strip()
    _check_compaction_lags(
        _parsed_or(clean, "min.compaction.lag.ms", 0),
        _parsed_or(clean, "max.compaction.lag.ms", LONG_MAX),
    )
    return clean


def _parsed_or(configs: Mapping[str, str], name: str, fallback: int) -> int:
    if name not in configs:
        return fallback
    value = TOPIC_KEYS[name].parse(configs[name])
    assert isinstance(value, int)
    return value


def _check_compaction_lags(min_lag: int, max_lag: int) -> None:
    # Kafka checks this pair across keys; a compactor could never satisfy both otherwise.
    if min_lag > max_lag:
        raise ConfigError(
            "min.compaction.lag.ms", min_lag,
            message=f"conflict topic config setting min.compaction.lag.ms ({min_lag}) > "
            f"max.compaction.lag.ms ({max_lag})",
        )


@dataclass(frozen=True, slots=True)
class EffectiveTopicConfig:
    """Every topic config of one topic, typed, after overrides and broker defaults.

    ``entries`` carries the DescribeConfigs view (value, source, synonyms) of each key.
    """

    cleanup_policy: tuple[str, ...]
    compression_type: str
    confluent_key_schema_validation: bool
    confluent_value_schema_validation: bool
    delete_retention_ms: int
    file_delete_delay_ms: int
    flush_messages: int
    flush_ms: int
    follower_replication_throttled_replicas: tuple[str, ...]
    index_interval_bytes: int
    leader_replication_throttled_replicas: tuple[str, ...]
    max_compaction_lag_ms: int
    max_message_bytes: int
    message_downconversion_enable: bool
    message_format_version: str
    #: Resolved like Kafka: the deprecated difference key stands in while these are unset.
    message_timestamp_after_max_ms: int
    message_timestamp_before_max_ms: int
    message_timestamp_difference_max_ms: int
    message_timestamp_type: str
    min_cleanable_dirty_ratio: float
    min_compaction_lag_ms: int
    min_insync_replicas: int
    preallocate: bool
    retention_bytes: int
    retention_ms: int
    segment_bytes: int
    segment_index_bytes: int
    segment_jitter_ms: int
    segment_ms: int
    unclean_leader_election_enable: bool
    entries: tuple[ConfigEntry, ...] = ()

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    def describe(self, names: Iterable[str] | None = None) -> list[ConfigEntry]:
        """DescribeConfigs rows, all keys or just ``names`` (unknown names are skipped)."""
        if names is None:
            return list(self.entries)
        wanted = set(names)
        return [e for e in self.entries if e.name in wanted]


def effective_topic_config(
    broker: BrokerConfig, topic_overrides: Mapping[str, str]
) -> EffectiveTopicConfig:
    """Combine a topic's overrides with the broker's defaults.

    Overrides are re-validated (they may predate a stricter moldau). A key without override
    takes the first set broker synonym, converted to the topic key's unit; a key without any
    broker synonym takes its own default.
    """
    values: dict[str, ConfigValue] = {}
    entries: list[ConfigEntry] = []
    for name in sorted(TOPIC_KEYS):
        key = TOPIC_KEYS[name]
        chain = TOPIC_SYNONYMS.get(name, ())
        synonyms: list[ConfigSynonym] = []
        if chain:
            synonyms = broker.synonyms(chain[0].name, [s.name for s in chain])
        if name in topic_overrides:
            value = key.parse(topic_overrides[name])
            synonyms.insert(0, ConfigSynonym(name, key.format(value), ConfigSource.TOPIC_CONFIG))
        elif chain:
            value = broker.resolve(chain)[0]
            if name == "retention.ms" and isinstance(value, int) and value < 0:
                value = -1  # Kafka maps every negative broker retention to "forever"
        else:
            value = key.default
        values[name] = value
        source = synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG
        entries.append(ConfigEntry(
            name=name,
            value=key.format(value),
            source=source,
            read_only=False,
            is_sensitive=key.sensitive,
            config_type=key.type,
            documentation=key.doc,
            synonyms=tuple(synonyms),
        ))
    min_lag, max_lag = values["min.compaction.lag.ms"], values["max.compaction.lag.ms"]
    assert isinstance(min_lag, int) and isinstance(max_lag, int)
    _check_compaction_lags(min_lag, max_lag)
    difference = values["message.timestamp.difference.max.ms"]
    for bound in ("message.timestamp.before.max.ms", "message.timestamp.after.max.ms"):
        if values[bound] == LONG_MAX:
            values[bound] = difference
    kwargs = {name.replace(".", "_"): value for name, value in values.items()}
    return EffectiveTopicConfig(**kwargs, entries=tuple(entries))  # type: ignore[arg-type]


#: LogConfig field -> EffectiveTopicConfig attribute, where the names differ.
_LOG_FIELD_SOURCES = {
    "flush_interval_messages": "flush_messages",
    "flush_interval_ms": "flush_ms",
}


def to_log_config(effective: EffectiveTopicConfig) -> LogConfig:
    """Build the log layer's :class:`~moldau.log.config.LogConfig` from a topic's settings.

    Every LogConfig field that has a topic config of the same (or mapped) name is filled, so
    fields the log engineer adds later are picked up without touching this function.
    """
    from ..log.config import LogConfig

    kwargs: dict[str, object] = {}
    for f in fields(LogConfig):
        attr = _LOG_FIELD_SOURCES.get(f.name, f.name)
        if attr in EffectiveTopicConfig.__dataclass_fields__:
            kwargs[f.name] = getattr(effective, attr)
    return LogConfig(**kwargs)  # type: ignore[arg-type]
