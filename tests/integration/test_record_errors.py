"""Produce refusals that name their records (KIP-467): ``record_errors`` in the response.

A keyless record sent to a compacted topic makes Kafka refuse the whole batch with
INVALID_RECORD, listing each offending record's index in the batch, so a client fails exactly
those records with the broker's message and may retry the others.
"""

from __future__ import annotations

import datetime
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


def test_confluent_kafka_fails_only_the_keyless_records(broker: Any, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, config={"cleanup.policy": "compact"})
    # One batch of four: linger long enough that librdkafka sends them together.
    p = producer(broker.bootstrap, linger_ms=200, retries=0)
    records = [{"key": b"k0", "value": b"0"}, {"value": b"1"},
               {"key": b"k2", "value": b"2"}, {"value": b"3"}]
    reports = produce_all(p, topic_name, records)
    errors = {msg.value(): err for msg, err in reports.failed}
    assert set(errors) == {b"0", b"1", b"2", b"3"}
    # librdkafka fails the records the broker named with INVALID_RECORD and the others of
    # the batch with its own code saying another record caused it: they may be resent.
    # Without record_errors all four would fail with INVALID_RECORD.
    assert {v: e.code() for v, e in errors.items()} == {
        b"0": KafkaError._INVALID_DIFFERENT_RECORD, b"1": KafkaError.INVALID_RECORD,
        b"2": KafkaError._INVALID_DIFFERENT_RECORD, b"3": KafkaError.INVALID_RECORD,
    }
    retried = produce_all(p, topic_name, [r for r in records if "key" in r])
    assert not retried.failed and [m.offset() for m in retried.acked] == [0, 1]
