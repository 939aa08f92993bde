"""Avro: parsing through fastavro, Avro's schema-resolution rules for compatibility.

Compatibility follows the Avro specification's "Schema Resolution" section (the rules
Confluent's registry applies through Avro's own SchemaCompatibility): data written with
the writer's schema must be readable with the reader's schema. Each rule is its own
branch below and has its own unit test (tests/unit/registry/test_avro_compatibility.py).
"""

from __future__ import annotations

import json
from typing import Any

import fastavro
from fastavro.schema import SchemaParseException, UnknownType

from .base import InvalidSchemaError, ParsedSchema

PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
NAMED = frozenset({"record", "error", "enum", "fixed"})

# Writer type -> reader types that may read it (Avro's promotions, plus identity).
PROMOTIONS: dict[str, frozenset[str]] = {
    "int": frozenset({"int", "long", "float", "double"}),
    "long": frozenset({"long", "float", "double"}),
    "float": frozenset({"float", "double"}),
    "string": frozenset({"string", "bytes"}),
    "bytes": frozenset({"bytes", "string"}),
}


class AvroFormat:
    name = "AVRO"

    def parse(
        self, text: str, referenced: list[tuple[str, str]], *, normalize: bool = False
    ) -> ParsedSchema:
        named: dict[str, Any] = {}
        try:
            for _name, ref_text in referenced:
                fastavro.parse_schema(json.loads(ref_text), named_schemas=named, _write_hint=False)
            raw = json.loads(text)
            _require_record_fields(raw)
            parsed = fastavro.parse_schema(raw, named_schemas=named, _write_hint=False)
        except json.JSONDecodeError as exc:
            raise InvalidSchemaError(f"not JSON: {exc}") from exc
        except UnknownType as exc:
            raise InvalidSchemaError(f"unknown type: {exc}") from exc
        except (SchemaParseException, ValueError, TypeError, KeyError, AttributeError) as exc:
            raise InvalidSchemaError(str(exc) or type(exc).__name__) from exc
        # Ids are given per exact schema (defaults and docs matter to readers), so the
        # canonical text is the schema's own JSON without whitespace; normalize=true
        # compares fastavro's expanded form instead (full names, keys in one order).
        canonical = (
            json.dumps(parsed, separators=(",", ":"), sort_keys=True)
            if normalize
            else json.dumps(raw, separators=(",", ":"))
        )
        return ParsedSchema("AVRO", canonical, _Resolved(parsed, named))

    def incompatibilities(self, reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
        checker = _Checker(reader.parsed.names, writer.parsed.names)
        checker.check(reader.parsed.schema, writer.parsed.schema, "")
        return checker.problems


def _require_record_fields(schema: Any) -> None:
    """Avro's parser refuses a record without ``fields``; fastavro reads it as empty."""
    if isinstance(schema, list):
        for branch in schema:
            _require_record_fields(branch)
    elif isinstance(schema, dict):
        kind = schema.get("type")
        if kind in ("record", "error"):
            if not isinstance(schema.get("fields"), list):
                raise InvalidSchemaError(f"record {schema.get('name')!r} has no fields")
            for field in schema["fields"]:
                if isinstance(field, dict):
                    _require_record_fields(field.get("type"))
        elif isinstance(kind, dict | list):
            _require_record_fields(kind)
        elif kind == "array":
            _require_record_fields(schema.get("items"))
        elif kind == "map":
            _require_record_fields(schema.get("values"))


class _Resolved:
    """A parsed schema with the named types it may refer to by name."""

    def __init__(self, schema: Any, named: dict[str, Any]) -> None:
        self.schema = schema
        self.names = dict(named)
        _collect_names(schema, self.names)


def _collect_names(schema: Any, names: dict[str, Any]) -> None:
    if isinstance(schema, list):
        for branch in schema:
            _collect_names(branch, names)
    elif isinstance(schema, dict):
        kind = schema.get("type")
        if kind in NAMED:
            names[schema["name"]] = schema
        if kind in ("record", "error"):
            for field in schema.get("fields", []):
                _collect_names(field["type"], names)
        elif kind == "array":
            _collect_names(schema["items"], names)
        elif kind == "map":
            _collect_names(schema["values"], names)


class _Checker:
    """Walks reader and writer together, collecting every incompatibility with its path."""

    def __init__(self, reader_names: dict[str, Any], writer_names: dict[str, Any]) -> None:
        self.reader_names = reader_names
        self.writer_names = writer_names
        self.problems: list[str] = []
        # (reader name, writer name) pairs being checked: recursive types terminate here.
        self._in_progress: set[tuple[str, str]] = set()

    def _resolve(self, schema: Any, names: dict[str, Any]) -> Any:
        if isinstance(schema, str) and schema not in PRIMITIVES:
            return names.get(schema, schema)
        if isinstance(schema, dict) and schema.get("type") in PRIMITIVES:
            return schema["type"]  # logical types read as their underlying type
        return schema

    def _fail(self, kind: str, path: str, detail: str) -> None:
        where = path or "/"
        self.problems.append(f"{{errorType:'{kind}', description:'{detail}', path:'{where}'}}")

    def check(self, reader: Any, writer: Any, path: str) -> None:
        reader = self._resolve(reader, self.reader_names)
        writer = self._resolve(writer, self.writer_names)
        if isinstance(writer, list):
            # Every branch the writer may have used must be readable.
            for index, branch in enumerate(writer):
                self._check_branch(reader, branch, f"{path}/{index}")
            return
        if isinstance(reader, list):
            if not any(self._readable(branch, writer) for branch in reader):
                self._fail(
                    "MISSING_UNION_BRANCH", path,
                    f"The new schema union has no branch that can read {_describe(writer)}",
                )
            return
        self._check_single(reader, writer, path)

    def _check_branch(self, reader: Any, writer_branch: Any, path: str) -> None:
        if isinstance(self._resolve(reader, self.reader_names), list):
            resolved = self._resolve(reader, self.reader_names)
            if not any(self._readable(b, writer_branch) for b in resolved):
                self._fail(
                    "MISSING_UNION_BRANCH", path,
                    f"The reader union has no branch for {_describe(writer_branch)}",
                )
        else:
            self.check(reader, writer_branch, path)

    def _readable(self, reader: Any, writer: Any) -> bool:
        probe = _Checker(self.reader_names, self.writer_names)
        probe._in_progress = set(self._in_progress)
        probe.check(reader, writer, "")
        return not probe.problems

    def _check_single(self, reader: Any, writer: Any, path: str) -> None:
        reader_kind = reader if isinstance(reader, str) else reader.get("type")
        writer_kind = writer if isinstance(writer, str) else writer.get("type")
        if writer_kind in PRIMITIVES or reader_kind in PRIMITIVES:
            if reader_kind not in PROMOTIONS.get(writer_kind, frozenset({writer_kind})):
                self._fail(
                    "TYPE_MISMATCH", path,
                    f"The type at path '{path or '/'}' in the new schema is {reader_kind}, "
                    f"which cannot read {writer_kind}",
                )
            return
        if {reader_kind, writer_kind} <= {"record", "error"}:
            self._check_record(reader, writer, path)
        elif reader_kind != writer_kind:
            self._fail(
                "TYPE_MISMATCH", path,
                f"The type at path '{path or '/'}' in the new schema is {reader_kind}, "
                f"which cannot read {writer_kind}",
            )
        elif reader_kind == "enum":
            self._check_name(reader, writer, path)
            missing = [s for s in writer["symbols"] if s not in reader["symbols"]]
            if missing and "default" not in reader:
                self._fail(
                    "MISSING_ENUM_SYMBOLS", f"{path}/symbols",
                    f"The new schema is missing enum symbols {missing} at path "
                    f"'{path}/symbols' and has no default symbol",
                )
        elif reader_kind == "fixed":
            self._check_name(reader, writer, path)
            if reader["size"] != writer["size"]:
                self._fail(
                    "FIXED_SIZE_MISMATCH", f"{path}/size",
                    f"The size of the fixed type changed from {writer['size']} to "
                    f"{reader['size']}",
                )
        elif reader_kind == "array":
            self.check(reader["items"], writer["items"], f"{path}/items")
        elif reader_kind == "map":
            self.check(reader["values"], writer["values"], f"{path}/values")

    def _check_name(self, reader: dict[str, Any], writer: dict[str, Any], path: str) -> bool:
        """Named types match by full name, or by the writer's name among the reader's
        aliases (Avro compares unqualified names too when the namespaces differ only by
        the reader's aliases; aliases are expanded to full names by fastavro)."""
        writer_name = writer["name"]
        if reader["name"] == writer_name or writer_name in reader.get("aliases", []):
            return True
        self._fail(
            "NAME_MISMATCH", f"{path}/name",
            f"The name of the type at path '{path or '/'}' changed from {writer_name} to "
            f"{reader['name']}",
        )
        return False

    def _check_record(self, reader: dict[str, Any], writer: dict[str, Any], path: str) -> None:
        if not self._check_name(reader, writer, path):
            return
        pair = (reader["name"], writer["name"])
        if pair in self._in_progress:
            return
        self._in_progress.add(pair)
        writer_fields = {f["name"]: f for f in writer.get("fields", [])}
        for index, field in enumerate(reader.get("fields", [])):
            field_path = f"{path}/fields/{index}"
            candidates = [field["name"], *field.get("aliases", [])]
            written = next((writer_fields[n] for n in candidates if n in writer_fields), None)
            if written is None:
                if "default" not in field:
                    self._fail(
                        "READER_FIELD_MISSING_DEFAULT_VALUE", field_path,
                        f"The field '{field['name']}' at path '{field_path}' in the new "
                        "schema has no default value and is missing in the old schema",
                    )
                continue
            self.check(field["type"], written["type"], f"{field_path}/type")
        self._in_progress.discard(pair)


def _describe(schema: Any) -> str:
    if isinstance(schema, str):
        return schema
    if isinstance(schema, dict):
        return str(schema.get("name", schema.get("type")))
    return "a union"


AVRO = AvroFormat()
