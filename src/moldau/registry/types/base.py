"""What every schema format provides, and the table of formats the registry knows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


class InvalidSchemaError(ValueError):
    """The schema text does not parse as its declared type (Confluent's 42201)."""


@dataclass(frozen=True)
class Reference:
    """A schema reference as Confluent's API spells it: the name the referring schema uses
    (an Avro full name, a JSON Schema ``$ref`` URL, a .proto import path) and the subject
    version that holds the referenced schema."""

    name: str
    subject: str
    version: int

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass(frozen=True)
class ParsedSchema:
    """A schema that parsed: its canonical text (what is stored), the format's own parsed
    form (what compatibility checks walk), and its identity (what ids are given for and
    lookups compare): the canonical text, unless one schema has several written forms
    (Protobuf's .proto text and base64 descriptor)."""

    schema_type: str
    canonical: str
    parsed: Any
    identity: str | bytes | None = None

    @property
    def key(self) -> str | bytes:
        return self.canonical if self.identity is None else self.identity


class SchemaFormat(Protocol):
    """One schema format (AVRO, JSON, PROTOBUF)."""

    name: str

    def parse(
        self, text: str, referenced: list[tuple[str, str]], *, normalize: bool = False
    ) -> ParsedSchema:
        """Parse ``text``; ``referenced`` holds (reference name, schema text) of every schema
        it references, dependencies first. Raises InvalidSchemaError."""
        ...

    def incompatibilities(self, reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
        """Why data written with ``writer`` cannot be read with ``reader`` (empty: it can)."""
        ...


def _formats() -> dict[str, SchemaFormat]:
    from .avro import AVRO
    from .json_schema import JSON_SCHEMA
    from .protobuf import PROTOBUF

    return {f.name: f for f in (AVRO, JSON_SCHEMA, PROTOBUF)}


_FORMATS: dict[str, SchemaFormat] = {}


def known_types() -> list[str]:
    """The schema types as ``/schemas/types`` lists them."""
    if not _FORMATS:
        _FORMATS.update(_formats())
    return sorted(_FORMATS)


def format_for(schema_type: str) -> SchemaFormat | None:
    if not _FORMATS:
        _FORMATS.update(_formats())
    return _FORMATS.get(schema_type.upper())
