"""v2 consumer instances: one confluent-kafka Consumer each, owned by one worker thread.

confluent-kafka consumers are not thread-safe and their calls block, so every call on an
instance's consumer runs in that instance's own single-thread executor: requests for one
instance run one after the other, the event loop never blocks, and instances do not wait for
each other. An instance unused for ``consumer.instance.timeout.ms`` is closed by the expiry
task; closing sends LeaveGroup, so a client that vanished leaves no member in its group.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)

from .config import RestConfig
from .errors import RestError, consumer_instance_not_found, unprocessable
from .formats import EMBEDDED_FORMATS, decode_binary, decode_json
from .schemas import SchemaCodecs

log = logging.getLogger(__name__)
T = TypeVar("T")

DEFAULT_REQUEST_TIMEOUT_MS = 1000  # Confluent's consumer.request.timeout.ms
DEFAULT_MAX_BYTES = 64 * 1024 * 1024  # Confluent's consumer.request.max.bytes
_OFFSET_RESETS = {"earliest": "earliest", "smallest": "earliest", "latest": "latest",
                  "largest": "latest", "none": "error"}


def illegal_state(message: str) -> RestError:
    return RestError(409, 40903, f"Illegal state: {message}")


@dataclass
class ConsumerInstance:
    group: str
    name: str
    format: str
    consumer: Consumer
    executor: ThreadPoolExecutor
    last_used: float = field(default_factory=time.monotonic)
    in_flight: int = 0
    subscription: list[str] = field(default_factory=list)
    manual_assignment: list[TopicPartition] = field(default_factory=list)
    # Records consumed from librdkafka but not yet returned (over a request's max_bytes).
    held_back: list[Message] = field(default_factory=list)

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(*args)`` on this instance's worker thread; Kafka errors become 5xx/409."""
        self.in_flight += 1
        self.last_used = time.monotonic()
        try:
            return await asyncio.get_running_loop().run_in_executor(self.executor, fn, *args)
        except KafkaException as exc:
            err = exc.args[0] if exc.args else None
            # A seek or commit for a partition the instance is not assigned: Kafka's
            # consumer throws IllegalStateException, which Confluent answers 409 40903.
            if isinstance(err, KafkaError) and err.code() in (KafkaError._STATE,
                                                              KafkaError._UNKNOWN_PARTITION):
                raise illegal_state(err.str()) from None
            raise RestError(500, 50002, f"Kafka error: {exc}") from None
        finally:
            self.in_flight -= 1
            self.last_used = time.monotonic()


def _flag(value: Any, key: str) -> bool:
    text = str(value).lower()
    if text not in ("true", "false"):
        raise unprocessable(f"Invalid consumer configuration: {key} must be true or false",
                            42204)
    return text == "true"


class ConsumerInstances:
    """Every live consumer instance, by (group, name), and their expiry."""

    def __init__(self, config: RestConfig, schemas: SchemaCodecs | None) -> None:
        self.config = config
        self.schemas = schemas
        self._instances: dict[tuple[str, str], ConsumerInstance] = {}
        self._expiry: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._expiry = asyncio.get_running_loop().create_task(self._expire_idle())

    def create(self, group: str, body: dict[str, Any]) -> ConsumerInstance:
        name = body.get("name") or f"rest-consumer-{uuid.uuid4()}"
        fmt = str(body.get("format") or "binary").lower()
        if not isinstance(name, str):
            raise unprocessable("Invalid consumer configuration: name must be a string", 42204)
        if fmt not in EMBEDDED_FORMATS:
            raise unprocessable(f"Invalid consumer configuration: unknown format {fmt}", 42204)
        if fmt in ("avro", "jsonschema", "protobuf") and self.schemas is None:
            raise unprocessable(f"Invalid consumer configuration: format {fmt} needs a "
                                "schema registry (--schema-registry)", 42204)
        if (group, name) in self._instances:
            raise RestError(409, 40902, "Consumer with specified consumer ID already exists "
                                        "in the specified consumer group.")
        reset = str(body.get("auto.offset.reset", "latest")).lower()
        if reset not in _OFFSET_RESETS:
            raise unprocessable(f"Invalid consumer configuration: auto.offset.reset {reset}",
                                42204)
        auto_commit = _flag(body.get("auto.commit.enable", "true"), "auto.commit.enable")
        conf: dict[str, Any] = {
            **self.config.client_config(),
            "group.id": group,
            "client.id": name,
            "auto.offset.reset": _OFFSET_RESETS[reset],
            "enable.auto.commit": auto_commit,
            "enable.partition.eof": False,
            "logger": logging.getLogger("moldau.rest.librdkafka"),
        }
        if "fetch.min.bytes" in body:
            try:
                conf["fetch.min.bytes"] = int(body["fetch.min.bytes"])
            except (TypeError, ValueError):
                raise unprocessable("Invalid consumer configuration: fetch.min.bytes must be "
                                    "an integer", 42204) from None
        try:
            consumer = Consumer(conf)
        except KafkaException as exc:
            raise unprocessable(f"Invalid consumer configuration: {exc}", 42204) from None
        instance = ConsumerInstance(group, name, fmt, consumer, ThreadPoolExecutor(
            max_workers=1, thread_name_prefix=f"rest-consumer-{name}"))
        self._instances[(group, name)] = instance
        return instance

    def get(self, group: str, name: str) -> ConsumerInstance:
        instance = self._instances.get((group, name))
        if instance is None:
            raise consumer_instance_not_found()
        instance.last_used = time.monotonic()
        return instance

    async def delete(self, group: str, name: str) -> None:
        instance = self._instances.pop((group, name), None)
        if instance is None:
            raise consumer_instance_not_found()
        await self._close(instance)

    async def _close(self, instance: ConsumerInstance) -> None:
        try:
            await asyncio.get_running_loop().run_in_executor(instance.executor,
                                                             instance.consumer.close)
        except Exception:
            log.exception("closing consumer instance %s/%s", instance.group, instance.name)
        instance.executor.shutdown(wait=False)

    async def _expire_idle(self) -> None:
        timeout_s = self.config.instance_timeout_ms / 1000
        period = min(1.0, max(0.05, timeout_s / 4))
        while True:
            await asyncio.sleep(period)
            now = time.monotonic()
            for key, instance in list(self._instances.items()):
                if instance.in_flight == 0 and now - instance.last_used > timeout_s:
                    del self._instances[key]
                    log.info("consumer instance %s/%s expired after %.0f ms idle",
                             instance.group, instance.name, timeout_s * 1000)
                    await self._close(instance)

    async def close_all(self) -> None:
        if self._expiry is not None:
            self._expiry.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._expiry
        instances = list(self._instances.values())
        self._instances.clear()
        await asyncio.gather(*(self._close(i) for i in instances))


def topic_partitions(items: Any, with_offset: bool) -> list[TopicPartition]:
    """``[{"topic", "partition"[, "offset"]}]`` from a request as TopicPartitions (422 if bad)."""
    if not isinstance(items, list):
        raise unprocessable("Expected a list of partitions")
    result = []
    for item in items:
        try:
            if with_offset:
                result.append(TopicPartition(str(item["topic"]), int(item["partition"]),
                                             int(item["offset"])))
            else:
                result.append(TopicPartition(str(item["topic"]), int(item["partition"])))
        except (KeyError, TypeError, ValueError):
            raise unprocessable(f"Invalid partition entry: {item!r}") from None
    return result


def seek_all(instance: ConsumerInstance, partitions: list[TopicPartition]) -> None:
    """Move the positions; for a manual assignment not fetching yet, re-assign at them.

    librdkafka refuses a seek on a partition it has not started fetching; a manual
    assignment can be restated with the new offsets instead, which has the same effect.
    """
    for tp in partitions:
        try:
            instance.consumer.seek(tp)
        except KafkaException:
            if not any((m.topic, m.partition) == (tp.topic, tp.partition)
                       for m in instance.manual_assignment):
                raise
            instance.manual_assignment = [
                tp if (m.topic, m.partition) == (tp.topic, tp.partition) else m
                for m in instance.manual_assignment]
            instance.consumer.assign(instance.manual_assignment)
    instance.held_back = [m for m in instance.held_back if not any(
        (m.topic(), m.partition()) == (tp.topic, tp.partition) for tp in partitions)]


def at_offset(partitions: list[TopicPartition], offset: int) -> list[TopicPartition]:
    return [TopicPartition(tp.topic, tp.partition, offset) for tp in partitions]


BEGINNING, END = OFFSET_BEGINNING, OFFSET_END


def poll_records(instance: ConsumerInstance, timeout_ms: int, max_bytes: int,
                 schemas: SchemaCodecs | None) -> list[dict[str, Any]]:
    """Up to ``max_bytes`` of keys and values, waiting at most ``timeout_ms`` for the first.

    Runs on the instance's thread. Records past ``max_bytes`` are kept for the next request,
    so none is skipped.
    """
    deadline = time.monotonic() + timeout_ms / 1000
    messages = instance.held_back
    instance.held_back = []
    while not messages:
        remaining = deadline - time.monotonic()
        batch = instance.consumer.consume(num_messages=500, timeout=max(0.0, remaining))
        for message in batch:
            err = message.error()
            if err is None:
                messages.append(message)
            elif err.code() != KafkaError._PARTITION_EOF:
                raise KafkaException(err)
        if remaining <= 0:
            break
    records: list[dict[str, Any]] = []
    size = 0
    for index, message in enumerate(messages):
        key, value = message.key(), message.value()
        size += len(key or b"") + len(value or b"")
        if records and size > max_bytes:
            instance.held_back = messages[index:]
            break
        topic = message.topic() or ""
        try:
            records.append({"topic": topic, "partition": message.partition(),
                            "offset": message.offset(),
                            "key": _decode(instance.format, topic, "key", key, schemas),
                            "value": _decode(instance.format, topic, "value", value, schemas)})
        except Exception:
            # Keep the record that cannot be decoded (and those after it) for the next
            # request: the client gets the error, nothing is skipped silently.
            instance.held_back = messages[index:]
            if records:
                break
            raise
    return records


def _decode(fmt: str, topic: str, field_name: str, data: bytes | None,
            schemas: SchemaCodecs | None) -> Any:
    if fmt == "binary":
        return decode_binary(data)
    if fmt == "json":
        return decode_json(data)
    assert schemas is not None
    return schemas.decode(fmt, topic, field_name, data)
