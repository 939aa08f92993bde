"""Protobuf schemas in both forms Confluent accepts: ``.proto`` text and a base64
``FileDescriptorProto`` (what confluent-kafka's ProtobufSerializer sends).

Confluent's registry treats the two forms of one schema as the same schema: a lookup or a
registration in one form finds the version registered in the other. These tests drive that
with confluent-kafka's own serializer, each of its schema-finding modes, against a real
``moldau registry`` (module fixture, a ``_schemas`` topic of its own) on the shared broker.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from tests.helpers.registry_process import RegistryProcess

FDP = descriptor_pb2.FieldDescriptorProto
# The same schema as .proto text, as a user (or the Java client) would register it.
ORDER_TEXT = """syntax = "proto3";
package shop;

message Order {
  int64 id = 1;
  string item = 2;
  Status status = 3;
  repeated Line lines = 4;
  map<string, int32> counts = 5;

  message Line {
    string sku = 1;
    int32 quantity = 2;
  }
}

enum Status {
  NEW = 0;
  PAID = 1;
}
"""


def order_class() -> Any:
    """``shop.Order`` built from a FileDescriptorProto as protoc would write it (fully
    qualified type names, map entry types), in a file name of its own."""
    file = descriptor_pb2.FileDescriptorProto(name=f"order_{secrets.token_hex(3)}.proto",
                                              package="shop", syntax="proto3")
    order = file.message_type.add(name="Order")
    order.field.add(name="id", number=1, type=FDP.TYPE_INT64, label=FDP.LABEL_OPTIONAL,
                    json_name="id")
    order.field.add(name="item", number=2, type=FDP.TYPE_STRING, label=FDP.LABEL_OPTIONAL,
                    json_name="item")
    order.field.add(name="status", number=3, type=FDP.TYPE_ENUM, type_name=".shop.Status",
                    label=FDP.LABEL_OPTIONAL, json_name="status")
    order.field.add(name="lines", number=4, type=FDP.TYPE_MESSAGE,
                    type_name=".shop.Order.Line", label=FDP.LABEL_REPEATED, json_name="lines")
    order.field.add(name="counts", number=5, type=FDP.TYPE_MESSAGE,
                    type_name=".shop.Order.CountsEntry", label=FDP.LABEL_REPEATED,
                    json_name="counts")
    line = order.nested_type.add(name="Line")
    line.field.add(name="sku", number=1, type=FDP.TYPE_STRING, label=FDP.LABEL_OPTIONAL)
    line.field.add(name="quantity", number=2, type=FDP.TYPE_INT32, label=FDP.LABEL_OPTIONAL)
    entry = order.nested_type.add(name="CountsEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=FDP.TYPE_STRING, label=FDP.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=FDP.TYPE_INT32, label=FDP.LABEL_OPTIONAL)
    status = file.enum_type.add(name="Status")
    status.value.add(name="NEW", number=0)
    status.value.add(name="PAID", number=1)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))


@pytest.fixture(scope="module")
def registry(broker: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RegistryProcess]:
    token = secrets.token_hex(4)
    process = RegistryProcess(broker.bootstrap, Path(tmp_path_factory.mktemp("registry")),
                              topic=f"_schemas-proto-{token}", group_id=f"registry-proto-{token}")
    process.start()
    yield process
    process.stop()


@pytest.fixture
def client(registry: RegistryProcess) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": registry.url})


@pytest.fixture
def topic(request: pytest.FixtureRequest) -> str:
    return f"{request.node.name[:40]}-{secrets.token_hex(3)}"


def serialize(client: SchemaRegistryClient, topic: str, cls: Any, **conf: Any) -> bytes:
    serializer = ProtobufSerializer(cls, client, {"use.deprecated.format": False, **conf})
    message = cls(id=7, item="book", status=1)
    message.lines.add(sku="b-1", quantity=2)
    message.counts["pages"] = 300
    framed = serializer(message, SerializationContext(topic, MessageField.VALUE))
    assert framed is not None
    decoded = ProtobufDeserializer(cls, {"use.deprecated.format": False})(
        framed, SerializationContext(topic, MessageField.VALUE))
    assert (decoded.id, decoded.item, decoded.status) == (7, "book", 1)
    assert [(li.sku, li.quantity) for li in decoded.lines] == [("b-1", 2)]
    return framed


def framed_id(framed: bytes) -> int:
    return int.from_bytes(framed[1:5], "big")


def test_serializer_lookup_finds_text_registration(client: SchemaRegistryClient,
                                                   topic: str) -> None:
    """auto.register.schemas=false: the serializer looks the descriptor up (POST
    /subjects/{subject}) and must find the version registered as text."""
    schema_id = client.register_schema(f"{topic}-value", Schema(ORDER_TEXT, "PROTOBUF"))
    framed = serialize(client, topic, order_class(), **{"auto.register.schemas": False})
    assert framed_id(framed) == schema_id


def test_serializer_lookup_with_normalize(client: SchemaRegistryClient, topic: str) -> None:
    schema_id = client.register_schema(f"{topic}-value", Schema(ORDER_TEXT, "PROTOBUF"),
                                       normalize_schemas=True)
    framed = serialize(client, topic, order_class(),
                       **{"auto.register.schemas": False, "normalize.schemas": True})
    assert framed_id(framed) == schema_id


def test_serializer_auto_register_reuses_text_version(client: SchemaRegistryClient,
                                                      topic: str) -> None:
    """Registering the descriptor form of a schema registered as text adds no version."""
    schema_id = client.register_schema(f"{topic}-value", Schema(ORDER_TEXT, "PROTOBUF"))
    framed = serialize(client, topic, order_class())
    assert framed_id(framed) == schema_id
    assert client.get_versions(f"{topic}-value") == [1]


def test_serializer_use_latest_version(client: SchemaRegistryClient, topic: str) -> None:
    schema_id = client.register_schema(f"{topic}-value", Schema(ORDER_TEXT, "PROTOBUF"))
    framed = serialize(client, topic, order_class(),
                       **{"auto.register.schemas": False, "use.latest.version": True})
    assert framed_id(framed) == schema_id


def test_text_lookup_finds_descriptor_registration(client: SchemaRegistryClient,
                                                   registry: RegistryProcess,
                                                   topic: str) -> None:
    """The other way round: the serializer registered the descriptor; a lookup (and a
    registration) with the .proto text finds that version, and the schema reads back as
    .proto text, as Confluent stores it."""
    framed = serialize(client, topic, order_class())
    found = client.lookup_schema(f"{topic}-value", Schema(ORDER_TEXT, "PROTOBUF"))
    assert found.schema_id == framed_id(framed)
    assert client.register_schema(f"{topic}-value",
                                  Schema(ORDER_TEXT, "PROTOBUF")) == framed_id(framed)
    with httpx.Client(base_url=registry.url) as http:
        stored = http.get(f"/schemas/ids/{framed_id(framed)}").json()["schema"]
    assert "message Order {" in stored and "map<string, int32> counts = 5;" in stored


def test_a_different_schema_is_not_found(client: SchemaRegistryClient, topic: str) -> None:
    client.register_schema(f"{topic}-value",
                           Schema(ORDER_TEXT.replace("int64 id = 1", "int32 id = 1"),
                                  "PROTOBUF"))
    with pytest.raises(SchemaRegistryError) as caught:
        serialize(client, topic, order_class(), **{"auto.register.schemas": False})
    assert caught.value.error_code == 40403
