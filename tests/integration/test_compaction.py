"""Log compaction end to end: a real broker's cleaner thread, driven by confluent-kafka."""

from __future__ import annotations

import asyncio
import struct
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka import TopicPartition as AioTopicPartition
from confluent_kafka import OFFSET_BEGINNING, KafkaError, KafkaException, TopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition

from .clients import consumer, create_topic, produce_all, producer, watermarks

pytestmark = pytest.mark.timeout(90)

DELETE_RETENTION_MS = 6_000
TOPIC_CONFIG = {
    "cleanup.policy": "compact",
    "segment.ms": "300",
    "segment.bytes": "2048",
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": str(DELETE_RETENTION_MS),
}

Entry = tuple[int, bytes | None, bytes | None]


def read_all(bootstrap: str, topic: str, timeout: float = 20.0) -> list[Entry]:
    """Every record from the log start to the high watermark: (offset, key, value)."""
    _, high = watermarks(bootstrap, topic)
    c = consumer(bootstrap, **{"enable.partition.eof": True})
    got: list[Entry] = []
    try:
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + timeout
        while not got or got[-1][0] < high - 1:
            assert time.monotonic() < deadline, f"read {len(got)} records up to {high}"
            for msg in c.consume(num_messages=1000, timeout=0.2):
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        continue
                    raise KafkaException(err)
                got.append((msg.offset(), msg.key(), msg.value()))
    finally:
        c.close()
    return got


def wait_for(condition: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def test_compaction_keeps_latest_value_per_key(make_broker: Any, topic_name: str) -> None:
    broker = make_broker("log.cleaner.backoff.ms=100")
    create_topic(broker.bootstrap, topic_name, config=TOPIC_CONFIG)
    p = producer(broker.bootstrap, linger_ms=0)
    writes: list[dict[str, Any]] = []
    for round_ in range(6):
        for i in range(10):
            writes.append({"key": f"k{i}".encode(), "value": f"v{round_}-{i}".encode() * 5})
    writes += [{"key": f"k{i}".encode(), "value": None} for i in range(3)]  # deletes
    reports = produce_all(p, topic_name, writes)
    assert not reports.failed
    expected: dict[bytes, bytes | None] = {}
    for w in writes:
        expected[w["key"]] = w["value"]
    # Age the active segment past segment.ms and roll it with one more write, so that all
    # of the above sits in inactive segments the cleaner may compact.
    time.sleep(0.5)
    assert not produce_all(p, topic_name, [{"key": b"filler", "value": b"x"}]).failed
    expected[b"filler"] = b"x"
    offsets = {m.key(): m.offset() for m in reports.acked}

    def compacted() -> list[Entry] | None:
        entries = read_all(broker.bootstrap, topic_name)
        keys = [k for _, k, _ in entries]
        return entries if len(keys) == len(set(keys)) else None

    entries = wait_for(compacted, 30, "the cleaner to compact the topic")
    assert {k: v for _, k, v in entries} == expected
    # Each surviving record kept the offset it was written at.
    for offset, key, _ in entries:
        if key != b"filler":
            assert offsets[key] == offset
    assert [o for o, _, _ in entries] == sorted(o for o, _, _ in entries)
    low, high = watermarks(broker.bootstrap, topic_name)
    assert low == 0 and high == len(writes) + 1

    # After delete.retention.ms, the tombstones go too (no new writes needed).
    def tombstones_gone() -> list[Entry] | None:
        entries = read_all(broker.bootstrap, topic_name)
        return entries if all(v is not None for _, _, v in entries) else None

    entries = wait_for(tombstones_gone, DELETE_RETENTION_MS / 1000 + 30,
                       "the tombstones to be removed")
    assert {k: v for _, k, v in entries} == {
        k: v for k, v in expected.items() if v is not None
    }
    # Produce still works after compaction, and a restart loads the compacted log.
    assert not produce_all(p, topic_name, [{"key": b"k9", "value": b"last"}]).failed
    broker.stop()
    broker.start()
    after = read_all(broker.bootstrap, topic_name)
    assert after[:-1] == entries and after[-1][1:] == (b"k9", b"last")


def test_produce_without_key_to_compacted_topic_fails(make_broker: Any, topic_name: str) -> None:
    broker = make_broker()
    create_topic(broker.bootstrap, topic_name, config={"cleanup.policy": "compact"})
    p = producer(broker.bootstrap, linger_ms=0, retries=0)
    refused = produce_all(p, topic_name, [{"value": b"no key"}])
    [(_, err)] = refused.failed
    assert err.code() == KafkaError.INVALID_RECORD
    accepted = produce_all(p, topic_name, [{"key": b"k", "value": b"v"}])
    assert not accepted.failed and accepted.acked[0].offset() == 0


def empty_batches(partition_dir: Path) -> int:
    """Header-only batches (recordsCount 0) in a partition's segment files."""
    count = 0
    for segment in partition_dir.glob("*.log"):
        data = segment.read_bytes()
        pos = 0
        while pos + 61 <= len(data):
            length = struct.unpack_from(">i", data, pos + 8)[0]
            count += struct.unpack_from(">i", data, pos + 57)[0] == 0
            pos += 12 + length
    return count


def read_with_kafka_python(bootstrap: str, topic: str, high: int) -> list[Entry]:
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                      auto_offset_reset="none", fetch_max_wait_ms=100)
    got: list[Entry] = []
    try:
        tp = KpTopicPartition(topic, 0)
        c.assign([tp])
        c.seek_to_beginning(tp)
        deadline = time.monotonic() + 20
        while not got or got[-1][0] < high - 1:
            assert time.monotonic() < deadline, f"kafka-python read {len(got)} records"
            for records in c.poll(timeout_ms=200).values():
                got.extend((r.offset, r.key, r.value) for r in records)
    finally:
        c.close()
    return got


def read_with_aiokafka(bootstrap: str, topic: str, high: int) -> list[Entry]:
    async def run() -> list[Entry]:
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                             enable_auto_commit=False, auto_offset_reset="none",
                             fetch_max_wait_ms=100)
        await c.start()
        got: list[Entry] = []
        try:
            tp = AioTopicPartition(topic, 0)
            c.assign([tp])
            await c.seek_to_beginning(tp)
            deadline = time.monotonic() + 20
            while not got or got[-1][0] < high - 1:
                assert time.monotonic() < deadline, f"aiokafka read {len(got)} records"
                for records in (await c.getmany(timeout_ms=200)).values():
                    got.extend((r.offset, r.key, r.value) for r in records)
        finally:
            await c.stop()
        return got

    return asyncio.run(run())


def test_every_client_reads_a_compacted_log_with_gaps_and_empty_batches(
    make_broker: Any, topic_name: str
) -> None:
    """Compaction leaves offset gaps and header-only batches (a group's or producer's last
    batch whose records all went); librdkafka, kafka-python and aiokafka step over them."""
    broker = make_broker("log.cleaner.backoff.ms=100")
    create_topic(broker.bootstrap, topic_name,
                 config={**TOPIC_CONFIG, "segment.bytes": "400"})
    p = producer(broker.bootstrap, linger_ms=0, enable_idempotence=True)
    for i in range(40):  # one batch each: "hot" rewritten all the time, a few cold keys
        key = b"hot" if i % 4 else f"cold{i}".encode()
        assert not produce_all(p, topic_name, [{"key": key, "value": str(i).encode()}]).failed
    time.sleep(0.5)
    assert not produce_all(p, topic_name, [{"key": b"filler", "value": b"x"}]).failed
    _, high = watermarks(broker.bootstrap, topic_name)

    def compacted() -> list[Entry] | None:
        entries = read_all(broker.bootstrap, topic_name)
        return entries if [k for _, k, _ in entries].count(b"hot") == 1 else None

    expected = wait_for(compacted, 30, "the cleaner to compact the topic")
    assert len(expected) == 12  # ten cold keys, hot, filler
    assert empty_batches(broker.data_dir / f"{topic_name}-0") > 0  # what this test is about
    assert read_with_kafka_python(broker.bootstrap, topic_name, high) == expected
    assert read_with_aiokafka(broker.bootstrap, topic_name, high) == expected
