"""Executor side: read one offset range with a consumer and hand Spark Arrow record batches.

Each task opens its own confluent-kafka consumer, ``assign``s the single partition at the
range's start (no group, no commits) and stops at the range's end. Rows are gathered column
by column and returned as ``pyarrow.RecordBatch``es: Spark takes those without converting
each row in Python, which is most of the cost of a Python data source.

A range is finished when the last wanted offset arrives or when the consumer reports the
end of the partition beyond the range; the latter covers offsets that never come back as
records (transaction markers, compacted-away keys). A poll that brings nothing for
``kafkaConsumer.pollTimeoutMs`` fails the task instead of hanging it.

That is the row path. The default columnar path (``moldau.decoder``, see columnar.py) does
the same job without a Python object per record: it fetches the partition's raw record
batches itself (raw_fetch.py) and decodes them in C straight into Arrow columns. It needs
the C extension (built at install time when a compiler is present) and a plaintext
connection; otherwise the row path reads, and the executor logs once why. Both give the
same rows, and both read with librdkafka's default ``isolation.level``, read_committed,
unless ``kafka.isolation.level`` says otherwise.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition
from kio.schema.errors import ErrorCode
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from . import columnar
from .metadata import report_data_loss
from .options import SourceOptions, consumer_config
from .planning import OffsetRange
from .raw_fetch import PartitionFetcher

log = logging.getLogger(__name__)

BATCH_ROWS = 8192
#: The columnar path's Fetch size limit (per request and partition); the broker still
#: returns a first batch larger than this whole, as Kafka does.
FETCH_MAX_BYTES = 8 << 20
#: How long one Fetch may wait at the broker for data before it answers empty.
_FETCH_WAIT_MS = 500
_fallback_logged = False
_CONSUME_MAX = 10_000
_POLL_S = 0.5


class _Columns:
    """Column lists for one Arrow batch in the Kafka source's row layout."""

    def __init__(self, schema: pa.Schema, include_headers: bool, topic: str,
                 partition: int) -> None:
        self.schema = schema
        self.include_headers = include_headers
        # One range is one partition: those columns are constants, not per-record calls.
        self.topic = topic
        self.partition = partition
        self.clear()

    def clear(self) -> None:
        self.key: list[bytes | None] = []
        self.value: list[bytes | None] = []
        self.offset: list[int] = []
        self.timestamp: list[int | None] = []
        self.timestamp_type: list[int] = []
        self.headers: list[list[tuple[str, bytes | None]] | None] = []

    def __len__(self) -> int:
        return len(self.offset)

    def add(self, message: Any) -> None:
        self.key.append(message.key())
        self.value.append(message.value())
        self.offset.append(message.offset())
        kind, stamp = message.timestamp()
        # librdkafka: 1 = CreateTime, 2 = LogAppendTime; Spark reports Kafka's 0 and 1.
        self.timestamp.append(stamp * 1000 if stamp >= 0 else None)
        self.timestamp_type.append(1 if kind == 2 else 0)
        if self.include_headers:
            headers = message.headers()
            self.headers.append(list(headers) if headers else None)

    def batch(self) -> pa.RecordBatch:
        rows = len(self.offset)
        arrays = [self.key, self.value, [self.topic] * rows, [self.partition] * rows,
                  self.offset, self.timestamp, self.timestamp_type]
        if self.include_headers:
            arrays.append(self.headers)
        columns = [pa.array(values, type=fld.type)
                   for values, fld in zip(arrays, self.schema, strict=True)]
        return pa.RecordBatch.from_arrays(columns, schema=self.schema)


def arrow_schema(schema: StructType) -> pa.Schema:
    """The Arrow schema Spark expects back: its own conversion, so it matches exactly."""
    return to_arrow_schema(schema, timezone="UTC")


def read_range(offset_range: OffsetRange, options: SourceOptions,
               schema: StructType) -> Iterator[pa.RecordBatch]:
    """Yield the records of ``offset_range`` as Arrow batches, checking for lost data."""
    if columnar_usable(options):
        yield from _read_columnar(offset_range, options, arrow_schema(schema))
        return
    consumer = Consumer({
        **consumer_config(options.client_config, "executor"),
        "enable.partition.eof": "true",
        "auto.offset.reset": "error",
    })
    try:
        yield from _read(consumer, offset_range, options, arrow_schema(schema))
    finally:
        consumer.close()


def columnar_usable(options: SourceOptions) -> bool:
    """Whether the columnar path can read with these options (else the row path reads)."""
    global _fallback_logged
    if options.decoder != "columnar":
        return False
    why = None
    if not columnar.AVAILABLE:
        why = "the C decoder moldau.spark._kafka_batches is not built (no C compiler at install)"
    protocol = options.client_config.get("security.protocol", "plaintext").strip().lower()
    if protocol != "plaintext":
        why = f"it speaks plaintext only, not security.protocol {protocol}"
    if why is None:
        return True
    if not _fallback_logged:
        _fallback_logged = True
        log.warning("moldau source: reading through the row path: %s", why)
    return False


def _read_columnar(r: OffsetRange, options: SourceOptions,
                   schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    config = options.client_config
    isolation = config.get("isolation.level", "read_committed").strip().lower()
    timeout_s = options.poll_timeout_ms / 1000
    fetcher = PartitionFetcher(config["bootstrap.servers"], r.topic, r.partition,
                               read_committed=isolation == "read_committed",
                               max_bytes=FETCH_MAX_BYTES, timeout_s=timeout_s)
    try:
        start, until = _clamp(r, *fetcher.watermarks(), options)
        position = start
        last_progress = time.monotonic()
        while position < until:
            fetched = fetcher.fetch(position, _FETCH_WAIT_MS)
            if fetched.error == ErrorCode.offset_out_of_range:
                report_data_loss(f"offset {position} of {r.topic}-{r.partition} went out of "
                                 "range while reading", options.fail_on_data_loss)
                return
            decoded = columnar.decode_fetched(
                fetched.records, position, until, topic=r.topic, partition=r.partition,
                schema=schema, include_headers=options.include_headers,
                aborted=fetched.aborted)
            if decoded.batch is not None:
                yield decoded.batch
            if decoded.next_offset > position:
                position = decoded.next_offset
                last_progress = time.monotonic()
            elif time.monotonic() - last_progress > timeout_s:
                raise TimeoutError(
                    f"no record of {r.topic}-{r.partition} within {timeout_s:g} s while "
                    f"reading offsets [{start}, {until}) (kafkaConsumer.pollTimeoutMs)")
    finally:
        fetcher.close()


def _bounds(consumer: Any, r: OffsetRange, options: SourceOptions) -> tuple[int, int]:
    """The range actually readable, after comparing it with the partition's watermarks."""
    timeout = options.poll_timeout_ms / 1000
    tp = KafkaTopicPartition(r.topic, r.partition)
    low, high = consumer.get_watermark_offsets(tp, timeout=timeout, cached=False)
    return _clamp(r, low, high, options)


def _clamp(r: OffsetRange, low: int, high: int, options: SourceOptions) -> tuple[int, int]:
    """``r`` within [low, high), reporting what falls outside as lost data."""
    start, until = r.from_offset, r.until_offset
    if start < low:
        report_data_loss(f"cannot read {r.topic}-{r.partition} from offset {start}: the "
                         f"earliest available offset is {low}", options.fail_on_data_loss)
        start = low
    if until > high:
        report_data_loss(f"cannot read {r.topic}-{r.partition} up to offset {until}: the "
                         f"latest offset is {high}", options.fail_on_data_loss)
        until = high
    return start, until


def _read(consumer: Any, r: OffsetRange, options: SourceOptions,
          schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    start, until = _bounds(consumer, r, options)
    if start >= until:
        return
    consumer.assign([KafkaTopicPartition(r.topic, r.partition, start)])
    columns = _Columns(schema, options.include_headers, r.topic, r.partition)
    timeout_s = options.poll_timeout_ms / 1000
    last_progress = time.monotonic()
    done = False
    while not done:
        messages = consumer.consume(_CONSUME_MAX, timeout=_POLL_S)
        if not messages:
            if time.monotonic() - last_progress > timeout_s:
                raise TimeoutError(
                    f"no record of {r.topic}-{r.partition} within {timeout_s:g} s while "
                    f"reading offsets [{start}, {until}) (kafkaConsumer.pollTimeoutMs)"
                )
            continue
        last_progress = time.monotonic()
        for message in messages:
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    # Everything up to the high watermark is read; any offset of the range
                    # not seen by now is a marker or compacted away, never a record.
                    done = done or message.offset() >= until
                    continue
                if error.code() == KafkaError._AUTO_OFFSET_RESET:
                    report_data_loss(f"offset {start} of {r.topic}-{r.partition} went out "
                                     f"of range while reading: {error.str()}",
                                     options.fail_on_data_loss)
                    done = True
                    break
                raise KafkaException(error)
            if message.offset() >= until:
                done = True
                break
            columns.add(message)
            if message.offset() == until - 1:
                done = True
                break
            if len(columns) >= BATCH_ROWS:
                yield columns.batch()
                columns.clear()
    if len(columns):
        yield columns.batch()
