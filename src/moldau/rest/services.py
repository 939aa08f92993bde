"""What the routers share, kept on ``app.state``: config, producer, admin, instances."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field

from confluent_kafka.admin import TopicMetadata
from starlette.requests import Request

from .config import RestConfig
from .consumers import ConsumerInstances
from .kafka_admin import KafkaAdmin
from .producer import SharedProducer
from .schemas import SchemaCodecs


class UnkeyedPartitions:
    """Where the next request of unkeyed records goes: the topic's partitions in turn.

    Each request's unkeyed records go to one partition (as a Java producer's sticky
    partitioner does with a batch), and successive requests spread over the partitions
    that have a leader.
    """

    def __init__(self) -> None:
        self._turns: dict[str, Iterator[int]] = {}

    def next(self, topic: str, metadata: TopicMetadata) -> int:
        turns = self._turns.get(topic)
        if turns is None:
            turns = self._turns[topic] = itertools.count()
        led = sorted(p for p, info in metadata.partitions.items() if info.leader >= 0)
        candidates = led or sorted(metadata.partitions)
        return candidates[next(turns) % len(candidates)]


@dataclass
class Services:
    config: RestConfig
    producer: SharedProducer
    admin: KafkaAdmin
    consumers: ConsumerInstances
    schemas: SchemaCodecs | None
    partitions: UnkeyedPartitions = field(default_factory=UnkeyedPartitions)


def services(request: Request) -> Services:
    result: Services = request.app.state.services
    return result
