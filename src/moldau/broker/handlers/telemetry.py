"""GetTelemetrySubscriptions and PushTelemetry (KIP-714): clients push their own metrics.

librdkafka and the Java client ask which metrics to push as soon as the broker advertises
these APIs, then push them every interval; :mod:`..client_metrics` holds the subscriptions
(client-metrics config resources) and the latest push per client instance.
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode

from ...protocol.codec import build
from ..broker import RequestContext, now_ms
from ..client_metrics import TELEMETRY_MAX_BYTES
from .api_versions import NO_THROTTLE


def _source(ctx: RequestContext) -> str:
    return ctx.client_host.lstrip("/")


async def handle_get_subscriptions(request: Any, ctx: RequestContext) -> Any:
    instance = ctx.broker.client_metrics.subscribe(request.client_instance_id, ctx.client_id,
                                                   _source(ctx))
    return build(
        ctx.resp.GetTelemetrySubscriptionsResponse,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        client_instance_id=instance.instance_id,
        subscription_id=instance.subscription_id,
        accepted_compression_types=(),  # uncompressed only: the kept payloads stay plain OTLP
        push_interval=datetime.timedelta(milliseconds=instance.interval_ms),
        telemetry_max_bytes=TELEMETRY_MAX_BYTES,
        delta_temporality=True,
        requested_metrics=instance.metrics,
    )


async def handle_push(request: Any, ctx: RequestContext) -> Any:
    code, _message = ctx.broker.client_metrics.push(
        request.client_instance_id, request.subscription_id, request.terminating,
        request.compression_type, request.metrics, ctx.client_id, _source(ctx), now_ms())
    return build(ctx.resp.PushTelemetryResponse, throttle_time=NO_THROTTLE, error_code=code)
