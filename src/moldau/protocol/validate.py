"""Check a request body's counts and lengths against the frame before kio decodes it.

kio's native reader reserves memory for an array as soon as it has read the array's count, so
one compact count of ``ff ff ff ff 0f`` (4,294,967,294 elements) makes it ask for 32 GiB and
abort the whole process. This module walks the same schema first, with the request's bytes and
nothing else, and refuses what Kafka's own generated readers refuse:

- an array whose count could not fit in the bytes left (each element needs at least its
  minimum encoded size), or over ``MAX_ARRAY_ELEMENTS`` (Kafka 4.x's limit);
- a string longer than 32,767 bytes (Kafka's readers refuse these in every version, compact
  ones included, so such a group id or member id can never enter the broker's state);
- a string or byte field longer than the bytes left; a negative length other than -1, and -1
  (null) where the field is not nullable, arrays included;
- a tagged-field section with more than ``MAX_TAGGED_FIELDS`` entries, an entry larger than
  the bytes left, or a known one whose value does not end where its size says. Unknown tagged
  fields are ignored, as Kafka does: kio cannot skip them, so :func:`prepare_request` hands
  kio a copy without them.

moldau adds one bound Kafka does not have, because every decoded element becomes a Python
object (about 100 bytes where the wire needed 3): a request holds at most
``MAX_REQUEST_ELEMENTS`` array elements in all.

Speed matters because every Produce request passes here. For each (api key, version) the
request's kio dataclasses are turned once into the source of one Python function (fixed-size
fields become a single ``pos += n``, one-byte varints are read inline, arrays of fixed-size
primitives are skipped without a loop), compiled and cached. The work is per array element of
the request, never per record: Produce's records field is an opaque length-prefixed blob.
"""

from __future__ import annotations

import dataclasses
import io
import struct
from collections.abc import Callable
from functools import cache
from types import NoneType, UnionType
from typing import Any, Union, get_args, get_origin

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)
from kio.serial.writers import write_unsigned_varint
from kio.static.primitive import uvarint

from .frames import MAX_TAGGED_FIELDS, FrameError
from .schemas import request_schema

MAX_ARRAY_ELEMENTS = 1_000_000
MAX_STRING_BYTES = 0x7FFF
MAX_REQUEST_ELEMENTS = 1_000_000

_FIXED_SIZES = {
    "int8": 1, "uint8": 1, "bool": 1,
    "int16": 2, "uint16": 2, "error_code": 2,
    "int32": 4, "uint32": 4, "timedelta_i32": 4,
    "int64": 8, "uint64": 8, "float64": 8, "timedelta_i64": 8, "datetime_i64": 8,
    "uuid": 16,
}

#: A tagged-field section holding unknown fields: where its count starts and ends, the count
#: without them, and the (start, end) of each unknown field.
Strip = tuple[int, int, int, list[tuple[int, int]]]
Validator = Callable[[Any, int], tuple[int, list[Strip]]]


class InvalidRequest(FrameError):
    """A request body that Kafka's readers would refuse; its connection is closed."""


def validate_request(api_key: int, version: int, buf: Any, offset: int) -> int:
    """Check the body of request (``api_key``, ``version``) starting at ``buf[offset]``.

    Returns where the body ends; raises :class:`InvalidRequest` for anything that kio must not
    be given. ``buf`` is the whole frame (bytes or a memoryview of it).
    """
    return _check(api_key, version, buf, offset)[0]


def prepare_request(api_key: int, version: int, buf: Any, offset: int) -> tuple[Any, int]:
    """Check the body as :func:`validate_request` does and return what kio should read.

    That is ``(buf, offset)`` itself, unless the request carries tagged fields this schema
    does not know: Kafka sets those aside, kio refuses them, so they are cut out of a copy of
    the body (the only case that copies; real clients send tags their version defines).
    """
    end, strips = _check(api_key, version, buf, offset)
    if not strips:
        return buf, offset
    return _without(buf, offset, end, strips), 0


def _check(api_key: int, version: int, buf: Any, offset: int) -> tuple[int, list[Strip]]:
    check = validator(api_key, version)
    try:
        end, strips = check(buf, offset)
    except (IndexError, struct.error):
        raise InvalidRequest("the request body ends in the middle of a field") from None
    if end > len(buf):
        raise InvalidRequest(f"the request body needs {end - len(buf)} bytes more than sent")
    return end, strips


def _without(buf: Any, offset: int, end: int, strips: list[Strip]) -> bytes:
    """The body ``buf[offset:end]`` without the unknown tagged fields, counts adjusted.

    Sections never overlap: an unknown field inside a known tagged field's value is refused
    by the validator (cutting it would change the enclosing size), and a nested entity's
    section ends before the section of the entity holding it begins.
    """
    out = bytearray()
    last = offset
    for count_start, count_end, count, fields in sorted(strips):
        out += buf[last:count_start]
        out += encode_uvarint(count)
        last = count_end
        for start, stop in fields:
            out += buf[last:start]
            last = stop
    out += buf[last:end]
    return bytes(out)


def encode_uvarint(value: int) -> bytes:
    """An unsigned varint as the protocol writes counts (kio's writer, into bytes)."""
    buf = io.BytesIO()
    write_unsigned_varint(buf, uvarint(value))
    return buf.getvalue()


@cache
def validator(api_key: int, version: int) -> Validator:
    """The compiled checker of one request version (built on first use, then cached)."""
    cls = request_schema(api_key, version)
    return compile_validator(cls)


def compile_validator(cls: type) -> Validator:
    source = _Generator().function(cls)
    namespace: dict[str, Any] = dict(_HELPERS)
    version = getattr(cls, "__version__", "?")
    code = compile(source, f"<request validator {cls.__name__} v{version}>", "exec")
    exec(code, namespace)  # generated from kio's schema classes only, never from input
    check: Validator = namespace["check"]
    check.__doc__ = source  # keep the source at hand for debugging
    return check


def generated_source(api_key: int, version: int) -> str:  # pragma: no cover - debugging
    """The Python source of one validator (for tests and debugging)."""
    return validator(api_key, version).__doc__ or ""


# -- helpers the generated code calls (only on slow or failing paths) ------------------------


def _uvarint(buf: Any, pos: int) -> tuple[int, int]:
    """An unsigned varint of at most 5 bytes, as kio and Kafka read it."""
    value = 0
    for shift in (0, 7, 14, 21, 28):
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
    raise InvalidRequest("unsigned varint longer than 5 bytes")


def _null(path: str) -> None:
    raise InvalidRequest(f"{path}: null in a field that is not nullable")


def _negative(path: str, length: int) -> None:
    raise InvalidRequest(f"{path}: invalid length {length}")


def _too_long(path: str, length: int, left: int) -> None:
    if length > MAX_STRING_BYTES and left >= length:
        raise InvalidRequest(f"{path}: string of {length} bytes (at most {MAX_STRING_BYTES})")
    raise InvalidRequest(f"{path}: length {length} but only {max(left, 0)} bytes left")


def _too_many(path: str, count: int, left: int, min_size: int, total: int) -> None:
    if count > MAX_ARRAY_ELEMENTS:
        raise InvalidRequest(f"{path}: array of {count} elements (at most "
                             f"{MAX_ARRAY_ELEMENTS})")
    if total > MAX_REQUEST_ELEMENTS:
        raise InvalidRequest(f"{path}: request holds over {MAX_REQUEST_ELEMENTS} array "
                             "elements")
    raise InvalidRequest(f"{path}: array of {count} elements of at least {min_size} bytes "
                         f"but only {max(left, 0)} bytes left")


def _tagged(path: str, count: int) -> None:
    raise InvalidRequest(f"{path}: {count} tagged fields (at most {MAX_TAGGED_FIELDS})")


def _unknown_tag(path: str, tag: int) -> None:
    raise InvalidRequest(f"{path}: unknown tagged field {tag}")


def _tag_size(path: str, tag: int, size: int, used: int) -> None:
    raise InvalidRequest(f"{path}: tagged field {tag} declares {size} bytes, its value has "
                         f"{used}")


_HELPERS: dict[str, Any] = {
    "_uvarint": _uvarint,
    "_i16": struct.Struct(">h").unpack_from,
    "_i32": struct.Struct(">i").unpack_from,
    "_null": _null,
    "_negative": _negative,
    "_too_long": _too_long,
    "_too_many": _too_many,
    "_tagged": _tagged,
    "_unknown_tag": _unknown_tag,
    "_tag_size": _tag_size,
    "InvalidRequest": InvalidRequest,
    "MAX_ARRAY": MAX_ARRAY_ELEMENTS,
    "MAX_TOTAL": MAX_REQUEST_ELEMENTS,
    "MAX_STRING": MAX_STRING_BYTES,
    "MAX_TAGGED": MAX_TAGGED_FIELDS,
}


# -- code generation --------------------------------------------------------------------------


def _nullable_type(tp: Any) -> bool:
    return get_origin(tp) in (UnionType, Union) and NoneType in get_args(tp)


class _Generator:
    """Emits the body of ``check(buf, pos) -> pos`` for one request class.

    It mirrors how kio's native reader interprets each field (kio/serial/_introspect.py and
    the native schema compiler): flexible entities use compact strings, bytes and arrays and
    end with a tagged-field section; tuple types are arrays (their elements never null);
    ``X | None`` primitives are nullable except in tagged fields; a nullable nested entity
    starts with an int8 marker, -1 meaning null.
    """

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.indent = 1
        self.pending = 0  # fixed-size bytes not yet added to pos
        self.depth = 0
        self.in_tagged = 0  # > 0 while generating the value of a known tagged field

    # output

    def emit(self, line: str) -> None:
        self.lines.append("    " * self.indent + line)

    def flush(self) -> None:
        if self.pending:
            self.emit(f"pos += {self.pending}")
            self.pending = 0

    def function(self, cls: type) -> str:
        self.lines = ["def check(buf, pos):", "    end = len(buf)", "    total = 0",
                      "    strips = []"]
        self.entity(cls, nullable=False, path=cls.__name__)
        self.flush()
        self.emit("return pos, strips")
        return "\n".join(self.lines) + "\n"

    def read_uvarint(self, var: str, long: bool = False) -> None:
        """Inline the one-byte case of an unsigned varint; the rest goes to ``_uvarint``.

        ``long`` also inlines two and three bytes: byte and records lengths are mostly
        between 128 bytes and 2 MiB, and a call per partition is most of Produce's cost here.
        """
        self.flush()
        self.emit(f"{var} = buf[pos]")
        self.emit(f"if {var} < 128:")
        self.emit("    pos += 1")
        if long:
            self.emit("elif buf[pos + 1] < 128:")
            self.emit(f"    {var} = ({var} & 127) | (buf[pos + 1] << 7)")
            self.emit("    pos += 2")
            self.emit("elif buf[pos + 2] < 128:")
            self.emit(f"    {var} = ({var} & 127) | ((buf[pos + 1] & 127) << 7) | "
                      "(buf[pos + 2] << 14)")
            self.emit("    pos += 3")
        self.emit("else:")
        self.emit(f"    {var}, pos = _uvarint(buf, pos)")

    # schema walking

    def entity(self, cls: type, nullable: bool, path: str) -> None:
        if nullable:
            self.flush()
            self.emit("if buf[pos] == 255:")
            self.emit("    pos += 1")
            self.emit("else:")
            self.indent += 1
            self.pending += 1
            self.entity_body(cls, path)
            self.flush()
            self.indent -= 1
        else:
            self.entity_body(cls, path)

    def entity_body(self, cls: type, path: str) -> None:
        flexible = bool(getattr(cls, "__flexible__", False))
        tagged: list[tuple[int, dataclasses.Field[Any]]] = []
        for field in dataclasses.fields(cls):
            tag = get_field_tag(field)
            if tag is not None:
                tagged.append((int(tag), field))
            else:
                self.field(field, flexible, f"{path}.{field.name}", tagged=False)
        if flexible:
            self.tagged_section(tagged, path)

    def tagged_section(self, tagged: list[tuple[int, dataclasses.Field[Any]]], path: str
                       ) -> None:
        self.depth += 1
        d = self.depth
        self.flush()
        # Almost always empty: one byte, zero.
        self.emit("if buf[pos] == 0:")
        self.emit("    pos += 1")
        self.emit("else:")
        self.indent += 1
        self.emit(f"c{d} = pos")
        self.emit(f"t{d}, pos = _uvarint(buf, pos)")
        self.emit(f"if t{d} > MAX_TAGGED:")
        self.emit(f"    _tagged({path!r}, t{d})")
        self.emit(f"ce{d} = pos")
        self.emit(f"u{d} = []")
        self.emit(f"for _ in range(t{d}):")
        self.indent += 1
        self.emit(f"e{d} = pos")
        self.emit(f"tag{d}, pos = _uvarint(buf, pos)")
        self.emit(f"size{d}, pos = _uvarint(buf, pos)")
        self.emit(f"if size{d} > end - pos:")
        self.emit(f"    _too_long({path + '.<tagged field>'!r}, size{d}, end - pos)")
        self.emit(f"s{d} = pos + size{d}")
        for i, (tag, field) in enumerate(tagged):
            self.emit(f"{'if' if i == 0 else 'elif'} tag{d} == {tag}:")
            self.indent += 1
            self.in_tagged += 1
            self.field(field, True, f"{path}.{field.name}", tagged=True)
            self.in_tagged -= 1
            self.flush()
            self.emit("pass")
            self.indent -= 1
        if tagged:
            self.emit("else:")
            self.indent += 1
        if self.in_tagged:
            # Cutting it out would change the size of the tagged field holding it.
            self.emit(f"_unknown_tag({path!r}, tag{d})")
        else:
            # Kafka keeps unknown tagged fields aside; kio cannot skip them, so they are cut.
            self.emit(f"u{d}.append((e{d}, s{d}))")
            self.emit(f"pos = s{d}")
        if tagged:
            self.indent -= 1
        self.emit(f"if pos != s{d}:")
        self.emit(f"    _tag_size({path!r}, tag{d}, size{d}, pos - s{d} + size{d})")
        self.indent -= 1
        self.emit(f"if u{d}:")
        self.emit(f"    strips.append((c{d}, ce{d}, t{d} - len(u{d}), u{d}))")
        self.indent -= 1
        self.depth -= 1

    def field(self, field: dataclasses.Field[Any], flexible: bool, path: str, tagged: bool
              ) -> None:
        kind = classify_field(field)
        if isinstance(kind, PrimitiveField):
            optional = is_optional(field) and not tagged
            self.primitive(get_schema_field_type(field), flexible, optional, path)
        elif isinstance(kind, EntityField):
            self.entity(kind.type_, nullable=is_optional(field), path=path)
        elif isinstance(kind, PrimitiveTupleField):
            element = get_schema_field_type(field)
            self.array(field, flexible, path, _min_primitive(element, flexible),
                       fixed=_FIXED_SIZES.get(element),
                       element=lambda: self.primitive(element, flexible, False, path + "[]"))
        elif isinstance(kind, EntityTupleField):
            entity_type = kind.type_
            self.array(field, flexible, path, _min_entity(entity_type, False),
                       fixed=_fixed_entity_size(entity_type),
                       element=lambda: self.entity(entity_type, False, path + "[]"))
        else:  # pragma: no cover - kio knows only these four
            raise TypeError(f"unsupported field {path}")

    def primitive(self, kafka_type: str, flexible: bool, optional: bool, path: str) -> None:
        fixed = _FIXED_SIZES.get(kafka_type)
        if fixed is not None:
            self.pending += fixed
            return
        is_string = kafka_type == "string"
        if kafka_type not in ("string", "bytes", "records"):
            raise TypeError(f"unsupported kafka type {kafka_type} at {path}")
        if flexible:
            self.read_uvarint("v", long=not is_string)
            self.emit("if v == 0:")
            self.emit(f"    _null({path!r})" if not optional else "    pass")
            self.emit("else:")
            self.emit("    v -= 1")
            limit = "(v > MAX_STRING or v > end - pos)" if is_string else "v > end - pos"
            self.emit(f"    if {limit}:")
            self.emit(f"        _too_long({path!r}, v, end - pos)")
            self.emit("    pos += v")
            return
        self.flush()
        width = 2 if is_string else 4
        self.emit(f"v = {'_i16' if is_string else '_i32'}(buf, pos)[0]")
        self.emit(f"pos += {width}")
        self.emit("if v < 0:")
        if optional:
            self.emit("    if v != -1:")
            self.emit(f"        _negative({path!r}, v)")
        else:
            self.emit(f"    _null({path!r}) if v == -1 else _negative({path!r}, v)")
        self.emit("elif v > end - pos:")
        self.emit(f"    _too_long({path!r}, v, end - pos)")
        self.emit("else:")
        self.emit("    pos += v")

    def array(self, field: dataclasses.Field[Any], flexible: bool, path: str, min_size: int,
              fixed: int | None, element: Callable[[], None]) -> None:
        nullable = _nullable_type(field.type)
        self.depth += 1
        n = f"n{self.depth}"
        if flexible:
            self.read_uvarint(n)
            self.emit(f"if {n} == 0:")
            self.emit(f"    _null({path!r})" if not nullable else "    pass")
            self.emit("else:")
            self.indent += 1
            self.emit(f"{n} -= 1")
        else:
            self.flush()
            self.emit(f"{n} = _i32(buf, pos)[0]")
            self.emit("pos += 4")
            self.emit(f"if {n} < 0:")
            if nullable:
                self.emit(f"    if {n} != -1:")
                self.emit(f"        _negative({path!r}, {n})")
            else:
                self.emit(f"    _null({path!r}) if {n} == -1 else _negative({path!r}, {n})")
            self.emit("else:")
            self.indent += 1
        self.emit(f"total += {n}")
        bound = f"{n} * {min_size} > end - pos" if min_size > 1 else f"{n} > end - pos"
        self.emit(f"if {n} > MAX_ARRAY or total > MAX_TOTAL or {bound}:")
        self.emit(f"    _too_many({path!r}, {n}, end - pos, {min_size}, total)")
        if fixed is not None:
            self.emit(f"pos += {n} * {fixed}" if fixed > 1 else f"pos += {n}")
        else:
            self.emit(f"for _ in range({n}):")
            self.indent += 1
            element()
            self.flush()
            self.indent -= 1
        self.indent -= 1
        self.depth -= 1


def _min_primitive(kafka_type: str, flexible: bool) -> int:
    fixed = _FIXED_SIZES.get(kafka_type)
    if fixed is not None:
        return fixed
    if flexible:
        return 1
    return 2 if kafka_type == "string" else 4


def _fixed_entity_size(cls: type) -> int | None:
    """The encoded size of ``cls`` if every instance has it (then an array of them is skipped
    without a loop), else None. Only legacy entities of fixed-size fields qualify: a flexible
    one ends with a tagged-field section of variable size."""
    if getattr(cls, "__flexible__", False):
        return None
    size = 0
    for field in dataclasses.fields(cls):
        kind = classify_field(field)
        if isinstance(kind, PrimitiveField) and not is_optional(field):
            fixed = _FIXED_SIZES.get(get_schema_field_type(field))
        elif isinstance(kind, EntityField) and not is_optional(field):
            fixed = _fixed_entity_size(kind.type_)
        else:
            fixed = None
        if fixed is None:
            return None
        size += fixed
    return size or None


def _min_entity(cls: type, nullable: bool) -> int:
    """The fewest bytes one encoded ``cls`` can take (a null one takes its marker byte)."""
    if nullable:
        return 1
    flexible = bool(getattr(cls, "__flexible__", False))
    size = 1 if flexible else 0
    for field in dataclasses.fields(cls):
        if get_field_tag(field) is not None:
            continue
        kind = classify_field(field)
        if isinstance(kind, PrimitiveField):
            size += _min_primitive(get_schema_field_type(field), flexible)
        elif isinstance(kind, EntityField):
            size += _min_entity(kind.type_, is_optional(field))
        else:
            size += 1 if flexible else 4
    # An element of zero bytes would let any count pass; one byte is the least that counts.
    return max(size, 1)
