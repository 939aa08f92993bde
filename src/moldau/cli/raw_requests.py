"""One Kafka request on a fresh connection, encoded and decoded by kio.

For the admin APIs confluent-kafka has no call for (partition reassignments, transactions):
the command finds the broker to ask through confluent-kafka's metadata and sends the request
itself, over TLS and SASL PLAIN/SCRAM when the command's client settings ask for them
(:mod:`.client_security`).
"""

from __future__ import annotations

import socket
import struct
from typing import Any

from kio.index import load_response_schema
from kio.schema.errors import ErrorCode
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.serial import entity_reader

from ..broker.sasl_client import SaslClientExchange
from ..broker.scram import ScramError
from ..protocol.codec import encode_request, response_body_offset
from .client_security import ClientSecurity
from .connection import Connection
from .errors import CliError

_SIZE = struct.Struct(">i")
_CLIENT_ID = b"moldau-cli"


def request(address: tuple[str, int], obj: Any, timeout: float,
            response_cls: type | None = None, security: ClientSecurity | None = None) -> Any:
    """Send ``obj`` (a kio request) to ``address`` and return the decoded response (as
    ``response_cls`` when given, else kio's class of that version), over TLS and after SASL
    when ``security`` says so.

    Raises OSError when the connection fails or closes before the whole answer came (an
    ssl.SSLError is one), and :class:`SaslRefused` when the broker refuses the credentials."""
    sock = socket.create_connection(address, timeout=timeout)
    try:
        if security is not None and security.tls is not None:
            sock = security.tls.wrap_socket(sock, server_hostname=address[0])
        with sock.makefile("rb") as reader:
            if security is not None and security.mechanism is not None:
                _authenticate(sock, reader, security)
            return _exchange(sock, reader, obj, 2, response_cls)
    finally:
        sock.close()


def ask(conn: Connection, address: tuple[str, int], obj: Any, who: str,
        what: str | None = None, response_cls: type | None = None) -> Any:
    """:func:`request` with the connection's time limit and TLS/SASL settings; a refusal or
    a failed connection is one CLI line naming ``who`` was asked (after ``what`` failed)."""
    where = f"{who} at {address[0]}:{address[1]}"
    prefix = f"{what}: " if what else ""
    try:
        return request(address, obj, conn.timeout, response_cls, security=conn.security)
    except SaslRefused as exc:
        raise CliError(f"{prefix}{where} refused us: {exc}") from None
    except OSError as exc:
        raise CliError(f"{prefix}cannot reach {where}: {exc.strerror or exc}") from None


class SaslRefused(ConnectionError):
    """The broker refused the mechanism or the credentials."""


def _authenticate(sock: socket.socket, reader: Any, security: ClientSecurity) -> None:
    """SaslHandshake, then SaslAuthenticate with each token of the mechanism's exchange."""
    mechanism = security.mechanism
    assert mechanism is not None
    handshake = _exchange(sock, reader, SaslHandshakeRequest(mechanism=mechanism), 0)
    if handshake.error_code != ErrorCode.none:
        raise SaslRefused(f"the broker does not offer SASL {mechanism} here (it offers "
                          f"{', '.join(handshake.mechanisms) or 'none'})")
    login = {"username": security.username, "password": security.password}
    try:
        for token in SaslClientExchange(mechanism, login):
            answer = _exchange(sock, reader, SaslAuthenticateRequest(auth_bytes=token.send), 1)
            if answer.error_code != ErrorCode.none:
                raise SaslRefused(f"SASL {mechanism} authentication failed: "
                                  f"{answer.error_message or answer.error_code.name}")
            token.received = bytes(answer.auth_bytes)
    except ScramError as exc:
        raise SaslRefused(f"{mechanism} exchange failed: {exc}") from None


def _exchange(sock: socket.socket, reader: Any, obj: Any, correlation: int,
              response_cls: type | None = None) -> Any:
    """One request and its response on an open connection."""
    cls = type(obj)
    sock.sendall(encode_request(obj, correlation, _CLIENT_ID))
    head = reader.read(4)
    if len(head) != 4:
        raise OSError("connection closed before an answer")
    (size,) = _SIZE.unpack(head)
    frame = reader.read(size)
    if len(frame) != size:
        raise OSError(f"connection closed after {len(frame)} of {size} bytes")
    schema = response_cls or load_response_schema(int(cls.__api_key__), int(cls.__version__))
    value: Any
    value, _ = entity_reader(schema)(frame, response_body_offset(cls))
    return value
