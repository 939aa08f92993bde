"""SASL on the broker: which mechanisms a listener offers and one exchange per connection.

PLAIN checks the password against the ``user_<name>`` entries of the listener's JAAS config
(as Kafka's PlainLoginModule does; passwords in the config file, meant for development and
tests). SCRAM-SHA-256/512 check against the salted credentials of the metadata store (see
:mod:`.scram`). Every failure reads the same to the client (:data:`FAILED_MESSAGE`), so that
it learns nothing about which part was wrong; the reason goes to the broker's log only.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from ..config.jaas import parse_jaas_options, plain_users
from ..config.listeners import SASL_MECHANISMS
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
    """The client failed to authenticate; the message is for the log, not for the client."""


class SaslExchange(Protocol):
    mechanism: str

    @property
    def complete(self) -> bool: ...

    @property
    def username(self) -> str: ...

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
    return ScramExchange(mechanism, scram_lookup(store, mechanism), secret)
