"""``_schemas`` on the broker: replayed into memory by a reader thread, written through
an idempotent ``acks=all`` producer.

A write returns only once this registry's own reader has consumed the written records
(read-your-write, as Confluent's registry does), so the next request to any endpoint
sees it. The topic is created on first start: one partition (one order of writes),
``cleanup.policy=compact``, replication factor min(3, brokers).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from . import errors, records
from .state import RegistryState

log = logging.getLogger(__name__)

WRITE_TIMEOUT_S = 10.0


def ensure_topic(admin: AdminClient, topic: str, timeout: float) -> None:
    """Create ``topic`` as a compacted single-partition topic unless it exists."""
    metadata = admin.list_topics(timeout=timeout)
    if topic in metadata.topics and metadata.topics[topic].error is None:
        return
    replicas = min(3, max(1, len(metadata.brokers)))
    new = NewTopic(topic, num_partitions=1, replication_factor=replicas,
                   config={"cleanup.policy": "compact"})
    future = admin.create_topics([new], operation_timeout=timeout)[topic]
    try:
        future.result(timeout=timeout)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise


class KafkaStore:
    """The registry's state and the topic it lives in."""

    def __init__(self, client_config: dict[str, Any], topic: str = "_schemas") -> None:
        self.topic = topic
        self.state = RegistryState()
        self.lock = threading.RLock()
        self._consumed = threading.Condition(self.lock)
        self._next_offset = 0  # offset after the last record applied
        self._client_config = client_config
        self._stop = threading.Event()
        self._reader: threading.Thread | None = None
        self._consumer = Consumer({
            **client_config,
            "group.id": f"moldau-registry-reader-{uuid.uuid4()}",  # never joins: assign()
            "enable.auto.commit": False,
            "enable.partition.eof": False,
            "fetch.wait.max.ms": 100,
        })
        # A second handle only for end-offset queries: asked on the reader's own handle
        # while its thread polls, the query waits behind the poll loop.
        self._offsets = Consumer({
            **client_config,
            "group.id": f"moldau-registry-offsets-{uuid.uuid4()}",
            "enable.auto.commit": False,
        })
        self.producer = Producer({
            **client_config,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 0,
        })

    # --- lifecycle ----------------------------------------------------------------
    def start(self, timeout: float = 30.0) -> None:
        """Create the topic if needed, then replay it to its end before returning."""
        ensure_topic(AdminClient(self._client_config), self.topic, timeout)
        self._consumer.assign([TopicPartition(self.topic, 0, 0)])
        self._reader = threading.Thread(target=self._read_loop, name="schemas-reader",
                                        daemon=True)
        self._reader.start()
        self.catch_up(timeout)

    def close(self) -> None:
        self._stop.set()
        if self._reader is not None:
            self._reader.join(timeout=5)
        self._consumer.close()
        self._offsets.close()
        self.producer.flush(5)

    def _read_loop(self) -> None:
        while not self._stop.is_set():
            try:
                message = self._consumer.poll(0.2)
            except KafkaException as exc:  # pragma: no cover - broker trouble, retried
                log.warning("reading %s: %s", self.topic, exc)
                continue
            if message is None:
                continue
            error = message.error()
            if error is not None:
                if error.code() != KafkaError._PARTITION_EOF:
                    log.warning("reading %s: %s", self.topic, error)
                continue
            self._apply(message)

    def _apply(self, message: Message) -> None:
        try:
            key = records.decode(message.key())
            value = records.decode(message.value())
        except ValueError:
            log.warning("ignoring unreadable %s record at offset %s", self.topic,
                        message.offset())
            key = value = None
        with self.lock:
            if key is not None:
                try:
                    self.state.apply(key, value)
                except (KeyError, TypeError, ValueError) as exc:
                    log.warning("ignoring malformed %s record at offset %s: %r", self.topic,
                                message.offset(), exc)
            self._next_offset = (message.offset() or 0) + 1
            self._consumed.notify_all()

    # --- reading and writing ------------------------------------------------------
    def end_offset(self, timeout: float = 10.0) -> int:
        """The topic's end offset, asked of the broker; Confluent's 50001 while it is away."""
        try:
            _low, high = self._offsets.get_watermark_offsets(
                TopicPartition(self.topic, 0), timeout=timeout, cached=False
            )
        except KafkaException as exc:
            raise errors.RegistryError(
                500, errors.STORE_ERROR,
                f"Error while reading the end offset of {self.topic}: {_reason(exc)}",
            ) from None
        return int(high)

    def wait_consumed(self, offset: int, timeout: float) -> None:
        """Block until every record before ``offset`` has been applied."""
        deadline = time.monotonic() + timeout
        with self.lock:
            while self._next_offset < offset:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise errors.RegistryError(
                        500, errors.STORE_TIMEOUT,
                        f"Timed out waiting for the registry's reader to reach offset {offset}",
                    )
                self._consumed.wait(left)

    def catch_up(self, timeout: float = WRITE_TIMEOUT_S) -> None:
        """Apply everything written to the topic so far (by any registry)."""
        self.wait_consumed(self.end_offset(timeout), timeout)

    def write(self, batch: list[tuple[bytes, bytes | None]]) -> None:
        """Append ``batch`` and return once the reader has applied all of it."""
        outcome: dict[str, Any] = {}
        done = threading.Event()
        remaining = [len(batch)]

        def delivered(error: KafkaError | None, message: Message) -> None:
            if error is not None:
                outcome["error"] = error
            else:
                outcome["offset"] = max(outcome.get("offset", -1), message.offset() or 0)
            remaining[0] -= 1
            if remaining[0] == 0:
                done.set()

        for key, value in batch:
            self.producer.produce(self.topic, key=key, value=value, partition=0,
                                  on_delivery=delivered)
        deadline = time.monotonic() + WRITE_TIMEOUT_S
        while not done.is_set() and time.monotonic() < deadline:
            self.producer.poll(0.05)
        if not done.is_set() or "error" in outcome:
            raise errors.RegistryError(
                500, errors.STORE_ERROR,
                f"Error while writing to {self.topic}: {outcome.get('error', 'timed out')}",
            )
        self.wait_consumed(outcome["offset"] + 1, WRITE_TIMEOUT_S)

    @contextmanager
    def reading(self) -> Iterator[RegistryState]:
        with self.lock:
            yield self.state


def _reason(exc: KafkaException) -> str:
    error = exc.args[0] if exc.args else None
    return error.str() if isinstance(error, KafkaError) else str(exc)
