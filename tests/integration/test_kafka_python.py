"""kafka-python (pure-Python client) against the real broker."""

from __future__ import annotations

import time

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from .clients import create_topic

pytestmark = pytest.mark.timeout(60)


def _producer(bootstrap: str, **config) -> KafkaProducer:
    return KafkaProducer(bootstrap_servers=bootstrap, request_timeout_ms=10_000,
                         max_block_ms=10_000, **config)


def _consumer(bootstrap: str) -> KafkaConsumer:
    return KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                         auto_offset_reset="none", request_timeout_ms=15_000,
                         fetch_max_wait_ms=100, consumer_timeout_ms=200)


def _poll(c: KafkaConsumer, count: int, timeout: float = 20.0) -> list:
    got: list = []
    deadline = time.monotonic() + timeout
    while len(got) < count:
        assert time.monotonic() < deadline, f"got {len(got)} of {count} records"
        for records in c.poll(timeout_ms=200, max_records=count - len(got)).values():
            got.extend(records)
    return got


@pytest.mark.parametrize("codec", ["none", "gzip", "lz4"])
def test_round_trip(broker, topic_name, codec):
    if codec == "lz4":
        pytest.importorskip("lz4")
    create_topic(broker.bootstrap, topic_name)
    config = {} if codec == "none" else {"compression_type": codec}
    p = _producer(broker.bootstrap, linger_ms=10, **config)
    sent = [(f"key-{i}".encode(), f"value-{i}".encode() * (1 + i % 5),
             [("seq", str(i).encode()), ("dup", b"a"), ("dup", b"b")]) for i in range(300)]
    sent.append((b"tombstone", None, []))
    futures = [p.send(topic_name, key=k, value=v, headers=h) for k, v, h in sent]
    p.flush(timeout=20)
    metas = [f.get(timeout=10) for f in futures]
    p.close(timeout=5)
    assert [m.offset for m in metas] == list(range(len(sent)))
    assert {m.partition for m in metas} == {0}

    c = _consumer(broker.bootstrap)
    try:
        tp = TopicPartition(topic_name, 0)
        c.assign([tp])
        c.seek_to_beginning(tp)
        got = _poll(c, len(sent))
    finally:
        c.close()
    assert [(r.key, r.value, list(r.headers)) for r in got] == [
        (k, v, h) for k, v, h in sent
    ]
    assert [r.offset for r in got] == list(range(len(sent)))


def test_metadata_seek_and_offsets(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, partitions=3)
    base = int(time.time() * 1000) - 600_000
    p = _producer(broker.bootstrap, linger_ms=0)
    for i in range(30):  # one batch per record: the lookups below land on batch boundaries
        p.send(topic_name, value=f"r{i}".encode(), partition=i % 3, timestamp_ms=base + i * 100)
        p.flush(timeout=10)
    assert p.partitions_for(topic_name) == {0, 1, 2}
    p.close(timeout=5)

    c = _consumer(broker.bootstrap)
    try:
        assert c.partitions_for_topic(topic_name) == {0, 1, 2}
        assert topic_name in c.topics()
        tps = [TopicPartition(topic_name, i) for i in range(3)]
        assert c.beginning_offsets(tps) == dict.fromkeys(tps, 0)
        assert c.end_offsets(tps) == dict.fromkeys(tps, 10)

        # Partition 1 holds records 1, 4, 7, ... with timestamps base + i*100.
        times = c.offsets_for_times({tps[1]: base + 350, tps[2]: base + 10_000_000})
        assert times[tps[1]].offset == 1  # record 4 is the first at/after base + 350
        assert times[tps[1]].timestamp == base + 400
        assert times[tps[2]] is None  # nothing that late

        c.assign([tps[1]])
        c.seek(tps[1], 6)
        got = _poll(c, 4)
        assert [r.offset for r in got] == [6, 7, 8, 9]
        assert [r.value for r in got] == [f"r{1 + 3 * o}".encode() for o in (6, 7, 8, 9)]
        assert c.position(tps[1]) == 10
        c.seek_to_beginning(tps[1])
        assert c.position(tps[1]) == 0
        c.seek_to_end(tps[1])
        assert c.position(tps[1]) == 10
    finally:
        c.close()
