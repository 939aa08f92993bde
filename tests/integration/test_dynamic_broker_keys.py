"""Per-broker dynamic keys Kafka accepts (TLS/SASL per listener, connection limits, thread
counts), stored before they have an effect, with Kafka's rules and secrets kept secret."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)
from kio.schema.describe_configs.v4 import request as describe
from kio.schema.errors import ErrorCode
from kio.schema.incremental_alter_configs.v1 import request as incremental
from kio.static.primitive import i8

from .wire import WireClient

pytestmark = pytest.mark.timeout(90)

TIMEOUT = 15
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'username="admin" password="admin-secret";')
PER_BROKER = {
    "listener.name.external.ssl.keystore.location": "/etc/moldau/external.jks",
    "listener.name.external.ssl.keystore.password": "keystore-secret",
    "listener.name.external.ssl.key.password": "key-secret",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
    "max.connections": "1000",
    "max.connections.per.ip": "50",
    "max.connections.per.ip.overrides": "127.0.0.1:100",
    "log.cleaner.threads": "2",
    "num.io.threads": "4",
    "message.max.bytes": "2000000",
}
SECRETS = {"listener.name.external.ssl.keystore.password",
           "listener.name.external.ssl.key.password",
           "listener.name.sasl_plaintext.plain.sasl.jaas.config"}


def alter(admin: AdminClient, name: str, configs: dict[str, str]) -> Any:
    resource = ConfigResource(ResourceType.BROKER, name, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
        for k, v in configs.items()])
    return admin.incremental_alter_configs([resource])[resource]


def refused(admin: AdminClient, name: str, configs: dict[str, str]) -> str:
    with pytest.raises(KafkaException) as info:
        alter(admin, name, configs).result(TIMEOUT)
    err = info.value.args[0]
    assert err.code() == KafkaError.INVALID_REQUEST
    message: str = err.str()
    return message


def alter_default(bootstrap: str, configs: dict[str, str]) -> tuple[ErrorCode, str | None]:
    """IncrementalAlterConfigs SET on the cluster default resource "", which librdkafka's
    AdminClient cannot name; returns the resource's error code and message."""
    request = incremental.IncrementalAlterConfigsRequest(validate_only=False, resources=(
        incremental.AlterConfigsResource(resource_type=i8(4), resource_name="", configs=tuple(
            incremental.AlterableConfig(name=k, config_operation=i8(0), value=v)
            for k, v in configs.items())),))
    with WireClient.to(bootstrap) as wire:
        [result] = wire.request(request).responses
    return result.error_code, result.error_message


def described_default(bootstrap: str) -> dict[str, Any]:
    request = describe.DescribeConfigsRequest(
        include_synonyms=False, include_documentation=False,
        resources=(describe.DescribeConfigsResource(
            resource_type=i8(4), resource_name="", configuration_keys=None),))
    with WireClient.to(bootstrap) as wire:
        [result] = wire.request(request).results
    return {c.name: c for c in result.configs}


def described(admin: AdminClient, name: str) -> dict[str, Any]:
    resource = ConfigResource(ResourceType.BROKER, name)
    result: dict[str, Any] = admin.describe_configs([resource])[resource].result(TIMEOUT)
    return result


def check_stored(admin: AdminClient, node: str) -> None:
    configs = described(admin, node)
    for key, value in PER_BROKER.items():
        entry = configs[key]
        assert entry.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value, key
        if key in SECRETS:
            assert entry.is_sensitive and entry.value is None, key
        else:
            assert not entry.is_sensitive and entry.value == value, key


def test_per_broker_keys_stored_described_and_kept(make_broker: Any) -> None:
    broker = make_broker()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    node = str(admin.describe_cluster().result(TIMEOUT).controller.id)
    alter(admin, node, PER_BROKER).result(TIMEOUT)
    check_stored(admin, node)
    # A bare password key is described as Kafka does: type PASSWORD, never its value.
    bare = described(admin, node)["ssl.keystore.password"]
    assert bare.is_sensitive and bare.value is None and not bare.is_read_only

    broker.restart()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    check_stored(admin, node)


def test_kafka_rules_for_security_keys(make_broker: Any) -> None:
    broker = make_broker()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    node = str(admin.describe_cluster().result(TIMEOUT).controller.id)
    # Key stores change only per listener.
    assert refused(admin, node, {"ssl.keystore.location": "/x.jks"}) == (
        "These security configs can be dynamically updated only per-listener using the "
        "listener prefix: Set(ssl.keystore.location)")
    # Per-broker keys are refused on the cluster default resource...
    assert alter_default(broker.bootstrap, {
        "listener.name.external.ssl.keystore.location": "/x.jks"}) == (
        ErrorCode.invalid_request,
        "Cannot update these configs at default cluster level, broker id must be specified: "
        "Set(listener.name.external.ssl.keystore.location)")
    code, message = alter_default(broker.bootstrap, {"sasl.enabled.mechanisms": "PLAIN"})
    assert code == ErrorCode.invalid_request and "sasl.enabled.mechanisms" in str(message)
    # ...the connection limits Kafka keeps cluster-wide are not.
    assert alter_default(broker.bootstrap, {
        "max.connections": "500", "listener.name.external.max.connections": "200",
    }) == (ErrorCode.none, None)
    defaults = described_default(broker.bootstrap)
    assert defaults["listener.name.external.max.connections"].value == "200"
    assert defaults["max.connections"].config_source == (
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
    # Listener keys are validated with the type of their base key.
    message = refused(admin, node, {"listener.name.external.sasl.login.refresh.window.factor":
                                    "soon"})
    assert "sasl.login.refresh.window.factor" in message
    # A listener prefix does not make any key dynamic.
    assert "listener.name.external.log.dirs" in refused(
        admin, node, {"listener.name.external.log.dirs": "/elsewhere"})
    # Nothing of the refused requests was stored.
    configs = described(admin, node)
    assert "listener.name.external.ssl.keystore.location" not in configs
    assert configs["ssl.keystore.location"].value is None
