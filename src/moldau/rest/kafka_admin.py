"""The proxy's AdminClient, awaited from the event loop, and a short-lived metadata cache.

AdminClient calls return concurrent futures (awaited with ``asyncio.wrap_future``);
``list_topics`` blocks, so it runs in a worker thread. Produce requests check the topic and
partition against cached metadata (Confluent answers 40401/40402 before producing), so the
cache keeps a metadata round trip off every produce request; a topic missing from the cache
is looked up again at once, so a topic created a moment ago is found.
"""

from __future__ import annotations

import asyncio
import logging
import time
from concurrent.futures import Future
from typing import Any, TypeVar

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ClusterMetadata, TopicMetadata

from .config import RestConfig
from .errors import RestError

T = TypeVar("T")
METADATA_TTL_S = 5.0


class KafkaAdmin:
    def __init__(self, config: RestConfig) -> None:
        self.config = config
        conf: dict[str, Any] = {**config.client_config(),
                                "logger": logging.getLogger("moldau.rest.librdkafka")}
        self.client = AdminClient(conf)
        self._cached: ClusterMetadata | None = None
        self._cached_at = 0.0

    async def result(self, future: Future[T]) -> T:
        """The result of an AdminClient future; a Kafka failure is a RestError."""
        try:
            return await asyncio.wrap_future(future)
        except KafkaException as exc:
            raise kafka_rest_error(exc) from None

    async def metadata(self, fresh: bool = False) -> ClusterMetadata:
        now = time.monotonic()
        if fresh or self._cached is None or now - self._cached_at > METADATA_TTL_S:
            try:
                self._cached = await asyncio.to_thread(
                    self.client.list_topics, timeout=self.config.request_timeout_s)
            except KafkaException as exc:
                raise kafka_rest_error(exc) from None
            self._cached_at = time.monotonic()
        return self._cached

    async def topic(self, name: str) -> TopicMetadata | None:
        """The topic's metadata, or None when the cluster has no such topic."""
        topic = (await self.metadata()).topics.get(name)
        if topic is None:
            topic = (await self.metadata(fresh=True)).topics.get(name)
        if topic is not None and topic.error is not None and not topic.partitions:
            return None
        return topic

    async def cluster_id(self) -> str:
        cluster_id = (await self.metadata()).cluster_id
        return cluster_id or ""

    def forget(self) -> None:
        """Drop the cached metadata after a topic was created or deleted."""
        self._cached = None


def kafka_rest_error(exc: KafkaException) -> RestError:
    """A KafkaException as the HTTP error Confluent's proxy gives for it."""
    err = exc.args[0] if exc.args else None
    if not isinstance(err, KafkaError):
        return RestError(500, 50002, f"Kafka error: {exc}")
    code = err.code()
    if code == KafkaError.UNKNOWN_TOPIC_OR_PART:
        return RestError(404, 404, err.str())
    if code == KafkaError.TOPIC_ALREADY_EXISTS:
        return RestError(400, 40002, err.str())
    if code in (KafkaError.INVALID_CONFIG, KafkaError.INVALID_PARTITIONS,
                KafkaError.INVALID_REPLICATION_FACTOR, KafkaError.TOPIC_EXCEPTION,
                KafkaError.INVALID_REQUEST, KafkaError.POLICY_VIOLATION):
        return RestError(400, 400, err.str())
    if code == KafkaError.GROUP_ID_NOT_FOUND:
        return RestError(404, 404, err.str())
    if code in (KafkaError._TIMED_OUT, KafkaError.REQUEST_TIMED_OUT, KafkaError._TRANSPORT,
                KafkaError._ALL_BROKERS_DOWN):
        return RestError(500, 50003, f"Retriable Kafka error: {err.str()}")
    return RestError(500, 50002, f"Kafka error: {err.str()}")


def topic_name(topic: TopicMetadata) -> str:
    """The name of a topic from the metadata (typed optional by confluent-kafka)."""
    return topic.topic or ""
