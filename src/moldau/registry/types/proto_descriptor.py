"""A ``.proto`` file's parse tree (proto-schema-parser) as a ``FileDescriptorProto``, for
clients that ask for a schema with ``format=serialized`` (confluent-kafka's Protobuf
deserializer does) when it was registered as text.

Type names are kept as written: the protobuf descriptor pool resolves relative names and
tells enums from messages itself, as it does for protoc's own parser output. Covered:
messages (nested), fields with labels, maps, oneofs, proto3 ``optional``, enums, imports,
package and syntax; options, services and extensions are left out (clients do not need
them to decode).
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2
from proto_schema_parser import ast

FDP = descriptor_pb2.FieldDescriptorProto
SCALARS = {
    name: getattr(FDP, f"TYPE_{name.upper()}")
    for name in ("double", "float", "int64", "uint64", "int32", "fixed64", "fixed32", "bool",
                 "string", "bytes", "uint32", "sfixed32", "sfixed64", "sint32", "sint64")
}
LABELS = {"REPEATED": FDP.LABEL_REPEATED, "REQUIRED": FDP.LABEL_REQUIRED}


def file_descriptor(tree: ast.File,
                    name: str = "default.proto") -> descriptor_pb2.FileDescriptorProto:
    out = descriptor_pb2.FileDescriptorProto(name=name, syntax=tree.syntax or "proto2")
    for element in tree.file_elements:
        if isinstance(element, ast.Package):
            out.package = element.name
        elif isinstance(element, ast.Import):
            out.dependency.append(element.name)
        elif isinstance(element, ast.Message):
            _message(element, out.message_type.add(), proto3=out.syntax == "proto3")
        elif isinstance(element, ast.Enum):
            _enum(element, out.enum_type.add())
    return out


def _set_type(field: Any, type_name: str) -> None:
    if type_name in SCALARS:
        field.type = SCALARS[type_name]
    else:
        field.type_name = type_name


def _message(message: ast.Message, out: descriptor_pb2.DescriptorProto, proto3: bool) -> None:
    out.name = message.name
    synthetic: list[str] = []

    def add_field(element: ast.Field, oneof_index: int | None) -> None:
        field = out.field.add(name=element.name, number=element.number,
                              label=FDP.LABEL_OPTIONAL)
        _set_type(field, element.type)
        cardinality = element.cardinality.value if element.cardinality else None
        if cardinality in LABELS:
            field.label = LABELS[cardinality]
        if oneof_index is not None:
            field.oneof_index = oneof_index
        elif proto3 and cardinality == "OPTIONAL":
            field.proto3_optional = True
            synthetic.append(element.name)
            field.oneof_index = -1  # fixed below, after the real oneofs

    for element in message.elements:
        if isinstance(element, ast.Field):
            add_field(element, None)
        elif isinstance(element, ast.OneOf):
            index = len(out.oneof_decl)
            out.oneof_decl.add(name=element.name)
            for member in element.elements:
                if isinstance(member, ast.Field):
                    add_field(member, index)
        elif isinstance(element, ast.MapField):
            entry_name = "".join(p[:1].upper() + p[1:] for p in element.name.split("_")) + "Entry"
            entry = out.nested_type.add(name=entry_name)
            entry.options.map_entry = True
            key = entry.field.add(name="key", number=1, label=FDP.LABEL_OPTIONAL)
            _set_type(key, element.key_type)
            value = entry.field.add(name="value", number=2, label=FDP.LABEL_OPTIONAL)
            _set_type(value, element.value_type)
            out.field.add(name=element.name, number=element.number,
                          label=FDP.LABEL_REPEATED, type_name=entry_name)
        elif isinstance(element, ast.Message):
            _message(element, out.nested_type.add(), proto3)
        elif isinstance(element, ast.Enum):
            _enum(element, out.enum_type.add())
    for field in out.field:
        if field.proto3_optional:
            field.oneof_index = len(out.oneof_decl)
            out.oneof_decl.add(name=f"_{field.name}")


def _enum(enum: ast.Enum, out: descriptor_pb2.EnumDescriptorProto) -> None:
    out.name = enum.name
    for element in enum.elements:
        if isinstance(element, ast.EnumValue):
            out.value.add(name=element.name, number=element.number)
