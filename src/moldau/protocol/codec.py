"""Bodies of requests and responses, decoded and encoded by kio.

kio generates one dataclass per message and version from Kafka's JSON specs. This module loads
those classes once per (api key, version), decodes request bodies, encodes responses, and offers
:func:`build`, which fills a versioned dataclass from keyword arguments and drops the fields that
version does not have. Handlers can then be written once for all versions of an API.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Callable
from functools import cache
from types import ModuleType
from typing import Any, TypeVar, cast

from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType

from .frames import FrameError
from .schemas import payload_module, request_schema, response_schema
from .validate import prepare_request

T = TypeVar("T")

#: A client's frame start: size, api key, version, correlation id, client id length.
_CLIENT_FRAME_HEAD = struct.Struct(">ihhih")


@cache
def request_reader(api_key: int, version: int) -> tuple[type, Callable[..., Any]]:
    cls = request_schema(api_key, version)
    return cls, entity_reader(cls)


@cache
def response_writer(api_key: int, version: int) -> tuple[type, Callable[..., Any]]:
    cls = response_schema(api_key, version)
    return cls, entity_writer(cls)


@cache
def response_module(api_key: int, version: int) -> ModuleType:
    """The kio module holding the response class and its nested classes for this version."""
    return payload_module(api_key, version, EntityType.response)


@cache
def request_module(api_key: int, version: int) -> ModuleType:
    return payload_module(api_key, version, EntityType.request)


def is_flexible(api_key: int, version: int) -> bool:
    """Whether this API version uses tagged fields (and thus request header v2)."""
    cls, _ = request_reader(api_key, version)
    return bool(getattr(cls, "__flexible__", False))


def decode_request(api_key: int, version: int, frame: bytes | memoryview, offset: int) -> Any:
    """Decode a request body; malformed bodies raise :class:`FrameError`.

    The body is checked by :mod:`.validate` first: kio's native reader trusts counts and would
    abort the process on an absurd one. Whatever else kio refuses (bad UTF-8, a boolean that
    is neither 0 nor 1, ...) it raises as an ordinary exception, turned into FrameError here.
    """
    body, start = prepare_request(api_key, version, frame, offset)
    _, reader = request_reader(api_key, version)
    try:
        value, _size = reader(body, start)
    except Exception as exc:  # kio raises several types for malformed input
        raise FrameError(f"kio: {type(exc).__name__}: {exc}") from exc
    return value


def encode_request(obj: Any, correlation: int, client_id: bytes) -> bytes:
    """A whole request frame for a kio request object, as a client sends it: size, request
    header v2 (flexible versions: it ends with empty tagged fields) or v1, then the body."""
    cls = type(obj)
    body = io.BytesIO()
    entity_writer(cls)(body, obj)
    tagged = b"\x00" if response_body_offset(cls) == 5 else b""
    size = _CLIENT_FRAME_HEAD.size - 4 + len(client_id) + len(tagged) + body.tell()
    return _CLIENT_FRAME_HEAD.pack(size, int(cls.__api_key__), int(cls.__version__),
                                   correlation, len(client_id)) + client_id + tagged + \
        body.getvalue()


def response_body_offset(request_cls: type) -> int:
    """Where the body of the response to ``request_cls`` starts in its frame: after the
    correlation id, and for flexible versions (response header v1) after its empty tagged
    fields."""
    return 5 if getattr(request_cls, "__flexible__", True) else 4


def encode_body(api_key: int, version: int, response: Any) -> bytes:
    _, writer = response_writer(api_key, version)
    buf = io.BytesIO()
    writer(buf, response)
    return buf.getvalue()


@cache
def _field_names(cls: type) -> frozenset[str]:
    return frozenset(getattr(cls, "__dataclass_fields__", {}))


def build(cls: type[T], **fields: Any) -> T:
    """Instantiate a kio dataclass, keeping only the fields that exist in its version.

    Handlers pass the union of fields over all versions of an API; a field a version lacks is
    simply not sent, which is exactly what Kafka does when it downgrades a response.
    """
    names = _field_names(cast(type, cls))
    return cls(**{k: v for k, v in fields.items() if k in names})


def has_field(cls: type, name: str) -> bool:
    return name in _field_names(cls)
