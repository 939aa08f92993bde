"""Several listeners at once: every one accepts clients, and each answers with its own
advertised endpoints (Metadata, FindCoordinator, DescribeCluster), as Kafka does."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from tests.conftest import MakeBroker
from tests.helpers.broker_process import BrokerProcess, free_port


@pytest.fixture
def two_listeners(make_broker: MakeBroker) -> Iterator[tuple[BrokerProcess, int, int]]:
    inner, outer = free_port(), free_port()
    broker = make_broker(
        f"listeners=INNER://127.0.0.1:{inner},OUTER://127.0.0.1:{outer}",
        # OUTER advertises "localhost" so that the two answers can be told apart.
        f"advertised.listeners=INNER://127.0.0.1:{inner},OUTER://localhost:{outer}",
        "listener.security.protocol.map=INNER:PLAINTEXT,OUTER:PLAINTEXT",
        "inter.broker.listener.name=INNER",
        port=inner,
    )
    yield broker, inner, outer


def _brokers(bootstrap: str) -> list[str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    md = admin.list_topics(timeout=10)
    return [f"{b.host}:{b.port}" for b in md.brokers.values()]


def test_metadata_answers_the_endpoint_of_the_listener_used(
        two_listeners: tuple[BrokerProcess, int, int]) -> None:
    broker, inner, outer = two_listeners
    assert _brokers(f"127.0.0.1:{inner}") == [f"127.0.0.1:{inner}"]
    assert _brokers(f"127.0.0.1:{outer}") == [f"localhost:{outer}"]
    assert f"and OUTER://127.0.0.1:{outer}" in broker.stdout_text()


def test_clients_produce_and_consume_through_the_second_listener(
        two_listeners: tuple[BrokerProcess, int, int]) -> None:
    _broker, _inner, outer = two_listeners
    topic = f"listeners-{uuid.uuid4().hex[:8]}"
    bootstrap = f"localhost:{outer}"
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(5):
        producer.produce(topic, value=f"v{i}".encode())
    assert producer.flush(15) == 0
    # A group consumer needs FindCoordinator: it must point at this listener too.
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": topic,
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    values = []
    try:
        for _ in range(100):
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                values.append(msg.value())
            if len(values) == 5:
                break
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    assert values == [f"v{i}".encode() for i in range(5)]


def test_describe_cluster_answers_the_listener_used(
        two_listeners: tuple[BrokerProcess, int, int]) -> None:
    _broker, inner, outer = two_listeners
    for bootstrap, expected in ((f"127.0.0.1:{inner}", f"127.0.0.1:{inner}"),
                                (f"127.0.0.1:{outer}", f"localhost:{outer}")):
        admin = AdminClient({"bootstrap.servers": bootstrap})
        nodes = admin.describe_cluster().result(timeout=10).nodes
        assert [f"{n.host}:{n.port}" for n in nodes] == [expected]
