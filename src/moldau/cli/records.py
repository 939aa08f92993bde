"""How ``moldau consume`` prints a record.

text: the fields asked for with ``--print-*``, in kafka-console-consumer's order
(timestamp, partition, offset, headers, key, value) joined by the key separator; the key
and value are written as raw bytes so binary payloads survive a redirect to a file. A
missing key or value prints ``null``; no headers prints ``NO_HEADERS``.

json: one object per line with every field, whatever the ``--print-*`` flags say:
``topic, partition, offset, timestamp, timestampType, key, value, headers``. Keys, values
and header values are decoded as UTF-8 with invalid bytes replaced by U+FFFD: readable
for the text payloads people inspect by eye, and never a crash. Use the text format when
the exact bytes matter. ``timestamp`` is milliseconds since the epoch; ``timestampType``
is ``CreateTime``, ``LogAppendTime`` or null; ``headers`` is a list of ``{"key", "value"}``
objects (a list, because Kafka allows a header key to repeat).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from confluent_kafka import TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME, Message

_TIMESTAMP_TYPES = {TIMESTAMP_CREATE_TIME: "CreateTime", TIMESTAMP_LOG_APPEND_TIME: "LogAppendTime"}


def _text(data: bytes | str | None) -> str | None:
    if data is None:
        return None
    if isinstance(data, str):
        return data
    return data.decode("utf-8", errors="replace")


def _raw(data: bytes | str | None) -> bytes:
    if data is None:
        return b"null"
    return data.encode() if isinstance(data, str) else data


def _headers(message: Message) -> list[tuple[str, bytes | str | None]]:
    headers = message.headers() or []
    return list(headers.items()) if isinstance(headers, dict) else list(headers)


@dataclass(frozen=True)
class TextFormat:
    """Which optional fields to print, and what goes between fields."""

    separator: bytes = b"\t"
    key: bool = False
    timestamp: bool = False
    headers: bool = False
    partition: bool = False
    offset: bool = False
    value: bool = True

    def render(self, message: Message) -> bytes:
        fields: list[bytes] = []
        if self.timestamp:
            kind, ms = message.timestamp()
            fields.append(f"{_TIMESTAMP_TYPES.get(kind, 'NoTimestampType')}:{ms}".encode())
        if self.partition:
            fields.append(f"Partition:{message.partition()}".encode())
        if self.offset:
            fields.append(f"Offset:{message.offset()}".encode())
        if self.headers:
            pairs = _headers(message)
            fields.append(
                b",".join(k.encode() + b":" + _raw(v) for k, v in pairs) if pairs else b"NO_HEADERS"
            )
        if self.key:
            fields.append(_raw(message.key()))
        if self.value:
            fields.append(_raw(message.value()))
        return self.separator.join(fields) + b"\n"


def json_record(message: Message) -> dict[str, Any]:
    """The JSON object for one record (see the module docstring for the encoding)."""
    kind, ms = message.timestamp()
    return {
        "topic": message.topic(),
        "partition": message.partition(),
        "offset": message.offset(),
        "timestamp": ms if kind in _TIMESTAMP_TYPES else None,
        "timestampType": _TIMESTAMP_TYPES.get(kind),
        "key": _text(message.key()),
        "value": _text(message.value()),
        "headers": [{"key": k, "value": _text(v)} for k, v in _headers(message)],
    }


def render_json(message: Message) -> bytes:
    return json.dumps(json_record(message), ensure_ascii=False).encode() + b"\n"
