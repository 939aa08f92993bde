"""The sink's write paths (``writePath=batches``, the default, ``columnar`` and ``rows``)
write the same records; the paths' column handling and failures are also checked without
Spark, on Arrow batches like those Spark hands the writer."""

from __future__ import annotations

import time
from typing import Any

import pytest

pa = pytest.importorskip("pyarrow", reason="Spark tests need pyarrow: pip install -e '.[spark]'")
pytest.importorskip("pyspark", reason="Spark tests need pyspark: pip install -e '.[spark]'")

from confluent_kafka import TIMESTAMP_CREATE_TIME  # noqa: E402

from moldau.spark.options import parse_sink_options  # noqa: E402
from moldau.spark.writers import DeliveryError, write_batches  # noqa: E402

from .conftest import create_topic  # noqa: E402
from .records import consume_all  # noqa: E402


def _records(bootstrap: str, topic: str, partitions: int) -> list[tuple[Any, ...]]:
    """(partition, offset, key, value, headers, timestamp type) of every record, in order."""
    got = consume_all(bootstrap, topic, partitions)
    return sorted((m.partition(), m.offset(), m.key(), m.value(), tuple(m.headers() or ()),
                   m.timestamp()[0]) for m in got)


def _timestamps(bootstrap: str, topic: str, partitions: int) -> list[int]:
    return [m.timestamp()[1] for m in consume_all(bootstrap, topic, partitions)]


def _write(df: Any, bootstrap: str, topic: str, path: str) -> None:
    (df.write.format("moldau").option("kafka.bootstrap.servers", bootstrap)
     .option("topic", topic).option("writePath", path).mode("append").save())


def test_both_paths_write_identical_records(spark: Any, broker: Any) -> None:
    header = "array<struct<key:string,value:binary>>"
    # Null keys get an explicit partition: a keyless record's partition is chosen at random.
    rows = [(f"k{i}" if i % 4 else None, f"v{i}".encode() if i % 7 else None,
             "ignored-topic-column", (i % 3) if i % 4 == 0 or i % 5 == 0 else None,
             [("n", str(i).encode()), ("e", None)] if i % 2 else None) for i in range(300)]
    full = spark.createDataFrame(
        rows, f"key string, value binary, topic string, partition int, headers {header}"
    ).coalesce(1)  # one task: the DataFrame's order is the produce order
    plain = full.where("key is not null").select("key", "value")
    for df in (full, plain):
        written = {}
        for path in ("rows", "columnar", "batches"):
            topic = create_topic(broker.bootstrap, partitions=3)
            before = int(time.time() * 1000)
            _write(df, broker.bootstrap, topic, path)
            after = int(time.time() * 1000)
            written[path] = _records(broker.bootstrap, topic, 3)
            assert all(before - 1000 <= ts <= after + 1000
                       for ts in _timestamps(broker.bootstrap, topic, 3))
        assert len(written["rows"]) == (len(rows) if df is full else 225)
        assert written["columnar"] == written["rows"]
        assert written["batches"] == written["rows"]
        assert {r[5] for r in written["columnar"]} == {TIMESTAMP_CREATE_TIME}
        if df is full:  # keys, values and headers are the DataFrame's
            by_value = {r[3]: (r[2], r[4]) for r in written["columnar"] if r[3] is not None}
            assert by_value[b"v1"] == (b"k1", (("n", b"1"), ("e", None)))


@pytest.mark.parametrize("path", ["batches", "columnar"])
def test_text_columns_and_topic_column(broker: Any, path: str) -> None:
    """Without Spark: text keys and values (plain and large strings) go out as their UTF-8
    bytes, a topic column routes each row, and a null topic fails before producing."""
    first = create_topic(broker.bootstrap, partitions=1)
    second = create_topic(broker.bootstrap, partitions=1)
    batch = pa.RecordBatch.from_arrays(
        [pa.array(["ä", None, "k"], pa.large_string()), pa.array(["v0", "v1", "ü"]),
         pa.array([first, second, first])], names=["Key", "VALUE", "topic"])
    options = parse_sink_options({"kafka.bootstrap.servers": broker.bootstrap,
                                  "writePath": path})
    assert write_batches(options, iter([batch])).records == 3
    assert [(m.key(), m.value()) for m in consume_all(broker.bootstrap, first, 1)] == \
        [("ä".encode(), b"v0"), (b"k", "ü".encode())]
    assert [(m.key(), m.value()) for m in consume_all(broker.bootstrap, second, 1)] == \
        [(None, b"v1")]
    null_topic = pa.RecordBatch.from_arrays([pa.array([b"v"]), pa.array([None], pa.string())],
                                            names=["value", "topic"])
    with pytest.raises(ValueError, match="null topic"):
        write_batches(options, iter([null_topic]))


def test_columnar_path_fails_on_refused_records(broker: Any) -> None:
    """A record the broker refuses (no such partition) fails the task on the columnar path
    too, although that path asks librdkafka to report failures only. (A librdkafka setting
    the batch path does not take, here message.timeout.ms, selects the columnar path.)"""
    topic = create_topic(broker.bootstrap, partitions=1)
    batch = pa.RecordBatch.from_arrays([pa.array([b"a", b"b"]), pa.array([0, 5], pa.int32())],
                                       names=["value", "partition"])
    options = parse_sink_options({"kafka.bootstrap.servers": broker.bootstrap, "topic": topic,
                                  "kafka.message.timeout.ms": "3000"})
    assert options.write_path == "batches"
    with pytest.raises(DeliveryError, match="1 record"):
        write_batches(options, iter([batch]))


def test_batch_path_fails_on_refused_records(broker: Any) -> None:
    """The batch path names what the broker refused: a partition that does not exist, and
    a batch above the topic's max.message.bytes (MESSAGE_TOO_LARGE, not retried)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = create_topic(broker.bootstrap, partitions=1)
    options = parse_sink_options({"kafka.bootstrap.servers": broker.bootstrap, "topic": topic})
    no_partition = pa.RecordBatch.from_arrays(
        [pa.array([b"a", b"b"]), pa.array([0, 5], pa.int32())], names=["value", "partition"])
    with pytest.raises(DeliveryError, match=r"partition 5 .* does not exist"):
        write_batches(options, iter([no_partition]))
    small = f"small-{topic}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics(
        [NewTopic(small, 1, 1, config={"max.message.bytes": "2000"})])[small].result(30)
    big = pa.RecordBatch.from_arrays([pa.array([b"x" * 5000])], names=["value"])
    started = time.monotonic()
    with pytest.raises(DeliveryError, match=r"MESSAGE_TOO_LARGE|RECORD_LIST_TOO_LARGE"):
        write_batches(parse_sink_options({"kafka.bootstrap.servers": broker.bootstrap,
                                          "topic": small}), iter([big]))
    assert time.monotonic() - started < 30  # refused at once, not retried to the timeout


def test_batch_path_survives_a_broker_restart(make_broker: Any) -> None:
    """The leader goes away between two Arrow batches and comes back on the same port: the
    batch path reconnects, and the idempotent producer's sequence numbers keep every record
    exactly once and in order."""
    broker = make_broker()
    topic = create_topic(broker.bootstrap, partitions=1)
    options = parse_sink_options({"kafka.bootstrap.servers": broker.bootstrap, "topic": topic})
    batches = [pa.RecordBatch.from_arrays([pa.array([f"{b}-{i}".encode() for i in range(500)])],
                                          names=["value"]) for b in range(3)]

    def restarting() -> Any:
        yield batches[0]
        broker.restart()
        yield from batches[1:]

    assert write_batches(options, restarting()).records == 1500
    got = [m.value() for m in sorted(consume_all(broker.bootstrap, topic, 1),
                                     key=lambda m: m.offset())]
    assert got == [v for b in batches for v in b.column(0).to_pylist()]
