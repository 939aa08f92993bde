"""One confluent-kafka Producer shared by every produce request of the proxy.

Requests never flush: each hands its records to the producer and awaits one future that the
delivery reports resolve. A dedicated thread polls the producer (delivery callbacks run
there); the last report of a request wakes the event loop once, through
``loop.call_soon_threadsafe``, instead of once per record. That, and librdkafka batching
records of concurrent requests together, is what lets the proxy keep up with tens of
thousands of records a second.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, Message, Producer

from .config import RestConfig

log = logging.getLogger(__name__)

# Confluent's codes for a record that Kafka refused: retriable or not.
KAFKA_ERROR = 50002
KAFKA_RETRIABLE_ERROR = 50003


@dataclass(frozen=True, slots=True)
class OutgoingRecord:
    key: bytes | None
    value: bytes | None
    partition: int | None = None
    headers: Sequence[tuple[str, bytes | None]] | None = None
    timestamp_ms: int | None = None


@dataclass(frozen=True, slots=True)
class Delivery:
    """What became of one record: where it was written, or why not."""

    partition: int | None
    offset: int | None
    timestamp_ms: int | None
    error_code: int | None
    error: str | None
    kafka_error: KafkaError | None = None


def _failed(err: KafkaError) -> Delivery:
    code = KAFKA_RETRIABLE_ERROR if err.retriable() else KAFKA_ERROR
    return Delivery(None, None, None, code, err.str(), err)


class _PendingRequest:
    """The records of one request in flight; resolves its future when all are reported."""

    __slots__ = ("future", "lock", "loop", "remaining", "results")

    def __init__(self, loop: asyncio.AbstractEventLoop, count: int) -> None:
        self.loop = loop
        self.future: asyncio.Future[list[Delivery]] = loop.create_future()
        self.results: list[Delivery | None] = [None] * count
        # One extra count held until every record was handed over, so the future cannot
        # resolve while the loop is still producing the request's later records.
        self.remaining = count + 1
        self.lock = threading.Lock()

    def settle(self, index: int, delivery: Delivery) -> None:
        self.results[index] = delivery
        self._count_down()

    def sealed(self) -> None:
        self._count_down()

    def _count_down(self) -> None:
        with self.lock:
            self.remaining -= 1
            done = self.remaining == 0
        if done:
            self.loop.call_soon_threadsafe(self._resolve)

    def _resolve(self) -> None:
        if not self.future.done():
            self.future.set_result([d for d in self.results if d is not None])


class SharedProducer:
    """The proxy's producer: idempotent, acks=all, polled by its own thread."""

    def __init__(self, config: RestConfig) -> None:
        self._producer = Producer({
            **config.client_config(),
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            # Keyed records land where Java clients (and Confluent's proxy) would put them.
            "partitioner": "murmur2_random",
            "queue.buffering.max.messages": 1_000_000,
            "logger": logging.getLogger("moldau.rest.librdkafka"),
        })
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._poll_loop, name="rest-producer-poll",
                                        daemon=True)
        self._thread.start()

    def _poll_loop(self) -> None:
        while not self._stopping.is_set():
            self._producer.poll(0.1)

    async def produce(self, topic: str, records: Sequence[OutgoingRecord]) -> list[Delivery]:
        """Hand all records to the producer; their deliveries in the same order."""
        pending = _PendingRequest(asyncio.get_running_loop(), len(records))
        for index, record in enumerate(records):
            kwargs: dict[str, Any] = {}
            if record.partition is not None:
                kwargs["partition"] = record.partition
            if record.headers:
                kwargs["headers"] = list(record.headers)
            if record.timestamp_ms is not None:
                kwargs["timestamp"] = record.timestamp_ms
            try:
                self._producer.produce(
                    topic, record.value, record.key,
                    on_delivery=self._reporter(pending, index), **kwargs)
            except BufferError:
                pending.settle(index, Delivery(None, None, None, KAFKA_RETRIABLE_ERROR,
                                               "Local: Queue full"))
            except Exception as exc:  # KafkaException: e.g. an unknown partition
                err = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
                pending.settle(index, _failed(err) if err is not None else Delivery(
                    None, None, None, KAFKA_ERROR, str(exc)))
        pending.sealed()
        return await pending.future

    @staticmethod
    def _reporter(pending: _PendingRequest, index: int) -> Any:
        def report(err: KafkaError | None, msg: Message) -> None:
            if err is not None:
                pending.settle(index, _failed(err))
            else:
                pending.settle(index, Delivery(msg.partition(), msg.offset(),
                                               msg.timestamp()[1], None, None))
        return report

    def close(self, timeout: float = 10.0) -> None:
        """Deliver what is queued (bounded), then stop the poll thread."""
        remaining = self._producer.flush(timeout)
        if remaining:
            log.warning("REST proxy stopped with %d records undelivered", remaining)
        self._stopping.set()
        self._thread.join(timeout)
