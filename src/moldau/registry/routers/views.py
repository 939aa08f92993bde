"""JSON shapes of Confluent's responses, and list paging (``offset``/``limit``)."""

from __future__ import annotations

from typing import Any, TypeVar

from starlette.requests import Request

from ..records import SchemaVersion

T = TypeVar("T")


def schema_fields(version: SchemaVersion, fmt: str | None = None) -> dict[str, Any]:
    """``fmt="serialized"`` turns a Protobuf schema into a base64 FileDescriptorProto."""
    text = version.schema
    if fmt == "serialized" and version.schema_type == "PROTOBUF":
        from ..types.protobuf import serialized

        text = serialized(text)
    body: dict[str, Any] = {"schema": text}
    if version.schema_type != "AVRO":
        body["schemaType"] = version.schema_type
    if version.references:
        body["references"] = [r.as_json() for r in version.references]
    return body


def version_view(version: SchemaVersion, fmt: str | None = None) -> dict[str, Any]:
    return {"subject": version.subject, "version": version.version,
            "id": version.schema_id, **schema_fields(version, fmt)}


def page(request: Request, items: list[T]) -> list[T]:
    try:
        offset = max(0, int(request.query_params.get("offset", 0)))
        limit = int(request.query_params.get("limit", -1))
    except ValueError:
        return items
    items = items[offset:]
    return items if limit < 0 else items[:limit]
