"""Throttling a request as Kafka does (KIP-219): measure it against the client's quotas,
put the throttle time in the response, and let the connection mute itself for that long.

The broker calls :func:`request_throttle` once a handler returned, only while some quota is
configured (``ClientQuotas.active``): Produce requests count their size in bytes against
``producer_byte_rate`` (the whole request, as Kafka's ``request.sizeInBytes``), every
request that is not exempt counts its handler time against ``request_percentage``. The Fetch
handler measures ``consumer_byte_rate`` itself (the size of its response) and the topic
handlers ``controller_mutation_rate``; they leave their throttle time in the context. The
largest of them is the request's throttle time.

Handler time is wall time around the handler, less a Fetch's wait in purgatory: on one event
loop that is the time the loop gave this request (approximately Kafka's request thread
time, which the percentage is of).
"""

from __future__ import annotations

import dataclasses
import datetime
import struct
import time
from typing import TYPE_CHECKING, Any

from ..protocol import apis
from .client_quotas import principal_user
from .response import Response

if TYPE_CHECKING:
    from .broker import Broker, RequestContext

#: Requests Kafka never throttles by request time: authentication and version discovery,
#: and the inter-broker (cluster action) APIs.
EXEMPT = frozenset({
    apis.API_VERSIONS, apis.SASL_HANDSHAKE, apis.SASL_AUTHENTICATE, apis.CONTROLLED_SHUTDOWN,
    apis.WRITE_TXN_MARKERS,
})
_INT32 = struct.Struct(">i")


def client_of(ctx: RequestContext) -> tuple[str, str]:
    """(user, client id) as quotas know a request's client."""
    principal = ctx.session.principal if ctx.session is not None else "User:ANONYMOUS"
    return principal_user(principal), ctx.client_id


def request_throttle(broker: Broker, key: int, request_bytes: int, ctx: RequestContext,
                     started: float) -> int:
    """Record the request against its client's quotas: its throttle time in ms."""
    quotas = broker.client_quotas
    if ctx.quota_exempt or key in EXEMPT:
        return ctx.throttle_ms
    user, client = client_of(ctx)
    throttle = ctx.throttle_ms
    if key == apis.PRODUCE:
        throttle = max(throttle, quotas.record_produce(user, client, request_bytes))
    if quotas.enabled["request_percentage"]:
        spent = max(time.perf_counter() - started - ctx.waited_s, 0.0)
        throttle = max(throttle, quotas.record_request_time(user, client, spent))
    return throttle


def with_throttle(result: Any, throttle_ms: int) -> Any:
    """``result`` carrying ``throttle_ms`` (a kio response, or an encoded Fetch body)."""
    if isinstance(result, Response):
        # An encoded Fetch response: throttle_time_ms is the first field of its body.
        head = result.parts[0]
        if isinstance(head, bytes) and len(head) >= 4:
            result.parts[0] = _INT32.pack(throttle_ms) + head[4:]
        result.throttle_ms = throttle_ms
        return result
    if dataclasses.is_dataclass(result) and hasattr(result, "throttle_time"):
        return dataclasses.replace(result,  # type: ignore[type-var]
                                   throttle_time=datetime.timedelta(milliseconds=throttle_ms))
    return result
