"""The check every bad-authentication test ends with: a Produce that a refused client sends
right behind its bad input (pipelined on the same connection) is never written, and another
client is still served."""

from __future__ import annotations

import uuid
from collections.abc import Callable

from confluent_kafka import Consumer, Producer, TopicPartition

from tests.integration.test_bad_input import produce, values_batch
from tests.integration.wire import WireClient


def new_topic_with_one_record(bootstrap_conf: dict[str, str]) -> str:
    """A topic made through a good client, with one record (high watermark 1)."""
    topic = f"guarded-{uuid.uuid4().hex[:8]}"
    producer = Producer(bootstrap_conf)
    producer.produce(topic, b"good")
    assert producer.flush(15) == 0
    return topic


def high_watermark(bootstrap_conf: dict[str, str], topic: str) -> int:
    consumer = Consumer({**bootstrap_conf, "group.id": "watermarks"})
    try:
        return int(consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1])
    finally:
        consumer.close()


def refused_then_nothing_written(client: WireClient, bad_input: Callable[[WireClient], None],
                                 good_conf: dict[str, str]) -> None:
    """``bad_input`` (which sends requests and reads their answers), a pipelined Produce
    behind it, the connection closed, the topic unchanged, ``good_conf`` still served."""
    topic = new_topic_with_one_record(good_conf)
    bad_input(client)
    client.send_request(produce(topic, values_batch([b"sneaked-in"]), acks=1))
    assert client.wait_closed()
    assert high_watermark(good_conf, topic) == 1
