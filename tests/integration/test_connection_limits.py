"""Connection limits as Kafka applies them: idle expiry, per-address and broker-wide maxima.

Real sockets against brokers started with the configs under test.
"""

from __future__ import annotations

import socket
import time

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest

from tests.helpers import BrokerProcess, BrokerStartError

from .wire import WireClient

pytestmark = pytest.mark.timeout(90)


def api_versions() -> ApiVersionsRequest:
    return ApiVersionsRequest(client_software_name="moldau-tests", client_software_version="1")


def answered(client: WireClient) -> bool:
    return client.request(api_versions()).error_code == 0


def rejected_lines(b: BrokerProcess) -> list[str]:
    return [line for line in b.stderr_text().splitlines() if "Rejected connection from" in line]


def test_idle_connections_are_closed(make_broker) -> None:
    b = make_broker("connections.max.idle.ms=1000")
    with WireClient(b.host, b.port) as idle, WireClient(b.host, b.port) as busy:
        assert answered(idle)
        start = time.monotonic()
        # A connection that keeps sending requests is never idle.
        while time.monotonic() - start < 3.0:
            assert answered(busy)
            time.sleep(0.2)
        assert idle.wait_closed(timeout=10)
        assert time.monotonic() - start >= 0.9
        assert answered(busy)


def test_a_request_being_handled_is_not_idle(make_broker, topic_name) -> None:
    """A long-poll fetch that waits longer than connections.max.idle.ms keeps its connection."""
    from .test_bad_input import create_topics, fetch

    b = make_broker("connections.max.idle.ms=500")
    with WireClient(b.host, b.port) as client:
        assert client.request(create_topics(topic_name)).topics[0].error_code == 0
        started = time.monotonic()
        response = client.request(fetch(topic_name, 0, max_wait_ms=1500))
        assert time.monotonic() - started >= 1.0
        assert response.responses[0].partitions[0].error_code == 0


def test_max_connections_per_ip(make_broker) -> None:
    b = make_broker("max.connections.per.ip=2")
    with WireClient(b.host, b.port) as first, WireClient(b.host, b.port) as second:
        assert answered(first) and answered(second)
        with WireClient(b.host, b.port) as third:
            assert third.wait_closed(timeout=5)
        assert answered(first) and answered(second)
    assert any("address already has the configured maximum of 2 connections" in line
               for line in rejected_lines(b))
    time.sleep(0.3)  # the broker sees the two closes
    with WireClient(b.host, b.port) as again:
        assert answered(again)


def test_max_connections_per_ip_overrides(make_broker) -> None:
    b = make_broker("max.connections.per.ip=0",
                    "max.connections.per.ip.overrides=10.255.255.1:7, 127.0.0.1:3")
    clients = [WireClient(b.host, b.port) for _ in range(3)]
    try:
        assert all(answered(c) for c in clients)
        with WireClient(b.host, b.port) as fourth:
            assert fourth.wait_closed(timeout=5)
    finally:
        for c in clients:
            c.close()
    assert len(rejected_lines(b)) == 1


def test_max_connections_stops_accepting_until_one_closes(make_broker) -> None:
    b = make_broker("max.connections=3")
    time.sleep(0.3)  # the start-up probe connection has closed
    clients = [WireClient(b.host, b.port) for _ in range(3)]
    try:
        assert all(answered(c) for c in clients)
        # The kernel completes the handshake, but the broker does not accept: no answer.
        waiting = WireClient(b.host, b.port, timeout=1.5)
        correlation = waiting.send_request(api_versions())
        with pytest.raises(TimeoutError):
            waiting.read_frame()
        clients.pop().close()
        waiting.sock.settimeout(10)
        assert waiting.read_response(18, 3, correlation).error_code == 0
        waiting.close()
        assert all(answered(c) for c in clients)
    finally:
        for c in clients:
            c.close()
    assert "max.connections (3) reached" in b.stderr_text()


@pytest.mark.parametrize(("overrides", "message"), [
    (("max.connections.per.ip=0",),
     "max.connections.per.ip can be set to zero only if max.connections.per.ip.overrides "
     "property is set."),
    (("max.connections.per.ip.overrides=bad#host:3",),
     "max.connections.per.ip.overrides contains invalid addresses : bad#host"),
    (("max.connections.per.ip.overrides=127.0.0.1:many",),
     "Invalid value 127.0.0.1:many for configuration max.connections.per.ip.overrides"),
    (("max.connections=-1",),
     "Invalid value -1 for configuration max.connections: Value must be at least 0"),
    (("socket.request.max.bytes=1048576", "queued.max.request.bytes=1000"),
     "queued.max.request.bytes must be larger or equal to socket.request.max.bytes"),
])
def test_invalid_connection_configs_stop_start_up(make_broker, overrides, message) -> None:
    b = make_broker(*overrides, start=False)
    with pytest.raises(BrokerStartError):
        b.start()
    err = b.stderr_text()
    assert message in err
    assert "Traceback" not in err
    assert len([line for line in err.splitlines() if message in line]) == 1


def test_connections_from_other_addresses_are_not_limited_by_an_override(make_broker) -> None:
    """An override for one address leaves max.connections.per.ip for the others."""
    b = make_broker("max.connections.per.ip=1",
                    "max.connections.per.ip.overrides=127.0.0.1:2")
    with WireClient(b.host, b.port) as first, WireClient(b.host, b.port) as second:
        assert answered(first) and answered(second)
        with WireClient(b.host, b.port) as third:
            assert third.wait_closed(timeout=5)


def test_dynamic_max_connections_per_ip(make_broker) -> None:
    """max.connections.per.ip is a dynamic broker config, as in Kafka."""
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    b = make_broker()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    resource = ConfigResource(ResourceType.BROKER, "0", incremental_configs=[
        ConfigEntry("max.connections.per.ip", "2",
                    incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=15)
    del admin  # its own connection closes
    time.sleep(0.5)
    with WireClient(b.host, b.port) as first, WireClient(b.host, b.port) as second:
        assert answered(first) and answered(second)
        sock = socket.create_connection((b.host, b.port), timeout=5)
        try:
            assert sock.recv(1) == b""  # closed at once
        except ConnectionResetError:
            pass
        finally:
            sock.close()
