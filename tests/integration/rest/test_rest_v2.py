"""v2 API of the REST Proxy against a real broker: metadata, produce, consumer instances."""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import httpx
from confluent_kafka.admin import AdminClient
from kafka.partitioner.default import murmur2

from tests.helpers.rest_proxy import RestProxyProcess

from .conftest import create_topic, read_back

V2 = "application/vnd.kafka.v2+json"
JSON_V2 = "application/vnd.kafka.json.v2+json"
BINARY_V2 = "application/vnd.kafka.binary.v2+json"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_topic_partition_and_broker_metadata(rest: httpx.Client, broker: Any,
                                             topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, partitions=2)
    assert topic_name in rest.get("/topics").json()
    topic = rest.get(f"/topics/{topic_name}").json()
    assert topic["name"] == topic_name
    assert topic["configs"]["cleanup.policy"] == "delete"
    assert [p["partition"] for p in topic["partitions"]] == [0, 1]
    replica = topic["partitions"][0]["replicas"][0]
    assert replica["leader"] is True and replica["in_sync"] is True
    assert rest.get(f"/topics/{topic_name}/partitions").json() == topic["partitions"]
    assert rest.get(f"/topics/{topic_name}/partitions/1").json()["partition"] == 1
    offsets = rest.get(f"/topics/{topic_name}/partitions/0/offsets").json()
    assert offsets == {"beginning_offset": 0, "end_offset": 0}
    brokers = rest.get("/brokers").json()["brokers"]
    assert len(brokers) == 1


def test_produce_binary_and_read_back(rest: httpx.Client, broker: Any, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name)
    records = [{"key": b64(b"k%d" % i), "value": b64(b"\x00binary\xff%d" % i)} for i in range(5)]
    answer = rest.post(f"/topics/{topic_name}", json={"records": records},
                       headers={"Content-Type": BINARY_V2})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["key_schema_id"] is None and body["value_schema_id"] is None
    assert [o["offset"] for o in body["offsets"]] == [0, 1, 2, 3, 4]
    assert all(o["error_code"] is None and o["partition"] == 0 for o in body["offsets"])
    messages = read_back(broker.bootstrap, topic_name, 5)
    assert [(m.key(), m.value()) for m in messages] == [
        (b"k%d" % i, b"\x00binary\xff%d" % i) for i in range(5)]


def test_produce_json_to_topic_and_partition(rest: httpx.Client, broker: Any,
                                             topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, partitions=3)
    answer = rest.post(f"/topics/{topic_name}/partitions/2", headers={"Content-Type": JSON_V2},
                       json={"records": [{"key": "order-1", "value": {"amount": 12.5}},
                                         {"value": [1, "two", None]}]})
    assert answer.status_code == 200, answer.text
    assert [(o["partition"], o["offset"]) for o in answer.json()["offsets"]] == [(2, 0), (2, 1)]
    answer = rest.post(f"/topics/{topic_name}", headers={"Content-Type": JSON_V2},
                       json={"records": [{"value": {"n": 1}, "partition": 0}]})
    assert answer.json()["offsets"][0]["partition"] == 0
    messages = read_back(broker.bootstrap, topic_name, 3, partitions=3)
    assert [json.loads(m.value()) for m in messages] == [{"n": 1}, {"amount": 12.5},
                                                        [1, "two", None]]
    assert messages[1].key() == b'"order-1"'


def _poll_until(rest: httpx.Client, base: str, fmt: str, count: int) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    deadline = time.monotonic() + 30
    while len(records) < count and time.monotonic() < deadline:
        answer = rest.get(f"{base}/records", params={"timeout": 1000},
                          headers={"Accept": f"application/vnd.kafka.{fmt}.v2+json"})
        assert answer.status_code == 200, answer.text
        records += answer.json()
    assert len(records) == count, records
    return records


def test_consumer_instance_whole_life(rest: httpx.Client, broker: Any, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name)
    rest.post(f"/topics/{topic_name}", headers={"Content-Type": JSON_V2},
              json={"records": [{"key": i, "value": {"i": i}} for i in range(4)]})
    group = f"group-{topic_name}"
    created = rest.post(f"/consumers/{group}", headers={"Content-Type": V2}, json={
        "name": "life", "format": "json", "auto.offset.reset": "earliest",
        "auto.commit.enable": "false"})
    assert created.status_code == 200, created.text
    base = f"/consumers/{group}/instances/life"
    assert created.json() == {"instance_id": "life",
                              "base_uri": str(rest.base_url).rstrip("/") + base}
    again = rest.post(f"/consumers/{group}", headers={"Content-Type": V2}, json={"name": "life"})
    assert again.status_code == 409 and again.json()["error_code"] == 40902

    subscribed = rest.post(f"{base}/subscription", headers={"Content-Type": V2},
                           json={"topics": [topic_name]})
    assert subscribed.status_code == 204
    assert rest.get(f"{base}/subscription").json() == {"topics": [topic_name]}
    records = _poll_until(rest, base, "json", 4)
    assert [(r["key"], r["value"], r["offset"]) for r in records] == [
        (i, {"i": i}, i) for i in range(4)]
    assert rest.get(f"{base}/assignments").json() == {
        "partitions": [{"topic": topic_name, "partition": 0}]}

    committed = rest.post(f"{base}/offsets", headers={"Content-Type": V2},
                          json={"offsets": [{"topic": topic_name, "partition": 0, "offset": 3}]})
    assert committed.status_code == 200
    fetched = rest.request("GET", f"{base}/offsets", headers={"Content-Type": V2},
                           json={"partitions": [{"topic": topic_name, "partition": 0}]})
    assert fetched.json()["offsets"] == [
        {"topic": topic_name, "partition": 0, "offset": 3, "metadata": ""}]

    to_start = rest.post(f"{base}/positions/beginning", headers={"Content-Type": V2},
                         json={"partitions": [{"topic": topic_name, "partition": 0}]})
    assert to_start.status_code == 204
    assert [r["offset"] for r in _poll_until(rest, base, "json", 4)] == [0, 1, 2, 3]
    to_two = rest.post(f"{base}/positions", headers={"Content-Type": V2},
                       json={"offsets": [{"topic": topic_name, "partition": 0, "offset": 2}]})
    assert to_two.status_code == 204
    assert [r["offset"] for r in _poll_until(rest, base, "json", 2)] == [2, 3]
    to_end = rest.post(f"{base}/positions/end", headers={"Content-Type": V2},
                       json={"partitions": [{"topic": topic_name, "partition": 0}]})
    assert to_end.status_code == 204
    assert rest.get(f"{base}/records", params={"timeout": 300},
                    headers={"Accept": JSON_V2}).json() == []
    # The whole fetched range committed by an empty commit (the consumer's positions).
    assert rest.post(f"{base}/offsets", headers={"Content-Type": V2}).status_code == 200

    assert rest.delete(f"{base}/subscription").status_code == 204
    assert rest.get(f"{base}/subscription").json() == {"topics": []}
    assert rest.delete(base).status_code == 204
    gone = rest.get(f"{base}/subscription")
    assert gone.status_code == 404 and gone.json()["error_code"] == 40403


def test_binary_consumer_with_manual_assignment(rest: httpx.Client, broker: Any,
                                                topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, partitions=2)
    rest.post(f"/topics/{topic_name}/partitions/1", headers={"Content-Type": BINARY_V2},
              json={"records": [{"value": b64(b"one")}, {"value": b64(b"two")}]})
    group = f"group-{topic_name}"
    base = f"/consumers/{group}/instances/manual"
    rest.post(f"/consumers/{group}", headers={"Content-Type": V2},
              json={"name": "manual", "format": "binary", "auto.offset.reset": "earliest"})
    assigned = rest.post(f"{base}/assignments", headers={"Content-Type": V2},
                         json={"partitions": [{"topic": topic_name, "partition": 1}]})
    assert assigned.status_code == 204
    assert rest.get(f"{base}/assignments").json()["partitions"] == [
        {"topic": topic_name, "partition": 1}]
    conflict = rest.post(f"{base}/subscription", headers={"Content-Type": V2},
                         json={"topics": [topic_name]})
    assert conflict.status_code == 409 and conflict.json()["error_code"] == 40903
    seek = rest.post(f"{base}/positions", headers={"Content-Type": V2},
                     json={"offsets": [{"topic": topic_name, "partition": 1, "offset": 1}]})
    assert seek.status_code == 204, seek.text
    records = _poll_until(rest, base, "binary", 1)
    assert records[0]["value"] == b64(b"two") and records[0]["partition"] == 1
    assert rest.delete(base).status_code == 204


def test_idle_consumer_instance_expires_and_leaves_its_group(
        broker: Any, tmp_path: Any, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name)
    proxy = RestProxyProcess(tmp_path, broker.bootstrap,
                             "--consumer-instance-timeout-ms", "2000").start()
    group = f"group-{topic_name}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})

    def members() -> int:
        (future,) = admin.describe_consumer_groups([group]).values()
        return len(future.result(timeout=10).members)

    try:
        with httpx.Client(base_url=proxy.url, timeout=30) as rest:
            base = f"/consumers/{group}/instances/idle"
            rest.post(f"/consumers/{group}", headers={"Content-Type": V2},
                      json={"name": "idle", "auto.offset.reset": "earliest"})
            rest.post(f"{base}/subscription", headers={"Content-Type": V2},
                      json={"topics": [topic_name]})
            deadline = time.monotonic() + 20
            while members() == 0 and time.monotonic() < deadline:
                rest.get(f"{base}/records", params={"timeout": 200},
                         headers={"Accept": BINARY_V2})
            assert members() == 1
            deadline = time.monotonic() + 20
            while members() and time.monotonic() < deadline:
                time.sleep(0.2)
            assert members() == 0, "the expired instance is still a member of its group"
            gone = rest.get(f"{base}/subscription")
            assert gone.status_code == 404 and gone.json()["error_code"] == 40403
            assert "expired" in proxy.log_text()
    finally:
        proxy.stop()


def test_keyed_records_are_partitioned_as_java_clients_do(rest: httpx.Client, broker: Any,
                                                          topic_name: str) -> None:
    """murmur2 of the key, as Kafka's Java producer (and Confluent's proxy) partition."""
    create_topic(broker.bootstrap, topic_name, partitions=4)
    keys = [f"user-{i}".encode() for i in range(20)]
    answer = rest.post(f"/topics/{topic_name}", headers={"Content-Type": BINARY_V2},
                       json={"records": [{"key": b64(k), "value": b64(b"x")} for k in keys]})
    partitions = [o["partition"] for o in answer.json()["offsets"]]
    assert partitions == [(murmur2(k) & 0x7FFFFFFF) % 4 for k in keys]
    assert len(set(partitions)) > 1


def test_unkeyed_requests_go_to_one_partition_each_in_turn(rest: httpx.Client, broker: Any,
                                                          topic_name: str) -> None:
    """Each request's unkeyed records land on one partition, in request order; successive
    requests go to the next partition (the proxy's one-call produce path)."""
    create_topic(broker.bootstrap, topic_name, partitions=3)
    answers = []
    for request in range(3):
        answer = rest.post(f"/topics/{topic_name}", headers={"Content-Type": JSON_V2},
                           json={"records": [{"value": [request, i]} for i in range(50)]})
        assert answer.status_code == 200, answer.text
        answers.append(answer.json()["offsets"])
    for offsets in answers:
        assert len({o["partition"] for o in offsets}) == 1
        assert [o["offset"] for o in offsets] == list(range(50))
        assert all(o["error_code"] is None for o in offsets)
    assert sorted(offsets[0]["partition"] for offsets in answers) == [0, 1, 2]
    messages = read_back(broker.bootstrap, topic_name, 150, partitions=3)
    by_partition: dict[int, list[Any]] = {}
    for message in messages:
        by_partition.setdefault(message.partition(), []).append(json.loads(message.value()))
    for offsets in answers:
        request = by_partition[offsets[0]["partition"]][0][0]
        assert by_partition[offsets[0]["partition"]] == [[request, i] for i in range(50)]


def test_records_over_max_bytes_wait_for_the_next_poll(rest: httpx.Client, broker: Any,
                                                       topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name)
    rest.post(f"/topics/{topic_name}", headers={"Content-Type": BINARY_V2},
              json={"records": [{"value": b64(bytes([i]) * 100)} for i in range(5)]})
    group = f"group-{topic_name}"
    base = f"/consumers/{group}/instances/small"
    rest.post(f"/consumers/{group}", headers={"Content-Type": V2},
              json={"name": "small", "auto.offset.reset": "earliest"})
    rest.post(f"{base}/assignments", headers={"Content-Type": V2},
              json={"partitions": [{"topic": topic_name, "partition": 0}]})
    polls: list[list[int]] = []
    deadline = time.monotonic() + 30
    while sum(len(p) for p in polls) < 5 and time.monotonic() < deadline:
        answer = rest.get(f"{base}/records", params={"timeout": 1000, "max_bytes": 250},
                          headers={"Accept": BINARY_V2})
        offsets = [r["offset"] for r in answer.json()]
        if offsets:
            polls.append(offsets)
    assert [o for p in polls for o in p] == [0, 1, 2, 3, 4]
    assert max(len(p) for p in polls) <= 2
    assert rest.delete(base).status_code == 204
