"""Protobuf wire-compatibility rules, one test per rule, on .proto text and on the
base64 FileDescriptorProto form confluent-kafka's serializer sends."""

from __future__ import annotations

import base64

import pytest
from google.protobuf import descriptor_pb2

from moldau.registry.types.base import InvalidSchemaError
from moldau.registry.types.protobuf import PROTOBUF


def proto(body: str, package: str = "shop") -> str:
    return f'syntax = "proto3";\npackage {package};\n{body}\n'


def problems(reader: str, writer: str) -> list[str]:
    return PROTOBUF.incompatibilities(PROTOBUF.parse(reader, []), PROTOBUF.parse(writer, []))


BASE = proto("message Order { int64 id = 1; string item = 2; }")


def test_identical() -> None:
    assert problems(BASE, BASE) == []


def test_added_and_removed_fields_are_fine() -> None:
    assert problems(proto("message Order { int64 id = 1; string item = 2; bool paid = 3; }"),
                    BASE) == []
    assert problems(proto("message Order { int64 id = 1; }"), BASE) == []


@pytest.mark.parametrize(("old", "new"), [
    ("int64", "int32"), ("int32", "uint64"), ("int64", "bool"), ("string", "bytes"),
    ("fixed32", "sfixed32"), ("fixed64", "sfixed64"), ("sint32", "sint32"),
])
def test_same_wire_encoding_is_compatible(old: str, new: str) -> None:
    assert problems(proto(f"message M {{ {new} f = 1; }}"),
                    proto(f"message M {{ {old} f = 1; }}")) == []


@pytest.mark.parametrize(("old", "new"), [
    ("int64", "string"), ("int32", "sint32"), ("fixed32", "int32"), ("double", "float"),
    ("string", "int32"), ("float", "fixed32"),
])
def test_other_wire_encoding_is_not(old: str, new: str) -> None:
    found = problems(proto(f"message M {{ {new} f = 1; }}"), proto(f"message M {{ {old} f = 1; }}"))
    assert len(found) == 1 and "FIELD_SCALAR_KIND_CHANGED" in found[0]


def test_field_number_reused_for_another_message_type() -> None:
    old = proto("message A {} message B {} message M { A f = 1; }")
    new = proto("message A {} message B {} message M { B f = 1; }")
    assert "FIELD_NAMED_TYPE_CHANGED" in problems(new, old)[0]


def test_enum_reads_as_varint() -> None:
    old = proto("enum Kind { A = 0; } message M { int32 f = 1; }")
    new = proto("enum Kind { A = 0; } message M { Kind f = 1; }")
    assert problems(new, old) == []


def test_singular_to_repeated() -> None:
    found = problems(proto("message M { repeated int64 f = 1; }"),
                     proto("message M { int64 f = 1; }"))
    assert "FIELD_LABEL_CHANGED" in found[0]


def test_field_moved_into_oneof() -> None:
    found = problems(proto("message M { oneof o { int64 f = 1; string g = 2; } }"),
                     proto("message M { int64 f = 1; }"))
    assert "FIELD_MOVED_TO_ONEOF" in found[0]


def test_message_removed_and_package_changed() -> None:
    assert "MESSAGE_REMOVED" in problems(proto("message Other {}"), BASE)[0]
    assert "PACKAGE_CHANGED" in problems(proto("message Order { int64 id = 1; string item = 2; }",
                                               package="elsewhere"), BASE)[0]


def test_nested_messages_are_compared() -> None:
    old = proto("message M { message Inner { int64 x = 1; } Inner i = 1; }")
    new = proto("message M { message Inner { string x = 1; } Inner i = 1; }")
    found = problems(new, old)
    assert len(found) == 1 and "#/M.Inner/1" in found[0]


def test_proto2_required_fields() -> None:
    old = 'syntax = "proto2"; message M { required int64 id = 1; }'
    assert "REQUIRED_FIELD_REMOVED" in problems('syntax = "proto2"; message M { }', old)[0]
    added = 'syntax = "proto2"; message M { required int64 id = 1; required int64 x = 2; }'
    assert "REQUIRED_FIELD_ADDED" in problems(added, old)[0]


def test_base64_descriptor_equals_text_model() -> None:
    file = descriptor_pb2.FileDescriptorProto(name="order.proto", package="shop",
                                              syntax="proto3")
    message = file.message_type.add(name="Order")
    message.field.add(name="id", number=1, type=3, label=1)  # int64
    message.field.add(name="item", number=2, type=9, label=1)  # string
    encoded = base64.b64encode(file.SerializeToString()).decode()
    assert problems(encoded, BASE) == [] and problems(BASE, encoded) == []
    changed = proto("message Order { int64 id = 1; double item = 2; }")
    assert "FIELD_SCALAR_KIND_CHANGED" in problems(changed, encoded)[0]


def test_invalid_schemas_are_refused() -> None:
    for bad in ("message {", 'syntax = "proto3"; message A { int32 a = ; }', "hello",
                "bm90IGEgZGVzY3JpcHRvcg=="):
        with pytest.raises(InvalidSchemaError):
            PROTOBUF.parse(bad, [])
