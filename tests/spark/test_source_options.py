"""Source options checked through the reader objects Spark drives, against a real broker
but without a SparkSession (planning runs on the driver, ``read`` in a Python worker; here
both run in the test's process): timestamps as bounds, patterns, read_committed, offset
look-up retries and ``minOffsetsPerTrigger``/``maxTriggerDelay``."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="Spark tests need pyspark: pip install -e '.[spark]'")

from confluent_kafka import Producer

from moldau.spark.metadata import MetadataError, OffsetLister
from moldau.spark.options import parse_source_options
from moldau.spark.planning import RangePartition
from moldau.spark.readers import MoldauBatchReader, MoldauStreamReader
from moldau.spark.schema import source_schema

from .conftest import create_topic
from .records import produce

BASE_TS = 1_700_000_000_000


def _batch(bootstrap: str, **options: str) -> MoldauBatchReader:
    parsed = parse_source_options({"kafka.bootstrap.servers": bootstrap, **options},
                                  streaming=False)
    return MoldauBatchReader(parsed, source_schema(False))


def _spans(reader: MoldauBatchReader) -> dict[tuple[str, int], tuple[int, int]]:
    result = {}
    for part in reader.partitions():
        assert isinstance(part, RangePartition)
        r = part.range
        result[(r.topic, r.partition)] = (r.from_offset, r.until_offset)
    return result


def _values(reader: MoldauBatchReader) -> list[bytes]:
    values: list[bytes] = []
    for part in reader.partitions():
        for batch in reader.read(part):
            values.extend(batch.column(batch.schema.get_field_index("value")).to_pylist())
    return sorted(values)


@pytest.fixture(scope="module")
def stamped(broker: Any) -> str:
    """2 partitions x 10 records; record i of a partition has timestamp BASE_TS + i s."""
    topic = create_topic(broker.bootstrap, partitions=2)
    produce(broker.bootstrap, topic, [
        {"value": f"p{p}-{i}".encode(), "partition": p, "timestamp": BASE_TS + i * 1000}
        for p in range(2) for i in range(10)])
    return topic


def test_offsets_by_timestamp_bounds(broker: Any, stamped: str) -> None:
    topic = stamped
    # endingTimestamp: up to (not including) the first record at or after it.
    spans = _spans(_batch(broker.bootstrap, subscribe=topic,
                          endingTimestamp=str(BASE_TS + 4000)))
    assert spans == {(topic, 0): (0, 4), (topic, 1): (0, 4)}
    by_partition = json.dumps({topic: {"0": BASE_TS + 2000, "1": BASE_TS + 7500}})
    ending = json.dumps({topic: {"0": BASE_TS + 5000, "1": BASE_TS + 60_000}})
    spans = _spans(_batch(broker.bootstrap, subscribe=topic,
                          startingOffsetsByTimestamp=by_partition,
                          endingOffsetsByTimestamp=ending))
    # Partition 1 has nothing at or after its end timestamp: it reads to the end.
    assert spans == {(topic, 0): (2, 5), (topic, 1): (8, 10)}
    late = json.dumps({topic: {"0": BASE_TS + 60_000, "1": BASE_TS}})
    with pytest.raises(MetadataError, match="startingOffsetsByTimestampStrategy"):
        _spans(_batch(broker.bootstrap, subscribe=topic, startingOffsetsByTimestamp=late))
    spans = _spans(_batch(broker.bootstrap, subscribe=topic, startingOffsetsByTimestamp=late,
                          startingOffsetsByTimestampStrategy="latest"))
    assert spans == {(topic, 1): (0, 10)}  # partition 0 starts at its end: nothing to read


def test_subscribe_pattern_reads_matching_topics(broker: Any) -> None:
    tag = uuid.uuid4().hex[:8]
    wanted = [create_topic(broker.bootstrap, 1, prefix=f"pat-{tag}-a"),
              create_topic(broker.bootstrap, 1, prefix=f"pat-{tag}-b")]
    other = create_topic(broker.bootstrap, 1, prefix=f"nopat-{tag}")
    for topic in [*wanted, other]:
        produce(broker.bootstrap, topic, [{"value": topic.encode()}])
    reader = _batch(broker.bootstrap, subscribePattern=f"pat-{tag}-.*")
    assert _values(reader) == sorted(t.encode() for t in wanted)


def test_read_committed_stops_at_the_last_stable_offset(broker: Any) -> None:
    """read_committed (librdkafka's default, kept by both read paths) ends at the last
    stable offset and skips aborted records; read_uncommitted (Spark's default) reads
    everything up to the high watermark."""
    topic = create_topic(broker.bootstrap, partitions=1)
    producer = Producer({"bootstrap.servers": broker.bootstrap,
                         "transactional.id": f"spark-lso-{uuid.uuid4().hex[:8]}"})
    producer.init_transactions(30)
    for outcome in ("committed", "aborted", "open"):
        producer.begin_transaction()
        for i in range(3):
            producer.produce(topic, f"{outcome}-{i}".encode(), partition=0)
        producer.flush(30)
        if outcome == "committed":
            producer.commit_transaction(30)
        elif outcome == "aborted":
            producer.abort_transaction(30)
    try:
        committed = _batch(broker.bootstrap, subscribe=topic,
                           **{"kafka.isolation.level": "read_committed"})
        assert _values(committed) == [f"committed-{i}".encode() for i in range(3)]
        # committed 0-2, marker 3, aborted 4-6, marker 7: the open transaction starts at 8.
        assert _spans(committed) == {(topic, 0): (0, 8)}
        assert _values(_batch(broker.bootstrap, subscribe=topic)) == _values(committed)
        everything = _batch(broker.bootstrap, subscribe=topic,
                            **{"kafka.isolation.level": "read_uncommitted"})
        assert len(_values(everything)) == 9
        assert _spans(everything) == {(topic, 0): (0, 11)}
    finally:
        producer.abort_transaction(30)


def test_offset_lookups_are_retried(broker: Any, stamped: str) -> None:
    lister = OffsetLister({"bootstrap.servers": broker.bootstrap}, retries=2,
                          retry_interval_ms=300)
    try:
        start = time.monotonic()
        with pytest.raises(MetadataError, match=r"after 2 retries: fetchOffset.numRetries"):
            lister.latest([(stamped, 0), (stamped, 7)])  # no partition 7
        assert time.monotonic() - start >= 0.6
        assert lister.latest([(stamped, 0)]) == {(stamped, 0): 10}
    finally:
        lister.close()


def test_min_offsets_per_trigger_waits_for_max_trigger_delay(broker: Any) -> None:
    topic = create_topic(broker.bootstrap, partitions=2)
    options = parse_source_options({
        "kafka.bootstrap.servers": broker.bootstrap, "subscribe": topic,
        "startingOffsets": "earliest", "minOffsetsPerTrigger": "10",
        "maxTriggerDelay": "2s"}, streaming=True)
    reader = MoldauStreamReader(options, source_schema(False))

    def add(count: int) -> None:
        produce(broker.bootstrap, topic, [{"value": b"x", "partition": i % 2}
                                          for i in range(count)])

    def total(offsets: dict) -> int:
        return sum(offsets[topic].values())

    try:
        add(3)
        start = reader.initialOffset()
        limit = reader.getDefaultReadLimit()
        first = reader.latestOffset(start, limit)
        assert total(first) == 3  # the first batch never waits
        add(4)
        assert reader.latestOffset(first, limit) == first  # 4 < 10: no batch yet
        add(6)
        second = reader.latestOffset(first, limit)
        assert total(second) == 13  # 10 waiting: the batch runs at once
        add(1)
        waited_from = time.monotonic()
        assert reader.latestOffset(second, limit) == second
        time.sleep(max(0.0, 2.1 - (time.monotonic() - waited_from)))
        assert total(reader.latestOffset(second, limit)) == 14  # the delay has passed
    finally:
        reader.stop()


def test_a_property_librdkafka_refuses_fails_the_plan(broker: Any, stamped: str) -> None:
    reader = _batch(broker.bootstrap, subscribe=stamped,
                    **{"kafka.sasl.jaas.config": "org.apache.kafka...PlainLoginModule"})
    with pytest.raises(MetadataError, match="JAAS"):
        reader.partitions()
