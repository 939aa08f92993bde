"""One Kafka request on a fresh connection, encoded and decoded by kio.

For the admin APIs confluent-kafka has no call for (partition reassignments, transactions):
the command finds the broker to ask through confluent-kafka's metadata and sends the request
itself, over TLS and SASL PLAIN/SCRAM when the command's client settings ask for them
(:mod:`.client_security`).
"""

from __future__ import annotations

import io
import socket
import struct
from typing import Any

from kio.index import load_response_schema
from kio.schema.errors import ErrorCode
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.serial import entity_reader, entity_writer

from ..broker.scram import ScramClient, ScramError
from .client_security import ClientSecurity

_HEADER = struct.Struct(">hhih")
_SIZE = struct.Struct(">i")
_CLIENT_ID = b"moldau-cli"


def request(address: tuple[str, int], obj: Any, timeout: float,
            response_cls: type | None = None, security: ClientSecurity | None = None) -> Any:
    """Send ``obj`` (a flexible kio request) to ``address`` and return the decoded response
    (as ``response_cls`` when given, else kio's class of that version), over TLS and after
    SASL when ``security`` says so.

    Raises OSError when the connection fails or closes before the whole answer came (an
    ssl.SSLError is one), and :class:`SaslRefused` when the broker refuses the credentials."""
    with _connect(address, timeout, security) as sock:
        reader = sock.makefile("rb")
        return _exchange(sock, reader, obj, 2, response_cls)


class SaslRefused(ConnectionError):
    """The broker refused the mechanism or the credentials."""


def _connect(address: tuple[str, int], timeout: float,
             security: ClientSecurity | None) -> socket.socket:
    sock = socket.create_connection(address, timeout=timeout)
    try:
        if security is not None and security.tls is not None:
            sock = security.tls.wrap_socket(sock, server_hostname=address[0])
        if security is not None and security.mechanism is not None:
            _authenticate(sock, security)
    except BaseException:
        sock.close()
        raise
    return sock


def _authenticate(sock: socket.socket, security: ClientSecurity) -> None:
    """SaslHandshake, then SaslAuthenticate until the mechanism's exchange is done."""
    mechanism = security.mechanism
    assert mechanism is not None
    reader = sock.makefile("rb")
    handshake = _exchange(sock, reader, SaslHandshakeRequest(mechanism=mechanism), 0)
    if handshake.error_code != ErrorCode.none:
        raise SaslRefused(f"the broker does not offer SASL {mechanism} here (it offers "
                          f"{', '.join(handshake.mechanisms) or 'none'})")
    if mechanism == "PLAIN":
        tokens = [f"\0{security.username}\0{security.password}".encode()]
        _authenticate_steps(sock, reader, tokens, mechanism)
        return
    client = ScramClient(mechanism, security.username, security.password)
    server_first = _authenticate_steps(sock, reader, [client.first()], mechanism)
    try:
        server_final = _authenticate_steps(sock, reader, [client.final(server_first)], mechanism)
        client.verify(server_final)
    except ScramError as exc:
        raise SaslRefused(f"{mechanism} exchange failed: {exc}") from None


def _authenticate_steps(sock: socket.socket, reader: Any, tokens: list[bytes],
                        mechanism: str) -> bytes:
    answer = b""
    for token in tokens:
        response = _exchange(sock, reader, SaslAuthenticateRequest(auth_bytes=token), 1)
        if response.error_code != ErrorCode.none:
            raise SaslRefused(f"SASL {mechanism} authentication failed: "
                              f"{response.error_message or response.error_code.name}")
        answer = bytes(response.auth_bytes)
    return answer


def _exchange(sock: socket.socket, reader: Any, obj: Any, correlation: int,
              response_cls: type | None = None) -> Any:
    """One request and its response on an open connection. Flexible versions use request
    header v2 and response header v1; the others (SaslHandshake) v1 and v0."""
    cls = type(obj)
    api_key, version = int(cls.__api_key__), int(cls.__version__)
    flexible = bool(getattr(cls, "__flexible__", True))
    body = io.BytesIO()
    entity_writer(cls)(body, obj)
    payload = _HEADER.pack(api_key, version, correlation, len(_CLIENT_ID)) + _CLIENT_ID + \
        (b"\x00" if flexible else b"") + body.getvalue()
    sock.sendall(_SIZE.pack(len(payload)) + payload)
    head = reader.read(4)
    if len(head) != 4:
        raise OSError("connection closed before an answer")
    (size,) = _SIZE.unpack(head)
    frame = reader.read(size)
    if len(frame) != size:
        raise OSError(f"connection closed after {len(frame)} of {size} bytes")
    cls = response_cls or load_response_schema(api_key, version)
    value, _ = entity_reader(cls)(frame, 5 if flexible else 4)
    return value
