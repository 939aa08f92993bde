"""Schema formats (avro, jsonschema, protobuf) through the REST Proxy and a real registry.

The registry is ``moldau registry`` (its own branch, merged separately): started here on a
free port when this checkout has it, or the one at ``MOLDAU_TEST_SCHEMA_REGISTRY`` (a URL)
when set. Without either the tests are skipped with that reason; the registry is never
faked. Records are read back with confluent-kafka and its own deserializers.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory

from tests.helpers import free_port, terminate
from tests.helpers.rest_proxy import RestProxyProcess

from .conftest import create_topic

AVRO_V2 = "application/vnd.kafka.avro.v2+json"
JSONSCHEMA_V2 = "application/vnd.kafka.jsonschema.v2+json"
PROTOBUF_V2 = "application/vnd.kafka.protobuf.v2+json"
PROTO = 'syntax = "proto3"; package shop; message Item { string name = 1; int32 qty = 2; }'
V2 = "application/vnd.kafka.v2+json"
ORDER = json.dumps({"type": "record", "name": "Order", "fields": [
    {"name": "item", "type": "string"}, {"name": "qty", "type": "int"}]})
COUNT = json.dumps({"type": "object", "properties": {"n": {"type": "integer"}},
                    "required": ["n"]})


@pytest.fixture(scope="module")
def registry_url(broker: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    external = os.environ.get("MOLDAU_TEST_SCHEMA_REGISTRY")
    if external:
        yield external.rstrip("/")
        return
    if importlib.util.find_spec("moldau.registry") is None:
        pytest.skip("no Schema Registry: `moldau registry` is not in this checkout yet "
                    "(or set MOLDAU_TEST_SCHEMA_REGISTRY=URL)")
    port = free_port()
    log_path = Path(tmp_path_factory.mktemp("registry")) / "registry.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "moldau", "registry", "-b", broker.bootstrap,
             "--listen", f"127.0.0.1:{port}"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert proc.poll() is None, log_path.read_text()
            try:
                if httpx.get(f"{url}/subjects", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        else:
            pytest.fail(f"the registry did not answer within 60 s:\n{log_path.read_text()}")
        yield url
    finally:
        terminate(proc, 15)


@pytest.fixture(scope="module")
def schema_rest(broker: Any, registry_url: str, tmp_path_factory: pytest.TempPathFactory
                ) -> Iterator[httpx.Client]:
    proxy = RestProxyProcess(tmp_path_factory.mktemp("rest-schemas"), broker.bootstrap,
                             "--schema-registry", registry_url).start()
    with httpx.Client(base_url=proxy.url, timeout=30) as client:
        yield client
    assert proxy.is_running(), proxy.log_text()[-3000:]
    proxy.stop()


def read_values(bootstrap: str, topic: str, count: int, deserialize: Any) -> list[Any]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{topic}"})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        values: list[Any] = []
        deadline = time.monotonic() + 30
        while len(values) < count and time.monotonic() < deadline:
            for message in consumer.consume(count, timeout=1.0):
                assert message.error() is None
                values.append(deserialize(message.value(), SerializationContext(
                    topic, MessageField.VALUE)))
        return values
    finally:
        consumer.close()


def test_avro_by_schema_text_then_by_id(schema_rest: httpx.Client, broker: Any,
                                        registry_url: str, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name)
    first = schema_rest.post(f"/topics/{topic_name}", headers={"Content-Type": AVRO_V2},
                             json={"value_schema": ORDER,
                                   "records": [{"value": {"item": "book", "qty": 2}}]})
    assert first.status_code == 200, first.text
    schema_id = first.json()["value_schema_id"]
    assert isinstance(schema_id, int)
    second = schema_rest.post(f"/topics/{topic_name}", headers={"Content-Type": AVRO_V2},
                              json={"value_schema_id": schema_id,
                                    "records": [{"value": {"item": "pen", "qty": 1}}]})
    assert second.json()["offsets"][0]["offset"] == 1
    registry = SchemaRegistryClient({"url": registry_url})
    assert read_values(broker.bootstrap, topic_name, 2, AvroDeserializer(registry)) == [
        {"item": "book", "qty": 2}, {"item": "pen", "qty": 1}]


def test_jsonschema_produce_and_read_back(schema_rest: httpx.Client, broker: Any,
                                          registry_url: str, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name)
    answer = schema_rest.post(f"/topics/{topic_name}", headers={"Content-Type": JSONSCHEMA_V2},
                              json={"value_schema": COUNT, "records": [{"value": {"n": 5}}]})
    assert answer.status_code == 200, answer.text
    registry = SchemaRegistryClient({"url": registry_url})
    deserializer = JSONDeserializer(None, schema_registry_client=registry)
    assert read_values(broker.bootstrap, topic_name, 1, deserializer) == [{"n": 5}]


def test_avro_consumer_instance_and_v3_records(schema_rest: httpx.Client, broker: Any,
                                               topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name)
    produced = schema_rest.post(f"/topics/{topic_name}", headers={"Content-Type": AVRO_V2},
                                json={"value_schema": ORDER,
                                      "records": [{"value": {"item": "cup", "qty": 4}}]})
    schema_id = produced.json()["value_schema_id"]
    cid = schema_rest.get("/v3/clusters").json()["data"][0]["cluster_id"]
    v3 = schema_rest.post(f"/v3/clusters/{cid}/topics/{topic_name}/records", json={
        "value": {"type": "AVRO", "schema_id": schema_id, "data": {"item": "ink", "qty": 3}}})
    assert v3.status_code == 200, v3.text
    assert v3.json()["value"]["type"] == "AVRO"
    group = f"group-{topic_name}"
    base = f"/consumers/{group}/instances/avro-reader"
    schema_rest.post(f"/consumers/{group}", headers={"Content-Type": V2}, json={
        "name": "avro-reader", "format": "avro", "auto.offset.reset": "earliest"})
    schema_rest.post(f"{base}/assignments", headers={"Content-Type": V2},
                     json={"partitions": [{"topic": topic_name, "partition": 0}]})
    values: list[Any] = []
    deadline = time.monotonic() + 30
    while len(values) < 2 and time.monotonic() < deadline:
        answer = schema_rest.get(f"{base}/records", params={"timeout": 1000},
                                 headers={"Accept": AVRO_V2})
        assert answer.status_code == 200, answer.text
        values += [r["value"] for r in answer.json()]
    assert values == [{"item": "cup", "qty": 4}, {"item": "ink", "qty": 3}]
    assert schema_rest.delete(base).status_code == 204


def test_schema_mistakes(schema_rest: httpx.Client, broker: Any, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name)
    unknown = schema_rest.post(f"/topics/{topic_name}", headers={"Content-Type": AVRO_V2},
                               json={"value_schema_id": 987654,
                                     "records": [{"value": {"item": "x", "qty": 1}}]})
    assert (unknown.status_code, unknown.json()["error_code"]) == (422, 42205)
    wrong = schema_rest.post(f"/topics/{topic_name}", headers={"Content-Type": AVRO_V2},
                             json={"value_schema": ORDER,
                                   "records": [{"value": {"item": "x", "qty": "many"}}]})
    assert (wrong.status_code, wrong.json()["error_code"]) == (422, 42203)
    invalid = schema_rest.post(f"/topics/{topic_name}", headers={"Content-Type": AVRO_V2},
                               json={"value_schema": "{not a schema",
                                     "records": [{"value": 1}]})
    assert (invalid.status_code, invalid.json()["error_code"]) == (422, 42205)
    fine = schema_rest.post(f"/topics/{topic_name}", headers={"Content-Type": AVRO_V2},
                            json={"value_schema": ORDER,
                                  "records": [{"value": {"item": "ok", "qty": 1}}]})
    assert fine.status_code == 200, fine.text


def shop_item_class() -> Any:
    """The test's own compiled class of PROTO, independent of the proxy's."""
    file_proto = descriptor_pb2.FileDescriptorProto(name="shop_item.proto", package="shop",
                                                    syntax="proto3")
    message = file_proto.message_type.add(name="Item")
    message.field.add(name="name", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
                      label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    message.field.add(name="qty", number=2, type=descriptor_pb2.FieldDescriptorProto.TYPE_INT32,
                      label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file_proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Item"))


def test_protobuf_produce_read_back_and_consume(schema_rest: httpx.Client, broker: Any,
                                                topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name)
    first = schema_rest.post(f"/topics/{topic_name}", headers={"Content-Type": PROTOBUF_V2},
                             json={"value_schema": PROTO,
                                   "records": [{"value": {"name": "book", "qty": 2}}]})
    assert first.status_code == 200, first.text
    schema_id = first.json()["value_schema_id"]
    second = schema_rest.post(f"/topics/{topic_name}", headers={"Content-Type": PROTOBUF_V2},
                              json={"value_schema_id": schema_id,
                                    "records": [{"value": {"name": "pen", "qty": 5}}]})
    assert second.status_code == 200, second.text
    bad = schema_rest.post(f"/topics/{topic_name}", headers={"Content-Type": PROTOBUF_V2},
                           json={"value_schema_id": schema_id,
                                 "records": [{"value": {"name": "x", "qty": "many"}}]})
    assert (bad.status_code, bad.json()["error_code"]) == (422, 42203)

    deserializer = ProtobufDeserializer(shop_item_class(), {"use.deprecated.format": False})
    values = read_values(broker.bootstrap, topic_name, 2, deserializer)
    assert [json_format.MessageToDict(v) for v in values] == [
        {"name": "book", "qty": 2}, {"name": "pen", "qty": 5}]

    group = f"group-{topic_name}"
    base = f"/consumers/{group}/instances/proto-reader"
    schema_rest.post(f"/consumers/{group}", headers={"Content-Type": V2}, json={
        "name": "proto-reader", "format": "protobuf", "auto.offset.reset": "earliest"})
    schema_rest.post(f"{base}/assignments", headers={"Content-Type": V2},
                     json={"partitions": [{"topic": topic_name, "partition": 0}]})
    read: list[Any] = []
    deadline = time.monotonic() + 30
    while len(read) < 2 and time.monotonic() < deadline:
        answer = schema_rest.get(f"{base}/records", params={"timeout": 1000},
                                 headers={"Accept": PROTOBUF_V2})
        assert answer.status_code == 200, answer.text
        read += [r["value"] for r in answer.json()]
    assert read == [{"name": "book", "qty": 2}, {"name": "pen", "qty": 5}]
    assert schema_rest.delete(base).status_code == 204


@pytest.mark.parametrize("fmt", ["avro", "protobuf"])
def test_schema_id_registered_under_another_subject(schema_rest: httpx.Client, broker: Any,
                                                    registry_url: str, topic_name: str,
                                                    fmt: str) -> None:
    """A ``value_schema_id`` may name a schema registered under any subject, not only
    ``<topic>-value`` (confluent-kafka's serializers look the id up under a subject)."""
    create_topic(broker.bootstrap, topic_name)
    text, schema_type = (ORDER, "AVRO") if fmt == "avro" else (PROTO, "PROTOBUF")
    registered = httpx.post(f"{registry_url}/subjects/elsewhere-{topic_name}/versions",
                            json={"schema": text, "schemaType": schema_type}, timeout=30)
    assert registered.status_code == 200, registered.text
    schema_id = registered.json()["id"]
    value = {"item": "book", "qty": 2} if fmt == "avro" else {"name": "book", "qty": 2}
    answer = schema_rest.post(f"/topics/{topic_name}",
                              headers={"Content-Type": f"application/vnd.kafka.{fmt}.v2+json"},
                              json={"value_schema_id": schema_id, "records": [{"value": value}]})
    assert answer.status_code == 200, answer.text
    assert answer.json()["value_schema_id"] == schema_id
    assert answer.json()["offsets"][0]["error_code"] is None
    if fmt == "protobuf":
        deserializer = ProtobufDeserializer(shop_item_class(), {"use.deprecated.format": False})
        (decoded,) = read_values(broker.bootstrap, topic_name, 1, deserializer)
        assert json_format.MessageToDict(decoded) == value
