"""SCRAM-SHA-256/512 (RFC 5802, RFC 7677) on the server side, sans I/O, as Kafka speaks it.

Only salted credentials are kept (salt, iterations, stored key, server key: Kafka's
``ScramCredential``); a password never reaches the broker except inside a client's proof.
The exchange is two round trips: client-first -> server-first (nonce, salt, iterations),
client-final (proof) -> server-final (server signature). A user without credentials gets a
made-up salt and fails at the proof like a wrong password, so a client cannot learn which
users exist.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Callable

from ..cluster.scram_credential import (  # noqa: F401 (re-exported)
    MAX_ITERATIONS,
    MECHANISM_BY_TYPE,
    MECHANISMS,
    MIN_ITERATIONS,
    ScramCredential,
)


class ScramError(Exception):
    """The client's message is malformed or its proof is wrong (said to it the same way)."""


def _attributes(message: str) -> dict[str, str]:
    attrs: dict[str, str] = {}
    for part in message.split(","):
        if len(part) < 2 or part[1] != "=":
            raise ScramError(f"invalid SCRAM attribute {part[:20]!r}")
        attrs.setdefault(part[0], part[2:])
    return attrs


def _saslname(name: str) -> str:
    """RFC 5802's escaping of ',' and '=' in user names."""
    if "=" in name.replace("=2C", "").replace("=3D", ""):
        raise ScramError("invalid user name encoding")
    return name.replace("=2C", ",").replace("=3D", "=")


class ScramServer:
    """One SCRAM exchange. ``lookup(user)`` returns the user's credential or None."""

    def __init__(self, mechanism: str, lookup: Callable[[str], ScramCredential | None],
                 secret: bytes) -> None:
        self.mechanism = mechanism
        self._digest = MECHANISMS[mechanism][0]
        self._lookup = lookup
        self._secret = secret
        self._state = "first"
        self.username = ""
        self._credential: ScramCredential | None = None
        self._known = False
        self._nonce = ""
        self._auth_prefix = ""
        self._gs2_header = ""

    @property
    def complete(self) -> bool:
        return self._state == "done"

    def step(self, token: bytes) -> bytes:
        try:
            message = token.decode("utf-8")
        except UnicodeDecodeError:
            raise ScramError("SCRAM message is not UTF-8") from None
        if self._state == "first":
            return self._client_first(message)
        if self._state == "final":
            return self._client_final(message)
        raise ScramError("SCRAM exchange already complete")

    def _client_first(self, message: str) -> bytes:
        # gs2-header: "n,," / "y,," / "n,a=authzid," then client-first-bare.
        parts = message.split(",", 2)
        if len(parts) != 3 or parts[0] not in ("n", "y") or \
                (parts[1] and not parts[1].startswith("a=")):
            raise ScramError("invalid SCRAM client-first message")
        bare = parts[2]
        attrs = _attributes(bare)
        if "n" not in attrs or "r" not in attrs or not attrs["r"]:
            raise ScramError("SCRAM client-first message lacks user or nonce")
        self.username = _saslname(attrs["n"])
        authzid = _saslname(parts[1][2:]) if parts[1] else ""
        if authzid and authzid != self.username:
            raise ScramError("authorization id differs from the user name")
        self._gs2_header = f"{parts[0]},{parts[1]},"
        credential = self._lookup(self.username)
        self._known = credential is not None
        if credential is None:
            # A stable made-up salt: asking twice for an unknown user looks like a real one.
            salt = hmac.digest(self._secret, self.username.encode(), "sha256")
            credential = ScramCredential(salt, b"", b"", MIN_ITERATIONS)
        self._credential = credential
        self._nonce = attrs["r"] + secrets.token_urlsafe(24)
        server_first = (f"r={self._nonce},s={base64.b64encode(credential.salt).decode()},"
                        f"i={credential.iterations}")
        self._auth_prefix = f"{bare},{server_first}"
        self._state = "final"
        return server_first.encode()

    def _client_final(self, message: str) -> bytes:
        self._state = "failed"
        without_proof, sep, proof_attr = message.rpartition(",p=")
        if not sep:
            raise ScramError("SCRAM client-final message has no proof")
        attrs = _attributes(without_proof)
        expected_binding = base64.b64encode(self._gs2_header.encode()).decode()
        # Kafka accepts a final nonce that ends with the server's (not only one equal to it):
        # librdkafka 2.0.x (Debian's kcat) sends the client nonce twice. The proof still
        # covers the whole nonce, so a replayed proof cannot pass.
        if attrs.get("c") != expected_binding or not attrs.get("r", "").endswith(self._nonce):
            raise ScramError("SCRAM channel binding or nonce mismatch")
        try:
            proof = base64.b64decode(proof_attr, validate=True)
        except ValueError:
            raise ScramError("invalid SCRAM proof encoding") from None
        credential = self._credential
        assert credential is not None
        auth_message = f"{self._auth_prefix},{without_proof}".encode()
        signature = hmac.digest(credential.stored_key or b"\0", auth_message, self._digest)
        if len(proof) != len(signature):
            raise ScramError("invalid SCRAM proof")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        computed = hashlib.new(self._digest, client_key).digest()
        if not self._known or not hmac.compare_digest(computed, credential.stored_key):
            raise ScramError("invalid user credentials")
        server_signature = hmac.digest(credential.server_key, auth_message, self._digest)
        self._state = "done"
        return b"v=" + base64.b64encode(server_signature)


class ScramClient:
    """The client side of one SCRAM exchange (a broker authenticating to its peers), sans
    I/O: :meth:`first`, then :meth:`final` with the server-first message, then
    :meth:`verify` with the server-final one (which proves the server knew the credential)."""

    def __init__(self, mechanism: str, username: str, password: str) -> None:
        self._digest = MECHANISMS[mechanism][0]
        self._password = password
        name = username.replace("=", "=3D").replace(",", "=2C")
        self._bare = f"n={name},r={secrets.token_urlsafe(24)}"
        self._server_signature = b""

    def first(self) -> bytes:
        return f"n,,{self._bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        message = server_first.decode("utf-8", errors="replace")
        attrs = _attributes(message)
        nonce, salt, iterations = attrs.get("r", ""), attrs.get("s", ""), attrs.get("i", "")
        if not nonce.startswith(_attributes(self._bare)["r"]) or not salt or \
                not iterations.isdigit():
            raise ScramError(f"invalid SCRAM server-first message {message[:60]!r}")
        salted = hashlib.pbkdf2_hmac(self._digest, self._password.encode(),
                                     base64.b64decode(salt), int(iterations))
        without_proof = f"c={base64.b64encode(b'n,,').decode()},r={nonce}"
        auth_message = f"{self._bare},{message},{without_proof}".encode()
        client_key = hmac.digest(salted, b"Client Key", self._digest)
        signature = hmac.digest(hashlib.new(self._digest, client_key).digest(), auth_message,
                                self._digest)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        server_key = hmac.digest(salted, b"Server Key", self._digest)
        self._server_signature = hmac.digest(server_key, auth_message, self._digest)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        expected = b"v=" + base64.b64encode(self._server_signature)
        if not hmac.compare_digest(server_final, expected):
            raise ScramError("the server's SCRAM signature is wrong")
