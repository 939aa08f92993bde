"""aiokafka (asyncio client) against the real broker."""

from __future__ import annotations

import asyncio
import time

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from .clients import create_topic

pytestmark = pytest.mark.timeout(60)


async def _getmany(c: AIOKafkaConsumer, count: int, timeout: float = 20.0) -> list:
    got: list = []
    deadline = time.monotonic() + timeout
    while len(got) < count:
        assert time.monotonic() < deadline, f"got {len(got)} of {count} records"
        batches = await c.getmany(timeout_ms=200, max_records=count - len(got))
        for records in batches.values():
            got.extend(records)
    return got


def _consumer(bootstrap: str) -> AIOKafkaConsumer:
    return AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                            enable_auto_commit=False, auto_offset_reset="none",
                            fetch_max_wait_ms=100, request_timeout_ms=15_000)


@pytest.mark.parametrize("codec", ["none", "gzip", "lz4"])
def test_round_trip(broker, topic_name, codec):
    if codec == "lz4":
        pytest.importorskip("cramjam")  # aiokafka compresses lz4 through cramjam
    create_topic(broker.bootstrap, topic_name)
    sent = [(f"key-{i}".encode(), f"value-{i}".encode() * (1 + i % 5),
             [("seq", str(i).encode()), ("dup", b"a"), ("dup", b"b")]) for i in range(300)]
    sent.append((b"tombstone", None, []))

    async def run() -> list:
        p = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=10,
                             compression_type=None if codec == "none" else codec,
                             request_timeout_ms=10_000)
        await p.start()
        try:
            futures = [await p.send(topic_name, key=k, value=v, headers=h)
                       for k, v, h in sent]
            metas = await asyncio.wait_for(asyncio.gather(*futures), 20)
        finally:
            await p.stop()
        assert [m.offset for m in metas] == list(range(len(sent)))

        c = _consumer(broker.bootstrap)
        await c.start()
        try:
            tp = TopicPartition(topic_name, 0)
            c.assign([tp])
            await c.seek_to_beginning(tp)
            return await _getmany(c, len(sent))
        finally:
            await c.stop()

    got = asyncio.run(run())
    assert [(r.key, r.value, list(r.headers)) for r in got] == [
        (k, v, h) for k, v, h in sent
    ]
    assert [r.offset for r in got] == list(range(len(sent)))


def test_metadata_seek_and_offsets(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, partitions=3)
    base = int(time.time() * 1000) - 600_000

    async def run() -> None:
        p = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=0)
        await p.start()
        try:
            for i in range(30):  # one batch per record: lookups land on batch boundaries
                await asyncio.wait_for(await p.send(
                    topic_name, value=f"r{i}".encode(), partition=i % 3,
                    timestamp_ms=base + i * 100), 10)
            assert await p.partitions_for(topic_name) == {0, 1, 2}
        finally:
            await p.stop()

        c = _consumer(broker.bootstrap)
        await c.start()
        try:
            assert topic_name in await c.topics()
            tps = [TopicPartition(topic_name, i) for i in range(3)]
            c.assign([tps[2]])  # puts the topic in the consumer's metadata
            deadline = time.monotonic() + 10
            while c.partitions_for_topic(topic_name) is None and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            assert c.partitions_for_topic(topic_name) == {0, 1, 2}
            assert await c.beginning_offsets(tps) == dict.fromkeys(tps, 0)
            assert await c.end_offsets(tps) == dict.fromkeys(tps, 10)
            times = await c.offsets_for_times({tps[2]: base + 500, tps[0]: base + 10**9})
            # Partition 2 holds records 2, 5, 8, ...: record 5 (offset 1) is at base + 500.
            assert times[tps[2]].offset == 1
            assert times[tps[2]].timestamp == base + 500
            assert times[tps[0]] is None

            c.seek(tps[2], 7)
            got = await _getmany(c, 3)
            assert [r.offset for r in got] == [7, 8, 9]
            assert [r.value for r in got] == [f"r{2 + 3 * o}".encode() for o in (7, 8, 9)]
            assert [r.timestamp for r in got] == [base + (2 + 3 * o) * 100 for o in (7, 8, 9)]
            assert await c.position(tps[2]) == 10
            await c.seek_to_beginning(tps[2])
            assert await c.position(tps[2]) == 0
            await c.seek_to_end(tps[2])
            assert await c.position(tps[2]) == 10
        finally:
            await c.stop()

    asyncio.run(run())
