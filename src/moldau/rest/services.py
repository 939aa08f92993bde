"""What the routers share, kept on ``app.state``: config, producer, admin, instances."""

from __future__ import annotations

from dataclasses import dataclass

from starlette.requests import Request

from .config import RestConfig
from .consumers import ConsumerInstances
from .kafka_admin import KafkaAdmin
from .producer import SharedProducer
from .schemas import SchemaCodecs


@dataclass
class Services:
    config: RestConfig
    producer: SharedProducer
    admin: KafkaAdmin
    consumers: ConsumerInstances
    schemas: SchemaCodecs | None


def services(request: Request) -> Services:
    result: Services = request.app.state.services
    return result
