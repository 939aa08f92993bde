"""Registry processes and ``_schemas``: a restart re-reads the topic, two processes are one
registry (writes through either land on the elected primary), and the primary's death
hands the role to the other."""

from __future__ import annotations

import json
import secrets
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.helpers import free_port, one_line_error, run_moldau
from tests.helpers.registry_process import RegistryProcess

SCHEMA = json.dumps({"type": "record", "name": "Event", "namespace": "proc",
                     "fields": [{"name": "id", "type": "long"}]})
SCHEMA_V2 = json.dumps({"type": "record", "name": "Event", "namespace": "proc",
                        "fields": [{"name": "id", "type": "long"},
                                   {"name": "note", "type": ["null", "string"],
                                    "default": None}]})


def _pair(broker: Any, tmp_path: Path, count: int) -> list[RegistryProcess]:
    token = secrets.token_hex(4)
    return [RegistryProcess(broker.bootstrap, tmp_path, topic=f"_schemas-proc-{token}",
                            group_id=f"registry-proc-{token}") for _ in range(count)]


def test_restart_rereads_schemas_topic(broker: Any, tmp_path: Path) -> None:
    (registry,) = _pair(broker, tmp_path, 1)
    registry.start()
    try:
        first = httpx.post(f"{registry.url}/subjects/s1/versions", json={"schema": SCHEMA})
        httpx.put(f"{registry.url}/config/s1", json={"compatibility": "FULL"})
        httpx.post(f"{registry.url}/subjects/s1/versions", json={"schema": SCHEMA_V2})
        httpx.delete(f"{registry.url}/subjects/s1/versions/1")
    finally:
        registry.stop()
    schema_id = first.json()["id"]
    registry.start()
    try:
        assert httpx.get(f"{registry.url}/subjects/s1/versions").json() == [2]
        assert httpx.get(f"{registry.url}/subjects/s1/versions?deleted=true").json() == [1, 2]
        assert httpx.get(f"{registry.url}/config/s1").json() == {"compatibilityLevel": "FULL"}
        assert json.loads(httpx.get(f"{registry.url}/schemas/ids/{schema_id}").json()["schema"]) \
            == json.loads(SCHEMA)
        # Ids continue after the ones already given.
        third = httpx.post(f"{registry.url}/subjects/s2/versions",
                           json={"schema": json.dumps({"type": "string"})}).json()["id"]
        assert third > schema_id
    finally:
        registry.stop()

    # The topic is Confluent's format: JSON keys and values, compacted.
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "inspect",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(registry.topic, 0, 0)])
    keys = []
    try:
        _low, end = consumer.get_watermark_offsets(TopicPartition(registry.topic, 0), 10)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and len(keys) < end:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                keys.append(json.loads(message.key()))
    finally:
        consumer.close()
    assert {"keytype": "SCHEMA", "subject": "s1", "version": 1, "magic": 1} in keys
    assert {"keytype": "CONFIG", "subject": "s1", "magic": 0} in keys


def test_two_processes_agree_and_fail_over(broker: Any, tmp_path: Path) -> None:
    one, two = _pair(broker, tmp_path, 2)
    one.start()
    two.start()
    try:
        ids = {}
        # Writes through either process: one of them forwards to the primary.
        for index, process in enumerate((one, two)):
            answer = httpx.post(f"{process.url}/subjects/both-{index}/versions",
                                json={"schema": json.dumps({"type": "enum", "name": f"E{index}",
                                                            "symbols": ["A"]})}, timeout=30)
            assert answer.status_code == 200, answer.text
            ids[index] = answer.json()["id"]
        assert len(set(ids.values())) == 2
        for process in (one, two):
            assert httpx.get(f"{process.url}/subjects").json() == ["both-0", "both-1"]
            for index, schema_id in ids.items():
                got = httpx.get(f"{process.url}/subjects/both-{index}/versions/1").json()
                assert got["id"] == schema_id
        # Errors come back through the forwarding unchanged.
        for process in (one, two):
            refused = httpx.delete(f"{process.url}/subjects/both-0?permanent=true")
            assert refused.status_code == 404 and refused.json()["error_code"] == 40405
        one.stop()
        # The other process becomes the primary (group rebalance) and takes writes.
        deadline = time.monotonic() + 40
        status = None
        while time.monotonic() < deadline:
            answer = httpx.post(f"{two.url}/subjects/after/versions",
                                json={"schema": SCHEMA}, timeout=30)
            status = answer.status_code
            if status == 200:
                assert answer.json()["id"] not in ids.values()
                break
            time.sleep(0.5)
        assert status == 200
    finally:
        one.stop()
        two.stop()


def test_primary_killed_hands_over(broker: Any, tmp_path: Path) -> None:
    """kill -9 of the primary: the other process takes over after the group's session
    timeout (6 s) and keeps the ids going, with nothing written before lost."""
    one, two = _pair(broker, tmp_path, 2)
    one.start()
    two.start()
    try:
        first = httpx.post(f"{two.url}/subjects/k/versions", json={"schema": SCHEMA},
                           timeout=30).json()["id"]
        primary, other = (one, two) if one.is_primary() else (two, one)
        assert primary.is_primary() and not other.is_primary()
        primary.kill9()
        deadline = time.monotonic() + 45
        answer = None
        while time.monotonic() < deadline:
            answer = httpx.post(f"{other.url}/subjects/k2/versions",
                                json={"schema": SCHEMA_V2}, timeout=30)
            if answer.status_code == 200:
                break
            # Until the session times out, writes are forwarded to the dead primary.
            assert answer.json()["error_code"] == 50003, answer.text
            time.sleep(0.5)
        assert answer is not None and answer.status_code == 200, answer and answer.text
        assert answer.json()["id"] > first
        assert other.is_primary()
        assert httpx.get(f"{other.url}/subjects/k/versions/1").json()["id"] == first
    finally:
        one.stop()
        two.stop()


@pytest.mark.parametrize("listen", ["nope", "127.0.0.1:99999"])
def test_bad_listen_is_one_line(listen: str, broker: Any) -> None:
    result = run_moldau("registry", "-b", broker.bootstrap, "--listen", listen)
    assert result.returncode == 1
    one_line_error(result, "invalid --listen")


def test_port_taken_is_one_line(broker: Any) -> None:
    result = run_moldau("registry", "-b", broker.bootstrap, "--listen", broker.bootstrap)
    one_line_error(result, "cannot listen on", "in use")


def test_unreachable_broker_is_one_line() -> None:
    result = run_moldau("registry", "-b", f"127.0.0.1:{free_port()}", "--timeout", "1")
    one_line_error(result, "cannot reach a broker")
