"""ListOffsets by timestamp and MAX_TIMESTAMP answer with the record, not its batch.

Real producers write the batches (so every codec's framing is the one clients really use:
librdkafka's raw snappy, aiokafka's xerial snappy, LZ4 frames, zstd frames), each batch
holding ten records; the lookups then have to land inside the batch.
"""

from __future__ import annotations

import asyncio
import datetime
import time
from collections.abc import Callable

import pytest
from aiokafka import AIOKafkaProducer
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec
from kafka import KafkaProducer
from kafka import codec as kafka_python_codec
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic

from moldau.log.records import XERIAL_MAGIC
from tests.unit.batchgen import HEADER

from .clients import consumer, create_topic, produce_all, producer
from .wire import WireClient

pytestmark = pytest.mark.timeout(60)

CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
#: (key, value, timestamp) of the records of one batch.
Batch = list[tuple[bytes, bytes, int]]
#: Writes each batch with one client, in order, waiting for the acks in between.
Writer = Callable[[str, str, list[Batch]], None]


def _batches_on_disk(bootstrap: str, topic: str) -> list[tuple[int, int, int, bytes]]:
    """(base offset, codec id, record count, first 8 record bytes) of each batch in partition 0."""
    with WireClient.to(bootstrap) as wire:
        resp = wire.request(FetchRequest(
            max_wait=datetime.timedelta(0), min_bytes=1, max_bytes=10_000_000,
            forgotten_topics_data=(),
            topics=(FetchTopic(topic=topic, partitions=(
                FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=10_000_000),
            )),),
        ))
    data = resp.responses[0].partitions[0]
    assert data.error_code == 0
    raw = bytes(data.records)
    found = []
    pos = 0
    while pos + HEADER.size <= len(raw):
        fields = HEADER.unpack_from(raw, pos)
        found.append((fields[0], fields[5] & 7, fields[12], raw[pos + 61 : pos + 69]))
        pos += 12 + fields[1]
    return found


def _offsets_for_times(bootstrap: str, topic: str, stamps: list[int]) -> list[tuple[int, int]]:
    """(offset, timestamp) answered for each target timestamp, one request per target."""
    c = consumer(bootstrap)
    try:
        answers = []
        for ts in stamps:
            (res,) = c.offsets_for_times([TopicPartition(topic, 0, ts)], timeout=10)
            assert res.error is None
            answers.append((res.offset, ts))
        return answers
    finally:
        c.close()


def _max_timestamp(bootstrap: str, topic: str) -> tuple[int, int]:
    """(offset, timestamp) of ListOffsets MAX_TIMESTAMP (-3) through the admin client."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    tp = TopicPartition(topic, 0)
    futures = admin.list_offsets({tp: OffsetSpec.max_timestamp()}, request_timeout=10)
    info = futures[tp].result(timeout=15)
    return info.offset, info.timestamp


def _write_confluent(bootstrap: str, topic: str, codec: str, batches: list[Batch]) -> None:
    p = producer(bootstrap, compression_type=codec, linger_ms=1000, batch_num_messages=10_000)
    # Learn the (auto-created) topic's leader first: records produced while librdkafka still
    # waits for it can leave in more than one batch on a loaded machine.
    p.list_topics(topic, timeout=10)
    for batch in batches:
        reports = produce_all(p, topic, [{"key": k, "value": v, "timestamp": ts}
                                         for k, v, ts in batch])
        assert not reports.failed


def _write_kafka_python(bootstrap: str, topic: str, codec: str, batches: list[Batch]) -> None:
    if codec == "lz4" and not kafka_python_codec.has_lz4():
        pytest.skip("kafka-python has no lz4 library here")
    config = {} if codec == "none" else {"compression_type": codec}
    p = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=200, request_timeout_ms=10_000,
                      max_block_ms=10_000, **config)
    try:
        for batch in batches:
            futures = [p.send(topic, key=k, value=v, partition=0, timestamp_ms=ts)
                       for k, v, ts in batch]
            p.flush(timeout=20)
            for f in futures:
                f.get(timeout=10)
    finally:
        p.close(timeout=5)


def _write_aiokafka(bootstrap: str, topic: str, codec: str, batches: list[Batch]) -> None:
    async def run() -> None:
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=200,
                             compression_type=None if codec == "none" else codec,
                             request_timeout_ms=10_000)
        await p.start()
        try:
            for batch in batches:
                futures = [await p.send(topic, key=k, value=v, partition=0, timestamp_ms=ts)
                           for k, v, ts in batch]
                await asyncio.wait_for(asyncio.gather(*futures), 20)
        finally:
            await p.stop()

    asyncio.run(run())


WRITERS: dict[str, Writer] = {
    "confluent": _write_confluent,
    "kafka-python": _write_kafka_python,
    "aiokafka": _write_aiokafka,
}

CASES = [
    *(pytest.param("confluent", c, id=f"confluent-{c}")
      for c in ("none", "gzip", "snappy", "lz4", "zstd")),
    pytest.param("kafka-python", "gzip", id="kafka-python-gzip"),
    pytest.param("kafka-python", "lz4", id="kafka-python-lz4"),
    # aiokafka frames snappy the xerial way, as the Java client does.
    *(pytest.param("aiokafka", c, id=f"aiokafka-{c}") for c in ("gzip", "snappy", "lz4", "zstd")),
]


@pytest.mark.parametrize(("client", "codec"), CASES)
def test_lookups_land_on_records_inside_a_batch(broker, topic_name, client, codec):
    create_topic(broker.bootstrap, topic_name)
    base = int(time.time() * 1000) - 3_600_000
    # First batch: ten increasing timestamps, one second apart (offsets 0..9). Values compress
    # well, since librdkafka sends a batch uncompressed when compressing does not pay.
    first = [(f"k{i}".encode(), f"v{i}".encode() * 200, base + i * 1000) for i in range(10)]
    # Second batch (offsets 10..19): later, unordered, the maximum twice (offsets 14 and 17).
    late = [30, 31, 35, 33, 90, 40, 41, 90, 50, 60]
    second = [(f"k{10 + i}".encode(), b"w" * 500, base + s * 1000) for i, s in enumerate(late)]
    WRITERS[client](broker.bootstrap, topic_name, codec, [first, second])
    batches = _batches_on_disk(broker.bootstrap, topic_name)
    assert [b[:3] for b in batches] == [(0, CODEC_IDS[codec], 10), (10, CODEC_IDS[codec], 10)]
    if codec == "snappy":  # both framings seen in the wild are covered
        assert (batches[0][3] == XERIAL_MAGIC) == (client == "aiokafka")

    # Each record's own timestamp finds exactly that record.
    stamps = [ts for _, _, ts in first]
    got = _offsets_for_times(broker.bootstrap, topic_name, stamps)
    assert got == [(i, ts) for i, ts in enumerate(stamps)]
    # Between records: the next one; inside the unordered batch: the first record at/after.
    targets = [base + 1, base + 8_999, base + 9_001, base + 34_000, base + 36_000,
               base + 60_001, base + 90_000, base + 90_001]
    got = _offsets_for_times(broker.bootstrap, topic_name, targets)
    assert [offset for offset, _ in got] == [1, 9, 10, 12, 14, 14, 14, -1]

    assert _max_timestamp(broker.bootstrap, topic_name) == (14, base + 90_000)
