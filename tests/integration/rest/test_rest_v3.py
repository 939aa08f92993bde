"""v3 API of the REST Proxy against a real broker: clusters, topics, configs, partitions,
records (single and streaming produce), consumer groups and lag."""

from __future__ import annotations

import base64
import json
import socket
import time
from typing import Any

import httpx
from confluent_kafka import Consumer, TopicPartition

from tests.helpers.rest_proxy import RestProxyProcess

from .conftest import create_topic, read_back


def test_clusters(rest: httpx.Client, cluster_id: str) -> None:
    listed = rest.get("/v3/clusters").json()
    assert listed["kind"] == "KafkaClusterList"
    (cluster,) = listed["data"]
    assert cluster["cluster_id"] == cluster_id and cluster["kind"] == "KafkaCluster"
    assert cluster["topics"]["related"].endswith(f"/v3/clusters/{cluster_id}/topics")
    assert rest.get(f"/v3/clusters/{cluster_id}").json() == cluster
    missing = rest.get("/v3/clusters/no-such-cluster")
    assert missing.status_code == 404 and missing.json()["error_code"] == 404
    brokers = rest.get(f"/v3/clusters/{cluster_id}/brokers").json()["data"]
    assert len(brokers) == 1 and brokers[0]["kind"] == "KafkaBroker"
    one = rest.get(f"/v3/clusters/{cluster_id}/brokers/{brokers[0]['broker_id']}").json()
    assert one == brokers[0]
    assert rest.get(f"/v3/clusters/{cluster_id}/brokers/999").status_code == 404


def test_topic_create_get_list_delete(rest: httpx.Client, cluster_id: str,
                                      topic_name: str) -> None:
    topics = f"/v3/clusters/{cluster_id}/topics"
    created = rest.post(topics, json={"topic_name": topic_name, "partitions_count": 3,
                                      "replication_factor": 1,
                                      "configs": [{"name": "retention.ms", "value": "60000"}]})
    assert created.status_code == 201, created.text
    topic = created.json()
    assert (topic["kind"], topic["topic_name"], topic["partitions_count"],
            topic["replication_factor"], topic["is_internal"]) == (
        "KafkaTopic", topic_name, 3, 1, False)
    assert rest.get(f"{topics}/{topic_name}").json()["partitions_count"] == 3
    assert topic_name in [t["topic_name"] for t in rest.get(topics).json()["data"]]
    again = rest.post(topics, json={"topic_name": topic_name, "partitions_count": 1})
    assert again.status_code == 400 and again.json()["error_code"] == 40002

    partitions = rest.get(f"{topics}/{topic_name}/partitions").json()
    assert [p["partition_id"] for p in partitions["data"]] == [0, 1, 2]
    assert rest.get(f"{topics}/{topic_name}/partitions/2").json()["partition_id"] == 2
    assert rest.get(f"{topics}/{topic_name}/partitions/7").status_code == 404

    assert rest.delete(f"{topics}/{topic_name}").status_code == 204
    gone = rest.get(f"{topics}/{topic_name}")
    assert gone.status_code == 404 and gone.json()["error_code"] == 404
    assert rest.delete(f"{topics}/{topic_name}").status_code == 404


def test_topic_configs(rest: httpx.Client, broker: Any, cluster_id: str,
                       topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name)
    configs = f"/v3/clusters/{cluster_id}/topics/{topic_name}/configs"
    listed = {c["name"]: c for c in rest.get(configs).json()["data"]}
    assert listed["retention.ms"]["is_default"] is True
    assert listed["retention.ms"]["kind"] == "KafkaTopicConfig"

    assert rest.put(f"{configs}/retention.ms", json={"value": "123456"}).status_code == 204
    one = rest.get(f"{configs}/retention.ms").json()
    assert (one["value"], one["is_default"], one["source"]) == (
        "123456", False, "DYNAMIC_TOPIC_CONFIG")

    altered = rest.post(f"{configs}:alter", json={"data": [
        {"name": "retention.ms", "operation": "DELETE"},
        {"name": "cleanup.policy", "value": "compact"}]})
    assert altered.status_code == 204, altered.text
    listed = {c["name"]: c for c in rest.get(configs).json()["data"]}
    assert listed["retention.ms"]["is_default"] is True
    assert listed["cleanup.policy"]["value"] == "compact"

    assert rest.delete(f"{configs}/cleanup.policy").status_code == 204
    assert rest.get(f"{configs}/cleanup.policy").json()["value"] == "delete"
    assert rest.get(f"{configs}/no.such.config").status_code == 404
    bad = rest.put(f"{configs}/retention.ms", json={"value": "not-a-number"})
    assert bad.status_code == 400 and bad.json()["error_code"] == 400


def test_produce_records_binary_json_string_with_headers(
        rest: httpx.Client, broker: Any, cluster_id: str, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, partitions=2)
    records = f"/v3/clusters/{cluster_id}/topics/{topic_name}/records"
    answer = rest.post(records, json={
        "partition_id": 1,
        "headers": [{"name": "trace", "value": base64.b64encode(b"abc").decode()}],
        "key": {"type": "STRING", "data": "order-7"},
        "value": {"type": "JSON", "data": {"amount": 3}},
        "timestamp": "2026-01-02T03:04:05.678Z",
    })
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert (body["error_code"], body["cluster_id"], body["topic_name"], body["partition_id"],
            body["offset"]) == (200, cluster_id, topic_name, 1, 0)
    assert body["key"] == {"type": "STRING", "size": 7}
    assert body["value"] == {"type": "JSON", "size": len(b'{"amount":3}')}
    assert body["timestamp"] == "2026-01-02T03:04:05.678Z"
    binary = rest.post(records, json={"partition_id": 1, "value": {
        "type": "BINARY", "data": base64.b64encode(b"\x01\x02").decode()}})
    assert binary.json()["offset"] == 1

    (first, second) = read_back(broker.bootstrap, topic_name, 2, partitions=2)
    assert (first.key(), json.loads(first.value()), first.headers()) == (
        b"order-7", {"amount": 3}, [("trace", b"abc")])
    assert first.timestamp()[1] == 1767323045678
    assert second.value() == b"\x01\x02" and second.key() is None


def test_streaming_produce_answers_each_record(rest: httpx.Client, broker: Any,
                                               cluster_id: str, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name)
    records = f"/v3/clusters/{cluster_id}/topics/{topic_name}/records"
    stream = b"".join(json.dumps(r).encode() + b"\n" for r in [
        {"value": {"type": "JSON", "data": 1}},
        {"value": {"type": "BINARY", "data": "not base64!"}},
        {"value": {"type": "JSON", "data": 2}},
        {"partition_id": 5, "value": {"type": "JSON", "data": 3}},
    ])

    def chunks() -> Any:
        for index in range(0, len(stream), 17):
            yield stream[index:index + 17]

    answer = rest.post(records, content=chunks(), headers={"Content-Type": "application/json"})
    assert answer.status_code == 200, answer.text
    answers = [json.loads(line) for line in answer.text.splitlines()]
    assert [a["error_code"] for a in answers] == [200, 400, 200, 404]
    assert [answers[0]["offset"], answers[2]["offset"]] == [0, 1]
    assert [json.loads(m.value()) for m in read_back(broker.bootstrap, topic_name, 2)] == [1, 2]


def test_consumer_groups_consumers_and_lag(rest: httpx.Client, broker: Any, cluster_id: str,
                                           topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, partitions=2)
    records = f"/v3/clusters/{cluster_id}/topics/{topic_name}/records"
    for partition, count in ((0, 5), (1, 3)):
        for i in range(count):
            rest.post(records, json={"partition_id": partition,
                                     "value": {"type": "JSON", "data": i}})
    group = f"group-{topic_name}"
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                         "client.id": "lag-client", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    try:
        consumer.subscribe([topic_name])
        deadline = time.monotonic() + 30
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.2)
        consumer.commit(offsets=[TopicPartition(topic_name, 0, 1),
                                 TopicPartition(topic_name, 1, 3)], asynchronous=False)
        groups = f"/v3/clusters/{cluster_id}/consumer-groups"
        assert group in [g["consumer_group_id"] for g in rest.get(groups).json()["data"]]
        described = rest.get(f"{groups}/{group}").json()
        assert (described["kind"], described["state"], described["is_simple"]) == (
            "KafkaConsumerGroup", "STABLE", False)
        (member,) = rest.get(f"{groups}/{group}/consumers").json()["data"]
        assert member["client_id"] == "lag-client"
        lags = rest.get(f"{groups}/{group}/lags").json()["data"]
        assert [(lag["partition_id"], lag["current_offset"], lag["log_end_offset"], lag["lag"])
                for lag in lags] == [(0, 1, 5, 4), (1, 3, 3, 0)]
        assert lags[0]["consumer_id"] == member["consumer_id"]
        summary = rest.get(f"{groups}/{group}/lag-summary").json()
        assert (summary["max_lag"], summary["total_lag"], summary["max_lag_partition_id"],
                summary["max_lag_client_id"]) == (4, 4, 0, "lag-client")
    finally:
        consumer.close()
    missing = rest.get(f"/v3/clusters/{cluster_id}/consumer-groups/no-such-group-{topic_name}")
    assert missing.status_code == 404 and missing.json()["error_code"] == 404


def test_streaming_produce_answers_while_the_client_is_still_sending(
        rest_proxy: RestProxyProcess, broker: Any, cluster_id: str, topic_name: str) -> None:
    """A chunked request: each record's answer arrives before the next record is sent."""
    create_topic(broker.bootstrap, topic_name)
    with socket.create_connection(("127.0.0.1", rest_proxy.port), timeout=30) as sock:
        sock.sendall(
            f"POST /v3/clusters/{cluster_id}/topics/{topic_name}/records HTTP/1.1\r\n"
            "Host: 127.0.0.1\r\nContent-Type: application/json\r\n"
            "Transfer-Encoding: chunked\r\n\r\n".encode())
        received = b""
        for n in range(3):
            record = json.dumps({"value": {"type": "JSON", "data": n}}).encode() + b"\n"
            sock.sendall(b"%x\r\n%s\r\n" % (len(record), record))
            while received.count(b'"error_code":200') <= n:
                data = sock.recv(65536)
                assert data, f"the proxy closed the stream; got {received!r}"
                received += data
            assert b'"offset":%d' % n in received
        sock.sendall(b"0\r\n\r\n")
    assert received.startswith(b"HTTP/1.1 200")
    assert [json.loads(m.value()) for m in read_back(broker.bootstrap, topic_name, 3)] == [
        0, 1, 2]
