"""What a connection knows about who is on the other end: its listener and its principal.

Each accepted connection gets one :class:`Session`. Handlers read the listener from it (a
Metadata answer lists the endpoints of the listener the client came in on, as Kafka does)
and the authentication state machine keeps its progress in it: on a SASL listener nothing
but ApiVersions, SaslHandshake and SaslAuthenticate is served until a mechanism has
succeeded (see :mod:`.sasl`).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..config.listeners import Listener
from ..config.principal_mapping import NoMatchingRule, cached_rules, certificate_dn, map_name
from ..protocol.apis import API_VERSIONS, SASL_AUTHENTICATE, SASL_HANDSHAKE, SUPPORTED

if TYPE_CHECKING:
    from ..config import BrokerConfig
    from .fetch_sessions import FetchSession
    from .sasl import SaslExchange

log = logging.getLogger(__name__)

#: Kafka's principal of a connection that is not authenticated (PLAINTEXT, SSL without a
#: client certificate).
ANONYMOUS = "User:ANONYMOUS"


@dataclass(slots=True)
class Session:
    """One connection's listener and authentication state."""

    listener: Listener
    client_address: str = ""
    principal: str = ANONYMOUS
    #: The SASL mechanism chosen by SaslHandshake; None until then.
    mechanism: str | None = None
    #: The running SASL exchange (between handshake and success).
    exchange: SaslExchange | None = None
    #: True once SASL succeeded (always True on PLAINTEXT and SSL listeners).
    authenticated: bool = field(default=False)
    #: SaslHandshake v0: the next frames are raw SASL tokens, not Kafka requests.
    raw_tokens: bool = False
    #: Monotonic deadline (seconds) after which a re-authentication is due (KIP-368); None
    #: when sessions do not expire.
    expires_at: float | None = None
    #: Close the connection once the current response is sent (a failed authentication).
    closing: bool = False
    #: A follower's incremental fetch session (KIP-227), kept for this connection only.
    fetch_session: FetchSession | None = None

    def __post_init__(self) -> None:
        if not self.uses_sasl:
            self.authenticated = True

    def transport_ready(self, transport: Any, config: BrokerConfig) -> bool:
        """On a TLS connection without SASL, the principal is the client certificate's
        subject DN mapped by ``ssl.principal.mapping.rules`` (Kafka's default: the DN
        itself), if the client sent a certificate. False when no rule maps the DN: the
        connection fails authentication, as in Kafka, and is to be closed."""
        if not self.uses_tls or self.uses_sasl:
            return True
        ssl_object = transport.get_extra_info("ssl_object")
        der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
        if not der:
            return True
        dn = certificate_dn(der)
        rules = config.listener_setting(self.listener.name, "ssl.principal.mapping.rules")
        try:
            self.principal = f"User:{map_name(cached_rules(str(rules or 'DEFAULT')), dn)}"
        except NoMatchingRule as exc:
            log.warning("Failed authentication with /%s (listener %s, SSL): %s",
                        self.client_address or "?", self.listener.name, exc)
            return False
        log.debug("Authenticated /%s on listener %s as %s", self.client_address or "?",
                  self.listener.name, self.principal)
        return True

    @property
    def uses_sasl(self) -> bool:
        return self.listener.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    @property
    def uses_tls(self) -> bool:
        return self.listener.security_protocol in ("SSL", "SASL_SSL")


#: What a SASL connection may send before it has authenticated.
_BEFORE_AUTHENTICATION = frozenset({API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE})
_REAUTHENTICATION = frozenset({SASL_HANDSHAKE, SASL_AUTHENTICATE})


def session_gate(session: Session, frame: bytes | memoryview) -> str | None:
    """Why ``frame`` must close the connection (None: serve it), as Kafka's
    SaslServerAuthenticator refuses a request before authentication and an expired session
    (KIP-368) anything but re-authentication."""
    key = (frame[0] << 8 | frame[1]) if len(frame) >= 2 else -1
    if not session.authenticated:
        if key in _BEFORE_AUTHENTICATION:
            return None
        api = SUPPORTED.get(key)
        return (f"unexpected Kafka request of type {api.name if api else key} during SASL "
                f"handshake (client {session.client_address or '?'})")
    if session.expires_at is not None and time.monotonic() > session.expires_at \
            and key not in _REAUTHENTICATION:
        return (f"SASL session of {session.principal} expired; the client did not "
                f"re-authenticate (connections.max.reauth.ms)")
    return None
