"""Avro's schema-resolution rules, one test per rule: can data written with ``writer`` be
read with ``reader``?"""

from __future__ import annotations

import json
from typing import Any

import pytest

from moldau.registry import compatibility
from moldau.registry.types.avro import AVRO
from moldau.registry.types.base import InvalidSchemaError, ParsedSchema


def parse(schema: Any) -> ParsedSchema:
    return AVRO.parse(json.dumps(schema), [])


def problems(reader: Any, writer: Any) -> list[str]:
    return AVRO.incompatibilities(parse(reader), parse(writer))


def rec(*fields: dict[str, Any], name: str = "R", **extra: Any) -> dict[str, Any]:
    return {"type": "record", "name": name, "fields": list(fields), **extra}


def test_field_added_with_default_is_readable() -> None:
    assert problems(rec({"name": "a", "type": "int"}, {"name": "b", "type": "int", "default": 1}),
                    rec({"name": "a", "type": "int"})) == []


def test_field_added_without_default_is_not() -> None:
    found = problems(rec({"name": "a", "type": "int"}, {"name": "b", "type": "int"}),
                     rec({"name": "a", "type": "int"}))
    assert len(found) == 1 and "READER_FIELD_MISSING_DEFAULT_VALUE" in found[0]
    assert "'b'" in found[0]


def test_field_removed_is_ignored_by_the_reader() -> None:
    assert problems(rec({"name": "a", "type": "int"}),
                    rec({"name": "a", "type": "int"}, {"name": "b", "type": "string"})) == []


@pytest.mark.parametrize(("writer", "reader"), [
    ("int", "long"), ("int", "float"), ("int", "double"), ("long", "float"),
    ("long", "double"), ("float", "double"), ("string", "bytes"), ("bytes", "string"),
])
def test_promotions(writer: str, reader: str) -> None:
    assert problems(reader, writer) == []


@pytest.mark.parametrize(("writer", "reader"), [
    ("long", "int"), ("double", "float"), ("float", "long"), ("string", "int"),
    ("boolean", "int"), ("null", "string"),
])
def test_no_demotions_or_unrelated_primitives(writer: str, reader: str) -> None:
    found = problems(reader, writer)
    assert len(found) == 1 and "TYPE_MISMATCH" in found[0]


def test_field_type_promotion_inside_record() -> None:
    assert problems(rec({"name": "a", "type": "long"}), rec({"name": "a", "type": "int"})) == []
    found = problems(rec({"name": "a", "type": "int"}), rec({"name": "a", "type": "long"}))
    assert "/fields/0/type" in found[0]


def test_enum_reader_missing_symbol() -> None:
    writer = {"type": "enum", "name": "E", "symbols": ["A", "B", "C"]}
    reader = {"type": "enum", "name": "E", "symbols": ["A", "B"]}
    found = problems(reader, writer)
    assert len(found) == 1 and "MISSING_ENUM_SYMBOLS" in found[0] and "C" in found[0]
    # Adding symbols on the reader side is fine.
    assert problems(writer, reader) == []


def test_enum_reader_default_covers_missing_symbols() -> None:
    writer = {"type": "enum", "name": "E", "symbols": ["A", "B", "C"]}
    reader = {"type": "enum", "name": "E", "symbols": ["A", "B"], "default": "A"}
    assert problems(reader, writer) == []


def test_union_writer_branches_all_need_a_reader_branch() -> None:
    assert problems(["null", "string", "int"], ["null", "string"]) == []
    found = problems(["null", "string"], ["null", "string", "int"])
    assert len(found) == 1 and "MISSING_UNION_BRANCH" in found[0]


def test_union_reader_reads_a_non_union_writer() -> None:
    assert problems(["null", "long"], "int") == []  # through a promotion
    assert "MISSING_UNION_BRANCH" in problems(["null", "string"], "int")[0]


def test_union_writer_into_non_union_reader() -> None:
    assert problems("long", ["int", "long"]) == []
    assert "TYPE_MISMATCH" in problems("int", ["int", "long"])[0]


def test_nested_records_are_checked_field_by_field() -> None:
    inner_v1 = rec({"name": "x", "type": "int"}, name="Inner")
    inner_v2 = rec({"name": "x", "type": "int"}, {"name": "y", "type": "int"}, name="Inner")
    found = problems(rec({"name": "in", "type": inner_v2}), rec({"name": "in", "type": inner_v1}))
    assert len(found) == 1 and "/fields/0/type/fields/1" in found[0]


def test_record_name_change_is_incompatible_unless_aliased() -> None:
    writer = rec({"name": "a", "type": "int"}, name="Old")
    assert "NAME_MISMATCH" in problems(rec({"name": "a", "type": "int"}, name="New"), writer)[0]
    assert problems(rec({"name": "a", "type": "int"}, name="New", aliases=["Old"]), writer) == []


def test_field_rename_with_alias() -> None:
    writer = rec({"name": "old", "type": "int"})
    assert problems(rec({"name": "new", "type": "int", "aliases": ["old"]}), writer) == []
    assert problems(rec({"name": "new", "type": "int"}), writer)


def test_fixed_size_and_name() -> None:
    fixed = {"type": "fixed", "name": "F", "size": 4}
    assert problems(fixed, fixed) == []
    assert "FIXED_SIZE_MISMATCH" in problems({**fixed, "size": 8}, fixed)[0]
    assert "NAME_MISMATCH" in problems({**fixed, "name": "G"}, fixed)[0]


def test_arrays_and_maps_check_their_items_and_values() -> None:
    assert problems({"type": "array", "items": "long"}, {"type": "array", "items": "int"}) == []
    assert problems({"type": "array", "items": "int"}, {"type": "array", "items": "long"})
    assert problems({"type": "map", "values": "double"}, {"type": "map", "values": "float"}) == []
    assert "/values" in problems({"type": "map", "values": "int"},
                                 {"type": "map", "values": "string"})[0]
    assert "TYPE_MISMATCH" in problems({"type": "array", "items": "int"},
                                       {"type": "map", "values": "int"})[0]


def test_logical_types_read_as_their_underlying_type() -> None:
    millis = {"type": "long", "logicalType": "timestamp-millis"}
    assert problems(millis, "long") == []
    assert problems("long", millis) == []


def test_recursive_records_terminate() -> None:
    node = rec({"name": "value", "type": "int"},
               {"name": "next", "type": ["null", "Node"], "default": None}, name="Node")
    assert problems(node, node) == []


def test_named_type_referenced_by_name() -> None:
    enum = {"type": "enum", "name": "E", "symbols": ["A"]}
    writer = rec({"name": "a", "type": enum}, {"name": "b", "type": "E"})
    reader = rec({"name": "a", "type": {**enum, "symbols": ["A", "B"]}}, {"name": "b", "type": "E"})
    assert problems(reader, writer) == []


def test_invalid_schemas_are_refused() -> None:
    for bad in ("{", '{"type": "nope"}', '{"type": "record", "name": "R"}',
                '{"type": "record", "name": "R", "fields": [{"name": "a", "type": "int", '
                '"default": "x"}]}'):
        with pytest.raises(InvalidSchemaError):
            AVRO.parse(bad, [])


def test_canonical_form_ignores_whitespace_only() -> None:
    compact = parse(rec({"name": "a", "type": "int"}))
    spaced = AVRO.parse(json.dumps(rec({"name": "a", "type": "int"}), indent=4), [])
    with_doc = parse(rec({"name": "a", "type": "int", "doc": "the a"}))
    assert compact.canonical == spaced.canonical != with_doc.canonical


def test_references_supply_named_types() -> None:
    address = json.dumps(rec({"name": "city", "type": "string"}, name="Address"))
    person = json.dumps(rec({"name": "home", "type": "Address"}, name="Person"))
    with pytest.raises(InvalidSchemaError):
        AVRO.parse(person, [])
    assert AVRO.parse(person, [("Address", address)]).schema_type == "AVRO"


@pytest.mark.parametrize(("level", "backward_ok", "forward_ok", "expected"), [
    ("BACKWARD", True, False, True), ("BACKWARD", False, True, False),
    ("FORWARD", False, True, True), ("FORWARD", True, False, False),
    ("FULL", True, False, False), ("FULL", True, True, True), ("NONE", False, False, True),
])
def test_levels_choose_the_direction(
    level: str, backward_ok: bool, forward_ok: bool, expected: bool
) -> None:
    old = {"name": "a", "type": "int"}
    # new reads old: needs new fields to have defaults; old reads new: old fields need them.
    new_fields = [old] + ([{"name": "n", "type": "int", "default": 0}] if backward_ok
                          else [{"name": "n", "type": "int"}])
    old_fields = [old] + ([{"name": "o", "type": "int", "default": 0}] if forward_ok
                          else [{"name": "o", "type": "int"}])
    new, previous = parse(rec(*new_fields)), parse(rec(*old_fields))
    messages = compatibility.check(level, new, [(1, previous)])
    assert (not messages) is expected, messages


def test_transitive_checks_every_version_plain_only_the_latest() -> None:
    v1 = parse(rec({"name": "a", "type": "int"}))
    v2 = parse(rec({"name": "a", "type": "int"}, {"name": "b", "type": "int", "default": 0}))
    v3 = parse(rec({"name": "b", "type": "int"}))
    assert compatibility.check("BACKWARD", v3, [(1, v1), (2, v2)]) == []
    messages = compatibility.check("BACKWARD_TRANSITIVE", v3, [(1, v1), (2, v2)])
    assert "{oldSchemaVersion: 1}" in messages
    assert messages[-1] == "{compatibility: 'BACKWARD_TRANSITIVE'}"
