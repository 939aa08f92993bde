"""The one way a broker opens a connection to another: the inter-broker listener's security.

Replica fetchers, the pooled peer clients (transaction markers, KIP-890 verification) and
controlled shutdown all connect through :class:`PeerConnector`, so that a cluster whose
inter-broker listener is SSL or SASL_SSL works the same as a PLAINTEXT one: TLS with the
listener's trust and key stores (:func:`..config.tls.client_context`), then SASL with
``sasl.mechanism.inter.broker.protocol`` and the listener's JAAS credentials
(:mod:`..config.inter_broker`). A SASL session the peer bounds (KIP-368,
``connections.max.reauth.ms`` or a token's expiry) is re-authenticated on the same
connection before it runs out, as Kafka's brokers do.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time

from kio.schema.errors import ErrorCode
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from ..config import BrokerConfig
from ..config.inter_broker import InterBrokerSecurity, inter_broker_security
from ..config.tls import client_context
from ..replica.broker_connection import BrokerConnection
from .sasl_client import SaslClientExchange
from .scram import ScramError

log = logging.getLogger(__name__)

#: Re-authenticate when this share of the session lifetime has passed (Kafka: 85-95 %).
REAUTH_AT = 0.85


class PeerAuthenticationError(ConnectionError):
    """The peer refused this broker's credentials (or answered the exchange wrongly)."""


class PeerConnector:
    """Opens authenticated connections to the other brokers (see the module docstring)."""

    def __init__(self, config: BrokerConfig) -> None:
        self.security: InterBrokerSecurity = inter_broker_security(config)
        self._tls: ssl.SSLContext | None = (
            client_context(config, self.security.listener) if self.security.uses_tls else None)

    async def connect(self, address: tuple[str, int], timeout_s: float) -> BrokerConnection:
        """A connection to the broker at ``address``, authenticated; raises OSError,
        TimeoutError, ssl.SSLError or PeerAuthenticationError (a ConnectionError)."""
        host, port = address
        conn = await asyncio.wait_for(BrokerConnection.open(host, port, self._tls), timeout_s)
        if self.security.mechanism is None:
            return conn
        try:
            await asyncio.wait_for(self._authenticate(conn, first=True), timeout_s)
        except PeerAuthenticationError:
            conn.close()
            raise
        except (ConnectionError, ValueError) as exc:  # the peer hung up mid-exchange
            conn.close()
            raise PeerAuthenticationError(f"SASL exchange with {host}:{port} broke off: "
                                          f"{exc}") from exc
        except BaseException:
            conn.close()
            raise
        return conn

    async def _authenticate(self, conn: BrokerConnection, first: bool = False) -> None:
        mechanism = self.security.mechanism
        assert mechanism is not None
        handshake = await conn.send(SaslHandshakeRequest(mechanism=mechanism))
        if handshake.error_code != ErrorCode.none:
            raise PeerAuthenticationError(f"peer refused SASL mechanism {mechanism} "
                                          f"({handshake.error_code.name}); it offers "
                                          f"{', '.join(handshake.mechanisms)}")
        lifetime_ms = 0
        try:
            for token in SaslClientExchange(mechanism, dict(self.security.jaas)):
                answer = await conn.send(SaslAuthenticateRequest(auth_bytes=token.send))
                if answer.error_code != ErrorCode.none:
                    raise PeerAuthenticationError(f"peer refused this broker's {mechanism} "
                                                  f"credentials: {answer.error_message}")
                token.received = answer.auth_bytes
                lifetime_ms = int(answer.session_lifetime.total_seconds() * 1000)
        except ScramError as exc:
            raise PeerAuthenticationError(f"{mechanism} exchange with a peer: {exc}") from None
        if lifetime_ms > 0:
            due = time.monotonic() + lifetime_ms * REAUTH_AT / 1000
            conn.before_request = lambda c: self._reauthenticate_after(c, due)
        else:
            conn.before_request = None
        if first:
            log.debug("authenticated to a peer with %s as %s", mechanism,
                      self.security.option("username") or
                      self.security.option("unsecuredLoginStringClaim_sub"))

    async def _reauthenticate_after(self, conn: BrokerConnection, due: float) -> None:
        if time.monotonic() >= due:
            await self._authenticate(conn)
