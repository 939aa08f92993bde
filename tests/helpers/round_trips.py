"""Produce-then-consume round trips through real clients, for tests that only vary how a
client connects (TLS, mTLS, SASL mechanisms): the records must come back unchanged."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition as AioPartition
from confluent_kafka import Consumer, Producer


def librdkafka_round_trip(conf: dict[str, Any], topic: str,
                          values: Sequence[bytes]) -> list[bytes]:
    """Produce ``values`` with confluent-kafka, read them back with a consumer group of the
    topic's name; returns what came back (at most 30 s of polling)."""
    producer = Producer(conf)
    for value in values:
        producer.produce(topic, value=value)
    assert producer.flush(15) == 0
    consumer = Consumer({**conf, "group.id": topic, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got: list[bytes] = []
    try:
        for _ in range(60):
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
            if len(got) == len(values):
                break
    finally:
        consumer.close()
    return got


def aiokafka_round_trip(conf: dict[str, Any], topic: str, value: bytes) -> list[bytes]:
    """Send ``value`` with aiokafka, then read partition 0 of ``topic`` from its start."""

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(**conf)
        await producer.start()
        try:
            await producer.send_and_wait(topic, value)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(**conf, auto_offset_reset="earliest")
        await consumer.start()
        try:
            consumer.assign([AioPartition(topic, 0)])
            batch = await consumer.getmany(timeout_ms=5000)
        finally:
            await consumer.stop()
        return [m.value for msgs in batch.values() for m in msgs if m.value is not None]

    return asyncio.run(run())
