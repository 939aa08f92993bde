"""One Kafka request on a fresh connection, encoded and decoded by kio.

For the admin APIs confluent-kafka has no call for (partition reassignments, transactions):
the command finds the broker to ask through confluent-kafka's metadata and sends the request
itself. Only flexible versions are sent (request header v2, response header v1), which every
such API has.
"""

from __future__ import annotations

import io
import socket
import struct
from typing import Any

from kio.index import load_response_schema
from kio.serial import entity_reader, entity_writer

_HEADER = struct.Struct(">hhih")
_SIZE = struct.Struct(">i")
_CLIENT_ID = b"moldau-cli"


def request(address: tuple[str, int], obj: Any, timeout: float,
            response_cls: type | None = None) -> Any:
    """Send ``obj`` (a flexible kio request) to ``address`` and return the decoded response
    (as ``response_cls`` when given, else kio's class of that version).

    Raises OSError when the connection fails or closes before the whole answer came."""
    cls = type(obj)
    api_key, version = int(cls.__api_key__), int(cls.__version__)
    body = io.BytesIO()
    entity_writer(cls)(body, obj)
    payload = _HEADER.pack(api_key, version, 1, len(_CLIENT_ID)) + _CLIENT_ID + b"\x00" + \
        body.getvalue()
    with socket.create_connection(address, timeout=timeout) as sock:
        sock.sendall(_SIZE.pack(len(payload)) + payload)
        reader = sock.makefile("rb")
        head = reader.read(4)
        if len(head) != 4:
            raise OSError("connection closed before an answer")
        (size,) = _SIZE.unpack(head)
        frame = reader.read(size)
    if len(frame) != size:
        raise OSError(f"connection closed after {len(frame)} of {size} bytes")
    # Response header v1: correlation id, then tagged fields (none).
    cls = response_cls or load_response_schema(api_key, version)
    value, _ = entity_reader(cls)(frame, 5)
    return value
