"""How the message browser shows keys, values and headers: Avro, JSON, UTF-8 or hex.

``auto`` picks Avro when a schema registry is configured and the bytes are in Confluent's
wire format (magic byte 0, a 4-byte schema id, the Avro body), then JSON when they parse
as a JSON object or array, else UTF-8 when they decode strictly, else hex, so a binary
payload never turns into replacement characters that look like data.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

FORMATS = ("auto", "avro", "json", "utf8", "hex")


@dataclass(frozen=True)
class Decoded:
    text: str
    kind: str  # "json", "utf8", "hex", "null" or "error: ..."


def _hex(data: bytes) -> Decoded:
    return Decoded(data.hex(" "), "hex")


class AvroDecoder:
    """Avro in Confluent's wire format, with writer schemas fetched from a schema registry.

    confluent-kafka's own deserializer does the work (and caches schemas by id); this only
    says which schema id a value used and renders the record as JSON.
    """

    def __init__(self, url: str) -> None:
        from confluent_kafka.schema_registry import SchemaRegistryClient
        from confluent_kafka.schema_registry.avro import AvroDeserializer

        self.url = url
        self._deserializer = AvroDeserializer(SchemaRegistryClient({"url": url}))

    def __call__(self, raw: bytes, topic: str, is_key: bool) -> Decoded:
        from confluent_kafka.serialization import MessageField, SerializationContext

        context = SerializationContext(topic, MessageField.KEY if is_key else MessageField.VALUE)
        record = self._deserializer(raw, context)
        schema_id = int.from_bytes(raw[1:5], "big")
        text = json.dumps(record, indent=2, ensure_ascii=False, default=str)
        return Decoded(text, f"avro, schema id {schema_id}")


def _is_wire_format(raw: bytes) -> bool:
    return len(raw) > 5 and raw[0] == 0


def decode(data: bytes | str | None, how: str = "auto", *, avro: AvroDecoder | None = None,
           topic: str = "", is_key: bool = False) -> Decoded:
    """Render ``data`` as asked; a value that is not what was asked for says so."""
    if data is None:
        return Decoded("null", "null")
    raw = data.encode() if isinstance(data, str) else data
    if how == "hex":
        return _hex(raw)
    if how == "avro" and avro is None:
        return Decoded(raw.hex(" "), "error: no schema registry configured "
                                     "(moldau console --schema-registry URL)")
    if how in ("auto", "avro") and avro is not None and _is_wire_format(raw):
        try:
            return avro(raw, topic, is_key)
        except Exception as exc:  # whatever the registry or the bytes did: show, never fail
            if how == "avro":
                return Decoded(raw.hex(" "), f"error: not Avro of a registered schema ({exc})")
    if how == "avro":
        return Decoded(raw.hex(" "), "error: not in the schema registry's wire format")
    if how in ("auto", "json"):
        try:
            parsed = json.loads(raw)
        except (UnicodeDecodeError, ValueError):
            if how == "json":
                return Decoded(raw.decode("utf-8", errors="replace"), "error: not JSON")
        else:
            if how == "json" or isinstance(parsed, dict | list):
                return Decoded(json.dumps(parsed, indent=2, ensure_ascii=False), "json")
    try:
        return Decoded(raw.decode("utf-8"), "utf8")
    except UnicodeDecodeError:
        if how == "utf8":
            return Decoded(raw.decode("utf-8", errors="replace"), "error: not UTF-8")
        return _hex(raw)
