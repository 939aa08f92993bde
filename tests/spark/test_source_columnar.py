"""The columnar read path gives exactly the rows of the row path, on real broker data.

One topic gets records through every codec (a producer per partition), null keys and values,
headers (with null values), and transactions that commit and abort between plain records;
another uses LogAppendTime. Each query runs with ``moldau.decoder`` = ``rows`` and
``columnar`` and the collected rows must be equal, under both isolation levels, whole and
split into ranges that start inside batches.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="Spark tests need pyspark: pip install -e '.[spark]'")

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from moldau.spark import columnar

from .conftest import create_topic

pytestmark = pytest.mark.skipif(not columnar.AVAILABLE, reason="C decoder not built")

CODECS = ("gzip", "snappy", "lz4", "zstd")
#: Recent timestamps: older ones than retention.ms (7 days) would be deleted by retention.
NOW_MS = int(time.time() * 1000) - 60_000


def _record(i: int, partition: int, tag: str) -> dict[str, Any]:
    record: dict[str, Any] = {"partition": partition, "value": f"{tag}-{i}".encode(),
                              "timestamp": NOW_MS + i}
    if i % 3:
        record["key"] = f"k{i}".encode()
    if i % 7 == 0:
        record["value"] = None
    if i % 4 == 0:
        record["headers"] = [("h", f"v{i}".encode()), ("nil", None), ("", b"")]
    return record


def _fill(bootstrap: str, topic: str) -> None:
    """Plain records through every codec, then aborted and committed transactions."""
    for partition, codec in enumerate(CODECS):
        producer = Producer({"bootstrap.servers": bootstrap, "compression.type": codec,
                             "linger.ms": 20, "enable.idempotence": True})
        for i in range(150):
            producer.produce(topic, **_record(i, partition, f"plain-{codec}"))
        assert producer.flush(30) == 0
    txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": uuid.uuid4().hex,
                    "compression.type": "lz4", "linger.ms": 5})
    txn.init_transactions(30)
    plain = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for round_ in range(4):
        txn.begin_transaction()
        for i in range(40):
            txn.produce(topic, **_record(i, i % len(CODECS), f"txn{round_}"))
            if i % 10 == 0:
                plain.produce(topic, **_record(i, i % len(CODECS), f"between{round_}"))
        plain.flush(30)
        assert txn.flush(30) == 0  # an abort would purge records still queued
        if round_ % 2:
            txn.commit_transaction(30)
        else:
            txn.abort_transaction(30)
    assert plain.flush(30) == 0


@pytest.fixture(scope="module")
def topics(broker: Any) -> tuple[str, str]:
    mixed = create_topic(broker.bootstrap, partitions=len(CODECS), prefix="columnar")
    _fill(broker.bootstrap, mixed)
    appended = f"columnar-lat-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(appended, 1, 1, config={
        "message.timestamp.type": "LogAppendTime"})])[appended].result(30)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": "zstd"})
    for i in range(50):
        producer.produce(appended, **_record(i, 0, "lat"))
    assert producer.flush(30) == 0
    return mixed, appended


def _rows(spark: Any, bootstrap: str, decoder: str, **options: str) -> list[tuple]:
    reader = (spark.read.format("moldau").option("kafka.bootstrap.servers", bootstrap)
              .option("includeHeaders", "true").option("moldau.decoder", decoder))
    for key, value in options.items():
        reader = reader.option(key, value)
    rows = [tuple(r) for r in reader.load().collect()]
    return sorted(rows, key=lambda r: (r[2], r[3], r[4]))


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_both_paths_give_the_same_rows(spark: Any, broker: Any, topics: tuple[str, str],
                                       isolation: str) -> None:
    mixed, _ = topics
    options = {"subscribe": mixed, "kafka.isolation.level": isolation}
    rows = _rows(spark, broker.bootstrap, "rows", **options)
    assert _rows(spark, broker.bootstrap, "columnar", **options) == rows
    values = {r[1] for r in rows}
    assert b"txn1-1" in values and b"between2-10" in values
    assert (b"txn0-1" in values) == (isolation == "read_uncommitted")
    assert any(r[7] for r in rows) and any(r[0] is None for r in rows)
    assert sum(v.startswith(b"plain-") for v in values if v) == 4 * (150 - 150 // 7 - 1)


def test_ranges_starting_inside_batches(spark: Any, broker: Any,
                                        topics: tuple[str, str]) -> None:
    mixed, appended = topics
    starting = json.dumps({mixed: {"0": 7, "1": 55, "2": 101, "3": 3}})
    options = {"subscribe": mixed, "startingOffsets": starting, "minPartitions": "11"}
    rows = _rows(spark, broker.bootstrap, "rows", **options)
    assert _rows(spark, broker.bootstrap, "columnar", **options) == rows
    assert rows and min(r[4] for r in rows if r[3] == 1) >= 55
    lat = {"subscribe": appended, "minPartitions": "3"}
    lat_rows = _rows(spark, broker.bootstrap, "columnar", **lat)
    assert lat_rows == _rows(spark, broker.bootstrap, "rows", **lat)
    assert len(lat_rows) == 50 and {r[6] for r in lat_rows} == {1}
