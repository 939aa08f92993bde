"""Small helpers for the ZooKeeper metadata tests: stores, a raw client, waiting."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from confluent_kafka import Consumer, TopicPartition
from kazoo.client import KazooClient

from moldau.cluster.znodes import BrokerRegistration, Endpoint
from moldau.cluster.zookeeper import ZkMetadataStore


def registration(broker_id: int, rack: str | None = None) -> BrokerRegistration:
    return BrokerRegistration(broker_id, (Endpoint("PLAINTEXT", "127.0.0.1", 9000 + broker_id),),
                              rack=rack)


def eventually(check: Callable[[], bool], timeout: float = 30.0, what: str = "condition") -> None:
    """Wait for ``check()`` (ZooKeeper watches fire on other threads); fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.05)


@contextmanager
def raw_client(connect: str) -> Iterator[KazooClient]:
    """A plain kazoo client, as an outside observer (or a Kafka broker) would use."""
    client = KazooClient(hosts=connect, timeout=10)
    client.start(timeout=30)
    try:
        yield client
    finally:
        client.stop()
        client.close()


class Stores:
    """Stores opened by a test, all closed at its end."""

    def __init__(self, connect: str) -> None:
        self.connect = connect
        self.opened: list[ZkMetadataStore] = []

    def open(self, broker_id: int, connect: str | None = None,
             session_timeout_ms: int = 10_000) -> ZkMetadataStore:
        store = ZkMetadataStore(connect or self.connect, broker_id,
                                session_timeout_ms=session_timeout_ms,
                                connection_timeout_ms=30_000)
        self.opened.append(store)
        return store.start()

    def close_all(self) -> None:
        for store in self.opened:
            with contextlib.suppress(Exception):  # already closed by the test
                store.close()


def read_to_end(bootstrap: str, topic: str, timeout: float = 60.0) -> list[bytes]:
    """Every record of partition 0 up to its high watermark (duplicates included); fails
    when the end is not reached within ``timeout``."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                         "enable.auto.commit": False})
    try:
        _, end = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
        consumer.assign([TopicPartition(topic, 0, 0)])
        got: list[bytes] = []
        position = 0
        deadline = time.monotonic() + timeout
        while position < end and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
                position = msg.offset() + 1
        assert position >= end, f"read to {position} of {end} within {timeout:.0f} s"
        return got
    finally:
        consumer.close()
