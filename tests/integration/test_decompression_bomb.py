"""Decompression bombs over the wire: refused with bounded memory, the broker keeps serving.

The broker decompresses a batch in two places a client can reach: producing to a compacted
topic (the keyless-record check) and ListOffsets by timestamp (the record inside the batch).
A 1 MB gzip batch holding 1 GiB of zeros must cost the broker a bounded amount of memory:
the produce is refused with CORRUPT_MESSAGE, the ListOffsets answered at batch level.
"""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from confluent_kafka import TopicPartition
from kio.schema.errors import ErrorCode
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData

from tests.helpers.bombs import GZIP, LZ4, ZSTD, bomb_batch
from tests.unit.batchgen import Record, build_batch

from .clients import consumer, create_topic, produce_all, producer, watermarks
from .wire import WireClient

pytestmark = pytest.mark.timeout(180)

GIB = 1 << 30
#: Peak RSS the broker may gain while refusing bombs: the cap is 64 MiB at these sizes and a
#: decompression holds about twice its cap; the rest is slack for a loaded machine.
RSS_BUDGET = 256 << 20


def peak_rss(pid: int) -> int:
    """VmHWM: the most resident memory the process ever had, in bytes."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM in /proc/PID/status")


def produce_raw(bootstrap: str, topic: str, records: bytes) -> Any:
    request = ProduceRequest(
        transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=30),
        topic_data=(TopicProduceData(name=topic, partition_data=(
            PartitionProduceData(index=0, records=records),
        )),),
    )
    with WireClient.to(bootstrap, timeout=60) as wire:
        response = wire.request(request)
    return response.responses[0].partition_responses[0]


def test_bombs_are_refused_with_bounded_memory(make_broker: Any, topic_name: str) -> None:
    broker = make_broker()
    compacted, plain = f"{topic_name}-c", f"{topic_name}-p"
    sizes = {"max.message.bytes": str(2 << 20)}
    create_topic(broker.bootstrap, compacted, config={"cleanup.policy": "compact", **sizes})
    create_topic(broker.bootstrap, plain, config=sizes)
    ok = produce_raw(broker.bootstrap, compacted, build_batch([Record(b"k", b"v", 1_000)]))
    assert ok.error_code == ErrorCode.none
    before = peak_rss(broker.pid)

    # gzip and zstd: 1 GiB of zeros (1 MB and 32 KB); lz4 at most 255:1, so 256 MiB (1.1 MB).
    for codec, size in ((GZIP, GIB), (ZSTD, GIB), (LZ4, 256 << 20)):
        batch = bomb_batch(codec, size, timestamp=5_000)
        answer = produce_raw(broker.bootstrap, compacted, batch)
        assert answer.error_code == ErrorCode.corrupt_message, (codec, answer)
        assert "decompression bomb" in (answer.error_message or ""), answer
    assert watermarks(broker.bootstrap, compacted) == (0, 1)

    # A topic that is not compacted stores the batch unread, as Kafka does; looking up a
    # timestamp inside it answers at batch level instead of expanding it.
    stored = produce_raw(broker.bootstrap, plain, bomb_batch(GZIP, GIB, timestamp=5_000))
    assert stored.error_code == ErrorCode.none
    c = consumer(broker.bootstrap)
    try:
        [found] = c.offsets_for_times([TopicPartition(plain, 0, 4_000)], timeout=30)
        assert found.offset == 0
    finally:
        c.close()

    grown = peak_rss(broker.pid) - before
    print(f"broker peak RSS grew by {grown >> 20} MiB")
    assert grown < RSS_BUDGET, f"broker peak RSS grew by {grown >> 20} MiB"
    # Still serving: a normal producer is acknowledged, nothing crashed or logged a traceback.
    report = produce_all(producer(broker.bootstrap), compacted, [{"key": b"a", "value": b"1"}])
    assert not report.failed and watermarks(broker.bootstrap, compacted) == (0, 2)
    assert broker.is_running()
    log = broker.stderr_text() + broker.stdout_text()
    assert "Traceback" not in log
    assert "decompression bomb" in log  # the ListOffsets warning names the batch
