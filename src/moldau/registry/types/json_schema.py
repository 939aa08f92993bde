"""JSON Schema: validated with the ``jsonschema`` library (the metaschema of the draft
the schema names, draft 7 by default as in Confluent), compatibility by the content-model
rules Confluent applies.

"Can ``reader`` read what ``writer`` allows" means: every document valid under the writer
is valid under the reader. Objects have an *open* content model (other properties allowed,
``additionalProperties`` absent or true) or a *closed* one (``additionalProperties:
false``). The rules, each with a unit test (tests/unit/registry/test_json_compatibility.py):

- type: the reader's types must cover the writer's (``integer`` is covered by ``number``);
- a property the writer has and the reader lacks: fine if the reader is open, refused if
  closed (PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL);
- a property the reader adds: fine if the writer is closed (no writer document has it),
  refused if the writer is open (a writer document may hold anything under that name)
  unless the reader's property accepts anything (PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL);
- required: the reader may not require what the writer did not (REQUIRED_PROPERTY_ADDED);
- additionalProperties: turning an open model closed is refused;
- enum: the reader's values must include the writer's; numeric and length limits may only
  widen (maximum/maxLength/maxItems not lower, minimum/minLength/minItems not higher);
- arrays: items by the same rules; anyOf/oneOf: each writer branch needs a reader branch.
"""

from __future__ import annotations

import json
from typing import Any

from jsonschema.exceptions import SchemaError
from jsonschema.validators import Draft7Validator, validator_for

from .base import InvalidSchemaError, ParsedSchema

NARROWING_LIMITS = {  # keyword -> True when a larger value is narrower
    "minimum": True, "exclusiveMinimum": True, "minLength": True, "minItems": True,
    "minProperties": True,
    "maximum": False, "exclusiveMaximum": False, "maxLength": False, "maxItems": False,
    "maxProperties": False,
}


class JsonSchemaFormat:
    name = "JSON"

    def parse(
        self, text: str, referenced: list[tuple[str, str]], *, normalize: bool = False
    ) -> ParsedSchema:
        try:
            schema = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InvalidSchemaError(f"not JSON: {exc}") from exc
        if not isinstance(schema, dict | bool):
            raise InvalidSchemaError("a JSON Schema is an object or a boolean")
        try:
            for _name, ref_text in referenced:
                Draft7Validator.check_schema(json.loads(ref_text))
            validator_for(schema, default=Draft7Validator).check_schema(schema)
        except (SchemaError, ValueError) as exc:
            raise InvalidSchemaError(getattr(exc, "message", str(exc))) from exc
        canonical = json.dumps(schema, separators=(",", ":"), sort_keys=normalize)
        return ParsedSchema("JSON", canonical, schema)

    def incompatibilities(self, reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
        problems: list[str] = []
        _compare(reader.parsed, writer.parsed, "#", problems)
        return problems


def _types(schema: Any) -> set[str] | None:
    declared = schema.get("type") if isinstance(schema, dict) else None
    if declared is None:
        return None
    return {declared} if isinstance(declared, str) else set(declared)


def _accepts_anything(schema: Any) -> bool:
    return schema is True or schema == {}


def _is_open(schema: dict[str, Any]) -> bool:
    return schema.get("additionalProperties", True) is not False


def _fail(problems: list[str], kind: str, path: str, detail: str) -> None:
    problems.append(f"{{errorType:'{kind}', description:'{detail}', path:'{path}'}}")


def _compare(reader: Any, writer: Any, path: str, problems: list[str]) -> None:
    if _accepts_anything(reader) or writer is False:
        return
    if reader is False or _accepts_anything(writer):
        if not _accepts_anything(reader):
            _fail(problems, "TYPE_NARROWED", path, "The new schema accepts less than the old")
        return
    for combiner in ("anyOf", "oneOf"):
        if combiner in writer or combiner in reader:
            reader_branches = reader.get(combiner, [reader])
            for index, branch in enumerate(writer.get(combiner, [writer])):
                if not any(_fits(r, branch) for r in reader_branches):
                    _fail(problems, "COMBINED_TYPE_SUBSCHEMAS_CHANGED",
                          f"{path}/{combiner}/{index}",
                          "A branch of the old schema has no matching branch in the new one")
            return
    reader_types, writer_types = _types(reader), _types(writer)
    if reader_types is not None:
        covered = reader_types | ({"integer"} if "number" in reader_types else set())
        if writer_types is None or not writer_types <= covered:
            _fail(problems, "TYPE_NARROWED" if writer_types and reader_types < writer_types
                  else "TYPE_CHANGED", f"{path}/type",
                  f"The type changed from {sorted(writer_types or ['any'])} to "
                  f"{sorted(reader_types)}")
            return
    if "enum" in reader:
        missing = [v for v in writer.get("enum", [None]) if v not in reader["enum"]]
        if "enum" not in writer or missing:
            _fail(problems, "ENUM_ARRAY_NARROWED", f"{path}/enum",
                  f"The new enum lacks values the old schema allowed: {missing}")
    for keyword, larger_is_narrower in NARROWING_LIMITS.items():
        if keyword not in reader:
            continue
        old = writer.get(keyword)
        new = reader[keyword]
        if not isinstance(new, int | float) or isinstance(new, bool):
            continue
        if old is None or (new > old if larger_is_narrower else new < old):
            change = "INCREASED" if larger_is_narrower else "DECREASED"
            kind = f"{keyword.upper()}_{change if old is not None else 'ADDED'}"
            _fail(problems, kind, f"{path}/{keyword}", f"{keyword} changed from {old} to {new}")
    _compare_object(reader, writer, path, problems)
    if "items" in reader and isinstance(reader["items"], dict | bool):
        _compare(reader["items"], writer.get("items", True), f"{path}/items", problems)


def _compare_object(reader: dict[str, Any], writer: dict[str, Any], path: str,
                    problems: list[str]) -> None:
    reader_props: dict[str, Any] = reader.get("properties", {})
    writer_props: dict[str, Any] = writer.get("properties", {})
    if not reader_props and not writer_props and "additionalProperties" not in reader:
        return
    if _is_open(writer) and not _is_open(reader):
        _fail(problems, "ADDITIONAL_PROPERTIES_REMOVED", f"{path}/additionalProperties",
              "The new schema closes a content model that was open")
    for name, schema in writer_props.items():
        where = f"{path}/properties/{name}"
        if name in reader_props:
            _compare(reader_props[name], schema, where, problems)
        elif not _is_open(reader):
            _fail(problems, "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", where,
                  f"The property '{name}' was removed from a closed content model")
        elif isinstance(reader.get("additionalProperties"), dict):
            _compare(reader["additionalProperties"], schema, where, problems)
    for name, schema in reader_props.items():
        if name in writer_props:
            continue
        where = f"{path}/properties/{name}"
        if _is_open(writer) and not _accepts_anything(schema):
            extra = writer.get("additionalProperties", True)
            if extra is True or not _fits(schema, extra):
                _fail(problems, "PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", where,
                      f"The property '{name}' was added to an open content model")
    required_before = set(writer.get("required", []))
    for name in reader.get("required", []):
        if name not in required_before:
            _fail(problems, "REQUIRED_PROPERTY_ADDED", f"{path}/required",
                  f"The property '{name}' is required now and was not before")


def _fits(reader: Any, writer: Any) -> bool:
    probe: list[str] = []
    _compare(reader, writer, "#", probe)
    return not probe


JSON_SCHEMA = JsonSchemaFormat()

