"""SASL/OAUTHBEARER (RFC 7628) with unsecured JWS tokens: Kafka's development-only validator.

Kafka ships OAUTHBEARER with an "unsecured" validator (OAuthBearerUnsecuredValidator-
CallbackHandler) for development and tests: the token is a JWT with ``alg: none`` and no
signature, so anyone can mint one for any principal. moldau offers the same, with the same
checks and JAAS options (``unsecuredValidatorPrincipalClaimName`` (default ``sub``),
``unsecuredValidatorScopeClaimName`` (``scope``), ``unsecuredValidatorRequiredScope``
(space-separated), ``unsecuredValidatorAllowableClockSkewMs`` (0)):

* the token has three base64url parts, a JSON header with ``alg`` ``none`` and an empty
  signature; the claims are a JSON object;
* ``exp`` (a number of seconds) is required and must be in the future, ``iat`` if present
  must not be in the future and must precede ``exp`` (both within the clock skew);
* the principal claim is a non-blank string; the scope holds every required scope.

A bad token is answered the RFC 7628 way: a server challenge ``{"status":"invalid_token"}``
(``insufficient_scope`` with the required scope for a scope failure); the client replies with
one 0x01 byte and the exchange fails with that JSON as the message. The token's ``exp`` bounds
the session (KIP-368): the handler takes :attr:`OAuthBearerExchange.credential_expires_ms`.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import time
from dataclasses import dataclass, field
from typing import Any

#: RFC 7628 client first message, as Kafka's OAuthBearerClientInitialResponse reads it.
_SEPARATOR = "\x01"
_SASLNAME = r"(?:[\x01-\x7F](?<![=,\x01])|=2C|=3D)+"
_CLIENT_FIRST = re.compile(r"n,(?:a=(?P<authzid>" + _SASLNAME + r"))?,\x01(?P<pairs>(?:[A-Za-z]+="
                           r"[\x21-\x7E \t\r\n]+\x01)*)\x01")
_AUTH = re.compile(r"(?P<scheme>\w+) +(?P<token>[-_.a-zA-Z0-9]+)")


class InvalidToken(Exception):
    """The token fails validation; ``scope`` set when it lacks a required scope."""

    def __init__(self, reason: str, scope: str | None = None) -> None:
        super().__init__(reason)
        self.scope = scope

    def challenge(self) -> str:
        """The RFC 7628 error the server sends before failing (Kafka's JSON, byte for byte)."""
        if self.scope is None:
            return '{"status":"invalid_token"}'
        return f'{{"status":"insufficient_scope", "scope":"{self.scope}"}}'


class MalformedMessage(Exception):
    """The client's first message is not RFC 7628's."""


@dataclass(frozen=True, slots=True)
class ValidatorOptions:
    """The ``unsecuredValidator*`` JAAS options of the OAUTHBEARER login module."""

    principal_claim: str = "sub"
    scope_claim: str = "scope"
    required_scope: tuple[str, ...] = ()
    clock_skew_ms: int = 0

    @classmethod
    def from_jaas(cls, options: dict[str, str]) -> ValidatorOptions:
        """Options from a parsed JAAS entry; ValueError for a bad clock skew."""
        skew_text = options.get("unsecuredValidatorAllowableClockSkewMs", "").strip()
        skew = int(skew_text) if skew_text else 0
        if skew < 0:
            raise ValueError(f"Allowable clock skew millis must not be negative: {skew}")
        return cls(
            principal_claim=options.get("unsecuredValidatorPrincipalClaimName", "").strip()
            or "sub",
            scope_claim=options.get("unsecuredValidatorScopeClaimName", "").strip() or "scope",
            required_scope=tuple(options.get("unsecuredValidatorRequiredScope", "").split()),
            clock_skew_ms=skew,
        )


@dataclass(frozen=True, slots=True)
class Token:
    """A validated token: its principal name and expiry (ms since the epoch)."""

    principal: str
    expires_ms: int
    scope: frozenset[str] = field(default_factory=frozenset)


def _json_part(part: str) -> dict[str, Any]:
    try:
        decoded = base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
        value = json.loads(decoded)
    except (binascii.Error, ValueError):
        raise InvalidToken("malformed Base64 URL encoded value or JSON") from None
    if not isinstance(value, dict):
        raise InvalidToken("malformed JSON (not an object)")
    return value


def _number(claims: dict[str, Any], name: str) -> float | None:
    value = claims.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidToken(f"The '{name}' claim was not of type Number")
    return float(value)


def _scope(claims: dict[str, Any], name: str) -> frozenset[str]:
    value = claims.get(name)
    if isinstance(value, str):
        return frozenset({value.strip()}) if value.strip() else frozenset()
    if isinstance(value, list):
        return frozenset(str(v).strip() for v in value if str(v).strip())
    if value is None:
        return frozenset()
    raise InvalidToken(f"The '{name}' claim was not of type List")


def validate(token: str, options: ValidatorOptions, now_ms: int | None = None) -> Token:
    """The checks of Kafka's unsecured validator, in its order; InvalidToken on failure."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    if ".." in token:
        raise InvalidToken("Malformed compact serialization contains '..'")
    parts = token.split(".")
    if len(parts) != 3:
        raise InvalidToken("Unsecured JWS compact serializations must have 3 dot-separated "
                           "Base64URL-encoded values")
    header, claims = _json_part(parts[0]), _json_part(parts[1])
    if header.get("alg") != "none":
        raise InvalidToken("Unsecured JWS must have 'none' for an algorithm")
    if parts[2]:
        raise InvalidToken("Unsecured JWS must not contain a digital signature")
    scope = _scope(claims, options.scope_claim)
    expires = _number(claims, "exp")
    if expires is None:
        raise InvalidToken("No expiration time in JWT")
    principal = claims.get(options.principal_claim)
    if principal is None:
        raise InvalidToken(f"Required claim missing: {options.principal_claim}")
    if not isinstance(principal, str) or not principal.strip():
        raise InvalidToken(f"No principal name in JWT claim: {options.principal_claim}")
    issued = _number(claims, "iat")
    skew = options.clock_skew_ms
    if issued is not None and 1000 * issued > now + skew:
        raise InvalidToken(f"The Issued At value ({issued} seconds) was after the indicated "
                           f"time ({now} ms) plus allowable clock skew ({skew} ms)")
    if now - skew >= 1000 * expires:
        raise InvalidToken(f"The indicated time ({now} ms) minus allowable clock skew ({skew} "
                           f"ms) was on or after the Expiration Time value ({expires} seconds)")
    if issued is not None and expires <= issued:
        raise InvalidToken(f"The Expiration Time time ({expires} seconds) was not after the "
                           f"Issued At time ({issued} seconds)")
    for required in options.required_scope:
        if required not in scope:
            raise InvalidToken(f"The provided scope ({sorted(scope)}) was missing a required "
                               f"scope ({required})",
                               scope="[" + ", ".join(options.required_scope) + "]")
    return Token(principal, round(expires * 1000), scope)


def parse_client_first(message: bytes) -> tuple[str, str]:
    """(authorization id, token) of RFC 7628's client first message; MalformedMessage."""
    text = message.decode("utf-8", errors="replace")
    match = _CLIENT_FIRST.fullmatch(text)
    if match is None:
        raise MalformedMessage("Invalid OAUTHBEARER client first message")
    pairs = dict(p.split("=", 1) for p in match.group("pairs").split(_SEPARATOR) if p)
    auth = pairs.get("auth")
    if auth is None:
        raise MalformedMessage("Invalid OAUTHBEARER client first message: 'auth' not specified")
    auth_match = _AUTH.fullmatch(auth)
    if auth_match is None:
        raise MalformedMessage("Invalid OAUTHBEARER client first message: invalid 'auth' "
                               "format")
    if auth_match.group("scheme").lower() != "bearer":
        raise MalformedMessage("Invalid scheme in OAUTHBEARER client first message: "
                               f"{auth_match.group('scheme')}")
    authzid = (match.group("authzid") or "").replace("=2C", ",").replace("=3D", "=")
    return authzid, auth_match.group("token")


def unsecured_login_token(options: dict[str, str], now_s: float | None = None) -> str:
    """A token as Kafka's unsecured login module makes one from its JAAS options (a broker's
    own OAUTHBEARER login to its peers): ``unsecuredLoginStringClaim_<name>``,
    ``unsecuredLoginNumberClaim_<name>``, ``unsecuredLoginListClaim_<name>`` (the first
    character separates the items), ``unsecuredLoginLifetimeSeconds`` (3600)."""
    now = int(time.time() if now_s is None else now_s)
    lifetime = int(options.get("unsecuredLoginLifetimeSeconds", "3600") or 3600)
    claims: dict[str, Any] = {"iat": now, "exp": now + lifetime}
    for key, value in options.items():
        kind, _, name = key.partition("Claim_")
        if not name:
            continue
        if kind == "unsecuredLoginString":
            claims[name] = value
        elif kind == "unsecuredLoginNumber":
            claims[name] = float(value) if "." in value else int(value)
        elif kind == "unsecuredLoginList" and value:
            claims[name] = [item for item in value[1:].split(value[0]) if item]

    def part(obj: dict[str, Any]) -> str:
        raw = json.dumps(obj, separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    return f"{part({'alg': 'none'})}.{part(claims)}."
