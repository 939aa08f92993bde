"""A raw Kafka protocol connection for tests: hand-built frames in, kio-decoded responses out.

Real clients refuse to send malformed requests, so the bad-input tests talk to the broker
through a plain socket. Request headers are written by hand (v1, or v2 for flexible versions);
bodies are encoded and responses decoded with kio, which is generated from Kafka's own specs
and is independent of how the broker uses it.
"""

from __future__ import annotations

import io
import socket
import struct
import time
from typing import Any

from kio.serial import entity_reader, entity_writer

from moldau.protocol.schemas import request_schema as load_request_schema
from moldau.protocol.schemas import response_schema as load_response_schema

API_VERSIONS = 18


def request_header(api_key: int, version: int, correlation_id: int,
                   client_id: str | None = "moldau-tests", *, flexible: bool = False) -> bytes:
    raw = client_id.encode() if client_id is not None else None
    head = struct.pack(">hhih", api_key, version, correlation_id,
                       -1 if raw is None else len(raw))
    head += raw or b""
    if flexible:
        head += b"\x00"  # no tagged fields
    return head


def encode_body(obj: Any) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(obj))(buf, obj)
    return buf.getvalue()


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


class ConnectionClosed(Exception):
    """The broker closed the connection instead of answering."""


class WireClient:
    """One TCP connection to the broker, one request at a time."""

    def __init__(self, host: str, port: int, timeout: float = 10.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._correlation = 0

    @classmethod
    def to(cls, bootstrap: str, timeout: float = 10.0) -> WireClient:
        host, _, port = bootstrap.rpartition(":")
        return cls(host, int(port), timeout)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def next_correlation(self) -> int:
        self._correlation += 1
        return self._correlation

    # -- bytes -------------------------------------------------------------------------------

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _recv_exact(self, size: int) -> bytes:
        chunks = bytearray()
        while len(chunks) < size:
            try:
                chunk = self.sock.recv(min(size - len(chunks), 1 << 20))
            except ConnectionResetError as exc:
                raise ConnectionClosed("connection reset") from exc
            if not chunk:
                raise ConnectionClosed(f"closed after {len(chunks)} of {size} bytes")
            chunks += chunk
        return bytes(chunks)

    def read_frame(self) -> bytes:
        (size,) = struct.unpack(">i", self._recv_exact(4))
        return self._recv_exact(size)

    def wait_closed(self, timeout: float = 5.0) -> bool:
        """True if the broker closes the connection within ``timeout`` without sending data.

        Any bytes received first mean the broker answered instead: that is not "closed".
        """
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            self.sock.settimeout(remaining)
            try:
                data = self.sock.recv(65536)
            except (ConnectionResetError, BrokenPipeError):
                return True
            except TimeoutError:
                return False
            if not data:
                return True
            raise AssertionError(f"expected the connection to close, got {len(data)} bytes")

    # -- requests ----------------------------------------------------------------------------

    def send_request(self, obj: Any, version: int | None = None,
                     correlation_id: int | None = None) -> int:
        api_key = int(type(obj).__api_key__)
        version = int(type(obj).__version__) if version is None else version
        correlation_id = self.next_correlation() if correlation_id is None else correlation_id
        flexible = bool(type(obj).__flexible__)
        head = request_header(api_key, version, correlation_id, flexible=flexible)
        self.send_raw(frame(head + encode_body(obj)))
        return correlation_id

    def read_response(self, api_key: int, version: int, correlation_id: int) -> Any:
        payload = self.read_frame()
        (got,) = struct.unpack_from(">i", payload, 0)
        assert got == correlation_id, f"correlation id {got}, expected {correlation_id}"
        offset = 4
        cls = load_response_schema(api_key, version)
        # Response header v1 (tagged fields) for flexible versions, except ApiVersions (v0).
        if cls.__flexible__ and api_key != API_VERSIONS:
            assert payload[offset] == 0, "unexpected tagged fields in response header"
            offset += 1
        value, _size = entity_reader(cls)(payload, offset)
        return value

    def request(self, obj: Any) -> Any:
        correlation_id = self.send_request(obj)
        return self.read_response(int(type(obj).__api_key__), int(type(obj).__version__),
                                  correlation_id)


def request_class(api_key: int, version: int) -> type:
    cls: type = load_request_schema(api_key, version)
    return cls
