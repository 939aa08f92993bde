"""SaslHandshake and SaslAuthenticate: the authentication of a SASL listener's connection.

The state machine lives in the connection's :class:`~..session.Session`: SaslHandshake picks
a mechanism (v0: the next frames are raw SASL tokens, handled in
:func:`handle_raw_token`; v1: they come wrapped in SaslAuthenticate requests), each token
advances the exchange, and success sets the principal. Until then the broker serves only
ApiVersions and these two (``Broker.handle_frame`` closes the connection on anything else, as
Kafka does). A failure answers SASL_AUTHENTICATION_FAILED with the same message whatever was
wrong, logs one line with the client's address, and closes the connection once the answer
is sent. An authenticated client may authenticate again (KIP-368) as the same principal.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import time
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from ...protocol.codec import build
from ..sasl import SaslFailure, enabled_mechanisms, failed_message, new_exchange

if TYPE_CHECKING:
    from ..broker import Broker, RequestContext
    from ..session import Session

log = logging.getLogger(__name__)


def _log_failure(session: Session, mechanism: str, reason: str) -> None:
    log.warning("Failed authentication with /%s (listener %s, %s): %s",
                session.client_address or "?", session.listener.name, mechanism, reason)


async def handle_handshake(request: Any, ctx: RequestContext) -> Any:
    m = ctx.resp
    session = ctx.session
    if session is None or not session.uses_sasl:
        return build(m.SaslHandshakeResponse, error_code=ErrorCode.illegal_sasl_state,
                     mechanisms=())
    broker = ctx.broker
    offered = enabled_mechanisms(broker.config, session.listener.name)
    mechanism = request.mechanism.upper()
    if mechanism not in offered or (session.authenticated and session.mechanism
                                    and mechanism != session.mechanism):
        _log_failure(session, request.mechanism, "unsupported SASL mechanism")
        session.closing = True
        return build(m.SaslHandshakeResponse, error_code=ErrorCode.unsupported_sasl_mechanism,
                     mechanisms=tuple(offered))
    session.mechanism = mechanism
    session.exchange = new_exchange(broker.config, broker.metadata, session.listener.name,
                                    mechanism, broker.sasl_secret)
    # Raw tokens (v0) only before the first authentication: re-authentication (KIP-368)
    # needs SaslAuthenticate.
    session.raw_tokens = ctx.version == 0 and not session.authenticated
    return build(m.SaslHandshakeResponse, error_code=ErrorCode.none, mechanisms=tuple(offered))


async def _step(broker: Broker, session: Session, token: bytes) -> tuple[bytes, bool, int]:
    """Advance the exchange by one token: (answer, done, session lifetime in ms, 0 when the
    session does not expire); SaslFailure when the client fails."""
    exchange = session.exchange
    if exchange is None:
        raise SaslFailure("SaslAuthenticate before SaslHandshake")
    if broker.cluster is not None:
        # Credentials are read from ZooKeeper: not on the event loop.
        answer = await asyncio.to_thread(exchange.step, token)
    else:
        answer = exchange.step(token)
    if not exchange.complete:
        return answer, False, 0
    principal = f"User:{exchange.username}"
    if session.authenticated and session.principal != principal and \
            session.principal != "User:ANONYMOUS":
        raise SaslFailure(f"re-authentication as {principal} on a connection of "
                          f"{session.principal}")
    session.principal = principal
    session.authenticated = True
    session.exchange = None
    session.raw_tokens = False
    lifetime_ms = _session_lifetime_ms(broker, session, exchange.credential_expires_ms)
    session.expires_at = time.monotonic() + lifetime_ms / 1000 if lifetime_ms else None
    log.debug("Authenticated /%s on listener %s as %s (%s)", session.client_address or "?",
              session.listener.name, principal, exchange.mechanism)
    return answer, True, lifetime_ms


def _session_lifetime_ms(broker: Broker, session: Session, expires_ms: int | None) -> int:
    """Kafka's session lifetime (KIP-368): connections.max.reauth.ms, bounded by the
    credential's expiry (an OAUTHBEARER token's ``exp``) when there is one; 0: no expiry."""
    value = broker.config.listener_setting(session.listener.name, "connections.max.reauth.ms",
                                           session.mechanism)
    reauth_ms = int(value) if isinstance(value, int) and value > 0 else 0
    if expires_ms is None:
        return reauth_ms
    remaining = max(1, expires_ms - int(time.time() * 1000))
    return min(remaining, reauth_ms) if reauth_ms else remaining


async def handle_authenticate(request: Any, ctx: RequestContext) -> Any:
    m = ctx.resp
    session = ctx.session
    if session is None or not session.uses_sasl or session.exchange is None:
        # Before authentication Kafka's authenticator closes the connection; afterwards (and
        # on other listeners) the request reaches KafkaApis, which only answers the error.
        if session is not None and not session.authenticated:
            session.closing = True
        return build(m.SaslAuthenticateResponse, error_code=ErrorCode.illegal_sasl_state,
                     error_message="Unexpected SaslAuthenticate request",
                     auth_bytes=b"", session_lifetime=datetime.timedelta(0))
    mechanism = session.exchange.mechanism
    try:
        answer, _done, lifetime = await _step(ctx.broker, session, request.auth_bytes)
    except SaslFailure as exc:
        _log_failure(session, mechanism, str(exc))
        session.closing = True
        session.exchange = None
        return build(m.SaslAuthenticateResponse,
                     error_code=ErrorCode.sasl_authentication_failed,
                     error_message=exc.client_message or failed_message(mechanism),
                     auth_bytes=b"", session_lifetime=datetime.timedelta(0))
    return build(m.SaslAuthenticateResponse, error_code=ErrorCode.none, error_message=None,
                 auth_bytes=answer, session_lifetime=datetime.timedelta(milliseconds=lifetime))


async def handle_raw_token(broker: Broker, session: Session, token: bytes) -> bytes:
    """A SASL token sent after SaslHandshake v0, without a Kafka request header: the answer
    goes back the same way. A failure closes the connection (v0 has no way to say why)."""
    mechanism = session.mechanism or "?"
    try:
        answer, _done, _lifetime = await _step(broker, session, token)
    except SaslFailure as exc:
        _log_failure(session, mechanism, str(exc))
        raise
    return answer
