"""KIP-714 client metrics: subscriptions as CLIENT_METRICS config resources, real pushes.

kafka-python's admin client sets and describes a subscription; librdkafka (confluent-kafka)
asks GetTelemetrySubscriptions as soon as the broker offers it and pushes the subscribed
metrics with PushTelemetry, which the broker acknowledges and keeps (it logs the first push
of each client instance). Raw kio requests check Kafka's errors for bad pushes.
"""

from __future__ import annotations

import importlib
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource, ConfigResourceType
from kio.schema.errors import ErrorCode

from tests.integration.clients import create_topic, unique
from tests.integration.wire import WireClient, request_class

GET_SUBSCRIPTIONS, PUSH = 71, 72


@pytest.fixture
def admin(broker: Any) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=15000)
    yield client
    client.close()


def _module(api_key: int) -> Any:
    return importlib.import_module(request_class(api_key, 0).__module__)


def _subscribe(admin: KafkaAdminClient, name: str, configs: dict[str, str]) -> Any:
    return admin.alter_configs([ConfigResource(ConfigResourceType.CLIENT_METRICS, name,
                                               configs=configs)], raise_on_unknown=False)


def test_librdkafka_pushes_subscribed_metrics(broker: Any, admin: KafkaAdminClient) -> None:
    client_id, sub, topic = unique("p42-tele"), unique("p42-sub"), unique("p42-tele-t")
    create_topic(broker.bootstrap, topic)
    _subscribe(admin, sub, {"metrics": "org.apache.kafka.", "interval.ms": "200",
                            "match": f"client_id={client_id}"})
    described = admin.describe_configs(
        [ConfigResource(ConfigResourceType.CLIENT_METRICS, sub)])
    assert "interval.ms" in str(described) and "200" in str(described)
    assert sub in admin.list_config_resources(["CLIENT_METRICS"])["client_metrics"]
    producer = Producer({"bootstrap.servers": broker.bootstrap, "client.id": client_id,
                         "enable.metrics.push": True})
    try:
        deadline = time.monotonic() + 30
        line = f"client {client_id!r} (instance"
        while line not in broker.stderr_text() and time.monotonic() < deadline:
            producer.produce(topic, b"v")
            producer.poll(0.2)
        assert line in broker.stderr_text()
        assert producer.flush(15) == 0
    finally:
        producer.flush(5)
    # Removing the subscription's configs removes it.
    admin.reset_configs([ConfigResource(ConfigResourceType.CLIENT_METRICS, sub,
                                        configs={"metrics": None, "interval.ms": None,
                                                 "match": None})],
                        raise_on_unknown=False)
    assert sub not in admin.list_config_resources(["CLIENT_METRICS"]).get("client_metrics", [])


def test_bad_subscription_config(broker: Any, admin: KafkaAdminClient) -> None:
    """An interval out of range or an unknown selector: INVALID_CONFIG, nothing stored."""
    for configs in ({"interval.ms": "5"}, {"match": "color=red"}, {"colour": "x"}):
        result = _subscribe(admin, unique("p42-badsub"), configs)
        assert "InvalidConfigurationError" in str(result)


def test_push_errors_as_kafka(broker: Any) -> None:
    g, p = _module(GET_SUBSCRIPTIONS), _module(PUSH)
    with WireClient.to(broker.bootstrap) as wire:
        sub = wire.request(g.GetTelemetrySubscriptionsRequest(client_instance_id=None))
        assert sub.error_code == ErrorCode.none and sub.client_instance_id is not None
        assert sub.accepted_compression_types == ()
        assert sub.requested_metrics == ()  # no subscription matches this client

        def push(instance: uuid.UUID | None, sub_id: int, compression: int = 0,
                 metrics: bytes = b"otlp", terminating: bool = False) -> ErrorCode:
            return wire.request(p.PushTelemetryRequest(
                client_instance_id=instance, subscription_id=sub_id, terminating=terminating,
                compression_type=compression, metrics=metrics)).error_code

        me = sub.client_instance_id
        assert push(None, sub.subscription_id) == ErrorCode.invalid_request
        assert push(me, sub.subscription_id + 1) == ErrorCode.unknown_subscription_id
        assert push(me, sub.subscription_id, compression=4) == \
            ErrorCode.unsupported_compression_type
        assert push(me, sub.subscription_id, metrics=b"x" * (1024 * 1024 + 1)) == \
            ErrorCode.telemetry_too_large
        assert push(me, sub.subscription_id) == ErrorCode.none
        # Again before the push interval: throttled; a terminating push is always taken once.
        assert push(me, sub.subscription_id) == ErrorCode.throttling_quota_exceeded
        assert push(me, sub.subscription_id, terminating=True) == ErrorCode.none
        assert push(me, sub.subscription_id, terminating=True) == ErrorCode.invalid_request
