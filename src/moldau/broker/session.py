"""What a connection knows about who is on the other end: its listener and its principal.

Each accepted connection gets one :class:`Session`. Handlers read the listener from it (a
Metadata answer lists the endpoints of the listener the client came in on, as Kafka does)
and the authentication state machine keeps its progress in it: on a SASL listener nothing
but ApiVersions, SaslHandshake and SaslAuthenticate is served until a mechanism has
succeeded (see :mod:`.sasl`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..config.listeners import Listener
from ..config.tls import subject_name
from ..protocol.apis import API_VERSIONS, SASL_AUTHENTICATE, SASL_HANDSHAKE, SUPPORTED

if TYPE_CHECKING:
    from .sasl import SaslExchange

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

    def __post_init__(self) -> None:
        if not self.uses_sasl:
            self.authenticated = True

    def transport_ready(self, transport: Any) -> None:
        """On a TLS connection without SASL, the principal is the client certificate's
        subject (Kafka's default ``ssl.principal.mapping.rules``), if it sent one."""
        if self.uses_tls and not self.uses_sasl:
            peercert = transport.get_extra_info("peercert")
            if peercert:
                self.principal = f"User:{subject_name(peercert)}"

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
