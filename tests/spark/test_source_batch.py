"""Batch reads through ``spark.read.format("moldau")`` against a real broker."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="Spark tests need pyspark: pip install -e '.[spark]'")

from .conftest import create_topic
from .records import Sent, produce


def _reader(spark: Any, bootstrap: str, **options: str) -> Any:
    reader = spark.read.format("moldau").option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader


def _as_sent(row: Any) -> Sent:
    stamp = row.timestamp.replace(tzinfo=UTC) if row.timestamp.tzinfo is None else row.timestamp
    headers = tuple((h.key, h.value) for h in row.headers) if row.headers else None
    return Sent(row.key, row.value, row.partition, row.offset,
                round(stamp.timestamp() * 1000), headers)


@pytest.fixture(scope="module")
def loaded(broker: Any) -> tuple[str, list[Sent]]:
    """A 3-partition topic with 90 records: keys, null keys, headers, fixed timestamps."""
    topic = create_topic(broker.bootstrap, partitions=3)
    base = 1_700_000_000_000
    records = []
    for i in range(90):
        record: dict[str, Any] = {"value": f"value-{i}".encode(), "partition": i % 3,
                                  "timestamp": base + i * 1000}
        if i % 5:
            record["key"] = f"key-{i}".encode()
        if i % 4 == 0:
            record["headers"] = [("trace", f"t{i}".encode()), ("empty", b"")]
        records.append(record)
    return topic, produce(broker.bootstrap, topic, records)


def test_batch_read_returns_exactly_the_produced_records(spark: Any, broker: Any,
                                                         loaded: tuple[str, list[Sent]]) -> None:
    topic, sent = loaded
    df = _reader(spark, broker.bootstrap, subscribe=topic, includeHeaders="true").load()
    assert df.columns == ["key", "value", "topic", "partition", "offset", "timestamp",
                          "timestampType", "headers"]
    rows = df.collect()
    assert {r.topic for r in rows} == {topic}
    assert {r.timestampType for r in rows} == {0}
    assert sorted((_as_sent(r) for r in rows), key=lambda s: (s.partition, s.offset)) == sent


def test_starting_and_ending_offsets_json_and_min_partitions(
        spark: Any, broker: Any, loaded: tuple[str, list[Sent]]) -> None:
    topic, sent = loaded
    starting = json.dumps({topic: {"0": 5, "1": -2, "2": 29}})
    ending = json.dumps({topic: {"0": 25, "1": 3, "2": -1}})
    df = _reader(spark, broker.bootstrap, subscribe=topic, startingOffsets=starting,
                 endingOffsets=ending, minPartitions="6").load()
    assert df.rdd.getNumPartitions() >= 6
    got = sorted((r.partition, r.offset, r.value) for r in df.collect())
    want = sorted((s.partition, s.offset, s.value) for s in sent
                  if (s.partition == 0 and 5 <= s.offset < 25)
                  or (s.partition == 1 and s.offset < 3)
                  or (s.partition == 2 and s.offset >= 29))
    assert got == want


def test_assign_and_starting_timestamp(spark: Any, broker: Any,
                                       loaded: tuple[str, list[Sent]]) -> None:
    topic, sent = loaded
    since = sent[0].timestamp_ms + 60_000  # records 60.. of the 90
    df = _reader(spark, broker.bootstrap, assign=json.dumps({topic: [1, 2]}),
                 startingTimestamp=str(since)).load()
    got = sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())
    want = sorted((s.partition, s.offset) for s in sent
                  if s.partition in (1, 2) and s.timestamp_ms >= since)
    assert got == want
    assert datetime.fromtimestamp(since / 1000, UTC).year >= 2023


def test_option_mistakes_fail_when_the_query_is_defined(spark: Any, broker: Any) -> None:
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException

    bad = [
        {},  # no subscribe/assign
        {"subscribe": "a", "assign": '{"a":[0]}'},
        {"subscribe": "a", "startingOffsets": "latest"},
        {"subscribe": "a", "kafka.auto.offset.reset": "earliest"},
        {"subscribe": "a", "startingOffsets": "{not json"},
    ]
    for options in bad:
        with pytest.raises((PySparkException, Py4JJavaError, ValueError)):
            _reader(spark, broker.bootstrap, **options).load().collect()
