"""The schema formats (avro, jsonschema, protobuf) through a Schema Registry.

A v2 produce request names its schema either by text (``value_schema``: registered under the
topic's subject, ``<topic>-value``, as Confluent's proxy does) or by id
(``value_schema_id``); the record values are then encoded by confluent-kafka's serializer for
that schema id, in Confluent's wire format (magic byte, schema id, payload). Everything here
talks HTTP to the registry synchronously, so callers run it in a worker thread.

Protobuf: the proxy asks the registry for the schema as a serialized FileDescriptorProto
(``format=serialized``, what confluent-kafka itself asks for), builds the class of the file's
first message (Confluent's default message index) in a private descriptor pool, and maps JSON
to it with protobuf's json_format; records are written by confluent-kafka's ProtobufSerializer
(``_ProtobufFromJson``) and read with its ProtobufDeserializer. Schemas that
import other files (references) are not supported.
"""

from __future__ import annotations

import base64
import threading
from collections.abc import Callable
from typing import Any

import httpx
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient, SchemaRegistryError
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory
from google.protobuf.message import Message

from .errors import RestError, unprocessable

_SCHEMA_TYPES = {"avro": "AVRO", "jsonschema": "JSON", "protobuf": "PROTOBUF"}
Encoder = Callable[[Any], bytes | None]


def _field(name: str) -> MessageField:
    return MessageField.KEY if name == "key" else MessageField.VALUE


class SchemaCodecs:
    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")
        self.client = SchemaRegistryClient({"url": url})
        # The Protobuf serializers' own client: they ask for schemas in serialized form, and
        # confluent-kafka's cache keys schemas by id alone, so a text form fetched through
        # ``client`` would be handed to them as if serialized.
        self.proto_client = SchemaRegistryClient({"url": url})
        self._lock = threading.Lock()
        self._serializers: dict[tuple[str, int, str], Any] = {}
        self._subjects: dict[tuple[str, int], str] = {}
        self._deserializers: dict[str, Any] = {}
        self._proto_classes: dict[int, type[Message]] = {}

    def schema_id(self, fmt: str, topic: str, field: str, schema_text: Any,
                  schema_id: Any) -> int:
        """The id of the request's key or value schema, registering a new schema text."""
        schema_type = _schema_type(fmt)
        try:
            if schema_id is not None:
                if not isinstance(schema_id, int) and not str(schema_id).isdigit():
                    raise unprocessable(f"{field}_schema_id must be an integer", 42205)
                schema = self.client.get_schema(int(schema_id))
                if (schema.schema_type or "AVRO") != schema_type:
                    raise unprocessable(
                        f"Schema {schema_id} is {schema.schema_type}, not {schema_type}", 42205)
                return int(schema_id)
            text = schema_text if isinstance(schema_text, str) else str(schema_text)
            return int(self.client.register_schema(f"{topic}-{field}",
                                                   Schema(text, schema_type)))
        except SchemaRegistryError as exc:
            if exc.http_status_code == 404:
                raise unprocessable(f"Invalid schema: schema {schema_id} not found "
                                    f"({exc.error_message})", 42205) from None
            if exc.http_status_code in (409, 422):
                raise unprocessable(f"Invalid schema: {exc.error_message}", 42205) from None
            raise RestError(500, 50002, f"Schema Registry error: {exc.error_message}") from None

    def encoder(self, fmt: str, topic: str, field: str, schema_id: int) -> Encoder:
        """Encode one key or value (a JSON value) with the given schema."""
        with self._lock:
            subject = self._subject_holding(topic, field, schema_id)
            serializer = self._serializers.get((fmt, schema_id, subject))
            if serializer is None:
                schema = self.client.get_schema(schema_id)
                conf = {"auto.register.schemas": False, "use.schema.id": schema_id,
                        "subject.name.strategy": lambda _ctx, _name: subject}
                if fmt == "avro":
                    serializer = AvroSerializer(self.client, schema, conf=conf)
                elif fmt == "jsonschema":
                    serializer = JSONSerializer(schema, self.client, conf=conf)
                else:
                    serializer = _ProtobufFromJson(self._proto_class(schema_id), self.proto_client,
                                                   {**conf, "use.deprecated.format": False})
                self._serializers[(fmt, schema_id, subject)] = serializer
        context = SerializationContext(topic, _field(field))

        def encode(value: Any) -> bytes | None:
            if value is None:
                return None
            try:
                result: bytes | None = serializer(value, context)
            except SchemaRegistryError as exc:
                raise RestError(500, 50002, f"Schema Registry error: {exc.error_message}") \
                    from None
            except Exception as exc:  # fastavro / jsonschema validation
                raise unprocessable(f"Conversion of JSON to {fmt} failed: {exc}", 42203) \
                    from None
            return result
        return encode

    def _subject_holding(self, topic: str, field: str, schema_id: int) -> str:
        """The subject a serializer looks the schema up under (confluent-kafka's serializers
        do, with ``use.schema.id``): the topic's own, ``<topic>-key``/``-value``, when the
        schema is registered there, else a subject that holds it, since a
        ``value_schema_id`` may name any registered schema, as with Confluent's proxy."""
        own = f"{topic}-{field}"
        known = self._subjects.get((own, schema_id))
        if known is not None:
            return known
        try:
            subjects = self.client.get_subjects_by_schema_id(schema_id, deleted=True)
        except SchemaRegistryError:
            return own
        subject = own if own in subjects or not subjects else str(subjects[0])
        self._subjects[(own, schema_id)] = subject
        return subject

    def _proto_class(self, schema_id: int) -> type[Message]:
        """The message class of a Protobuf schema (its file's first message)."""
        cls = self._proto_classes.get(schema_id)
        if cls is None:
            # Asked directly, as the registry's answer is all that is needed here.
            answer = httpx.get(f"{self.url}/schemas/ids/{schema_id}",
                               params={"format": "serialized"}, timeout=30)
            if answer.status_code == 404:
                raise unprocessable(f"Invalid schema: schema {schema_id} not found", 42205)
            answer.raise_for_status()
            file_proto = descriptor_pb2.FileDescriptorProto.FromString(
                base64.b64decode(answer.json()["schema"]))
            if file_proto.dependency or not file_proto.message_type:
                raise unprocessable(f"Invalid schema: Protobuf schema {schema_id} imports other "
                                    "files or has no message (not supported)", 42205)
            pool = descriptor_pool.DescriptorPool()
            pool.Add(file_proto)
            package = f"{file_proto.package}." if file_proto.package else ""
            descriptor = pool.FindMessageTypeByName(package + file_proto.message_type[0].name)
            cls = message_factory.GetMessageClass(descriptor)
            self._proto_classes[schema_id] = cls
        return cls

    def decode(self, fmt: str, topic: str, field: str, data: bytes | None) -> Any:
        if data is None:
            return None
        if fmt == "protobuf":
            if len(data) < 5 or data[0] != 0:
                raise RestError(500, 50002, "Kafka error: a record is not in the Schema "
                                            "Registry wire format")
            schema_id = int.from_bytes(data[1:5], "big")
            with self._lock:
                cls = self._proto_class(schema_id)
            # The class is known from the id, so the deserializer needs no registry.
            deserializer = ProtobufDeserializer(cls, {"use.deprecated.format": False})
            message = deserializer(data, SerializationContext(topic, _field(field)))
            return json_format.MessageToDict(message)
        with self._lock:
            deserializer = self._deserializers.get(fmt)
            if deserializer is None:
                deserializer = (AvroDeserializer(self.client) if fmt == "avro"
                                else JSONDeserializer(None, schema_registry_client=self.client))
                self._deserializers[fmt] = deserializer
        return deserializer(data, SerializationContext(topic, _field(field)))


def _schema_type(fmt: str) -> str:
    schema_type = _SCHEMA_TYPES.get(fmt)
    if schema_type is None:
        raise RestError(415, 415, f"The {fmt} embedded format is not supported by this proxy")
    return schema_type


class _ProtobufFromJson:
    """A JSON value to a message of ``cls``, written by confluent-kafka's ProtobufSerializer.

    protobuf's json_format maps the JSON to the message; the serializer (with
    ``use.schema.id``) looks the schema up under the subject in its serialized form and
    writes Confluent's framing: magic byte, schema id, message indexes, message.
    """

    def __init__(self, cls: type[Message], client: SchemaRegistryClient,
                 conf: dict[str, Any]) -> None:
        self.cls = cls
        self.serializer = ProtobufSerializer(cls, client, conf)

    def __call__(self, value: Any, context: SerializationContext) -> bytes | None:
        message = json_format.ParseDict(value, self.cls())
        result: bytes | None = self.serializer(message, context)
        return result
