"""ListConfigResources (Kafka 4.1+, KIP-1142): the config resources a client may describe.

Tools use it to discover resources that have no listing API of their own. Version 0 (once
named ListClientMetricsResources) lists client-metrics resources only; version 1 lists the
types asked for, every supported one when none is named: topics, brokers and their loggers
(one each per live broker), groups (those this broker's coordinator holds) and client-metrics
subscriptions (:mod:`..client_metrics`). A type outside that set
is refused with UNSUPPORTED_VERSION, as Kafka does.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from ...protocol.codec import build
from ..broker import Broker, RequestContext
from .api_versions import NO_THROTTLE
from .groups import loading_error

#: Kafka's ConfigResource.Type ids.
TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
#: What each version lists (ListConfigResourcesRequest.supportedResourceTypes in Kafka).
_SUPPORTED = {0: (CLIENT_METRICS,), 1: (TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP)}


def _broker_ids(broker: Broker) -> list[int]:
    if broker.cluster is None:
        return [broker.node_id]
    return sorted(broker.cluster.store.brokers())


def _names(ctx: RequestContext, resource_type: int) -> list[str]:
    broker = ctx.broker
    if resource_type == TOPIC:
        return sorted(broker.metadata.topics())
    if resource_type in (BROKER, BROKER_LOGGER):
        return [str(node_id) for node_id in _broker_ids(broker)]
    if resource_type == GROUP:
        if loading_error(ctx) is not None:
            return []
        return sorted({g.group_id for g in broker.groups.list_groups((), ())}
                      | set(broker.groups.consumer_groups))
    return broker.client_metrics.names()


async def handle(request: Any, ctx: RequestContext) -> Any:
    m = ctx.resp
    supported = _SUPPORTED[min(ctx.version, 1)]
    wanted = list(dict.fromkeys(getattr(request, "resource_types", ()))) or list(supported)
    unsupported = [t for t in wanted if t not in supported]
    if unsupported:
        return build(m.ListConfigResourcesResponse, throttle_time=NO_THROTTLE,
                     error_code=ErrorCode.unsupported_version, config_resources=())
    resources = [build(m.ConfigResource, resource_name=name, resource_type=resource_type)
                 for resource_type in wanted for name in _names(ctx, resource_type)]
    return build(m.ListConfigResourcesResponse, throttle_time=NO_THROTTLE,
                 error_code=ErrorCode.none, config_resources=tuple(resources))
