"""A request whose handling fails unexpectedly is answered with UNKNOWN_SERVER_ERROR, as
Kafka does, and the connection carries on; the broker logs one line (API, version, client,
peer) and keeps the traceback for DEBUG.

The failure is a real one: a ``broker.rack`` longer than 32,767 bytes (Kafka accepts any
value) fits DescribeConfigs v4 (compact strings) but not the int16-length strings of
DescribeConfigs v1-v3, so encoding that answer fails. Before, the broker logged a traceback
and closed the connection; now the resource asked for comes back with UNKNOWN_SERVER_ERROR.
"""

from __future__ import annotations

import pytest

from moldau.protocol import codec

from .wire import WireClient

pytestmark = pytest.mark.timeout(60)

UNKNOWN_SERVER_ERROR = -1
BROKER = 4  # ConfigResource type
RACK = "rack-" + "r" * 40_000


def _describe_broker(version: int) -> object:
    mod = codec.request_module(32, version)
    return mod.DescribeConfigsRequest(resources=(mod.DescribeConfigsResource(
        resource_type=BROKER, resource_name="1", configuration_keys=("broker.rack",)),))


def test_failing_request_answers_unknown_server_error(make_broker) -> None:
    broker = make_broker(f"broker.rack={RACK}", "node.id=1")
    with WireClient.to(broker.bootstrap) as wire:
        resp = wire.request(_describe_broker(1))
        assert [(r.resource_name, int(r.error_code), r.configs) for r in resp.results] == [
            ("1", UNKNOWN_SERVER_ERROR, ())]
        # The same connection goes on serving; a version that can carry the value has it.
        resp = wire.request(_describe_broker(4))
        assert int(resp.results[0].error_code) == 0
        assert [(c.name, c.value) for c in resp.results[0].configs] == [("broker.rack", RACK)]
    assert broker.is_running()
    log = broker.stderr_text()
    lines = [ln for ln in log.splitlines() if "DescribeConfigs v1 " in ln]
    assert len(lines) == 1, lines
    assert "client 'moldau-tests'" in lines[0] and "127.0.0.1" in lines[0]
    assert "UNKNOWN_SERVER_ERROR" in lines[0]
    assert "Traceback" not in log
