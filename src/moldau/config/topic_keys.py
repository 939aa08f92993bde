"""The topic-level config keys and the broker keys that supply their defaults.

A topic config that a topic does not override takes its value from the broker: from the first
of its broker synonyms that is set (``retention.ms`` <- ``log.retention.ms`` <-
``log.retention.minutes`` <- ``log.retention.hours``), converted to the topic key's unit.
The synonym lists and their order are Kafka's, so a ``server.properties`` tuned for Kafka
gives moldau topics the same effective settings.
"""

from __future__ import annotations

from dataclasses import dataclass

from .definitions import (
    LONG_MAX,
    ConfigKey,
    ConfigType,
    Importance,
    ListOf,
    OneOf,
    ThrottledReplicas,
    at_least,
    between,
    index_keys,
)

BOOL, STR, INT, LONG, DOUBLE, LIST = (
    ConfigType.BOOLEAN,
    ConfigType.STRING,
    ConfigType.INT,
    ConfigType.LONG,
    ConfigType.DOUBLE,
    ConfigType.LIST,
)

HOURS = 3_600_000
MINUTES = 60_000

#: Every codec Kafka knows; "producer" keeps whatever the producer used, "uncompressed" none.
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
CLEANUP_POLICIES = ("compact", "delete")

#: Kafka 3.x's floor for segment.bytes (LegacyRecord.RECORD_OVERHEAD_V0). Kafka 4 raised it to
#: 1 MiB; moldau keeps the old floor so tests can roll tiny segments.
MIN_SEGMENT_BYTES = 14


@dataclass(frozen=True, slots=True)
class BrokerSynonym:
    """A broker key that supplies a topic key's default; ``factor`` converts its unit to ms."""

    name: str
    factor: int = 1


TOPIC_KEYS: dict[str, ConfigKey] = index_keys(
    [
        ConfigKey("cleanup.policy", LIST, ("delete",), "What happens to old segments: 'delete' "
                  "drops them past retention, 'compact' keeps the last record per key.",
                  validator=ListOf(CLEANUP_POLICIES)),
        ConfigKey("confluent.key.schema.validation", BOOL, False, "Refuse records whose key "
                  "does not start with the id of a schema known to the Schema Registry at "
                  "confluent.schema.registry.url (Confluent Server's key)."),
        ConfigKey("confluent.value.schema.validation", BOOL, False, "Refuse records whose "
                  "value does not start with the id of a schema known to the Schema Registry "
                  "at confluent.schema.registry.url (Confluent Server's key)."),
        ConfigKey("compression.type", STR, "producer", "Codec batches are stored with; "
                  "'producer' keeps the producer's choice.", validator=OneOf(COMPRESSION_TYPES)),
        ConfigKey("delete.retention.ms", LONG, 86_400_000, "How long tombstones survive "
                  "compaction, so slow consumers still see deletes.", validator=at_least(0)),
        ConfigKey("file.delete.delay.ms", LONG, 60_000, "Grace period before a deleted segment's "
                  "files are removed from disk.", validator=at_least(0)),
        ConfigKey("flush.messages", LONG, LONG_MAX, "fsync after this many messages; the default "
                  "leaves durability to replication and the page cache.", validator=at_least(1)),
        ConfigKey("flush.ms", LONG, LONG_MAX, "fsync when the oldest unflushed message is this "
                  "old.", validator=at_least(0)),
        ConfigKey("follower.replication.throttled.replicas", LIST, (), "Replicas "
                  "(partition:broker, or *) whose follower fetches are limited to the broker's "
                  "follower.replication.throttled.rate while not in sync.",
                  validator=ThrottledReplicas()),
        ConfigKey("index.interval.bytes", INT, 4096, "Bytes of log between two offset index "
                  "entries: denser indexes cost space, sparser ones cost scans.",
                  validator=at_least(0)),
        ConfigKey("leader.replication.throttled.replicas", LIST, (), "Replicas "
                  "(partition:broker, or *) whose leader serves followers outside the ISR at "
                  "most at the broker's leader.replication.throttled.rate.",
                  validator=ThrottledReplicas()),
        ConfigKey("max.compaction.lag.ms", LONG, LONG_MAX, "Longest a record may stay "
                  "uncompacted.", validator=at_least(1)),
        ConfigKey("max.message.bytes", INT, 1_048_588, "Largest record batch the topic accepts "
                  "(after compression).", validator=at_least(0)),
        ConfigKey("message.downconversion.enable", BOOL, True, "Down-conversion for old fetch "
                  "versions; accepted, moldau serves record batches v2 only.", Importance.LOW,
                  used=False),
        ConfigKey("message.format.version", STR, "3.0-IV1", "Deprecated by Kafka 3.0; accepted "
                  "and ignored.", used=False),
        ConfigKey("message.timestamp.after.max.ms", LONG, LONG_MAX, "How far in the future a "
                  "CreateTime timestamp may be before the batch is rejected.",
                  validator=at_least(0)),
        ConfigKey("message.timestamp.before.max.ms", LONG, LONG_MAX, "How far in the past a "
                  "CreateTime timestamp may be before the batch is rejected.",
                  validator=at_least(0)),
        ConfigKey("message.timestamp.difference.max.ms", LONG, LONG_MAX, "Deprecated bound on "
                  "timestamp skew; used when the before/after keys are unset.",
                  validator=at_least(0)),
        ConfigKey("message.timestamp.type", STR, "CreateTime", "Whether record timestamps are the "
                  "producer's (CreateTime) or the broker's (LogAppendTime).",
                  validator=OneOf(TIMESTAMP_TYPES)),
        ConfigKey("min.cleanable.dirty.ratio", DOUBLE, 0.5, "Share of uncompacted log that makes "
                  "the cleaner compact a partition.", validator=between(0, 1)),
        ConfigKey("min.compaction.lag.ms", LONG, 0, "Shortest time a record stays uncompacted.",
                  validator=at_least(0)),
        ConfigKey("min.insync.replicas", INT, 1, "Replicas that must have a write before an "
                  "acks=all produce succeeds.", validator=at_least(1)),
        ConfigKey("preallocate", BOOL, False, "Preallocate segment files; accepted, moldau grows "
                  "files as it writes.", used=False),
        ConfigKey("retention.bytes", LONG, -1, "Partition size beyond which old segments are "
                  "deleted; -1 means no size limit."),
        ConfigKey("retention.ms", LONG, 7 * 24 * HOURS, "Age beyond which old segments are "
                  "deleted; -1 keeps data forever.", validator=at_least(-1)),
        ConfigKey("segment.bytes", INT, 1_073_741_824, "Size at which a new segment is rolled "
                  "(at least 14 bytes, Kafka 3.x's floor).",
                  validator=at_least(MIN_SEGMENT_BYTES)),
        ConfigKey("segment.index.bytes", INT, 10_485_760, "Size of a segment's offset and time "
                  "indexes; full indexes roll the segment.", validator=at_least(4)),
        ConfigKey("segment.jitter.ms", LONG, 0, "Random reduction of segment.ms so segments of "
                  "many partitions do not all roll at once.", validator=at_least(0)),
        ConfigKey("segment.ms", LONG, 7 * 24 * HOURS, "Age at which a segment is rolled even if "
                  "not full, so retention can delete it.", validator=at_least(1)),
        ConfigKey("unclean.leader.election.enable", BOOL, False, "Let an out-of-sync replica "
                  "become leader, trading lost records for availability."),
    ]
)

#: Topic key -> broker keys that supply its default, highest priority first (Kafka's order).
TOPIC_SYNONYMS: dict[str, tuple[BrokerSynonym, ...]] = {
    "segment.bytes": (BrokerSynonym("log.segment.bytes"),),
    "segment.ms": (BrokerSynonym("log.roll.ms"), BrokerSynonym("log.roll.hours", HOURS)),
    "segment.jitter.ms": (
        BrokerSynonym("log.roll.jitter.ms"),
        BrokerSynonym("log.roll.jitter.hours", HOURS),
    ),
    "segment.index.bytes": (BrokerSynonym("log.index.size.max.bytes"),),
    "flush.messages": (BrokerSynonym("log.flush.interval.messages"),),
    "flush.ms": (
        BrokerSynonym("log.flush.interval.ms"),
        BrokerSynonym("log.flush.scheduler.interval.ms"),
    ),
    "retention.bytes": (BrokerSynonym("log.retention.bytes"),),
    "retention.ms": (
        BrokerSynonym("log.retention.ms"),
        BrokerSynonym("log.retention.minutes", MINUTES),
        BrokerSynonym("log.retention.hours", HOURS),
    ),
    "max.message.bytes": (BrokerSynonym("message.max.bytes"),),
    "index.interval.bytes": (BrokerSynonym("log.index.interval.bytes"),),
    "delete.retention.ms": (BrokerSynonym("log.cleaner.delete.retention.ms"),),
    "min.compaction.lag.ms": (BrokerSynonym("log.cleaner.min.compaction.lag.ms"),),
    "max.compaction.lag.ms": (BrokerSynonym("log.cleaner.max.compaction.lag.ms"),),
    "file.delete.delay.ms": (BrokerSynonym("log.segment.delete.delay.ms"),),
    "min.cleanable.dirty.ratio": (BrokerSynonym("log.cleaner.min.cleanable.ratio"),),
    "cleanup.policy": (BrokerSynonym("log.cleanup.policy"),),
    "unclean.leader.election.enable": (BrokerSynonym("unclean.leader.election.enable"),),
    "min.insync.replicas": (BrokerSynonym("min.insync.replicas"),),
    "compression.type": (BrokerSynonym("compression.type"),),
    "preallocate": (BrokerSynonym("log.preallocate"),),
    "message.format.version": (BrokerSynonym("log.message.format.version"),),
    "message.timestamp.type": (BrokerSynonym("log.message.timestamp.type"),),
    "message.timestamp.difference.max.ms": (
        BrokerSynonym("log.message.timestamp.difference.max.ms"),
    ),
    "message.timestamp.before.max.ms": (BrokerSynonym("log.message.timestamp.before.max.ms"),),
    "message.timestamp.after.max.ms": (BrokerSynonym("log.message.timestamp.after.max.ms"),),
    "message.downconversion.enable": (BrokerSynonym("log.message.downconversion.enable"),),
}

#: The highest-priority synonym of each topic key: Kafka lets exactly these change at run time
#: (they are the cluster-wide topic defaults); the lower-priority unit variants such as
#: ``log.retention.hours`` stay read-only, and so does the deprecated message format version.
TOPIC_DEFAULT_BROKER_KEYS: frozenset[str] = frozenset(
    synonyms[0].name for synonyms in TOPIC_SYNONYMS.values()
) - {"log.message.format.version"}
