"""Every option of Spark's Kafka source and sink, and moldau's own, with what moldau does.

The names are those of Spark's Structured Streaming + Kafka Integration Guide. The parser
(``options.py``) reads exactly the options listed here, and ``docs/spark.md`` has one row per
entry; unit tests hold the three together, so the table in the docs stays true.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Side = Literal["source", "sink", "source and sink"]
Status = Literal["implemented", "refused", "moldau only"]


@dataclass(frozen=True)
class SparkOption:
    name: str
    side: Side
    status: Status


def _entries(side: Side, status: Status, *names: str) -> list[SparkOption]:
    return [SparkOption(name, side, status) for name in names]


CATALOG: tuple[SparkOption, ...] = tuple([
    *_entries("source and sink", "implemented", "kafka.bootstrap.servers", "kafka.*",
              "includeHeaders"),
    *_entries("source", "implemented",
              "assign", "subscribe", "subscribePattern",
              "startingOffsets", "startingTimestamp", "startingOffsetsByTimestamp",
              "startingOffsetsByTimestampStrategy",
              "endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp",
              "failOnDataLoss", "kafkaConsumer.pollTimeoutMs",
              "fetchOffset.numRetries", "fetchOffset.retryIntervalMs",
              "maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay",
              "minPartitions", "maxRecordsPerPartition",
              "groupIdPrefix", "kafka.group.id", "kafka.isolation.level"),
    *_entries("source", "refused",
              "kafka.auto.offset.reset", "kafka.enable.auto.commit",
              "kafka.key.deserializer", "kafka.value.deserializer",
              "kafka.interceptor.classes"),
    *_entries("source", "moldau only", "moldau.decoder"),
    *_entries("sink", "implemented", "topic"),
    *_entries("sink", "refused", "kafka.key.serializer", "kafka.value.serializer"),
    *_entries("sink", "moldau only",
              "writePath", "exactlyOnce", "commitsTopic", "transactionalIdPrefix",
              "queryId", "batchId", "moldau.test.failTaskOnce",
              "moldau.test.dieAfterCommitOnce"),
])

# Names the parser reads itself (``kafka.*`` keys go to librdkafka as a group instead).
PARSED_NAMES = frozenset(o.name.lower() for o in CATALOG if not o.name.startswith("kafka."))
