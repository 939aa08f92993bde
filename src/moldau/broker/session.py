"""What a connection knows about who is on the other end: its listener and its principal.

Each accepted connection gets one :class:`Session`. Handlers read the listener from it (a
Metadata answer lists the endpoints of the listener the client came in on, as Kafka does)
and the authentication state machine keeps its progress in it: on a SASL listener nothing
but ApiVersions, SaslHandshake and SaslAuthenticate is served until a mechanism has
succeeded (see :mod:`.sasl`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..config.listeners import Listener

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

    def __post_init__(self) -> None:
        if not self.uses_sasl:
            self.authenticated = True

    @property
    def uses_sasl(self) -> bool:
        return self.listener.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    @property
    def uses_tls(self) -> bool:
        return self.listener.security_protocol in ("SSL", "SASL_SSL")
