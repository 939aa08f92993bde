"""A ``FileDescriptorProto`` as ``.proto`` text, and the form-independent identity of a
Protobuf schema.

Confluent's registry stores Protobuf schemas as ``.proto`` text whichever form they came in:
confluent-kafka's ProtobufSerializer registers and looks up a base64 ``FileDescriptorProto``,
users and the Java client send text. :func:`proto_text` writes a descriptor back as text
(messages, nested types, fields with labels, maps, oneofs, proto3 ``optional``, enums,
imports, package, syntax and services; options are left out, as in proto_descriptor.py).

:func:`identity` is what makes both forms of one schema the same schema for lookups,
registrations and ids: the descriptor with what only one form carries removed (file name,
``json_name``, options, reserved ranges, source info) and type references reduced to their
last name (protoc writes ``.shop.Order.Line``, a parse of the text ``Line``).
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2

FDP = descriptor_pb2.FieldDescriptorProto
_SCALAR_NAMES = {
    value: name.removeprefix("TYPE_").lower()
    for name, value in FDP.Type.items()
    if name not in ("TYPE_MESSAGE", "TYPE_ENUM", "TYPE_GROUP")
}
_INDENT = "  "


def proto_text(file: descriptor_pb2.FileDescriptorProto) -> str:
    syntax = file.syntax or "proto2"
    lines = [f'syntax = "{syntax}";']
    if file.package:
        lines.append(f"package {file.package};")
    if file.dependency:
        lines.append("")
        lines += [f'import "{dependency}";' for dependency in file.dependency]
    for message in file.message_type:
        lines.append("")
        lines += _message(message, syntax, "")
    for enum in file.enum_type:
        lines.append("")
        lines += _enum(enum, "")
    for service in file.service:
        lines.append("")
        lines.append(f"service {service.name} {{")
        for method in service.method:
            source = f"stream {method.input_type}" if method.client_streaming \
                else method.input_type
            sink = f"stream {method.output_type}" if method.server_streaming \
                else method.output_type
            lines.append(f"{_INDENT}rpc {method.name} ({source}) returns ({sink});")
        lines.append("}")
    return "\n".join(lines) + "\n"


def _type_of(field: descriptor_pb2.FieldDescriptorProto) -> str:
    return field.type_name if field.type_name else _SCALAR_NAMES[field.type]


def _message(message: descriptor_pb2.DescriptorProto, syntax: str, indent: str) -> list[str]:
    inner = indent + _INDENT
    entries = {nested.name: nested for nested in message.nested_type
               if nested.options.map_entry}
    lines = [f"{indent}message {message.name} {{"]
    printed_oneofs: set[int] = set()
    for field in message.field:
        in_oneof = field.HasField("oneof_index") and not field.proto3_optional
        if in_oneof:
            if field.oneof_index in printed_oneofs:
                continue
            printed_oneofs.add(field.oneof_index)
            lines.append(f"{inner}oneof {message.oneof_decl[field.oneof_index].name} {{")
            lines += [f"{inner}{_INDENT}{_type_of(member)} {member.name} = {member.number};"
                      for member in message.field
                      if member.HasField("oneof_index") and not member.proto3_optional
                      and member.oneof_index == field.oneof_index]
            lines.append(f"{inner}}}")
            continue
        entry = entries.get(field.type_name.rsplit(".", 1)[-1]) if field.type_name else None
        if entry is not None and field.label == FDP.LABEL_REPEATED:
            key, value = entry.field[0], entry.field[1]
            lines.append(f"{inner}map<{_type_of(key)}, {_type_of(value)}> {field.name} = "
                         f"{field.number};")
            continue
        label = ""
        if field.label == FDP.LABEL_REPEATED:
            label = "repeated "
        elif field.label == FDP.LABEL_REQUIRED:
            label = "required "
        elif syntax == "proto2" or field.proto3_optional:
            label = "optional "
        lines.append(f"{inner}{label}{_type_of(field)} {field.name} = {field.number};")
    for nested in message.nested_type:
        if not nested.options.map_entry:
            lines += _message(nested, syntax, inner)
    for enum in message.enum_type:
        lines += _enum(enum, inner)
    lines.append(f"{indent}}}")
    return lines


def _enum(enum: descriptor_pb2.EnumDescriptorProto, indent: str) -> list[str]:
    return [f"{indent}enum {enum.name} {{",
            *(f"{indent}{_INDENT}{value.name} = {value.number};" for value in enum.value),
            f"{indent}}}"]


def identity(file: descriptor_pb2.FileDescriptorProto) -> bytes:
    """The schema's bytes with what differs between its two forms taken out."""
    copy = descriptor_pb2.FileDescriptorProto()
    copy.CopyFrom(file)
    copy.ClearField("name")
    copy.ClearField("options")
    copy.ClearField("source_code_info")
    copy.ClearField("service")
    copy.ClearField("extension")
    if not copy.syntax:
        copy.syntax = "proto2"
    for message in copy.message_type:
        _strip_message(message)
    for enum in copy.enum_type:
        _strip_enum(enum)
    _sort_by_name(copy.message_type)
    _sort_by_name(copy.enum_type)
    return copy.SerializeToString(deterministic=True)


def _sort_by_name(items: Any) -> None:
    """Declaration order of types does not change a schema (protoc and a parse of the text
    may differ in where a map's entry type goes)."""
    ordered = sorted(items, key=lambda item: item.name)
    copies = [type(item)() for item in ordered]
    for copy, item in zip(copies, ordered, strict=True):
        copy.CopyFrom(item)
    del items[:]
    items.extend(copies)


def _strip_message(message: descriptor_pb2.DescriptorProto) -> None:
    map_entry = message.options.map_entry
    for name in ("options", "reserved_range", "reserved_name", "extension_range", "extension"):
        message.ClearField(name)
    if map_entry:
        message.options.map_entry = True
    for field in message.field:
        for name in ("json_name", "options", "default_value"):
            field.ClearField(name)
        if field.type_name:
            field.type_name = field.type_name.rsplit(".", 1)[-1]
            field.ClearField("type")
    for oneof in message.oneof_decl:
        oneof.ClearField("options")
    for nested in message.nested_type:
        _strip_message(nested)
    for enum in message.enum_type:
        _strip_enum(enum)
    _sort_by_name(message.nested_type)
    _sort_by_name(message.enum_type)


def _strip_enum(enum: descriptor_pb2.EnumDescriptorProto) -> None:
    for name in ("options", "reserved_range", "reserved_name"):
        enum.ClearField(name)
    for value in enum.value:
        value.ClearField("options")
