"""Per-partition log settings, named after Kafka's topic configs.

The broker builds one :class:`LogConfig` per topic from its broker defaults and the topic's
overrides (``segment.bytes`` -> ``segment_bytes`` and so on); the log only reads it. Defaults
are Kafka's so that a log created without any configuration behaves like a Kafka log.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Java's Long.MAX_VALUE; Kafka uses it to mean "never" for the flush intervals.
LONG_MAX = 9223372036854775807


@dataclass(frozen=True, slots=True)
class LogConfig:
    """Settings of one partition log; immutable so a config swap is one attribute assignment."""

    segment_bytes: int = 1073741824
    segment_ms: int = 604800000
    segment_jitter_ms: int = 0
    #: -1 keeps data forever.
    retention_ms: int = 604800000
    #: -1 means no size limit.
    retention_bytes: int = -1
    max_message_bytes: int = 1048588
    index_interval_bytes: int = 4096
    segment_index_bytes: int = 10485760
    #: "CreateTime" keeps the producer's timestamps; "LogAppendTime" stamps the broker clock.
    message_timestamp_type: str = "CreateTime"
    flush_interval_messages: int = LONG_MAX
    #: How far before / after the broker's clock a CreateTime record's timestamp may be
    #: (KIP-937); LONG_MAX, the default, checks nothing and costs nothing.
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = LONG_MAX
    #: None (or LONG_MAX) leaves fsync to the OS and to roll/shutdown.
    flush_interval_ms: int | None = None
    cleanup_policy: tuple[str, ...] = ("delete",)
    #: Kept for completeness; segments are unlinked at once because open descriptors keep
    #: the data readable for in-flight fetches (see LogSegment.delete).
    file_delete_delay_ms: int = 60000
    #: Not used by the log itself; carried here because it is a topic config the produce path
    #: needs next to the others.
    min_insync_replicas: int = 1
    #: Not used by the log either: the produce handler checks records' schema ids against
    #: the Schema Registry for topics that turn these on (broker/schema_validation.py).
    confluent_key_schema_validation: bool = False
    confluent_value_schema_validation: bool = False
    #: How long a tombstone outlives the clean that first compacted it (see compactor.py).
    delete_retention_ms: int = 86400000
    #: Dirty share of a compacted log at which the cleaner rewrites it.
    min_cleanable_dirty_ratio: float = 0.5
    #: Records at least this young are never compacted.
    min_compaction_lag_ms: int = 0
    #: A dirty record older than this makes the log due for cleaning whatever its ratio.
    max_compaction_lag_ms: int = LONG_MAX

    @property
    def log_append_time(self) -> bool:
        """True when the broker, not the producer, sets record timestamps."""
        return self.message_timestamp_type == "LogAppendTime"

    @property
    def bounds_timestamps(self) -> bool:
        """True when produced records' timestamps must be checked against the clock."""
        return not self.log_append_time and (
            self.message_timestamp_before_max_ms < LONG_MAX
            or self.message_timestamp_after_max_ms < LONG_MAX
        )

    @property
    def deletes(self) -> bool:
        """True when retention may delete old segments (``cleanup.policy`` contains delete)."""
        return "delete" in self.cleanup_policy

    @property
    def compacts(self) -> bool:
        """True when the cleaner compacts the log (``cleanup.policy`` contains compact)."""
        return "compact" in self.cleanup_policy
