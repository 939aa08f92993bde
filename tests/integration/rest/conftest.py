"""Fixtures of the REST Proxy tests: a real proxy process per test module, an httpx client.

Records produced through the proxy are read back with a confluent-kafka consumer
(:func:`read_back`), so a test sees what any Kafka client would see.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer, Message, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.helpers.rest_proxy import RestProxyProcess


@pytest.fixture(scope="module")
def rest_proxy(broker: Any, tmp_path_factory: pytest.TempPathFactory
               ) -> Iterator[RestProxyProcess]:
    proxy = RestProxyProcess(tmp_path_factory.mktemp("rest"), broker.bootstrap).start()
    yield proxy
    proxy.stop()


@pytest.fixture
def rest(rest_proxy: RestProxyProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=rest_proxy.url, timeout=30) as client:
        yield client
    assert rest_proxy.is_running(), rest_proxy.log_text()[-3000:]


@pytest.fixture(scope="module")
def cluster_id(rest_proxy: RestProxyProcess) -> str:
    body = httpx.get(f"{rest_proxy.url}/v3/clusters", timeout=10).json()
    cid: str = body["data"][0]["cluster_id"]
    return cid


def create_topic(bootstrap: str, name: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    (future,) = admin.create_topics([NewTopic(name, partitions, 1)]).values()
    future.result(timeout=30)


def read_back(bootstrap: str, topic: str, count: int, partitions: int = 1,
              timeout: float = 30.0) -> list[Message]:
    """The first ``count`` records of the topic, read with a confluent-kafka consumer."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-back-{topic}",
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        messages: list[Message] = []
        deadline = time.monotonic() + timeout
        while len(messages) < count and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=count, timeout=1.0):
                assert message.error() is None, message.error()
                messages.append(message)
        assert len(messages) == count, f"read {len(messages)} of {count} records"
        return sorted(messages, key=lambda m: (m.partition(), m.offset()))
    finally:
        consumer.close()
