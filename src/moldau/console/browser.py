"""The message browser: read a few records of one partition from an offset or a time.

A short-lived consumer that assigns the partition itself (no group, nothing committed),
so looking at a topic never moves anybody's offsets. Reading stops at the limit, at the
end of the partition, or after the connection timeout, whichever comes first.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime

from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient

from ..cli.connection import Connection
from ..cli.errors import CliError, describe_kafka_error
from ..cli.topic import describe_topic
from .decode import AvroDecoder, Decoded, decode

#: Most records one page shows.
MAX_LIMIT = 200


@dataclass(frozen=True)
class Record:
    offset: int
    timestamp: str
    key: Decoded
    value: Decoded
    headers: list[tuple[str, Decoded]]


@dataclass(frozen=True)
class Page:
    topic: str
    partition: int
    start: int | None  # None: no record at or after the time asked for
    earliest: int
    end: int
    records: list[Record]


def parse_time(text: str) -> int:
    """Epoch milliseconds, or an ISO 8601 date-time (UTC when no zone is given)."""
    text = text.strip()
    if text.isdigit():
        return int(text)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise CliError(
            f"invalid time {text!r}: expected ISO 8601 such as 2026-05-01T12:00:00Z, "
            "or epoch milliseconds"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def _format_time(kind: int, ms: int) -> str:
    if kind == TIMESTAMP_NOT_AVAILABLE or ms < 0:
        return "-"
    moment = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def read_page(conn: Connection, admin: AdminClient, topic: str, partition: int,
              *, offset: int | None, timestamp_ms: int | None, limit: int,
              how: str, avro: AvroDecoder | None = None) -> Page:
    """Up to ``limit`` records of ``topic``/``partition`` from ``offset`` or ``timestamp_ms``."""
    description = describe_topic(conn, admin, topic)
    ids = sorted(p.id for p in description.partitions)
    if partition not in ids:
        raise CliError(f"topic {topic!r} has no partition {partition} (it has {len(ids)})")
    limit = max(1, min(limit, MAX_LIMIT))
    consumer = Consumer(conn.client_config(**{
        "client.id": "moldau-console",
        "group.id": "moldau-console-browser",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
    }))
    try:
        earliest, end = consumer.get_watermark_offsets(
            TopicPartition(topic, partition), timeout=conn.timeout)
        start: int | None = earliest if offset is None else offset
        if timestamp_ms is not None:
            found = consumer.offsets_for_times(
                [TopicPartition(topic, partition, timestamp_ms)], timeout=conn.timeout)
            start = found[0].offset if found and found[0].offset >= 0 else None
        elif start is not None and start >= end:
            raise CliError(
                f"offset {start} is past the end of {topic}:{partition}: its next offset is "
                f"{end}, so the last record is at {end - 1}" if end > 0 else
                f"offset {start} is past the end of {topic}:{partition}: it has no records")
        elif start is not None and start < earliest:
            raise CliError(f"offset {start} is before the start of {topic}:{partition}: its "
                           f"earliest offset is {earliest}")
        records = [] if start is None or start >= end else _read(
            consumer, conn, topic, partition, start, end, limit, how, avro)
        return Page(topic, partition, start, earliest, end, records)
    finally:
        consumer.close()


def _read(consumer: Consumer, conn: Connection, topic: str, partition: int, start: int,
          end: int, limit: int, how: str, avro: AvroDecoder | None) -> list[Record]:
    consumer.assign([TopicPartition(topic, partition, start)])
    records: list[Record] = []
    deadline = time.monotonic() + conn.timeout
    while len(records) < limit and time.monotonic() < deadline:
        message = consumer.poll(min(0.5, max(0.01, deadline - time.monotonic())))
        if message is None:
            continue
        error = message.error()
        if error is not None:
            if error.code() == KafkaError._PARTITION_EOF:
                break
            raise CliError(f"cannot read {topic}:{partition}: {describe_kafka_error(error)}")
        headers = message.headers() or []
        pairs = list(headers.items()) if isinstance(headers, dict) else list(headers)
        records.append(Record(
            offset=message.offset() or 0,
            timestamp=_format_time(*message.timestamp()),
            # Keys are rarely Avro: asked for Avro, a key that is not falls back to auto.
            key=decode(message.key(), "auto" if how == "avro" else how, avro=avro, topic=topic,
                       is_key=True),
            value=decode(message.value(), how, avro=avro, topic=topic),
            headers=[(k, decode(v, how)) for k, v in pairs],
        ))
        if (message.offset() or 0) + 1 >= end:
            break
    return records
