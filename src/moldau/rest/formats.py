"""v2 embedded formats: which one a request names, and the schemaless ones' bytes.

``Content-Type: application/vnd.kafka.{binary,json,avro,jsonschema,protobuf}.v2+json`` names
how the keys and values inside the JSON body are written: binary as base64 strings, json as
any JSON value, the schema formats as JSON checked and encoded against a registry schema
(``schemas.py``).
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

import orjson

from .errors import RestError, unprocessable, unsupported_media_type

EMBEDDED_FORMATS = ("binary", "json", "avro", "jsonschema", "protobuf")
SCHEMA_FORMATS = ("avro", "jsonschema", "protobuf")
_EMBEDDED = re.compile(r"application/vnd\.kafka\.(binary|json|avro|jsonschema|protobuf)"
                       r"\.v2\+json")
# Content types of v2 requests without embedded data (consumers, offsets, ...).
_PLAIN_V2 = ("application/vnd.kafka.v2+json", "application/vnd.kafka+json", "application/json",
             "application/octet-stream")


def _media_type(header: str | None) -> str:
    return (header or "").split(";", 1)[0].strip().lower()


def produce_format(content_type: str | None) -> str:
    """The embedded format of a v2 produce request; 415 for anything else."""
    match = _EMBEDDED.fullmatch(_media_type(content_type))
    if match is None:
        raise unsupported_media_type(content_type)
    return match.group(1)


def check_plain_v2(content_type: str | None) -> None:
    """A v2 request body without embedded data must be JSON (415 otherwise)."""
    media = _media_type(content_type)
    if media and media not in _PLAIN_V2:
        raise unsupported_media_type(content_type)


def accepted_format(accept: str | None) -> str | None:
    """The embedded format an ``Accept`` header asks for, if it names one."""
    for part in (accept or "").split(","):
        match = _EMBEDDED.fullmatch(_media_type(part))
        if match is not None:
            return match.group(1)
    return None


def encode_binary(value: Any, field: str) -> bytes | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise unprocessable(f"The {field} of a binary record must be a base64 string", 42205)
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise unprocessable(f"The {field} is not valid base64: {value[:40]!r}", 42205) from None


def encode_json(value: Any) -> bytes | None:
    return None if value is None else orjson.dumps(value)


def decode_binary(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def decode_json(data: bytes | None) -> Any:
    if data is None:
        return None
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        raise RestError(500, 50002, "Kafka error: a record is not valid JSON") from None
