"""Protobuf: schemas as ``.proto`` text (parsed with ``proto-schema-parser``) or as a
base64 ``FileDescriptorProto`` (what confluent-kafka's ProtobufSerializer registers; read
with ``protobuf``), compared by Protobuf's wire-compatibility rules.

Both forms are reduced to one model (messages by full name, fields by number) and compared
field number by field number, because the number is what the wire carries:

- a field number whose type changes to one with another wire encoding is refused
  (FIELD_SCALAR_KIND_CHANGED; ``int32/uint32/int64/uint64/bool/enum`` share varint,
  ``sint32/sint64`` zigzag, ``fixed32/sfixed32``, ``fixed64/sfixed64``, and
  ``string/bytes`` length-delimited encodings), or to another message type
  (FIELD_NAMED_TYPE_CHANGED);
- singular <-> repeated is refused (FIELD_LABEL_CHANGED), as is a field moved into or out
  of a oneof (FIELD_MOVED_TO_ONEOF);
- a message of the old schema that is gone is refused (MESSAGE_REMOVED); so is a changed
  package (PACKAGE_CHANGED);
- added and removed fields are fine (proto3 fields are optional, unknown fields are
  skipped), except a removed proto2 ``required`` field or an added one
  (REQUIRED_FIELD_ADDED / REQUIRED_FIELD_REMOVED).

As in Confluent's registry, the two forms of one schema are one schema (same id, found by a
lookup in either form: proto_text.identity), and the stored text is ``.proto`` text: as sent,
or written from a base64 descriptor (proto_text.proto_text). Asked with
``format=serialized`` (what the Python client's deserializer does), a schema is returned as
a base64 ``FileDescriptorProto`` built from its text (proto_descriptor.py); one stored as
base64 before (older registry versions kept that form) as stored.
"""

from __future__ import annotations

import base64
import binascii
import functools
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import descriptor_pb2
from google.protobuf.message import DecodeError
from proto_schema_parser import ast
from proto_schema_parser.parser import Parser

from .base import InvalidSchemaError, ParsedSchema
from .proto_descriptor import file_descriptor
from .proto_text import identity, proto_text

WIRE_GROUPS = {
    "int32": "varint", "uint32": "varint", "int64": "varint", "uint64": "varint",
    "bool": "varint", "enum": "varint", "sint32": "zigzag32", "sint64": "zigzag64",
    "fixed32": "fixed32", "sfixed32": "fixed32", "float": "float", "fixed64": "fixed64",
    "sfixed64": "fixed64", "double": "double", "string": "bytes", "bytes": "bytes",
}
_DESCRIPTOR_TYPES = {
    value: name.removeprefix("TYPE_").lower()
    for name, value in descriptor_pb2.FieldDescriptorProto.Type.items()
}


@dataclass(frozen=True)
class Field:
    name: str
    number: int
    type: str  # a scalar name, "enum:<Name>" or "message:<Name>"
    label: str  # "optional", "repeated", "required"
    oneof: str | None = None


@dataclass
class ProtoModel:
    package: str
    messages: dict[str, dict[int, Field]] = field(default_factory=dict)
    enums: set[str] = field(default_factory=set)


class _RaisingErrors:
    """antlr reports syntax errors on stderr and carries on; a registry refuses them."""

    def syntaxError(self, _recognizer: Any, _symbol: Any, line: int, column: int,
                    message: str, _exc: Any) -> None:
        raise InvalidSchemaError(f"line {line}:{column} {message}")

    def reportAmbiguity(self, *args: Any) -> None:
        pass

    def reportAttemptingFullContext(self, *args: Any) -> None:
        pass

    def reportContextSensitivity(self, *args: Any) -> None:
        pass


def _raise_on_errors(recognizer: Any) -> None:
    recognizer.removeErrorListeners()
    recognizer.addErrorListener(_RaisingErrors())


class ProtobufFormat:
    name = "PROTOBUF"

    def parse(
        self, text: str, referenced: list[tuple[str, str]], *, normalize: bool = False
    ) -> ParsedSchema:
        if _looks_base64(text):
            descriptor = _descriptor(text)
            model = _from_descriptor(descriptor)
            canonical = proto_text(descriptor).strip()
        else:
            tree = _parse_text(text)
            model = _from_text(tree)
            descriptor = file_descriptor(tree)
            canonical = text.strip()
        if normalize:
            canonical = "\n".join(line.strip() for line in canonical.splitlines() if line.strip())
        return ParsedSchema("PROTOBUF", canonical, model, identity(descriptor))

    def incompatibilities(self, reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
        return _compare(reader.parsed, writer.parsed)


@functools.lru_cache(maxsize=1024)
def serialized(text: str) -> str:
    """The schema as a base64 ``FileDescriptorProto`` (``format=serialized``)."""
    if _looks_base64(text):
        return text.strip()
    tree = Parser(setup_lexer=_raise_on_errors, setup_parser=_raise_on_errors).parse(text)
    return base64.b64encode(file_descriptor(tree).SerializeToString()).decode("ascii")


def _looks_base64(text: str) -> bool:
    stripped = text.strip()
    return bool(stripped) and " " not in stripped and "{" not in stripped and ";" not in stripped


def _descriptor(text: str) -> descriptor_pb2.FileDescriptorProto:
    try:
        return descriptor_pb2.FileDescriptorProto.FromString(
            base64.b64decode(text.strip(), validate=True))
    except (binascii.Error, DecodeError, ValueError) as exc:
        raise InvalidSchemaError(f"not a .proto file nor a base64 FileDescriptorProto: {exc}")\
            from exc


def _from_descriptor(proto: descriptor_pb2.FileDescriptorProto) -> ProtoModel:
    if not proto.message_type and not proto.enum_type:
        raise InvalidSchemaError("the descriptor declares no message or enum")
    model = ProtoModel(proto.package)

    def add(message: descriptor_pb2.DescriptorProto, prefix: str) -> None:
        full = f"{prefix}{message.name}"
        oneofs = [o.name for o in message.oneof_decl]
        fields = {}
        for f in message.field:
            kind = _DESCRIPTOR_TYPES.get(f.type, "unknown")
            if kind in ("message", "group", "enum"):
                kind = f"{'enum' if kind == 'enum' else 'message'}:{f.type_name.rsplit('.', 1)[-1]}"
            label = {1: "optional", 2: "required", 3: "repeated"}[f.label]
            in_oneof = (oneofs[f.oneof_index] if f.HasField("oneof_index")
                        and not f.proto3_optional else None)
            fields[f.number] = Field(f.name, f.number, kind, label, in_oneof)
        model.messages[full] = fields
        for nested in message.nested_type:
            if not nested.options.map_entry:
                add(nested, f"{full}.")
        for enum in message.enum_type:
            model.enums.add(enum.name)

    for message in proto.message_type:
        add(message, "")
    for enum in proto.enum_type:
        model.enums.add(enum.name)
    return model


def _parse_text(text: str) -> ast.File:
    try:
        return Parser(setup_lexer=_raise_on_errors, setup_parser=_raise_on_errors).parse(text)
    except InvalidSchemaError:
        raise
    except (ValueError, TypeError, AttributeError) as exc:
        raise InvalidSchemaError(f"cannot parse the .proto file: {exc}") from exc


def _from_text(tree: ast.File) -> ProtoModel:
    package = next((e.name for e in tree.file_elements if isinstance(e, ast.Package)), "")
    model = ProtoModel(package)
    enums = _enum_names(tree.file_elements)
    model.enums = enums

    def add(message: ast.Message, prefix: str) -> None:
        full = f"{prefix}{message.name}"
        fields: dict[int, Field] = {}

        def field_of(element: ast.Field, oneof: str | None) -> None:
            short = element.type.rsplit(".", 1)[-1]
            kind = element.type if element.type in WIRE_GROUPS else (
                f"enum:{short}" if short in enums else f"message:{short}")
            cardinality = element.cardinality.value.lower() if element.cardinality else "optional"
            fields[element.number] = Field(element.name, element.number, kind, cardinality,
                                           oneof)

        for element in message.elements:
            if isinstance(element, ast.Field):
                field_of(element, None)
            elif isinstance(element, ast.MapField):
                fields[element.number] = Field(element.name, element.number,
                                               f"message:{element.name}Entry", "repeated")
            elif isinstance(element, ast.OneOf):
                for member in element.elements:
                    if isinstance(member, ast.Field):
                        field_of(member, element.name)
            elif isinstance(element, ast.Message):
                add(element, f"{full}.")
        model.messages[full] = fields

    for element in tree.file_elements:
        if isinstance(element, ast.Message):
            add(element, "")
    if not model.messages and not model.enums:
        raise InvalidSchemaError("the .proto file declares no message or enum")
    return model


def _enum_names(elements: list[Any]) -> set[str]:
    names: set[str] = set()
    for element in elements:
        if isinstance(element, ast.Enum):
            names.add(element.name)
        elif isinstance(element, ast.Message):
            names |= _enum_names(element.elements)
    return names


def _compare(reader: ProtoModel, writer: ProtoModel) -> list[str]:
    problems: list[str] = []

    def fail(kind: str, path: str, detail: str) -> None:
        problems.append(f"{{errorType:'{kind}', description:'{detail}', path:'{path}'}}")

    if reader.package != writer.package:
        fail("PACKAGE_CHANGED", "#/", f"The package changed from '{writer.package}' to "
             f"'{reader.package}'")
    for name, old_fields in writer.messages.items():
        new_fields = reader.messages.get(name)
        if new_fields is None:
            fail("MESSAGE_REMOVED", f"#/{name}", f"The message {name} was removed")
            continue
        for number, old in old_fields.items():
            path = f"#/{name}/{number}"
            new = new_fields.get(number)
            if new is None:
                if old.label == "required":
                    fail("REQUIRED_FIELD_REMOVED", path, f"The required field {old.name} "
                         "was removed")
                continue
            _compare_field(old, new, path, fail)
        for number, new in new_fields.items():
            if number not in old_fields and new.label == "required":
                fail("REQUIRED_FIELD_ADDED", f"#/{name}/{number}",
                     f"The required field {new.name} was added")
    return problems


def _wire(kind: str) -> str:
    if kind.startswith("enum:"):
        return "varint"
    if kind.startswith("message:"):
        return "bytes"
    return WIRE_GROUPS.get(kind, kind)


def _compare_field(old: Field, new: Field, path: str, fail: Any) -> None:
    if old.type != new.type:
        if old.type.startswith("message:") and new.type.startswith("message:"):
            fail("FIELD_NAMED_TYPE_CHANGED", path, f"The type of field {new.name} changed "
                 f"from {old.type[8:]} to {new.type[8:]}")
        elif _wire(old.type) != _wire(new.type) or "message:" in old.type + new.type:
            fail("FIELD_SCALAR_KIND_CHANGED", path, f"The type of field {new.name} changed "
                 f"from {old.type} to {new.type}, another wire encoding")
    if (old.label == "repeated") != (new.label == "repeated"):
        fail("FIELD_LABEL_CHANGED", path, f"The field {new.name} changed between singular "
             "and repeated")
    if old.oneof != new.oneof:
        fail("FIELD_MOVED_TO_ONEOF", path, f"The field {new.name} moved into or out of a "
             "oneof")


PROTOBUF = ProtobufFormat()
