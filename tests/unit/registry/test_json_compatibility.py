"""JSON Schema content-model rules, one test per rule: is every document the ``writer``
allows also allowed by the ``reader``?"""

from __future__ import annotations

import json
from typing import Any

import pytest

from moldau.registry.types.base import InvalidSchemaError
from moldau.registry.types.json_schema import JSON_SCHEMA


def problems(reader: Any, writer: Any) -> list[str]:
    return JSON_SCHEMA.incompatibilities(JSON_SCHEMA.parse(json.dumps(reader), []),
                                         JSON_SCHEMA.parse(json.dumps(writer), []))


def obj(closed: bool = False, required: tuple[str, ...] = (), **props: Any) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": props}
    if closed:
        schema["additionalProperties"] = False
    if required:
        schema["required"] = list(required)
    return schema


STR, INT, NUM = {"type": "string"}, {"type": "integer"}, {"type": "number"}


def test_identical_schemas() -> None:
    assert problems(obj(a=STR), obj(a=STR)) == []


def test_property_removed_from_open_model_is_fine() -> None:
    assert problems(obj(a=STR), obj(a=STR, b=INT)) == []


def test_property_removed_from_closed_model_is_not() -> None:
    found = problems(obj(closed=True, a=STR), obj(closed=True, a=STR, b=INT))
    assert len(found) == 1 and "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL" in found[0]


def test_property_added_to_closed_writer_is_fine() -> None:
    assert problems(obj(closed=True, a=STR, b=INT), obj(closed=True, a=STR)) == []


def test_property_added_to_open_writer_is_not() -> None:
    found = problems(obj(a=STR, b=INT), obj(a=STR))
    assert len(found) == 1 and "PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL" in found[0]
    # ...unless the new property accepts anything.
    assert problems(obj(a=STR, b={}), obj(a=STR)) == []


def test_required_property_added() -> None:
    found = problems(obj(closed=True, required=("a",), a=STR), obj(closed=True, a=STR))
    assert len(found) == 1 and "REQUIRED_PROPERTY_ADDED" in found[0]
    assert problems(obj(a=STR), obj(required=("a",), a=STR)) == []


def test_closing_an_open_model() -> None:
    assert "ADDITIONAL_PROPERTIES_REMOVED" in problems(obj(closed=True, a=STR), obj(a=STR))[0]
    assert problems(obj(a=STR), obj(closed=True, a=STR)) == []


def test_type_change_and_widening() -> None:
    assert problems(obj(a=NUM), obj(a=INT)) == []  # integer is a number
    assert "TYPE_CHANGED" in problems(obj(a=INT), obj(a=NUM))[0]
    assert "TYPE_CHANGED" in problems(obj(a=STR), obj(a=INT))[0]
    assert problems(obj(a={"type": ["string", "null"]}), obj(a=STR)) == []
    assert "TYPE_NARROWED" in problems(obj(a=STR), obj(a={"type": ["string", "null"]}))[0]


def test_enum_narrowed_and_widened() -> None:
    small, big = {"enum": ["a", "b"]}, {"enum": ["a", "b", "c"]}
    assert problems(obj(x=big), obj(x=small)) == []
    assert "ENUM_ARRAY_NARROWED" in problems(obj(x=small), obj(x=big))[0]


@pytest.mark.parametrize(("keyword", "narrower", "wider"), [
    ("maxLength", 5, 10), ("minLength", 5, 1), ("maximum", 10, 100), ("minimum", 10, 0),
    ("maxItems", 2, 3),
])
def test_limits_may_only_widen(keyword: str, narrower: int, wider: int) -> None:
    assert problems({keyword: wider}, {keyword: narrower}) == []
    assert problems({keyword: narrower}, {keyword: wider})
    assert problems({keyword: narrower}, {})  # a limit added


def test_array_items() -> None:
    assert problems({"type": "array", "items": NUM}, {"type": "array", "items": INT}) == []
    assert problems({"type": "array", "items": INT}, {"type": "array", "items": STR})


def test_union_branches() -> None:
    assert problems({"oneOf": [STR, INT, {"type": "null"}]}, {"oneOf": [STR, INT]}) == []
    found = problems({"oneOf": [STR]}, {"oneOf": [STR, INT]})
    assert "COMBINED_TYPE_SUBSCHEMAS_CHANGED" in found[0]


def test_nested_objects() -> None:
    found = problems(obj(inner=obj(closed=True, a=STR)), obj(inner=obj(closed=True, a=STR, b=INT)))
    assert "#/properties/inner/properties/b" in found[0]


def test_invalid_schemas_are_refused() -> None:
    for bad in ('{"type": "strin"}', '{"type": 5}', '{"minLength": -1}', "[1]", "{"):
        with pytest.raises(InvalidSchemaError):
            JSON_SCHEMA.parse(bad, [])
