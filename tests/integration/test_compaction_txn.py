"""Transaction-aware compaction end to end: a compacted topic written by confluent-kafka's
transactional producer, committed and aborted transactions, the broker's cleaner thread.

Before the cleaner knew transactions, it copied transactional batches as they were: every
aborted record stayed readable by read_uncommitted consumers and no committed value was
ever compacted away.
"""

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
from confluent_kafka import KafkaError, KafkaException, TopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition

from .clients import consumer, create_topic, producer, unique

pytestmark = pytest.mark.timeout(120)

DELETE_RETENTION_MS = 2_000
TOPIC_CONFIG = {
    "cleanup.policy": "compact",
    "segment.ms": "300",
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": str(DELETE_RETENTION_MS),
}
KEYS = 6
#: Rounds 1, 4 and 7 abort: the last, so the producer's last batch below the active segment
#: is an aborted one (kept empty, with its marker).
ROUNDS = 8

Entry = tuple[int, bytes, bytes]


def read(bootstrap: str, topic: str, isolation: str, timeout: float = 30) -> list[Entry]:
    """Every record up to the end (the LSO for read_committed): (offset, key, value)."""
    c = consumer(bootstrap, **{"isolation.level": isolation, "enable.partition.eof": True})
    got: list[Entry] = []
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + timeout
        while True:
            assert time.monotonic() < deadline, f"read {len(got)} records, no end"
            for msg in c.consume(num_messages=1000, timeout=0.2):
                err = msg.error()
                if err is not None and err.code() == KafkaError._PARTITION_EOF:
                    return got
                if err is not None:
                    raise KafkaException(err)
                got.append((msg.offset(), msg.key(), msg.value()))
    finally:
        c.close()


def read_with_kafka_python(bootstrap: str, topic: str, isolation: str,
                           last: int) -> list[Entry]:
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                      auto_offset_reset="earliest", fetch_max_wait_ms=100,
                      isolation_level=isolation)
    got: list[Entry] = []
    try:
        c.assign([KpTopicPartition(topic, 0)])
        deadline = time.monotonic() + 20
        while not got or got[-1][0] < last:
            assert time.monotonic() < deadline, f"kafka-python read {got[-3:]}"
            for records in c.poll(timeout_ms=200).values():
                got.extend((r.offset, r.key, r.value) for r in records)
    finally:
        c.close()
    return got


def read_with_aiokafka(bootstrap: str, topic: str, isolation: str, last: int) -> list[Entry]:
    async def run() -> list[Entry]:
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                             enable_auto_commit=False, auto_offset_reset="earliest",
                             fetch_max_wait_ms=100, isolation_level=isolation)
        await c.start()
        got: list[Entry] = []
        try:
            c.assign([AioTopicPartition(topic, 0)])
            deadline = time.monotonic() + 20
            while not got or got[-1][0] < last:
                assert time.monotonic() < deadline, f"aiokafka read {got[-3:]}"
                for records in (await c.getmany(timeout_ms=200)).values():
                    got.extend((r.offset, r.key, r.value) for r in records)
        finally:
            await c.stop()
        return got

    return asyncio.run(run())


def wait_for(condition: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def markers(partition_dir: Path) -> list[tuple[int, int]]:
    """(offset, type: 0 ABORT, 1 COMMIT) of every control batch in the segment files."""
    found = []
    for segment in sorted(partition_dir.glob("*.log")):
        data = segment.read_bytes()
        pos = 0
        while pos + 61 <= len(data):
            base, length = struct.unpack_from(">qi", data, pos)
            attributes = struct.unpack_from(">h", data, pos + 21)[0]
            count = struct.unpack_from(">i", data, pos + 57)[0]
            if attributes & 0x20 and count:
                # One record: length, attributes, timestamp delta, offset delta, key length
                # (one byte each for a marker), then the key: version int16, type int16.
                found.append((base, struct.unpack_from(">h", data, pos + 61 + 5 + 2)[0]))
            pos += 12 + length
    return found


def test_compacted_topic_with_committed_and_aborted_transactions(
        make_broker: Any, topic_name: str) -> None:
    broker = make_broker("log.cleaner.backoff.ms=100")
    create_topic(broker.bootstrap, topic_name, config=TOPIC_CONFIG)
    tid = unique("tid")
    p = producer(broker.bootstrap, **{"transactional.id": tid, "linger.ms": 2})
    p.init_transactions(30)
    plain = producer(broker.bootstrap, linger_ms=0)
    expected: dict[bytes, bytes] = {}
    offsets: dict[bytes, int] = {}
    aborted: set[bytes] = set()

    def note(err: KafkaError | None, msg: Any) -> None:
        assert err is None, err
        offsets[msg.value()] = msg.offset()

    for r in range(ROUNDS):
        p.begin_transaction()
        values = {f"k{i}".encode(): f"r{r}-k{i}".encode() for i in range(KEYS)}
        for key, value in values.items():
            p.produce(topic_name, key=key, value=value, partition=0, on_delivery=note)
        p.flush(30)
        if r % 3 == 1:
            p.abort_transaction(30)
            aborted.update(values.values())
        else:
            p.commit_transaction(30)
            expected.update(values)
        # A plain producer's write between transactions.
        plain.produce(topic_name, key=b"plain", value=f"p{r}".encode(), partition=0,
                      on_delivery=note)
        assert plain.flush(30) == 0
        expected[b"plain"] = f"p{r}".encode()
    # Age the active segment past segment.ms; one more transaction rolls it, so that all of
    # the above sits in inactive segments.
    time.sleep(0.5)
    p.begin_transaction()
    p.produce(topic_name, key=b"filler", value=b"x", partition=0, on_delivery=note)
    p.commit_transaction(30)
    expected[b"filler"] = b"x"

    def compacted() -> list[Entry] | None:
        entries = read(broker.bootstrap, topic_name, "read_uncommitted")
        keys = [k for _, k, _ in entries]
        return entries if len(keys) == len(set(keys)) else None

    entries = wait_for(compacted, 40, "the cleaner to compact the topic")
    # Only the latest committed value of each key, at the offset it was written at; no
    # aborted record, for read_uncommitted and read_committed consumers alike.
    assert {k: v for _, k, v in entries} == expected
    assert not aborted & {v for _, _, v in entries}
    assert all(offsets[v] == o for o, _, v in entries)
    assert read(broker.bootstrap, topic_name, "read_committed") == entries

    # Markers whose transaction is entirely gone go in a later pass, after
    # delete.retention.ms. Three stay: round 6's COMMIT (its values are the latest), round
    # 7's ABORT (the producer's last batch there is kept, empty, for its sequence) and the
    # filler's COMMIT (in the active segment).
    partition_dir = broker.data_dir / f"{topic_name}-0"
    wait_for(lambda: len(markers(partition_dir)) <= 3, DELETE_RETENTION_MS / 1000 + 30,
             "the markers of removed transactions to go")
    assert [kind for _, kind in markers(partition_dir)] == [1, 0, 1]
    # kafka-python and aiokafka read the cleaned layout (gaps, an empty transactional batch
    # with its ABORT marker) the same way.
    last = entries[-1][0]
    for isolation in ("read_committed", "read_uncommitted"):
        assert read_with_kafka_python(broker.bootstrap, topic_name, isolation, last) == entries
        assert read_with_aiokafka(broker.bootstrap, topic_name, isolation, last) == entries

    # A restart loads the cleaned log; the same transactional id goes on writing.
    broker.stop()
    broker.start()
    assert read(broker.bootstrap, topic_name, "read_committed") == entries
    assert read(broker.bootstrap, topic_name, "read_uncommitted") == entries
    again = producer(broker.bootstrap, **{"transactional.id": tid, "linger.ms": 2})
    again.init_transactions(30)
    again.begin_transaction()
    again.produce(topic_name, key=b"k0", value=b"after-restart", partition=0)
    again.commit_transaction(30)
    latest = {k: v for _, k, v in read(broker.bootstrap, topic_name, "read_committed")}
    assert latest == {**expected, b"k0": b"after-restart"}
    assert "Traceback" not in broker.stderr_text()
