"""DescribeProducers (KIP-664) against a real broker, asked by kafka-python's admin client and
by raw requests: the leader reports each producer's epoch, last sequence and timestamp; unknown
topics and partitions get UNKNOWN_TOPIC_OR_PARTITION. Before the API existed, kafka-python
failed with an unsupported-version error and a raw request got no answer."""

from __future__ import annotations

import time
from typing import Any

from kafka import KafkaAdminClient
from kafka import TopicPartition as KafkaTopicPartition
from kio.schema.describe_producers.v0.request import DescribeProducersRequest, TopicRequest
from kio.schema.errors import ErrorCode

from .clients import create_topic, producer, unique
from .wire import WireClient


def _describe(bootstrap: str, topic: str, partitions: tuple[int, ...]) -> Any:
    with WireClient.to(bootstrap) as wire:
        return wire.request(DescribeProducersRequest(topics=(
            TopicRequest(name=topic, partition_indexes=partitions),)))


def test_leader_reports_its_idempotent_producers(broker: Any) -> None:
    topic = unique("describe-producers")
    create_topic(broker.bootstrap, topic, 2)
    before_ms = int(time.time() * 1000) - 1000
    p = producer(broker.bootstrap, **{"enable.idempotence": True, "acks": "all"})
    for i in range(3):
        p.produce(topic, value=f"v{i}".encode(), partition=0)
        p.flush(15)  # one batch each: last sequence 2
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=15_000)
    try:
        states = admin.describe_producers(
            [KafkaTopicPartition(topic, 0), KafkaTopicPartition(topic, 1)])
    finally:
        admin.close()
    assert states[KafkaTopicPartition(topic, 1)].active_producers == []
    (state,) = states[KafkaTopicPartition(topic, 0)].active_producers
    assert state.producer_id >= 0
    assert state.producer_epoch == 0
    assert state.last_sequence == 2
    assert state.last_timestamp >= before_ms
    assert state.current_transaction_start_offset == -1  # not transactional


def test_unknown_topic_and_partition(broker: Any) -> None:
    topic = unique("describe-producers-unknown")
    create_topic(broker.bootstrap, topic, 1)
    response = _describe(broker.bootstrap, topic, (0, 7))
    (answer,) = response.topics
    codes = {p.partition_index: p.error_code for p in answer.partitions}
    assert codes == {0: ErrorCode.none, 7: ErrorCode.unknown_topic_or_partition}
    response = _describe(broker.bootstrap, unique("no-such-topic"), (0,))
    assert response.topics[0].partitions[0].error_code == ErrorCode.unknown_topic_or_partition
