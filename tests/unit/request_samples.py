"""Sample requests built from kio's schema classes, for tests of the request validator.

``full_sample`` fills every field, tagged ones included, with one-element arrays and
one-character strings, so every count and length of a version appears once on the wire.
``length_positions`` then finds where each count or length sits by encoding the sample again
with that one array or string grown by one element or character and diffing the bytes: the
positions come from kio's writer, not from the validator under test.
"""

from __future__ import annotations

import dataclasses
import io
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from types import NoneType, UnionType
from typing import Any, Union, get_args, get_origin

from kio.serial import entity_writer
from kio.serial._implicit_defaults import get_implicit_default
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
)

Path = tuple[str, ...]


def _primitive(field: dataclasses.Field[Any], type_: type, size: int) -> Any:
    kafka_type = get_schema_field_type(field)
    if kafka_type == "string":
        return "s" * size
    if kafka_type in ("bytes", "records"):
        return b"b" * size
    if kafka_type == "bool":
        return True
    if kafka_type == "uuid":
        return uuid.UUID(int=7)
    return get_implicit_default(type_)


def build(cls: type, grow: Path | None = None, size: int = 2) -> Any:
    """A full instance of ``cls``; the array or string at path ``grow`` gets ``size`` elements
    or characters instead of one."""
    values = {}
    for field in dataclasses.fields(cls):
        sub = grow[1:] if grow and grow[0] == field.name else None
        values[field.name] = _value(field, sub, size)
    return cls(**values)


def _value(field: dataclasses.Field[Any], grow: Path | None, size: int) -> Any:
    kind = classify_field(field)
    n = size if grow == () else 1
    if isinstance(kind, PrimitiveField):
        return _primitive(field, kind.type_, n)
    if isinstance(kind, EntityField):
        return build(kind.type_, grow, size)
    if isinstance(kind, PrimitiveTupleField):
        return tuple(_primitive(field, kind.type_, 1) for _ in range(n))
    if isinstance(kind, EntityTupleField):
        if grow == ():
            return tuple(build(kind.type_) for _ in range(n))
        return (build(kind.type_, grow, size),)
    raise TypeError(field)


@dataclass(frozen=True)
class LengthField:
    path: Path
    kind: str  # "array", "string" or "bytes"
    flexible: bool  # the entity holding it uses compact encodings
    nullable: bool  # null is a legal value on the wire
    tagged: bool  # the field or one holding it is a tagged field


def _nullable(field: dataclasses.Field[Any]) -> bool:
    return get_origin(field.type) in (UnionType, Union) and NoneType in get_args(field.type)


def length_fields(cls: type, prefix: Path = (), tagged: bool = False
                  ) -> Iterator[LengthField]:
    """Every array, string and bytes field reachable in a full sample of ``cls``."""
    flexible = bool(getattr(cls, "__flexible__", False))
    for field in dataclasses.fields(cls):
        path = (*prefix, field.name)
        is_tagged = tagged or get_field_tag(field) is not None
        kind = classify_field(field)
        # kio reads tagged strings as never null.
        nullable = _nullable(field) and get_field_tag(field) is None
        if isinstance(kind, PrimitiveField):
            kafka_type = get_schema_field_type(field)
            if kafka_type == "string":
                yield LengthField(path, "string", flexible, nullable, is_tagged)
            elif kafka_type in ("bytes", "records"):
                yield LengthField(path, "bytes", flexible, nullable, is_tagged)
        elif isinstance(kind, EntityField):
            yield from length_fields(kind.type_, path, is_tagged)
        elif isinstance(kind, PrimitiveTupleField):
            yield LengthField(path, "array", flexible, _nullable(field), is_tagged)
        elif isinstance(kind, EntityTupleField):
            yield LengthField(path, "array", flexible, _nullable(field), is_tagged)
            yield from length_fields(kind.type_, path, is_tagged)


def encode(obj: Any) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(obj))(buf, obj)
    return buf.getvalue()


def full_sample(cls: type) -> bytes:
    return encode(build(cls))


def length_position(cls: type, field: LengthField) -> int:
    """Offset of the last byte of ``field``'s count or length prefix in ``full_sample(cls)``.

    In a flexible version that byte is the whole one-byte varint (or, for a tagged field, the
    byte of the tagged field's size, which precedes its value).
    """
    base = full_sample(cls)
    grown = encode(build(cls, field.path))
    for i, (a, b) in enumerate(zip(base, grown, strict=False)):
        if a != b:
            return i
    raise AssertionError(f"growing {field.path} changed nothing")
