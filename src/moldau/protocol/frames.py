"""Kafka request/response framing: the few bytes around every message that kio does not cover.

Every Kafka message on the wire is ``int32 size`` followed by a header and a body. The header
layout depends on the API and version (flexible versions add tagged fields), and ApiVersions
responses always use header v0 so that a client can parse them before it knows which versions
the broker speaks. kio decodes and encodes the bodies; this module only splits frames and reads
and writes headers, without any I/O (bytes in, values out).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

_HEADER_FIXED = struct.Struct(">hhih")  # api_key, api_version, correlation_id, client_id length
_INT32 = struct.Struct(">i")
API_VERSIONS_KEY = 18
#: Kafka 4.x refuses a tagged-field section with more entries than this.
MAX_TAGGED_FIELDS = 10_000


class FrameError(Exception):
    """The bytes on a connection cannot be a Kafka request; the connection must be closed."""


@dataclass(frozen=True, slots=True)
class RequestHeader:
    """The common part of request headers v1 and v2 (v0 is not used by any supported API)."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def read_frame_size(buf: bytes | bytearray | memoryview, offset: int) -> int:
    """Size of the frame starting at ``offset`` (the 4-byte prefix excluded)."""
    size: int = _INT32.unpack_from(buf, offset)[0]
    return size


def parse_request_header(frame: bytes | memoryview) -> tuple[RequestHeader, int]:
    """Parse the fixed part of a request header; returns the header and where the rest begins.

    The tagged fields of a v2 header are skipped by :func:`skip_tagged_fields`, because only
    the dispatcher knows whether this API version uses the flexible header.
    """
    if len(frame) < _HEADER_FIXED.size:
        raise FrameError(f"request of {len(frame)} bytes is shorter than a request header")
    api_key, api_version, correlation_id, client_id_len = _HEADER_FIXED.unpack_from(frame, 0)
    offset = _HEADER_FIXED.size
    client_id: str | None = None
    if client_id_len >= 0:
        end = offset + client_id_len
        if end > len(frame):
            raise FrameError("client id runs past the end of the request")
        try:
            client_id = bytes(frame[offset:end]).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise FrameError("client id is not valid UTF-8") from exc
        offset = end
    elif client_id_len != -1:
        raise FrameError(f"invalid client id length {client_id_len}")
    return RequestHeader(api_key, api_version, correlation_id, client_id), offset


def _read_uvarint(buf: bytes | memoryview, offset: int) -> tuple[int, int]:
    value = 0
    shift = 0
    while True:
        if offset >= len(buf):
            raise FrameError("unsigned varint runs past the end of the request")
        byte = buf[offset]
        offset += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, offset
        shift += 7
        if shift > 28:
            raise FrameError("unsigned varint is too long")


def skip_tagged_fields(buf: bytes | memoryview, offset: int) -> int:
    """Skip a tagged-field section (request header v2); moldau uses no header tags."""
    count, offset = _read_uvarint(buf, offset)
    if count > MAX_TAGGED_FIELDS:
        raise FrameError(f"{count} tagged fields in the request header")
    for _ in range(count):
        _tag, offset = _read_uvarint(buf, offset)
        size, offset = _read_uvarint(buf, offset)
        offset += size
        if offset > len(buf):
            raise FrameError("tagged field runs past the end of the request")
    return offset


def response_header(correlation_id: int, flexible: bool) -> bytes:
    """Response header v0 (correlation id) or v1 (correlation id + empty tagged fields)."""
    if flexible:
        return _INT32.pack(correlation_id) + b"\x00"
    return _INT32.pack(correlation_id)


def frame_prefix(size: int) -> bytes:
    """The 4-byte size prefix of a frame."""
    return _INT32.pack(size)
