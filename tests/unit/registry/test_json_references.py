"""JSON Schema compatibility through ``$ref``: to the schema's own definitions, to referenced
schemas (Confluent's schema references) by name or by ``$id``, recursive schemas, and
references that resolve nowhere. One test per case."""

from __future__ import annotations

import json
from typing import Any

from moldau.registry.types.base import ParsedSchema
from moldau.registry.types.json_schema import JSON_SCHEMA

ADDRESS_V1 = {"type": "object", "properties": {"street": {"type": "string"},
                                               "zip": {"type": "string"}}}
# The zip became an integer: documents written with v1 do not validate under v2.
ADDRESS_V2 = {"type": "object", "properties": {"street": {"type": "string"},
                                               "zip": {"type": "integer"}}}
# Adds an optional property to a closed model: readable by what read v1.
ADDRESS_CLOSED_V1 = {**ADDRESS_V1, "additionalProperties": False}
ADDRESS_CLOSED_V2 = {"type": "object", "additionalProperties": False, "properties": {
    **ADDRESS_V1["properties"], "city": {"type": "string"}}}


def parse(schema: Any, *referenced: tuple[str, Any]) -> ParsedSchema:
    return JSON_SCHEMA.parse(json.dumps(schema),
                             [(name, json.dumps(text)) for name, text in referenced])


def order(ref: str) -> dict[str, Any]:
    return {"type": "object", "properties": {"id": {"type": "integer"},
                                             "ship_to": {"$ref": ref}}}


def test_local_definition_narrowed_is_refused() -> None:
    def with_zip(zip_type: str) -> dict[str, Any]:
        return {"type": "object", "properties": {"ship_to": {"$ref": "#/definitions/a"}},
                "definitions": {"a": {"type": "object",
                                      "properties": {"zip": {"type": zip_type}}}}}

    found = JSON_SCHEMA.incompatibilities(parse(with_zip("integer")), parse(with_zip("string")))
    assert len(found) == 1 and "TYPE_CHANGED" in found[0]
    assert "#/properties/ship_to/properties/zip/type" in found[0]


def test_local_definition_unchanged_is_fine() -> None:
    schema = {"type": "object", "properties": {"a": {"$ref": "#/definitions/s"}},
              "definitions": {"s": {"type": "string"}}}
    assert JSON_SCHEMA.incompatibilities(parse(schema), parse(schema)) == []


def test_referenced_schema_changed_incompatibly_is_refused() -> None:
    """The same referring schema, the reference moved to an incompatible version."""
    reader = parse(order("address.json"), ("address.json", ADDRESS_V2))
    writer = parse(order("address.json"), ("address.json", ADDRESS_V1))
    found = JSON_SCHEMA.incompatibilities(reader, writer)
    assert len(found) == 1 and "#/properties/ship_to/properties/zip/type" in found[0]


def test_referenced_schema_changed_compatibly_is_fine() -> None:
    reader = parse(order("address.json"), ("address.json", ADDRESS_CLOSED_V2))
    writer = parse(order("address.json"), ("address.json", ADDRESS_CLOSED_V1))
    assert JSON_SCHEMA.incompatibilities(reader, writer) == []
    # And the other way round the added property of a closed model is a removal.
    found = JSON_SCHEMA.incompatibilities(writer, reader)
    assert len(found) == 1 and "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL" in found[0]


def test_reference_found_by_its_declared_id() -> None:
    url = "https://example.com/schemas/address.json"
    reader = parse(order(url), ("address", {**ADDRESS_V2, "$id": url}))
    writer = parse(order(url), ("address", {**ADDRESS_V1, "$id": url}))
    assert len(JSON_SCHEMA.incompatibilities(reader, writer)) == 1


def test_relative_reference_from_a_schema_with_an_id() -> None:
    """``$ref: address.json`` in a schema whose ``$id`` is a URL resolves against it."""
    base = "https://example.com/schemas/"
    reader = parse({**order("address.json"), "$id": base + "order.json"},
                   (base + "address.json", ADDRESS_V2))
    writer = parse({**order("address.json"), "$id": base + "order.json"},
                   (base + "address.json", ADDRESS_V1))
    assert len(JSON_SCHEMA.incompatibilities(reader, writer)) == 1


def test_reference_against_the_same_schema_inline_is_fine() -> None:
    """A writer that had the address inline, a reader that references the same schema."""
    inline = {"type": "object", "properties": {"id": {"type": "integer"},
                                               "ship_to": ADDRESS_V1}}
    reader = parse(order("address.json"), ("address.json", ADDRESS_V1))
    assert JSON_SCHEMA.incompatibilities(reader, parse(inline)) == []
    narrowed = parse(order("address.json"), ("address.json", ADDRESS_V2))
    assert len(JSON_SCHEMA.incompatibilities(narrowed, parse(inline))) == 1


def test_reference_in_a_referenced_schema_is_followed() -> None:
    """order -> address -> zip code: a change two references away is found."""
    def address(zip_ref: str) -> dict[str, Any]:
        return {"type": "object", "properties": {"zip": {"$ref": zip_ref}}}

    reader = parse(order("address.json"), ("zip.json", {"type": "integer"}),
                   ("address.json", address("zip.json")))
    writer = parse(order("address.json"), ("zip.json", {"type": "string"}),
                   ("address.json", address("zip.json")))
    found = JSON_SCHEMA.incompatibilities(reader, writer)
    assert len(found) == 1 and "ship_to/properties/zip/type" in found[0]


def test_recursive_schema_terminates() -> None:
    def tree(value_type: str) -> dict[str, Any]:
        return {"type": "object", "properties": {
            "value": {"type": value_type},
            "children": {"type": "array", "items": {"$ref": "#"}}}}

    assert JSON_SCHEMA.incompatibilities(parse(tree("string")), parse(tree("string"))) == []
    found = JSON_SCHEMA.incompatibilities(parse(tree("integer")), parse(tree("string")))
    assert found and all("TYPE_CHANGED" in f for f in found)


def test_unresolvable_reference_compared_as_text() -> None:
    same = order("https://nowhere.invalid/a.json")
    assert JSON_SCHEMA.incompatibilities(parse(same), parse(same)) == []
    found = JSON_SCHEMA.incompatibilities(parse(order("https://nowhere.invalid/b.json")),
                                          parse(same))
    assert len(found) == 1 and "#/properties/ship_to/$ref" in found[0]


def test_anyof_branches_through_references() -> None:
    def either(second: str) -> dict[str, Any]:
        return {"anyOf": [{"type": "string"}, {"$ref": second}]}

    reader = parse(either("n.json"), ("n.json", {"type": "number"}))
    writer = parse(either("n.json"), ("n.json", {"type": "integer"}))
    assert JSON_SCHEMA.incompatibilities(reader, writer) == []
    found = JSON_SCHEMA.incompatibilities(writer, reader)
    assert len(found) == 1 and "COMBINED_TYPE_SUBSCHEMAS_CHANGED" in found[0]
