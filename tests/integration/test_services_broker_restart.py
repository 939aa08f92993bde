"""The Schema Registry and the REST Proxy while their broker is stopped and started again.

While the broker is away, requests that need it are answered in bounded time with
Confluent's 5xx error bodies (the registry's 5000x codes, the proxy's 50003 "retriable
Kafka error"), reads the registry serves from memory keep working, and both services
serve again once the broker is back, without being restarted themselves.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.helpers.registry_process import RegistryProcess
from tests.helpers.rest_proxy import RestProxyProcess

JSON_V2 = {"content-type": "application/vnd.kafka.json.v2+json"}
REGISTRY = {"content-type": "application/vnd.schemaregistry.v1+json"}


def schema(name: str) -> str:
    return json.dumps({"type": "record", "name": name,
                       "fields": [{"name": "a", "type": "int"}]})


def eventually(call: Callable[[], httpx.Response], seconds: float = 60.0) -> httpx.Response:
    """The first 200 answer of ``call``, tried until ``seconds`` have passed."""
    deadline = time.monotonic() + seconds
    answer = None
    while time.monotonic() < deadline:
        try:
            answer = call()
            if answer.status_code == 200:
                return answer
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"no 200 within {seconds} s; last answer: "
                         f"{answer.text if answer is not None else None}")


def assert_confluent_5xx(answer: httpx.Response, codes: tuple[int, ...]) -> None:
    assert answer.status_code == 500, answer.text
    body = answer.json()
    assert body["error_code"] in codes, body
    assert isinstance(body["message"], str) and body["message"]


# About 17 s of broker restarts; in `make test-long-faults`.
@pytest.mark.long_faults
@pytest.mark.timeout(240)
def test_registry_and_proxy_across_a_broker_restart(make_broker: Any, tmp_path: Path) -> None:
    broker = make_broker()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("orders", 1, 1)])["orders"].result(30)
    registry = RegistryProcess(broker.bootstrap, tmp_path / "registry", topic="_schemas",
                               group_id="registry-restart").start()
    proxy = RestProxyProcess(tmp_path / "rest", broker.bootstrap,
                             "--request-timeout-ms", "3000").start()
    try:
        with httpx.Client(base_url=registry.url, headers=REGISTRY, timeout=60) as reg, \
                httpx.Client(base_url=proxy.url, timeout=60) as rest:
            before = reg.post("/subjects/s-before/versions", json={"schema": schema("A")})
            assert before.status_code == 200, before.text
            produced = rest.post("/topics/orders", content=b'{"records":[{"value":1}]}',
                                 headers=JSON_V2)
            assert produced.status_code == 200, produced.text

            broker.stop()

            # The registry: writes need the broker (Confluent's store errors, 5000x);
            # reads are served from memory.
            started = time.monotonic()
            assert_confluent_5xx(reg.post("/subjects/s-away/versions",
                                          json={"schema": schema("B")}), (50001, 50002, 50003))
            assert time.monotonic() - started < 30
            assert reg.get("/subjects").json() == ["s-before"]
            assert reg.get("/schemas/ids/1").status_code == 200

            # The proxy: metadata and produce are answered within --request-timeout-ms.
            started = time.monotonic()
            assert_confluent_5xx(rest.get("/topics"), (50003,))
            assert time.monotonic() - started < 15
            started = time.monotonic()
            away = rest.post("/topics/orders", content=b'{"records":[{"value":2}]}',
                             headers=JSON_V2)
            assert time.monotonic() - started < 15
            if away.status_code == 200:  # metadata was cached: the record itself failed
                (offset,) = away.json()["offsets"]
                assert offset["error_code"] == 50003 and offset["offset"] is None, offset
                assert "timed out" in offset["error"]
            else:
                assert_confluent_5xx(away, (50003,))

            broker.start()

            eventually(lambda: reg.post("/subjects/s-after/versions",
                                        json={"schema": schema("C")}))
            assert sorted(reg.get("/subjects").json()) == ["s-after", "s-before"]
            back = eventually(lambda: rest.post(
                "/topics/orders", content=b'{"records":[{"value":3}]}', headers=JSON_V2))
            (offset,) = back.json()["offsets"]
            assert offset["error_code"] is None and offset["offset"] >= 1
            assert eventually(lambda: rest.get("/topics")).json().count("orders") == 1
        assert registry.is_running() and proxy.is_running()
    finally:
        proxy.stop()
        registry.stop()
