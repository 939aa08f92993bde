"""Produce refusals that name their records (KIP-467): ``record_errors`` in the response.

A keyless record sent to a compacted topic, or a timestamp too far from the broker's clock on
a topic that bounds them (KIP-937), makes Kafka refuse the whole batch (INVALID_RECORD,
INVALID_TIMESTAMP), listing each offending record's index in the batch, so a client fails
exactly those records with the broker's message and may retry the others.
"""

from __future__ import annotations

import datetime
import re
import time
from typing import Any

import pytest
from confluent_kafka import KafkaError
from kio.schema.errors import ErrorCode
from kio.schema.produce.v7.request import PartitionProduceData as PartitionV7
from kio.schema.produce.v7.request import ProduceRequest as ProduceV7
from kio.schema.produce.v7.request import TopicProduceData as TopicV7
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData

from tests.unit.batchgen import Record, build_batch

from .clients import create_topic, produce_all, producer, watermarks
from .wire import WireClient

pytestmark = pytest.mark.timeout(60)


def _key_message(topic: str) -> str:
    return f"Compacted topic cannot accept message without key in topic partition {topic}-0"


def _batch(keys: list[bytes | None]) -> bytes:
    return build_batch([Record(key=k, value=b"v", timestamp=1_000 + i)
                        for i, k in enumerate(keys)])


def _produce(topic: str, records: bytes) -> ProduceRequest:
    return ProduceRequest(
        transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=10),
        topic_data=(TopicProduceData(name=topic, partition_data=(
            PartitionProduceData(index=0, records=records),
        )),),
    )


def test_raw_produce_lists_each_keyless_record(broker: Any, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, config={"cleanup.policy": "compact"})
    keys: list[bytes | None] = [b"a", None, b"b", None, None, b"c"]
    with WireClient.to(broker.bootstrap) as wire:
        response = wire.request(_produce(topic_name, _batch(keys)))
    [partition] = response.responses[0].partition_responses
    assert partition.error_code == ErrorCode.invalid_record
    message = _key_message(topic_name)
    assert [(e.batch_index, e.batch_index_error_message) for e in partition.record_errors] == [
        (1, message), (3, message), (4, message),
    ]
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{message}')" for i in (1, 3, 4))
    assert partition.error_message == (
        "One or more records have been rejected due to 3 record errors in total, and only "
        f"showing the first three errors at most: [{shown}]"
    )
    assert watermarks(broker.bootstrap, topic_name) == (0, 0)


def test_raw_produce_v7_has_no_record_errors_field(broker: Any, topic_name: str) -> None:
    """Versions before KIP-467 still get INVALID_RECORD, without the new fields."""
    create_topic(broker.bootstrap, topic_name, config={"cleanup.policy": "compact"})
    request = ProduceV7(
        transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=10),
        topic_data=(TopicV7(name=topic_name, partition_data=(
            PartitionV7(index=0, records=_batch([None])),
        )),),
    )
    with WireClient.to(broker.bootstrap) as wire:
        response = wire.request(request)
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.invalid_record


def _one_batch_producer(bootstrap: str, topic: str, count: int) -> Any:
    """A producer that sends the next ``count`` records to partition 0 as one batch.

    librdkafka sends a batch once it holds batch.num.messages records (or at flush); the long
    linger keeps a stalled test process from splitting it, and the producer knows the topic
    before the first record, so none waits in librdkafka's queue of unpartitioned messages.
    (With a 200 ms linger and no metadata beforehand, records went out in separate batches
    twice on loaded machines.) Records must name ``partition=0``.
    """
    p = producer(bootstrap, linger_ms=5000, batch_num_messages=count, retries=0)
    assert p.list_topics(topic, timeout=10).topics[topic].error is None
    return p


def test_confluent_kafka_fails_only_the_keyless_records(broker: Any, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, config={"cleanup.policy": "compact"})
    p = _one_batch_producer(broker.bootstrap, topic_name, 4)
    records = [{"key": b"k0", "value": b"0", "partition": 0}, {"value": b"1", "partition": 0},
               {"key": b"k2", "value": b"2", "partition": 0}, {"value": b"3", "partition": 0}]
    reports = produce_all(p, topic_name, records)
    errors = {msg.value(): err for msg, err in reports.failed}
    assert set(errors) == {b"0", b"1", b"2", b"3"}, (
        [(m.value(), m.offset()) for m in reports.acked], errors)
    # librdkafka fails the records the broker named with INVALID_RECORD and the others of
    # the batch with its own code saying another record caused it: they may be resent.
    # Without record_errors all four would fail with INVALID_RECORD.
    assert {v: e.code() for v, e in errors.items()} == {
        b"0": KafkaError._INVALID_DIFFERENT_RECORD, b"1": KafkaError.INVALID_RECORD,
        b"2": KafkaError._INVALID_DIFFERENT_RECORD, b"3": KafkaError.INVALID_RECORD,
    }
    retried = produce_all(p, topic_name, [r for r in records if "key" in r])
    assert not retried.failed and [m.offset() for m in retried.acked] == [0, 1]


# -- timestamps out of range (KIP-937) ----------------------------------------------------

HOUR = 3_600_000
BOUNDED = {"message.timestamp.before.max.ms": str(HOUR),
           "message.timestamp.after.max.ms": str(HOUR)}
_OUT_OF_RANGE = re.compile(
    r"Timestamp (-?\d+) of message with offset (\d+) is out of range\. "
    r"The timestamp should be within \[(-?\d+), (-?\d+)\]")


def _timestamp_error(message: str) -> tuple[int, int, int, int]:
    match = _OUT_OF_RANGE.fullmatch(message)
    assert match, message
    timestamp, offset, low, high = (int(g) for g in match.groups())
    return timestamp, offset, low, high


def test_raw_produce_names_records_with_timestamps_out_of_range(broker: Any,
                                                               topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, config=BOUNDED)
    now = int(time.time() * 1000)
    stamps = [now, now - 2 * HOUR, now + 2 * HOUR, now + 10_000]
    records = [Record(key=b"k%d" % i, value=b"v", timestamp=t) for i, t in enumerate(stamps)]
    with WireClient.to(broker.bootstrap) as wire:
        response = wire.request(_produce(topic_name, build_batch(records, base_timestamp=now)))
        [partition] = response.responses[0].partition_responses
        assert partition.error_code == ErrorCode.invalid_timestamp
        assert partition.error_message == (
            "One or more records have been rejected due to invalid timestamp")
        assert [e.batch_index for e in partition.record_errors] == [1, 2]
        for error, stamp in zip(partition.record_errors, (stamps[1], stamps[2]), strict=True):
            timestamp, offset, low, high = _timestamp_error(error.batch_index_error_message)
            assert (timestamp, offset) == (stamp, error.batch_index)
            assert high - low == 2 * HOUR and low <= now + 60_000 and now - 60_000 <= high
        assert watermarks(broker.bootstrap, topic_name) == (0, 0)
        # Within the bounds (or without a timestamp) the same records are accepted.
        fine = [Record(key=b"k", value=b"v", timestamp=t) for t in (now, now - 1000)]
        response = wire.request(_produce(topic_name, build_batch(fine)))
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.none


def test_keyless_and_late_records_on_a_compacted_bounded_topic(broker: Any,
                                                               topic_name: str) -> None:
    """A record with both faults is named once, for its key; any bad timestamp makes the
    whole answer INVALID_TIMESTAMP, as Kafka's validator decides."""
    create_topic(broker.bootstrap, topic_name, config={**BOUNDED, "cleanup.policy": "compact"})
    now = int(time.time() * 1000)
    records = [Record(key=None, value=b"v", timestamp=now - 2 * HOUR),
               Record(key=b"k", value=b"v", timestamp=now - 2 * HOUR),
               Record(key=None, value=b"v", timestamp=now)]
    with WireClient.to(broker.bootstrap) as wire:
        response = wire.request(_produce(topic_name, build_batch(records, base_timestamp=now)))
    [partition] = response.responses[0].partition_responses
    assert partition.error_code == ErrorCode.invalid_timestamp
    errors = [(e.batch_index, e.batch_index_error_message) for e in partition.record_errors]
    assert [i for i, _ in errors] == [0, 1, 2]
    assert errors[0][1] == errors[2][1] == _key_message(topic_name)
    assert _timestamp_error(errors[1][1])[:2] == (now - 2 * HOUR, 1)


def test_confluent_kafka_sees_invalid_timestamp(broker: Any, topic_name: str) -> None:
    """librdkafka (2.16) uses record_errors only for INVALID_RECORD: on INVALID_TIMESTAMP it
    fails the whole batch with that code, as against a Kafka broker. Nothing is stored; the
    raw tests above check what the broker names."""
    create_topic(broker.bootstrap, topic_name, config=BOUNDED)
    p = _one_batch_producer(broker.bootstrap, topic_name, 3)
    now = int(time.time() * 1000)
    records = [{"value": b"0", "timestamp": now, "partition": 0},
               {"value": b"1", "timestamp": now - 2 * HOUR, "partition": 0},
               {"value": b"2", "timestamp": now + 1000, "partition": 0}]
    reports = produce_all(p, topic_name, records)
    assert {m.value(): e.code() for m, e in reports.failed} == dict.fromkeys(
        (b"0", b"1", b"2"), KafkaError.INVALID_TIMESTAMP)
    assert watermarks(broker.bootstrap, topic_name) == (0, 0)
    accepted = produce_all(p, topic_name, [r for r in records if r["value"] != b"1"])
    assert not accepted.failed
