"""Unsecured JWS tokens (``alg: none``) for OAUTHBEARER tests, made the way Kafka's unsecured
login module and librdkafka's unsecured JWT builder make them."""

from __future__ import annotations

import base64
import json
import time
from typing import Any


def encode_part(value: Any) -> str:
    raw = value if isinstance(value, bytes) else json.dumps(value).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def unsecured_token(sub: str | None = "alice", *, lifetime_s: float = 3600,
                    header: Any = None, signature: str = "", **claims: Any) -> str:
    """A compact JWS: ``{"alg":"none"}``, claims with ``sub``/``iat``/``exp`` (pass
    ``exp=None`` or ``iat=None`` to leave one out), and ``signature`` (empty: unsecured)."""
    now = int(time.time())  # whole seconds, as librdkafka and Kafka's login module issue them
    body: dict[str, Any] = {"iat": now, "exp": now + lifetime_s}
    if sub is not None:
        body["sub"] = sub
    body.update(claims)
    body = {k: v for k, v in body.items() if v is not None}
    head = encode_part(header if header is not None else {"alg": "none"})
    return f"{head}.{encode_part(body)}.{signature}"


def client_first_message(token: str, authzid: str = "") -> bytes:
    """RFC 7628's client first message carrying ``token``."""
    return f"n,{'a=' + authzid if authzid else ''},\x01auth=Bearer {token}\x01\x01".encode()
