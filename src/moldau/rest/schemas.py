"""The schema formats (avro, jsonschema) through a Schema Registry and confluent-kafka's serdes.

A v2 produce request names its schema either by text (``value_schema``: registered under the
topic's subject, ``<topic>-value``, as Confluent's proxy does) or by id
(``value_schema_id``); the record values are then encoded by confluent-kafka's serializer for
that schema id, in Confluent's wire format (magic byte, schema id, payload). Everything here
talks HTTP to the registry synchronously, so callers run it in a worker thread.

Protobuf needs a compiled message class for confluent-kafka's serializer, which the proxy
cannot build from a schema text; it answers protobuf requests with 415 (not supported).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient, SchemaRegistryError
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from .errors import RestError, unprocessable

_SCHEMA_TYPES = {"avro": "AVRO", "jsonschema": "JSON"}
Encoder = Callable[[Any], bytes | None]


def _field(name: str) -> MessageField:
    return MessageField.KEY if name == "key" else MessageField.VALUE


class SchemaCodecs:
    def __init__(self, url: str) -> None:
        self.client = SchemaRegistryClient({"url": url})
        self._lock = threading.Lock()
        self._serializers: dict[tuple[str, int], Any] = {}
        self._deserializers: dict[str, Any] = {}

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
            serializer = self._serializers.get((fmt, schema_id))
            if serializer is None:
                schema = self.client.get_schema(schema_id)
                conf = {"auto.register.schemas": False, "use.schema.id": schema_id}
                if fmt == "avro":
                    serializer = AvroSerializer(self.client, schema, conf=conf)
                else:
                    serializer = JSONSerializer(schema, self.client, conf=conf)
                self._serializers[(fmt, schema_id)] = serializer
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

    def decode(self, fmt: str, topic: str, field: str, data: bytes | None) -> Any:
        if data is None:
            return None
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
