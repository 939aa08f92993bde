"""Streaming reads: checkpointed offsets, rate limits, restarts, new partitions, data loss."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="Spark tests need pyspark: pip install -e '.[spark]'")

from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions

from .conftest import create_topic
from .records import produce

QUERY_TIMEOUT_S = 180


class Collector:
    """A foreachBatch target that keeps every row and each batch's size on the driver."""

    def __init__(self) -> None:
        self.rows: list[tuple[int, int, bytes]] = []
        self.batch_sizes: list[int] = []
        self._lock = threading.Lock()

    def __call__(self, batch: Any, _batch_id: int) -> None:
        rows = [(r.partition, r.offset, r.value) for r in batch.collect()]
        with self._lock:
            self.rows.extend(rows)
            self.batch_sizes.append(len(rows))


def _run_available_now(spark: Any, bootstrap: str, topic: str, checkpoint: Path,
                       collector: Collector, **options: str) -> Any:
    reader = (spark.readStream.format("moldau").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic))
    for key, value in options.items():
        reader = reader.option(key, value)
    query = (reader.load().writeStream.foreachBatch(collector)
             .option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    assert query.awaitTermination(QUERY_TIMEOUT_S), "query did not finish in time"
    assert query.exception() is None, query.exception()
    return query


def _values(prefix: str, count: int, partitions: int) -> list[dict[str, Any]]:
    return [{"value": f"{prefix}-{i}".encode(), "partition": i % partitions}
            for i in range(count)]


@pytest.mark.timeout(300)  # Spark queries on a busy 2-core machine
def test_max_offsets_per_trigger_restart_and_new_partitions(
        spark: Any, broker: Any, tmp_path: Path) -> None:
    bootstrap = broker.bootstrap
    topic = create_topic(bootstrap, partitions=2)
    first = produce(bootstrap, topic, _values("a", 100, 2))
    collector = Collector()
    checkpoint = tmp_path / "checkpoint"
    starting = json.dumps({topic: {"0": 10, "1": -2}})
    _run_available_now(spark, bootstrap, topic, checkpoint, collector,
                       startingOffsets=starting, maxOffsetsPerTrigger="30")
    want = {(s.partition, s.offset, s.value) for s in first
            if s.partition == 1 or s.offset >= 10}
    assert sorted(collector.rows) == sorted(want)  # nothing missing, nothing twice
    assert max(collector.batch_sizes) <= 30
    assert sum(collector.batch_sizes) == len(want)
    # Spark's checkpoint holds our offsets as {"topic": {"partition": offset}}.
    logs = [p for p in (checkpoint / "offsets").iterdir() if p.name.isdigit()]
    last_offsets = max(logs, key=lambda p: int(p.name))
    assert json.loads(last_offsets.read_text().splitlines()[-1]) == {topic: {"0": 50, "1": 50}}

    # More records, and a third partition: a restart reads exactly the new ones.
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_partitions([NewPartitions(topic, 3)])[topic].result(30)
    second = produce(bootstrap, topic, _values("b", 60, 3))
    collector.rows.clear()
    _run_available_now(spark, bootstrap, topic, checkpoint, collector,
                       maxOffsetsPerTrigger="1000")
    assert sorted(collector.rows) == sorted((s.partition, s.offset, s.value) for s in second)


@pytest.mark.timeout(300)  # Spark queries on a busy 2-core machine
def test_fail_on_data_loss(spark: Any, broker: Any) -> None:
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException

    bootstrap = broker.bootstrap
    topic = create_topic(bootstrap, partitions=1)
    sent = produce(bootstrap, topic, _values("c", 20, 1))
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_records([TopicPartition(topic, 0, 8)]).values():
        future.result(30)

    def read(fail: str) -> list[int]:
        df = (spark.read.format("moldau").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic).option("failOnDataLoss", fail)
              .option("startingOffsets", json.dumps({topic: {"0": 3}})).load())
        return sorted(r.offset for r in df.select("offset").collect())

    with pytest.raises((PySparkException, Py4JJavaError, RuntimeError), match="failOnDataLoss"):
        read("true")
    assert read("false") == [s.offset for s in sent if s.offset >= 8]


@pytest.mark.timeout(300)  # Spark queries on a busy 2-core machine
def test_records_deleted_under_a_running_stream(spark: Any, broker: Any,
                                                tmp_path: Path) -> None:
    """The executor finds the loss (the range starts below the log start) and obeys the option."""
    from pyspark.errors import StreamingQueryException

    bootstrap = broker.bootstrap
    topic = create_topic(bootstrap, partitions=1)
    produce(bootstrap, topic, _values("d", 20, 1))
    collector = Collector()
    checkpoint = tmp_path / "checkpoint"
    _run_available_now(spark, bootstrap, topic, checkpoint, collector,
                       startingOffsets="earliest")
    assert len(collector.rows) == 20
    later = produce(bootstrap, topic, _values("e", 20, 1))  # offsets 20..39
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_records([TopicPartition(topic, 0, 30)]).values():
        future.result(30)

    collector.rows.clear()
    with pytest.raises(StreamingQueryException, match="failOnDataLoss"):
        _run_available_now(spark, bootstrap, topic, checkpoint, collector)
    assert collector.rows == []
    _run_available_now(spark, bootstrap, topic, checkpoint, collector, failOnDataLoss="false")
    assert sorted(collector.rows) == sorted(
        (s.partition, s.offset, s.value) for s in later if s.offset >= 30)
