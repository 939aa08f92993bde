"""Writes through ``format("moldau")``: batch and streaming, and failures that must surface."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="Spark tests need pyspark: pip install -e '.[spark]'")

from .conftest import create_topic
from .records import consume_all, produce


def test_batch_write_keys_values_partitions_headers(spark: Any, broker: Any) -> None:
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        IntegerType,
        StringType,
        StructField,
        StructType,
    )

    topic = create_topic(broker.bootstrap, partitions=2)
    header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
    schema = StructType([
        StructField("key", StringType()), StructField("value", BinaryType()),
        StructField("topic", StringType()), StructField("partition", IntegerType()),
        StructField("headers", ArrayType(header)),
    ])
    rows = [(f"k{i}" if i % 3 else None, f"v{i}".encode(), topic, i % 2,
             [("n", str(i).encode())] if i % 2 else None) for i in range(40)]
    # One task, so the DataFrame's order is the produce order.
    spark.createDataFrame(rows, schema).coalesce(1).write.format("moldau").option(
        "kafka.bootstrap.servers", broker.bootstrap).mode("append").save()

    got = consume_all(broker.bootstrap, topic, 2)
    by_value = {m.value(): (m.key(), m.partition(), tuple(m.headers() or ())) for m in got}
    assert len(got) == len(rows)
    assert by_value == {v: ((k.encode() if k else None), p, tuple(h or ()))
                        for k, v, _, p, h in rows}
    # Per partition, the order of the DataFrame's rows is kept.
    for partition in (0, 1):
        values = [m.value() for m in sorted(got, key=lambda m: m.offset())
                  if m.partition() == partition]
        assert values == [v for _, v, _, p, _ in rows if p == partition]


def test_stream_copy_between_topics(spark: Any, broker: Any, tmp_path: Path) -> None:
    source = create_topic(broker.bootstrap, partitions=2)
    target = create_topic(broker.bootstrap, partitions=2)
    sent = produce(broker.bootstrap, source,
                   [{"key": f"k{i}".encode(), "value": f"v{i}".encode()} for i in range(50)])
    query = (spark.readStream.format("moldau")
             .option("kafka.bootstrap.servers", broker.bootstrap)
             .option("subscribe", source).option("startingOffsets", "earliest").load()
             .select("key", "value")
             .writeStream.format("moldau")
             .option("kafka.bootstrap.servers", broker.bootstrap).option("topic", target)
             .option("checkpointLocation", str(tmp_path / "copy"))
             .trigger(availableNow=True).start())
    assert query.awaitTermination(180)
    assert query.exception() is None
    got = consume_all(broker.bootstrap, target, 2)
    assert sorted((m.key(), m.value()) for m in got) == sorted((s.key, s.value) for s in sent)


def test_refused_records_fail_the_task(spark: Any, broker: Any) -> None:
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException

    topic = create_topic(broker.bootstrap, partitions=1)
    df = spark.createDataFrame([(b"x", 7)], "value binary, partition int")
    with pytest.raises((PySparkException, Py4JJavaError), match=r"(?i)partition"):
        (df.write.format("moldau").option("kafka.bootstrap.servers", broker.bootstrap)
         .option("topic", topic).mode("append").save())
    with pytest.raises((PySparkException, Py4JJavaError), match="value"):
        (spark.createDataFrame([("k",)], "key string").write.format("moldau")
         .option("kafka.bootstrap.servers", broker.bootstrap).option("topic", topic)
         .mode("append").save())
