"""The records of the ``_schemas`` topic, in Confluent's format.

Keys and values are JSON, as Confluent's registry writes them, so the topic can be read
(and compacted: a key's bytes are always written the same way) like Confluent's:

- ``{"keytype":"SCHEMA","subject":S,"version":V,"magic":1}`` -> ``{"subject":S,"version":V,
  "id":N,"schema":TEXT,"deleted":false}`` (+ ``"schemaType"`` unless AVRO, ``"references"``);
  a tombstone (null value) is a permanent delete of that version.
- ``{"keytype":"CONFIG","subject":S|null,"magic":0}`` -> ``{"compatibilityLevel":L}`` or null.
- ``{"keytype":"MODE","subject":S|null,"magic":0}`` -> ``{"mode":M}`` or null.
- ``{"keytype":"DELETE_SUBJECT","subject":S,"magic":0}`` -> ``{"subject":S,"version":V}``:
  every version up to V is soft-deleted (read for compatibility; this registry writes
  ``deleted: true`` on each version instead, which Confluent's reader also understands).
- ``{"keytype":"NOOP","magic":0}``: ignored.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .types import Reference


@dataclass(frozen=True)
class SchemaVersion:
    """One version of one subject."""

    subject: str
    version: int
    schema_id: int
    schema: str
    schema_type: str = "AVRO"
    references: tuple[Reference, ...] = field(default_factory=tuple)
    deleted: bool = False

    def value_json(self) -> dict[str, Any]:
        value: dict[str, Any] = {
            "subject": self.subject,
            "version": self.version,
            "id": self.schema_id,
            "schema": self.schema,
            "deleted": self.deleted,
        }
        if self.schema_type != "AVRO":
            value["schemaType"] = self.schema_type
        if self.references:
            value["references"] = [r.as_json() for r in self.references]
        return value

    @classmethod
    def from_value(cls, value: dict[str, Any]) -> SchemaVersion:
        return cls(
            subject=value["subject"],
            version=int(value["version"]),
            schema_id=int(value["id"]),
            schema=value["schema"],
            schema_type=value.get("schemaType") or "AVRO",
            references=tuple(
                Reference(r["name"], r["subject"], int(r["version"]))
                for r in value.get("references") or []
            ),
            deleted=bool(value.get("deleted", False)),
        )


def _dump(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def schema_key(subject: str, version: int) -> bytes:
    return _dump({"keytype": "SCHEMA", "subject": subject, "version": version, "magic": 1})


def config_key(subject: str | None) -> bytes:
    return _dump({"keytype": "CONFIG", "subject": subject, "magic": 0})


def mode_key(subject: str | None) -> bytes:
    return _dump({"keytype": "MODE", "subject": subject, "magic": 0})


def encode_value(value: dict[str, Any] | None) -> bytes | None:
    return None if value is None else _dump(value)


def decode(raw: bytes | None) -> Any:
    return None if raw is None else json.loads(raw)
