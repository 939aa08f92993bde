"""confluent-kafka (librdkafka) against the real broker: produce, fetch, list offsets."""

from __future__ import annotations

import datetime
import os
import time

import pytest
from confluent_kafka import (
    OFFSET_END,
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    KafkaError,
    TopicPartition,
)
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic

from tests.unit.batchgen import HEADER, decode_batches

from .clients import (
    assert_no_more,
    consume,
    consumer,
    create_topic,
    produce_all,
    producer,
    read_partition,
    watermarks,
)
from .wire import WireClient

pytestmark = pytest.mark.timeout(60)


def _records(n: int, prefix: str = "v") -> list[dict[str, object]]:
    return [{"key": f"k{i}".encode(), "value": f"{prefix}{i}".encode() * (1 + i % 7)}
            for i in range(n)]


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_round_trip_per_codec(broker, topic_name, codec):
    create_topic(broker.bootstrap, topic_name)
    sent = _records(500)
    p = producer(broker.bootstrap, compression_type=codec, linger_ms=20)
    reports = produce_all(p, topic_name, sent)
    assert not reports.failed
    # Offsets are assigned contiguously from 0 in send order.
    assert sorted(m.offset() for m in reports.acked) == list(range(500))
    got = read_partition(broker.bootstrap, topic_name, 0, 0, 500)
    assert [(m.key(), m.value()) for m in got] == [(r["key"], r["value"]) for r in sent]
    assert [m.offset() for m in got] == list(range(500))
    assert watermarks(broker.bootstrap, topic_name) == (0, 500)


def test_keys_headers_and_null_values(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    sent = [
        {"key": b"k1", "value": b"v1", "headers": [("h", b"1"), ("h", b"2"), ("h", b"1")]},
        {"key": None, "value": b"no key"},
        {"key": b"tombstone", "value": None},
        {"key": None, "value": None},
        {"key": b"", "value": b""},
        {"key": b"nullhdr", "value": b"x", "headers": [("n", None), ("e", b""), ("n", b"z")]},
        {"key": b"\x00\xff" * 10, "value": bytes(range(256)), "headers": [("bin", b"\x00\x01")]},
        {"key": b"utf8", "value": "grüße".encode(), "headers": [("Ünïcode-key", b"v")]},
    ]
    p = producer(broker.bootstrap)
    reports = produce_all(p, topic_name, sent)
    assert not reports.failed
    got = read_partition(broker.bootstrap, topic_name, 0, 0, len(sent))
    for want, msg in zip(sent, got, strict=True):
        assert msg.key() == want["key"]
        assert msg.value() == want["value"]
        assert (msg.headers() or []) == want.get("headers", [])


@pytest.mark.parametrize("acks", [0, 1, -1], ids=["acks0", "acks1", "acksall"])
def test_acks(broker, topic_name, acks):
    create_topic(broker.bootstrap, topic_name)
    sent = _records(300)
    p = producer(broker.bootstrap, acks=acks, linger_ms=5)
    reports = produce_all(p, topic_name, sent)
    assert not reports.failed
    if acks != 0:
        assert sorted(m.offset() for m in reports.acked) == list(range(300))
    # With acks=0 nothing confirms the writes: the records must still all arrive.
    deadline = time.monotonic() + 10
    while watermarks(broker.bootstrap, topic_name)[1] < 300 and time.monotonic() < deadline:
        time.sleep(0.05)
    got = read_partition(broker.bootstrap, topic_name, 0, 0, 300)
    assert [m.value() for m in got] == [r["value"] for r in sent]
    assert watermarks(broker.bootstrap, topic_name) == (0, 300)


def test_partitions_keep_placement_and_order(broker, topic_name):
    partitions = 4
    create_topic(broker.bootstrap, topic_name, partitions=partitions)
    p = producer(broker.bootstrap, linger_ms=5)
    keyed = [{"key": f"user-{i % 13}".encode(), "value": f"keyed-{i}".encode()}
             for i in range(400)]
    explicit = [{"partition": i % partitions, "value": f"explicit-{i}".encode()}
                for i in range(200)]
    reports = produce_all(p, topic_name, keyed + explicit)
    assert not reports.failed
    where = {m.value(): (m.partition(), m.offset()) for m in reports.acked}
    # The partitioner sends one key to one partition; explicit partitions are honoured.
    by_key: dict[bytes, set[int]] = {}
    for m in reports.acked:
        if m.key() is not None:
            by_key.setdefault(m.key(), set()).add(m.partition())
    assert all(len(ps) == 1 for ps in by_key.values())
    for i in range(200):
        assert where[f"explicit-{i}".encode()][0] == i % partitions
    for part in range(partitions):
        expected = sorted((off, val) for val, (pp, off) in where.items() if pp == part)
        assert [off for off, _ in expected] == list(range(len(expected)))
        got = read_partition(broker.bootstrap, topic_name, part, 0, len(expected))
        assert [(m.offset(), m.value()) for m in got] == expected
        assert all(m.partition() == part for m in got)
        # Per-partition order is send order: sequence numbers only grow.
        for kind in ("keyed", "explicit"):
            seqs = [int(m.value().split(b"-")[1]) for m in got if m.value().startswith(
                kind.encode())]
            assert seqs == sorted(seqs)
        assert watermarks(broker.bootstrap, topic_name, part) == (0, len(expected))


def _offset_for_time(bootstrap: str, topic: str, timestamp: int) -> int:
    c = consumer(bootstrap)
    try:
        res = c.offsets_for_times([TopicPartition(topic, 0, timestamp)], timeout=10)
        assert res[0].error is None
        return int(res[0].offset)
    finally:
        c.close()


def test_offsets_for_times(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    base = int(time.time() * 1000) - 3_600_000
    p = producer(broker.bootstrap, linger_ms=0)
    for i in range(30):  # one batch per record: every answer is a batch's first record
        produce_all(p, topic_name, [{"value": f"t{i}".encode(), "timestamp": base + i * 1000}])
    lookups = {
        base - 10_000: 0,
        base: 0,
        base + 1: 1,  # the first record at or after the timestamp
        base + 5_500: 6,
        base + 13_000: 13,
        base + 29_000: 29,
        base + 29_001: -1,  # none at or after: Kafka answers -1
    }
    got = {ts: _offset_for_time(broker.bootstrap, topic_name, ts) for ts in lookups}
    assert got == lookups
    rec = read_partition(broker.bootstrap, topic_name, 0, 13, 1)
    assert rec[0].timestamp() == (TIMESTAMP_CREATE_TIME, base + 13_000)


def test_offsets_for_times_inside_a_batch(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    base = int(time.time() * 1000) - 3_600_000
    p = producer(broker.bootstrap, linger_ms=50)
    # Ten records in one batch (one flush, linger): the answers lie inside it.
    produce_all(p, topic_name, [{"value": f"b{i}".encode(), "timestamp": base + i * 1000}
                                for i in range(10)])
    lookups = {base: 0, base + 1: 1, base + 5_500: 6, base + 9_000: 9, base + 9_001: -1}
    got = {ts: _offset_for_time(broker.bootstrap, topic_name, ts) for ts in lookups}
    assert got == lookups


def test_watermarks(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, partitions=2)
    assert watermarks(broker.bootstrap, topic_name, 0) == (0, 0)
    assert watermarks(broker.bootstrap, topic_name, 1) == (0, 0)
    p = producer(broker.bootstrap)
    produce_all(p, topic_name, [{"value": b"x", "partition": 1} for _ in range(42)])
    assert watermarks(broker.bootstrap, topic_name, 0) == (0, 0)
    assert watermarks(broker.bootstrap, topic_name, 1) == (0, 42)
    produce_all(p, topic_name, [{"value": b"y", "partition": 0} for _ in range(7)])
    assert watermarks(broker.bootstrap, topic_name, 0) == (0, 7)


def test_log_append_time_topic(broker, topic_name):
    create_topic(broker.bootstrap, topic_name,
                 config={"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    p = producer(broker.bootstrap)
    reports = produce_all(p, topic_name, [
        {"value": f"lat{i}".encode(), "timestamp": 1_000_000_000_000 + i} for i in range(20)
    ])
    after = int(time.time() * 1000)
    assert not reports.failed
    got = read_partition(broker.bootstrap, topic_name, 0, 0, 20)
    for m in got:
        ts_type, ts = m.timestamp()
        assert ts_type == TIMESTAMP_LOG_APPEND_TIME
        # Broker time, not the producer's 2001 timestamps (a second of slack for clocks).
        assert before - 1000 <= ts <= after + 1000, (ts, before, after)


def test_large_records_near_max_message_bytes(broker, topic_name):
    limit = 200_000
    create_topic(broker.bootstrap, topic_name, config={"max.message.bytes": str(limit)})
    p = producer(broker.bootstrap, message_max_bytes=1_000_000, linger_ms=0,
                 batch_size=1_000_000)
    fits = os.urandom(limit - 200)  # incompressible; batch overhead is well under 200 B
    reports = produce_all(p, topic_name, [{"key": b"big", "value": fits}])
    assert not reports.failed, reports.failed
    too_big = os.urandom(limit + 100)
    reports = produce_all(p, topic_name, [{"key": b"bigger", "value": too_big}])
    assert len(reports.failed) == 1
    assert reports.failed[0][1].code() == KafkaError.MSG_SIZE_TOO_LARGE
    # A record close to the broker-wide default (1 MiB) on a topic with the default limit
    # goes through too, and a consumer with a smaller fetch size still gets it (KIP-74).
    other = topic_name + "-default"
    create_topic(broker.bootstrap, other)
    near_default = os.urandom(1_000_000)
    p2 = producer(broker.bootstrap, message_max_bytes=2_000_000, linger_ms=0)
    reports = produce_all(p2, other, [{"value": near_default}])
    assert not reports.failed, reports.failed
    got = read_partition(broker.bootstrap, topic_name, 0, 0, 1)
    assert got[0].value() == fits
    got = read_partition(broker.bootstrap, other, 0, 0, 1, max_partition_fetch_bytes=65536,
                         fetch_max_bytes=65536, message_max_bytes=65536)
    assert got[0].value() == near_default
    assert watermarks(broker.bootstrap, topic_name) == (0, 1)


def test_long_poll_wakes_on_produce(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    c = consumer(broker.bootstrap, fetch_wait_max_ms=5000, fetch_min_bytes=1)
    p = producer(broker.bootstrap, linger_ms=0)
    try:
        c.assign([TopicPartition(topic_name, 0, OFFSET_END)])
        p.list_topics(topic_name, timeout=10)  # connected before the clock starts
        latencies = []
        for i in range(3):
            # Let the consumer's fetch park on the broker (nothing to read yet).
            assert not [m for m in c.consume(num_messages=10, timeout=1.2) if not m.error()]
            start = time.monotonic()
            p.produce(topic_name, value=f"wake-{i}".encode())
            p.flush(5)
            got = consume(c, 1, timeout=6)
            latencies.append(time.monotonic() - start)
            assert got[0].value() == f"wake-{i}".encode()
        # Without a purgatory wake-up each would take up to fetch.wait.max.ms (5 s).
        assert max(latencies) < 1.0, latencies
    finally:
        c.close()


def test_consume_from_middle_offset(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    p = producer(broker.bootstrap, linger_ms=0)
    for chunk in range(10):  # ten batches of ten: offset 37 sits inside a batch
        produce_all(p, topic_name, [{"value": f"m{i}".encode()}
                                    for i in range(chunk * 10, chunk * 10 + 10)])
    c = consumer(broker.bootstrap)
    try:
        c.assign([TopicPartition(topic_name, 0, 37)])
        got = consume(c, 63)
        assert [m.offset() for m in got] == list(range(37, 100))
        assert [m.value() for m in got] == [f"m{i}".encode() for i in range(37, 100)]
        assert_no_more(c)
        # Seeking back to a batch boundary and to the last record.
        c.seek(TopicPartition(topic_name, 0, 99))
        assert [m.value() for m in consume(c, 1)] == [b"m99"]
        c.seek(TopicPartition(topic_name, 0, 50))
        assert [m.offset() for m in consume(c, 50)] == list(range(50, 100))
    finally:
        c.close()


def test_idempotent_producer(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, partitions=2)
    p = producer(broker.bootstrap, enable_idempotence=True, acks="all", linger_ms=2)
    sent = [{"value": f"idem-{i}".encode(), "partition": i % 2} for i in range(2000)]
    reports = produce_all(p, topic_name, sent)
    assert not reports.failed, reports.failed[:3]
    for part in range(2):
        want = [r["value"] for r in sent if r["partition"] == part]
        got = read_partition(broker.bootstrap, topic_name, part, 0, len(want))
        assert [m.value() for m in got] == want
        assert watermarks(broker.bootstrap, topic_name, part) == (0, 1000)
    # The batches on disk carry the producer id and epoch the broker handed out, and
    # sequence numbers that start at 0 and follow the records.
    with WireClient.to(broker.bootstrap) as wire:
        resp = wire.request(FetchRequest(
            max_wait=_ms(0), min_bytes=1, max_bytes=10_000_000,
            forgotten_topics_data=(),
            topics=(FetchTopic(topic=topic_name, partitions=(
                FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=10_000_000),
            )),),
        ))
    data = resp.responses[0].partitions[0]
    assert data.error_code == 0
    raw = bytes(data.records)
    headers = []  # (base offset, producer id, producer epoch, base sequence)
    pos = 0
    while pos + HEADER.size <= len(raw):
        fields = HEADER.unpack_from(raw, pos)
        headers.append((fields[0], fields[9], fields[10], fields[11]))
        pos += 12 + fields[1]
    assert headers
    assert all(pid >= 0 and epoch >= 0 for _, pid, epoch, _ in headers)
    assert len({pid for _, pid, _, _ in headers}) == 1
    assert [seq for _, _, _, seq in headers] == [base for base, _, _, _ in headers]
    assert headers[0][3] == 0


def _ms(ms: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=ms)


def test_a_fetch_of_several_large_partitions_comes_back_byte_exact(broker, topic_name):
    """Each partition's records (over 64 KiB: sent with sendfile on a corked socket, right
    behind the bytes encoded before them) arrive whole, in order and in the right place,
    twice in a row on one connection."""
    create_topic(broker.bootstrap, topic_name, partitions=3)
    p = producer(broker.bootstrap, linger_ms=20)
    sent = {partition: [f"p{partition}-{i}-".encode() * 40 for i in range(300)]
            for partition in range(3)}  # about 250 KB per partition
    for partition, values in sent.items():
        reports = produce_all(p, topic_name, [{"value": v, "partition": partition}
                                              for v in values])
        assert not reports.failed
    request = FetchRequest(
        max_wait=_ms(0), min_bytes=1, max_bytes=50_000_000, forgotten_topics_data=(),
        topics=(FetchTopic(topic=topic_name, partitions=tuple(
            FetchPartition(partition=partition, fetch_offset=0, partition_max_bytes=10_000_000)
            for partition in range(3))),))
    with WireClient("127.0.0.1", broker.port) as wire:
        for _ in range(2):
            resp = wire.request(request)
            got = {data.partition_index: data for data in resp.responses[0].partitions}
            for partition, values in sent.items():
                data = got[partition]
                assert data.error_code == 0
                assert len(data.records) > 64 * 1024
                batches = decode_batches(bytes(data.records))  # checks every CRC
                assert [r.value for b in batches for r in b.records] == values
                assert [o for b in batches for o in b.offsets] == list(range(len(values)))
