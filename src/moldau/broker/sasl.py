"""SASL on the broker: which mechanisms a listener offers and one exchange per connection.

PLAIN checks the password against the ``user_<name>`` entries of the listener's JAAS config
(as Kafka's PlainLoginModule does; passwords in the config file, meant for development and
tests). SCRAM-SHA-256/512 check against the salted credentials of the metadata store (see
:mod:`.scram`). OAUTHBEARER validates unsecured JWS tokens as Kafka's development-only
default validator does (see :mod:`.oauthbearer`). Every failure reads the same to the client
(:func:`failed_message`), so that it learns nothing about which part was wrong (OAUTHBEARER's
RFC 7628 error JSON excepted, as in Kafka); the reason goes to the broker's log only.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from ..config.jaas import parse_jaas_options, plain_users
from ..config.listeners import SASL_MECHANISMS
from .oauthbearer import InvalidToken, MalformedMessage, ValidatorOptions, parse_client_first
from .oauthbearer import validate as validate_token
from .scram import ScramCredential, ScramError, ScramServer

if TYPE_CHECKING:
    from ..cluster.metadata import MetadataStore
    from ..config import BrokerConfig

log = logging.getLogger(__name__)

SUPPORTED_MECHANISMS: tuple[str, ...] = SASL_MECHANISMS


def failed_message(mechanism: str) -> str:
    """Kafka's words for any failed authentication, whatever the reason."""
    return (f"Authentication failed during authentication due to invalid credentials with "
            f"SASL mechanism {mechanism}")


class SaslFailure(Exception):
    """The client failed to authenticate; the message is for the log. ``client_message``,
    when set, replaces Kafka's generic words in the answer (OAUTHBEARER's error JSON)."""

    def __init__(self, reason: str, client_message: str | None = None) -> None:
        super().__init__(reason)
        self.client_message = client_message


class SaslExchange(Protocol):
    mechanism: str

    @property
    def complete(self) -> bool: ...

    @property
    def username(self) -> str: ...

    @property
    def credential_expires_ms(self) -> int | None:
        """When the credential expires (ms since the epoch; None: never), which bounds the
        session (KIP-368)."""
        ...

    def step(self, token: bytes) -> bytes:
        """The response to one client token; SaslFailure when the client fails."""
        ...


def enabled_mechanisms(config: BrokerConfig, listener: str) -> list[str]:
    """The mechanisms ``listener`` offers: sasl.enabled.mechanisms that moldau supports."""
    raw = config.listener_setting(listener, "sasl.enabled.mechanisms") or ()
    assert isinstance(raw, tuple)
    return [m.upper() for m in raw if m.upper() in SUPPORTED_MECHANISMS]


class PlainExchange:
    """RFC 4616: one token ``authzid NUL user NUL password``, an empty answer."""

    mechanism = "PLAIN"
    credential_expires_ms = None

    def __init__(self, users: dict[str, str]) -> None:
        self._users = users
        self.username = ""
        self.complete = False

    def step(self, token: bytes) -> bytes:
        if self.complete:
            raise SaslFailure("PLAIN exchange already complete")
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise SaslFailure("invalid PLAIN token (not authzid NUL user NUL password)")
        try:
            authzid, user, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise SaslFailure("PLAIN token is not UTF-8") from None
        self.username = user
        if not user or not password:
            raise SaslFailure("PLAIN token without user name or password")
        if authzid and authzid != user:
            raise SaslFailure(f"authorization id {authzid!r} differs from user {user!r}")
        expected = self._users.get(user)
        # compare_digest wants same-type operands; bytes keep it constant-time for unicode.
        if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            raise SaslFailure(f"invalid credentials of user {user!r}")
        self.complete = True
        return b""


class ScramExchange:
    """An adapter of :class:`~.scram.ScramServer` to :class:`SaslExchange`."""

    credential_expires_ms = None

    def __init__(self, mechanism: str, lookup: Callable[[str], ScramCredential | None],
                 secret: bytes) -> None:
        self.mechanism = mechanism
        self._server = ScramServer(mechanism, lookup, secret)

    @property
    def complete(self) -> bool:
        return self._server.complete

    @property
    def username(self) -> str:
        return self._server.username

    def step(self, token: bytes) -> bytes:
        try:
            return self._server.step(token)
        except ScramError as exc:
            raise SaslFailure(str(exc)) from None


class OAuthBearerExchange:
    """RFC 7628 with unsecured JWS tokens (see :mod:`.oauthbearer`): one client message with
    the token; a bad token gets the error JSON as a challenge, then fails on the client's
    0x01 reply (or on anything else)."""

    mechanism = "OAUTHBEARER"

    def __init__(self, options: ValidatorOptions | str) -> None:
        #: The validator's options, or why the JAAS options cannot make them.
        self._options = options
        self._error: str | None = None
        self._reason = ""
        self.username = ""
        self.complete = False
        self.credential_expires_ms: int | None = None

    def step(self, token: bytes) -> bytes:
        if self.complete:
            raise SaslFailure("OAUTHBEARER exchange already complete")
        if self._error is not None:
            raise SaslFailure(f"invalid token: {self._reason}", self._error)
        if isinstance(self._options, str):
            raise SaslFailure("Authentication could not be performed due to an internal error "
                              f"on the server: {self._options}")
        try:
            authzid, value = parse_client_first(token)
        except MalformedMessage as exc:
            raise SaslFailure(str(exc)) from None
        try:
            validated = validate_token(value, self._options)
        except InvalidToken as exc:
            self._error = exc.challenge()
            self._reason = str(exc)
            return self._error.encode()
        if authzid and authzid != validated.principal:
            message = (f"Authentication failed: Client requested an authorization id "
                       f"({authzid}) that is different from the token's principal name "
                       f"({validated.principal})")
            raise SaslFailure(message, message)
        self.username = validated.principal
        self.credential_expires_ms = validated.expires_ms
        self.complete = True
        return b""


def scram_lookup(store: MetadataStore, mechanism: str
                 ) -> Callable[[str], ScramCredential | None]:
    def lookup(user: str) -> ScramCredential | None:
        text = store.user_configs(user).get(mechanism)
        if text is None:
            return None
        try:
            return ScramCredential.decode(text)
        except (KeyError, ValueError):
            log.warning("SCRAM credential of user %r (%s) is malformed; ignored", user,
                        mechanism)
            return None
    return lookup


def new_exchange(config: BrokerConfig, store: MetadataStore, listener: str, mechanism: str,
                 secret: bytes) -> SaslExchange:
    """The server side of ``mechanism`` (one that :func:`enabled_mechanisms` offers)."""
    if mechanism == "PLAIN":
        jaas = config.listener_setting(listener, "sasl.jaas.config", "PLAIN")
        users = plain_users(parse_jaas_options("sasl.jaas.config", str(jaas))) if jaas else {}
        return PlainExchange(users)
    if mechanism == "OAUTHBEARER":
        jaas = config.listener_setting(listener, "sasl.jaas.config", mechanism)
        options = parse_jaas_options("sasl.jaas.config", str(jaas)) if jaas else {}
        try:
            return OAuthBearerExchange(ValidatorOptions.from_jaas(options))
        except ValueError as exc:
            return OAuthBearerExchange(str(exc))
    return ScramExchange(mechanism, scram_lookup(store, mechanism), secret)
