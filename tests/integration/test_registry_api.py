"""The Schema Registry through Confluent's REST API and confluent-kafka's client.

One registry process (module fixture) on the shared broker, with its own ``_schemas``
topic; each test uses subjects of its own. Error bodies are checked as Confluent sends
them, since clients branch on ``error_code``.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.helpers.registry_process import RegistryProcess

MEDIA = {"content-type": "application/vnd.schemaregistry.v1+json"}


def record(name: str, *fields: dict[str, Any], namespace: str = "test") -> str:
    return json.dumps({"type": "record", "name": name, "namespace": namespace,
                       "fields": list(fields)})


USER_V1 = record("User", {"name": "name", "type": "string"})
USER_V2 = record("User", {"name": "name", "type": "string"},
                 {"name": "age", "type": "int", "default": 0})
USER_NO_DEFAULT = record("User", {"name": "name", "type": "string"},
                         {"name": "email", "type": "string"})


@pytest.fixture(scope="module")
def registry(broker: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RegistryProcess]:
    token = secrets.token_hex(4)
    process = RegistryProcess(broker.bootstrap, Path(tmp_path_factory.mktemp("registry")),
                              topic=f"_schemas-api-{token}", group_id=f"registry-api-{token}")
    process.start()
    yield process
    process.stop()


@pytest.fixture
def http(registry: RegistryProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=registry.url, headers=MEDIA, timeout=30.0) as client:
        yield client


@pytest.fixture
def subject(request: pytest.FixtureRequest) -> str:
    return f"{request.node.name[:40]}-{secrets.token_hex(3)}-value"


def register(http: httpx.Client, subject: str, schema: str, **extra: Any) -> httpx.Response:
    return http.post(f"/subjects/{subject}/versions", json={"schema": schema, **extra})


def assert_error(response: httpx.Response, status: int, code: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["error_code"] == code, body
    assert isinstance(body["message"], str) and body["message"]
    return body


def test_avro_serializer_round_trip_through_broker(
    registry: RegistryProcess, broker: Any, topic_name: str
) -> None:
    client = SchemaRegistryClient({"url": registry.url})
    serializer = AvroSerializer(client, USER_V2)
    deserializer = AvroDeserializer(SchemaRegistryClient({"url": registry.url}))
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    users = [{"name": f"user-{i}", "age": i} for i in range(5)]
    context = SerializationContext(topic_name, MessageField.VALUE)
    for user in users:
        producer.produce(topic_name, value=serializer(user, context))
    assert producer.flush(30) == 0

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": topic_name,
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic_name])
    received = []
    try:
        for _ in range(100):
            message = consumer.poll(1.0)
            if message is None or message.error():
                continue
            received.append(deserializer(message.value(), context))
            if len(received) == len(users):
                break
    finally:
        consumer.close()
    assert received == users
    registered = client.get_latest_version(f"{topic_name}-value")
    assert registered.version == 1
    assert json.loads(registered.schema.schema_str) == json.loads(USER_V2)


def test_same_schema_same_id_across_subjects(http: httpx.Client, subject: str) -> None:
    first = register(http, subject, USER_V1).json()["id"]
    assert register(http, subject, USER_V1).json()["id"] == first
    # Whitespace does not make another schema.
    assert register(http, subject, json.dumps(json.loads(USER_V1), indent=2)).json()["id"] == first
    assert register(http, f"other-{subject}", USER_V1).json()["id"] == first
    assert http.get(f"/subjects/{subject}/versions").json() == [1]
    second = register(http, subject, USER_V2).json()["id"]
    assert second != first
    assert http.get(f"/subjects/{subject}/versions").json() == [1, 2]
    latest = http.get(f"/subjects/{subject}/versions/latest").json()
    assert latest == {"subject": subject, "version": 2, "id": second,
                      "schema": json.dumps(json.loads(USER_V2), separators=(",", ":"))}
    assert http.get(f"/subjects/{subject}/versions/1").json()["id"] == first
    assert json.loads(http.get(f"/schemas/ids/{first}").json()["schema"]) == json.loads(USER_V1)
    assert json.loads(http.get(f"/schemas/ids/{first}/schema").text) == json.loads(USER_V1)
    assert sorted(http.get(f"/schemas/ids/{first}/subjects").json()) == sorted(
        [subject, f"other-{subject}"])
    assert {"subject": subject, "version": 1} in http.get(f"/schemas/ids/{first}/versions").json()
    assert "AVRO" in http.get("/schemas/types").json()


def test_lookup(http: httpx.Client, subject: str) -> None:
    schema_id = register(http, subject, USER_V1).json()["id"]
    found = http.post(f"/subjects/{subject}", json={"schema": USER_V1})
    assert found.status_code == 200
    assert found.json()["id"] == schema_id and found.json()["version"] == 1
    assert_error(http.post(f"/subjects/{subject}", json={"schema": USER_V2}), 404, 40403)
    assert_error(http.post(f"/subjects/nobody-{subject}", json={"schema": USER_V1}), 404, 40401)
    client = SchemaRegistryClient({"url": str(http.base_url)})
    assert client.lookup_schema(subject, Schema(USER_V1, "AVRO")).schema_id == schema_id


def test_not_found_and_invalid_errors(http: httpx.Client, subject: str) -> None:
    assert_error(http.get(f"/subjects/{subject}/versions"), 404, 40401)
    assert_error(http.get(f"/subjects/{subject}/versions/latest"), 404, 40401)
    register(http, subject, USER_V1)
    assert_error(http.get(f"/subjects/{subject}/versions/7"), 404, 40402)
    assert_error(http.get(f"/subjects/{subject}/versions/0"), 422, 42202)
    assert_error(http.get(f"/subjects/{subject}/versions/abc"), 422, 42202)
    assert_error(http.get("/schemas/ids/987654"), 404, 40403)
    assert_error(register(http, subject, "{not json"), 422, 42201)
    assert_error(register(http, subject, json.dumps({"type": "record", "name": "X",
                                                     "fields": [{"name": "a",
                                                                 "type": "nope"}]})), 422, 42201)
    assert_error(register(http, subject, json.dumps({"type": "record", "name": "X", "fields": [
        {"name": "a", "type": "int", "default": "text"}]})), 422, 42201)
    assert_error(register(http, subject, ""), 422, 42201)
    assert_error(http.put("/config/x", json={"compatibility": "SIDEWAYS"}), 422, 42203)
    assert_error(http.get("/no/such/path"), 404, 404)
    assert_error(http.post(f"/subjects/{subject}/versions", content=b"{oops"), 400, 400)
    assert_error(http.post(f"/subjects/{subject}/versions", json=["a list"]), 422, 42201)
    assert_error(register(http, subject, USER_V1, references=[{"name": "x"}]), 422, 42201)
    assert_error(http.put("/mode", json={}), 422, 42204)
    with pytest.raises(SchemaRegistryError) as caught:
        SchemaRegistryClient({"url": str(http.base_url)}).get_latest_version(f"nobody-{subject}")
    assert caught.value.error_code == 40401
    # The registry keeps serving after all that.
    assert http.get(f"/subjects/{subject}/versions").json() == [1]


def test_soft_and_permanent_delete(http: httpx.Client, subject: str) -> None:
    first = register(http, subject, USER_V1).json()["id"]
    register(http, subject, USER_V2)
    http.put(f"/config/{subject}", json={"compatibility": "NONE"})
    # Permanent only after soft, as Confluent.
    assert_error(http.delete(f"/subjects/{subject}?permanent=true"), 404, 40405)
    assert_error(http.delete(f"/subjects/{subject}/versions/1?permanent=true"), 404, 40407)
    assert http.delete(f"/subjects/{subject}/versions/1").json() == 1
    assert_error(http.delete(f"/subjects/{subject}/versions/1"), 404, 40406)
    assert http.get(f"/subjects/{subject}/versions").json() == [2]
    assert http.get(f"/subjects/{subject}/versions?deleted=true").json() == [1, 2]
    assert http.delete(f"/subjects/{subject}").json() == [2]
    assert_error(http.delete(f"/subjects/{subject}"), 404, 40404)
    assert subject not in http.get("/subjects").json()
    assert subject in http.get("/subjects?deleted=true").json()
    assert_error(http.get(f"/subjects/{subject}/versions/latest"), 404, 40401)
    assert http.get(f"/subjects/{subject}/versions/1?deleted=true").json()["id"] == first
    # Deserializers still need soft-deleted schemas by id.
    assert http.get(f"/schemas/ids/{first}").status_code == 200
    assert http.get(f"/config/{subject}").json() == {"compatibilityLevel": "NONE"}
    assert http.delete(f"/subjects/{subject}?permanent=true").json() == [1, 2]
    assert subject not in http.get("/subjects?deleted=true").json()
    assert_error(http.get(f"/config/{subject}"), 404, 40408)  # gone with the subject
    assert_error(http.get(f"/subjects/{subject}/versions?deleted=true"), 404, 40401)
    # A new registration starts the subject again at version 1 and keeps the schema's id.
    assert register(http, subject, USER_V1).json()["id"] == first
    assert http.get(f"/subjects/{subject}/versions").json() == [1]


def test_subject_prefix(http: httpx.Client, subject: str) -> None:
    register(http, f"pfx-a-{subject}", USER_V1)
    register(http, f"pfx-b-{subject}", USER_V1)
    assert http.get("/subjects", params={"subjectPrefix": "pfx-a-"}).json() == [
        f"pfx-a-{subject}"]
    client = SchemaRegistryClient({"url": str(http.base_url)})
    assert f"pfx-b-{subject}" in client.get_subjects()


@pytest.mark.parametrize(
    ("level", "v2", "accepted"),
    [
        ("BACKWARD", USER_V2, True),  # new field with a default: new reader reads old data
        ("BACKWARD", USER_NO_DEFAULT, False),  # new field without a default
        ("FORWARD", USER_NO_DEFAULT, True),  # old reader ignores the new field
        ("FORWARD", record("User", {"name": "age", "type": "int", "default": 1}), False),
        ("FULL", USER_V2, True),
        ("FULL", USER_NO_DEFAULT, False),
        ("NONE", record("User", {"name": "name", "type": "int"}), True),
        ("BACKWARD", record("User", {"name": "name", "type": "int"}), False),
    ],
)
def test_compatibility_levels(
    http: httpx.Client, subject: str, level: str, v2: str, accepted: bool
) -> None:
    assert http.put(f"/config/{subject}", json={"compatibility": level}).json() == {
        "compatibility": level}
    register(http, subject, USER_V1)
    check = http.post(f"/compatibility/subjects/{subject}/versions/latest?verbose=true",
                      json={"schema": v2}).json()
    assert check["is_compatible"] is accepted
    assert bool(check["messages"]) is not accepted
    response = register(http, subject, v2)
    if accepted:
        assert response.status_code == 200 and "id" in response.json()
    else:
        body = assert_error(response, 409, 409)
        assert "incompatible" in body["message"]


def test_transitive_levels(http: httpx.Client, subject: str) -> None:
    """v1 {a}, v2 {a, b=default}, v3 {b} without a: v3 reads v2 data (b is there) but not
    v1 data (b missing, no default) -> BACKWARD accepts v3, BACKWARD_TRANSITIVE refuses."""
    v1 = record("R", {"name": "a", "type": "int"})
    v2 = record("R", {"name": "a", "type": "int"}, {"name": "b", "type": "int", "default": 0})
    v3 = record("R", {"name": "b", "type": "int"})
    for level, accepted in (("BACKWARD_TRANSITIVE", False), ("BACKWARD", True)):
        name = f"{level}-{subject}"
        http.put(f"/config/{name}", json={"compatibility": level})
        register(http, name, v1)
        register(http, name, v2)
        assert (register(http, name, v3).status_code == 200) is accepted, level
    for level in ("FULL_TRANSITIVE", "FORWARD_TRANSITIVE"):
        name = f"{level}-{subject}"
        http.put(f"/config/{name}", json={"compatibility": level})
        register(http, name, v1)
        register(http, name, v2)
        assert_error(register(http, name, v3), 409, 409)


def test_config_global_and_default_to_global(http: httpx.Client, subject: str) -> None:
    assert http.get("/config").json() == {"compatibilityLevel": "BACKWARD"}
    assert_error(http.get(f"/config/{subject}"), 404, 40408)
    assert http.get(f"/config/{subject}?defaultToGlobal=true").json() == {
        "compatibilityLevel": "BACKWARD"}
    client = SchemaRegistryClient({"url": str(http.base_url)})
    client.set_compatibility(subject, "FULL")
    assert client.get_compatibility(subject) == "FULL"
    assert http.delete(f"/config/{subject}").json() == {"compatibilityLevel": "FULL"}
    assert_error(http.get(f"/config/{subject}"), 404, 40408)


def test_readonly_mode_refuses_writes(http: httpx.Client, subject: str) -> None:
    register(http, subject, USER_V1)
    assert http.put(f"/mode/{subject}", json={"mode": "READONLY"}).json() == {"mode": "READONLY"}
    assert_error(register(http, subject, USER_V2), 422, 42205)
    assert_error(http.put(f"/mode/{subject}", json={"mode": "SLEEPY"}), 422, 42204)
    assert http.delete(f"/mode/{subject}").json() == {"mode": "READONLY"}
    assert register(http, subject, USER_V2).status_code == 200
    assert http.get("/mode").json() == {"mode": "READWRITE"}


def test_references(http: httpx.Client, subject: str) -> None:
    address = json.dumps({"type": "record", "name": "Address", "namespace": "test",
                          "fields": [{"name": "city", "type": "string"}]})
    register(http, f"address-{subject}", address)
    person = record("Person", {"name": "name", "type": "string"},
                    {"name": "home", "type": "test.Address"})
    refs = [{"name": "test.Address", "subject": f"address-{subject}", "version": 1}]
    assert_error(register(http, subject, person), 422, 42201)  # unknown type without refs
    person_id = register(http, subject, person, references=refs).json()["id"]
    got = http.get(f"/schemas/ids/{person_id}").json()
    assert got["references"] == refs
    assert http.get(f"/subjects/address-{subject}/versions/1/referencedby").json() == [person_id]
    # A referenced schema cannot be deleted while something refers to it.
    assert_error(http.delete(f"/subjects/address-{subject}/versions/1"), 422, 42206)

    client = SchemaRegistryClient({"url": str(http.base_url)})
    schema = Schema(person, "AVRO", [SchemaReference("test.Address", f"address-{subject}", 1)])
    assert client.register_schema(subject, schema) == person_id


def _round_trip(broker: Any, topic: str, serializer: Any, deserializer: Any,
                values: list[Any]) -> list[Any]:
    context = SerializationContext(topic, MessageField.VALUE)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for value in values:
        producer.produce(topic, value=serializer(value, context))
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": topic,
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    received: list[Any] = []
    try:
        for _ in range(100):
            message = consumer.poll(1.0)
            if message is None or message.error():
                continue
            received.append(deserializer(message.value(), context))
            if len(received) == len(values):
                break
    finally:
        consumer.close()
    return received


ORDER_SCHEMA = json.dumps({
    "$schema": "http://json-schema.org/draft-07/schema#", "title": "Order", "type": "object",
    "properties": {"id": {"type": "integer"}, "item": {"type": "string"}},
    "required": ["id"], "additionalProperties": False,
})


def test_json_serializer_round_trip_through_broker(
    registry: RegistryProcess, broker: Any, topic_name: str
) -> None:
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer

    client = SchemaRegistryClient({"url": registry.url})
    orders = [{"id": i, "item": f"thing-{i}"} for i in range(4)]
    received = _round_trip(broker, topic_name, JSONSerializer(ORDER_SCHEMA, client),
                           JSONDeserializer(ORDER_SCHEMA), orders)
    assert received == orders
    registered = client.get_latest_version(f"{topic_name}-value")
    assert registered.schema.schema_type == "JSON"


def test_json_schema_compatibility_and_errors(http: httpx.Client, subject: str) -> None:
    def register_json(schema: dict[str, Any]) -> httpx.Response:
        return register(http, subject, json.dumps(schema), schemaType="JSON")

    closed = json.loads(ORDER_SCHEMA)
    assert register_json(closed).status_code == 200
    got = http.get(f"/subjects/{subject}/versions/latest").json()
    assert got["schemaType"] == "JSON"
    # BACKWARD: a closed model may gain an optional property, not lose one.
    wider = {**closed, "properties": {**closed["properties"], "note": {"type": "string"}}}
    assert register_json(wider).status_code == 200
    narrower = {**closed, "properties": {"id": {"type": "integer"}}}
    body = assert_error(register_json(narrower), 409, 409)
    assert "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL" in body["message"]
    assert_error(register_json({"type": "strng"}), 422, 42201)
    assert_error(register(http, subject, "{}", schemaType="XML"), 422, 42201)


def _order_message_class() -> Any:
    """A Protobuf message class built at run time (no protoc needed)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    file = descriptor_pb2.FileDescriptorProto(name=f"order_{secrets.token_hex(3)}.proto",
                                              package="shop", syntax="proto3")
    message = file.message_type.add(name="Order")
    message.field.add(name="id", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_INT64,
                      label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    message.field.add(name="item", number=2,
                      type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
                      label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))


def test_protobuf_serializer_round_trip_through_broker(
    registry: RegistryProcess, broker: Any, topic_name: str
) -> None:
    from confluent_kafka.schema_registry.protobuf import (
        ProtobufDeserializer,
        ProtobufSerializer,
    )

    order_class = _order_message_class()
    client = SchemaRegistryClient({"url": registry.url})
    serializer = ProtobufSerializer(order_class, client, {"use.deprecated.format": False})
    deserializer = ProtobufDeserializer(order_class, {"use.deprecated.format": False})
    orders = [order_class(id=i, item=f"thing-{i}") for i in range(3)]
    received = _round_trip(broker, topic_name, serializer, deserializer, orders)
    assert [(o.id, o.item) for o in received] == [(o.id, o.item) for o in orders]
    assert client.get_latest_version(f"{topic_name}-value").schema.schema_type == "PROTOBUF"


def test_protobuf_compatibility_over_http(http: httpx.Client, subject: str) -> None:
    v1 = 'syntax = "proto3";\npackage shop;\nmessage Order { int64 id = 1; string item = 2; }\n'
    v2 = 'syntax = "proto3";\npackage shop;\nmessage Order { int64 id = 1; string item = 2; ' \
         'bool paid = 3; }\n'
    bad = 'syntax = "proto3";\npackage shop;\nmessage Order { string id = 1; }\n'
    assert register(http, subject, v1, schemaType="PROTOBUF").status_code == 200
    assert register(http, subject, v2, schemaType="PROTOBUF").status_code == 200
    body = assert_error(register(http, subject, bad, schemaType="PROTOBUF"), 409, 409)
    assert "FIELD_SCALAR_KIND_CHANGED" in body["message"]
    assert_error(register(http, subject, "message {", schemaType="PROTOBUF"), 422, 42201)
    assert http.get(f"/subjects/{subject}/versions/2").json()["schema"] == v2.strip()
    assert http.get("/schemas/types").json() == ["AVRO", "JSON", "PROTOBUF"]


def test_import_mode_keeps_given_ids(http: httpx.Client, subject: str) -> None:
    imported = record("Imported", {"name": "a", "type": "int"})
    # Not in IMPORT mode: an id in the request is refused.
    assert_error(register(http, subject, imported, id=90001), 422, 42205)
    assert http.put(f"/mode/{subject}", json={"mode": "IMPORT"}).json() == {"mode": "IMPORT"}
    # A schema this registry already gave an id keeps that id.
    register(http, f"earlier-{subject}", USER_V1)
    assert_error(register(http, subject, USER_V1, id=90002), 422, 42205)
    answer = register(http, subject, imported, id=90001, version=3)
    assert answer.json() == {"id": 90001}
    assert http.get(f"/subjects/{subject}/versions/3").json()["id"] == 90001
    # Another schema under a taken id is refused.
    assert_error(register(http, subject, USER_V2, id=90001), 422, 42205)
    http.delete(f"/mode/{subject}")
    # Ids given later continue after the imported one.
    assert register(http, f"after-{subject}", json.dumps({"type": "fixed", "name": "F",
                                                          "size": 3})).json()["id"] > 90001


def test_context_qualified_subjects(http: httpx.Client, subject: str) -> None:
    qualified = f":.tenant:{subject}"
    schema_id = register(http, qualified, USER_V1).json()["id"]
    assert http.get(f"/subjects/{qualified}/versions/latest").json()["id"] == schema_id
    assert qualified in http.get("/subjects", params={"subjectPrefix": ":.tenant:"}).json()
    assert http.get("/contexts").json() == ["."]


def test_protobuf_text_schema_served_serialized(
    registry: RegistryProcess, broker: Any, topic_name: str
) -> None:
    """A schema registered as .proto text (as curl or the Java client would) decodes
    records for confluent-kafka's ProtobufDeserializer, which asks for it serialized."""
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer

    text = ('syntax = "proto3";\npackage shop;\n'
            "message Order { int64 id = 1; string item = 2; map<string, int32> counts = 3;\n"
            "  optional string note = 4; Kind kind = 5; enum Kind { NEW = 0; PAID = 1; } }\n")
    client = SchemaRegistryClient({"url": registry.url})
    schema_id = client.register_schema(f"{topic_name}-value", Schema(text, "PROTOBUF"))
    with httpx.Client(base_url=registry.url) as http:
        assert http.get(f"/schemas/ids/{schema_id}").json()["schema"] == text.strip()
    from confluent_kafka.schema_registry.common.protobuf import _str_to_proto
    from google.protobuf import descriptor_pool, message_factory

    served = client.get_schema(schema_id, fmt="serialized").schema_str
    pool = descriptor_pool.DescriptorPool()
    pool.Add(_str_to_proto("order.proto", served))
    order_class = message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))
    order = order_class(id=7, item="book", note="gift", kind=1)
    order.counts["pages"] = 300
    # Confluent's framing: magic byte, schema id, message indexes ([0] as one zero byte).
    framed = b"\x00" + schema_id.to_bytes(4, "big") + b"\x00" + order.SerializeToString()
    context = SerializationContext(topic_name, MessageField.VALUE)
    decoded = ProtobufDeserializer(order_class, {"use.deprecated.format": False})(framed, context)
    assert (decoded.id, decoded.item, decoded.note, decoded.kind) == (7, "book", "gift", 1)
    assert dict(decoded.counts) == {"pages": 300}


def test_confluent_client_methods(http: httpx.Client, subject: str) -> None:
    """The SchemaRegistryClient calls a registry user makes, parsed by the client itself."""
    client = SchemaRegistryClient({"url": str(http.base_url)})
    first = client.register_schema(subject, Schema(USER_V1, "AVRO"))
    second = client.register_schema(subject, Schema(USER_V2, "AVRO"))
    assert client.get_versions(subject) == [1, 2]
    assert client.get_version(subject, 1).schema_id == first
    assert client.get_schema(second).schema_type == "AVRO"
    assert set(client.get_schema_types()) == {"AVRO", "JSON", "PROTOBUF"}
    assert subject in client.get_subjects_by_schema_id(first)
    assert any(v.subject == subject and v.version == 1
               for v in client.get_schema_versions(first))
    assert client.test_compatibility(subject, Schema(USER_V2, "AVRO")) is True
    assert client.test_compatibility(subject, Schema(USER_NO_DEFAULT, "AVRO")) is False
    assert client.test_compatibility_all_versions(subject, Schema(USER_V2, "AVRO")) is True
    client.set_compatibility(subject, "FORWARD_TRANSITIVE")
    assert client.get_compatibility(subject) == "FORWARD_TRANSITIVE"
    assert client.get_config(subject).compatibility_level.value == "FORWARD_TRANSITIVE"
    client.delete_config(subject)
    assert client.update_mode(subject, "READONLY") == "READONLY"
    assert client.get_mode(subject) == "READONLY"
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema(subject, Schema(record("User", {"name": "x", "type": "int",
                                                               "default": 1}), "AVRO"))
    assert refused.value.error_code == 42205
    client.delete_mode(subject)
    assert client.get_global_mode() == "READWRITE"
    assert client.get_contexts() == ["."]
    assert client.delete_version(subject, 1) == 1
    assert client.delete_version(subject, 1, permanent=True) == 1
    assert client.delete_subject(subject) == [2]
    assert client.delete_subject(subject, permanent=True) == [2]
    with pytest.raises(SchemaRegistryError) as gone:
        client.get_versions(subject)
    assert gone.value.error_code == 40401


@pytest.mark.parametrize("schema_type", ["JSON", "PROTOBUF"])
@pytest.mark.parametrize("level", ["FORWARD", "FULL", "BACKWARD_TRANSITIVE"])
def test_levels_for_json_and_protobuf(
    http: httpx.Client, subject: str, schema_type: str, level: str
) -> None:
    """A change each level must refuse, with Confluent's 409 body, for JSON and Protobuf."""
    if schema_type == "JSON":
        old = json.dumps({"type": "object", "properties": {"a": {"type": "string"}},
                          "additionalProperties": False})
        # A property changes type: neither schema accepts the other's documents.
        new = json.dumps({"type": "object", "properties": {"a": {"type": "integer"}},
                          "additionalProperties": False})
    else:
        old = 'syntax = "proto3";\nmessage M { int64 a = 1; }\n'
        new = 'syntax = "proto3";\nmessage M { string a = 1; }\n'
    http.put(f"/config/{subject}", json={"compatibility": level})
    assert register(http, subject, old, schemaType=schema_type).status_code == 200
    body = assert_error(register(http, subject, new, schemaType=schema_type), 409, 409)
    assert f"{{compatibility: '{level}'}}" in body["message"]
    http.put(f"/config/{subject}", json={"compatibility": "NONE"})
    assert register(http, subject, new, schemaType=schema_type).status_code == 200
