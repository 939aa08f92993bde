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
import contextlib
import logging
import threading
from collections.abc import Sequence
from typing import Any, NamedTuple

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from .config import RestConfig

log = logging.getLogger(__name__)

# Confluent's codes for a record that Kafka refused: retriable or not.
KAFKA_ERROR = 50002
KAFKA_RETRIABLE_ERROR = 50003


class OutgoingRecord(NamedTuple):
    """One record to produce; a NamedTuple because a request makes hundreds of them."""

    key: bytes | None
    value: bytes | None
    partition: int | None = None
    headers: Sequence[tuple[str, bytes | None]] | None = None
    timestamp_ms: int | None = None


class Delivery(NamedTuple):
    """What became of one record: where it was written, or why not."""

    partition: int | None
    offset: int | None
    timestamp_ms: int | None
    error_code: int | None
    error: str | None


# librdkafka does not flag its local time-outs retriable; Kafka's Java client (and so
# Confluent's proxy) counts a TimeoutException as retriable.
_TIMEOUTS = (KafkaError._MSG_TIMED_OUT, KafkaError._TIMED_OUT, KafkaError.REQUEST_TIMED_OUT)


def _failed(err: KafkaError) -> Delivery:
    code = (KAFKA_RETRIABLE_ERROR if err.retriable() or err.code() in _TIMEOUTS
            else KAFKA_ERROR)
    return Delivery(None, None, None, code, err.str())


class _PendingRequest:
    """The records of one request in flight; resolves its future when all are reported.

    Delivery reports arrive on the poll thread only, which alone counts them
    (``reported``); the event loop sets ``expected`` once every record was handed over
    (records the producer refused at once are settled there and not expected). Each side
    checks after its own write, so whichever writes last sees both and resolves: no lock.
    A second resolution is harmless.
    """

    __slots__ = ("expected", "future", "loop", "reported", "results")

    def __init__(self, loop: asyncio.AbstractEventLoop, count: int) -> None:
        self.loop = loop
        self.future: asyncio.Future[list[Delivery]] = loop.create_future()
        self.results: list[Delivery | None] = [None] * count
        self.reported = 0
        self.expected = -1

    def delivered(self, index: int, delivery: Delivery) -> None:
        """Poll thread: one delivery report."""
        self.results[index] = delivery
        self.reported += 1
        if self.reported == self.expected:
            self.loop.call_soon_threadsafe(self._resolve)

    def seal(self, handed_over: int) -> None:
        """Event loop: every record was handed to the producer (or refused at once)."""
        self.expected = handed_over
        if self.reported == handed_over:
            self._resolve()

    def _resolve(self) -> None:
        if not self.future.done():
            self.future.set_result([d for d in self.results if d is not None])


class _OnePartitionRequest:
    """Unkeyed records of one request, all sent to one partition in one produce_batch call.

    One bound callback serves every record (no closure per record), and it keeps no more
    than the record's offset (an int) or its failure: the poll thread runs it for every
    record. Reports are matched to records by offset: the records of a request on one
    partition get ascending offsets in the order they were handed over, whatever order
    their reports arrive in.
    """

    __slots__ = ("arrived", "expected", "future", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.future: asyncio.Future[list[int | Delivery]] = loop.create_future()
        self.arrived: list[int | Delivery] = []
        self.expected = -1

    def delivered(self, err: KafkaError | None, msg: Message) -> None:
        """Poll thread: one delivery report."""
        # A delivered record always has its offset (librdkafka's stubs say int | None).
        self.arrived.append(msg.offset() if err is None else _failed(err))  # type: ignore[arg-type]
        if len(self.arrived) == self.expected:
            self.loop.call_soon_threadsafe(self._resolve)

    def seal(self, queued: int) -> None:
        """Event loop: this many records were queued (the others failed at once)."""
        self.expected = queued
        if len(self.arrived) == self.expected:
            self._resolve()

    def _resolve(self) -> None:
        if self.future.done():
            return
        offsets = [a for a in self.arrived if type(a) is int]
        known = sorted(o for o in offsets if o >= 0)
        self.future.set_result([*known, *(o for o in offsets if o < 0),
                                *(a for a in self.arrived if type(a) is not int)])


def _options(record: OutgoingRecord) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if record.partition is not None:
        options["partition"] = record.partition
    if record.headers:
        options["headers"] = list(record.headers)
    if record.timestamp_ms is not None:
        options["timestamp"] = record.timestamp_ms
    return options


class SharedProducer:
    """The proxy's producer: idempotent, acks=all, polled by its own thread."""

    def __init__(self, config: RestConfig) -> None:
        self._producer = Producer({
            **config.client_config(),
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            # A record not delivered in time (the brokers are away) is answered with its
            # error instead of holding the request for librdkafka's default five minutes.
            "message.timeout.ms": max(1, int(config.request_timeout_s * 1000)),
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
        produce = self._producer.produce
        handed_over = 0
        for index, record in enumerate(records):
            on_delivery = self._reporter(pending, index)
            try:
                if record.partition is None and not record.headers \
                        and record.timestamp_ms is None:
                    produce(topic, record.value, record.key, on_delivery=on_delivery)
                else:
                    produce(topic, record.value, record.key, on_delivery=on_delivery,
                            **_options(record))
                handed_over += 1
            except BufferError:
                pending.results[index] = Delivery(None, None, None, KAFKA_RETRIABLE_ERROR,
                                                  "Local: Queue full")
            except KafkaException as exc:  # e.g. an unknown partition
                err = exc.args[0] if exc.args else None
                pending.results[index] = (_failed(err) if isinstance(err, KafkaError) else
                                          Delivery(None, None, None, KAFKA_ERROR, str(exc)))
        pending.seal(handed_over)
        return await pending.future

    async def produce_to_partition(self, topic: str, partition: int,
                                   values: Sequence[bytes | None]) -> list[int | Delivery]:
        """Unkeyed records to one partition, in one call: the proxy's fast path.

        Confluent's proxy (a Java producer with the sticky partitioner) also puts the
        unkeyed records of a request on one partition; doing it here lets librdkafka take
        the whole request in one ``produce_batch`` call with one callback. Each record's
        result is its offset, or a Delivery with its error.
        """
        pending = _OnePartitionRequest(asyncio.get_running_loop())
        messages = [{"value": value} for value in values]
        # Records that did not fit in the queue carry an _error, read below.
        try:
            with contextlib.suppress(BufferError):
                self._producer.produce_batch(topic, messages, partition=partition,
                                             on_delivery=pending.delivered)
        except KafkaException as exc:  # refused whole: every record gets the error
            err = exc.args[0] if exc.args else None
            failed = (_failed(err) if isinstance(err, KafkaError)
                      else Delivery(None, None, None, KAFKA_ERROR, str(exc)))
            return [failed] * len(messages)
        refused = [message["_error"] for message in messages if "_error" in message]
        if not refused:
            pending.seal(len(messages))
            return await pending.future
        results: list[int | Delivery | None] = [None] * len(messages)
        queued = []
        for index, message in enumerate(messages):
            err = message.get("_error")
            if err is None:
                queued.append(index)
            else:
                results[index] = (_failed(err) if isinstance(err, KafkaError) else
                                  Delivery(None, None, None, KAFKA_ERROR, str(err)))
        pending.seal(len(queued))
        for index, result in zip(queued, await pending.future, strict=True):
            results[index] = result
        return [r for r in results if r is not None]

    @staticmethod
    def _reporter(pending: _PendingRequest, index: int) -> Any:
        def report(err: KafkaError | None, msg: Message) -> None:
            if err is not None:
                pending.delivered(index, _failed(err))
            else:
                pending.delivered(index, Delivery(msg.partition(), msg.offset(),
                                                  msg.timestamp()[1], None, None))
        return report

    def close(self, timeout: float = 10.0) -> None:
        """Deliver what is queued (bounded), then stop the poll thread."""
        remaining = self._producer.flush(timeout)
        if remaining:
            log.warning("REST proxy stopped with %d records undelivered", remaining)
        self._stopping.set()
        self._thread.join(timeout)
