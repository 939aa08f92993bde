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
- arrays: items by the same rules; anyOf/oneOf: each writer branch needs a reader branch;
- ``$ref``: followed on each side before comparing, to a definition in the same document
  (``#/definitions/...``) or to a referenced schema (Confluent's schema references, found
  under the reference's name or the ``$id`` it declares), with ``jsonschema``'s
  ``referencing`` registry; a recursive schema is compared once per pair of places. A
  ``$ref`` that resolves nowhere is compared as its text (the same reference is fine).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from jsonschema.exceptions import SchemaError
from jsonschema.validators import Draft7Validator, validator_for
from referencing import Registry, Resource
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT7

if TYPE_CHECKING:
    from referencing._core import Resolver

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
        return ParsedSchema("JSON", canonical, JsonSchema(schema, _resolver(schema, referenced)))

    def incompatibilities(self, reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
        problems: list[str] = []
        compare = _Comparison(problems)
        compare(reader.parsed.schema, writer.parsed.schema, "#", reader.parsed.resolver,
                writer.parsed.resolver)
        return problems


@dataclass(frozen=True)
class JsonSchema:
    """A parsed JSON Schema and where its ``$ref`` keywords lead (its own definitions and the
    schemas it references)."""

    schema: Any
    resolver: Resolver[Any]


def _resolver(schema: Any, referenced: list[tuple[str, str]]) -> Resolver[Any]:
    resources: list[tuple[str, Resource[Any]]] = []
    for name, text in referenced:
        resource = DRAFT7.create_resource(json.loads(text))
        resources.append((name, resource))
        declared = resource.id()
        if declared and declared != name:
            resources.append((declared, resource))
    root = Resource.from_contents(schema, default_specification=DRAFT7)
    base = root.id() or ""
    registry: Registry[Any] = Registry().with_resources([*resources, (base, root)])
    return registry.crawl().resolver(base_uri=base)


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


@dataclass
class _Comparison:
    """One compatibility check: the problems found, and the pairs of places already being
    compared (a recursive schema refers back to itself)."""

    problems: list[str]
    _seen: set[tuple[int, int]] = field(default_factory=set)

    def __call__(self, reader: Any, writer: Any, path: str, reader_at: Resolver[Any],
                 writer_at: Resolver[Any]) -> None:
        if isinstance(reader, dict) and isinstance(writer, dict) and (
                "$ref" in reader or "$ref" in writer):
            reader, reader_at = _follow(reader, reader_at)
            writer, writer_at = _follow(writer, writer_at)
            # The same two schemas again: a recursive schema came back round.
            key = (id(reader), id(writer))
            if key in self._seen:
                return
            self._seen.add(key)
            if "$ref" in reader or "$ref" in writer:  # unresolvable: compared as text
                if reader.get("$ref") != writer.get("$ref"):
                    _fail(self.problems, "TYPE_CHANGED", f"{path}/$ref",
                          f"The reference changed from {writer.get('$ref')} to "
                          f"{reader.get('$ref')}")
                return
        elif isinstance(reader, dict) and "$ref" in reader:
            reader, reader_at = _follow(reader, reader_at)
        elif isinstance(writer, dict) and "$ref" in writer:
            writer, writer_at = _follow(writer, writer_at)
        _compare(reader, writer, path, self.problems,
                 lambda r, w, p: self(r, w, p, reader_at, writer_at),
                 lambda r, w: self.fits(r, w, reader_at, writer_at))

    def fits(self, reader: Any, writer: Any, reader_at: Resolver[Any],
             writer_at: Resolver[Any]) -> bool:
        probe = _Comparison([], set(self._seen))
        probe(reader, writer, "#", reader_at, writer_at)
        return not probe.problems


def _follow(schema: Any, at: Resolver[Any]) -> tuple[Any, Resolver[Any]]:
    """The schema a ``$ref`` leads to (through chains of them), with the resolver for the
    document it is in; the schema itself when it has no ``$ref`` or it resolves nowhere."""
    for _ in range(32):
        ref = schema.get("$ref") if isinstance(schema, dict) else None
        if not isinstance(ref, str):
            break
        try:
            resolved = at.lookup(ref)
        except Unresolvable:
            break
        schema, at = resolved.contents, resolved.resolver
    return schema, at


Recurse = Any  # (reader, writer, path) -> None, following $refs
Fits = Any  # (reader, writer) -> bool


def _compare(reader: Any, writer: Any, path: str, problems: list[str], recurse: Recurse,
             fits: Fits) -> None:
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
                if not any(fits(r, branch) for r in reader_branches):
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
    _compare_object(reader, writer, path, problems, recurse, fits)
    if "items" in reader and isinstance(reader["items"], dict | bool):
        recurse(reader["items"], writer.get("items", True), f"{path}/items")


def _compare_object(reader: dict[str, Any], writer: dict[str, Any], path: str,
                    problems: list[str], recurse: Recurse, fits: Fits) -> None:
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
            recurse(reader_props[name], schema, where)
        elif not _is_open(reader):
            _fail(problems, "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", where,
                  f"The property '{name}' was removed from a closed content model")
        elif isinstance(reader.get("additionalProperties"), dict):
            recurse(reader["additionalProperties"], schema, where)
    for name, schema in reader_props.items():
        if name in writer_props:
            continue
        where = f"{path}/properties/{name}"
        if _is_open(writer) and not _accepts_anything(schema):
            extra = writer.get("additionalProperties", True)
            if extra is True or not fits(schema, extra):
                _fail(problems, "PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", where,
                      f"The property '{name}' was added to an open content model")
    required_before = set(writer.get("required", []))
    for name in reader.get("required", []):
        if name not in required_before:
            _fail(problems, "REQUIRED_PROPERTY_ADDED", f"{path}/required",
                  f"The property '{name}' is required now and was not before")


JSON_SCHEMA = JsonSchemaFormat()

