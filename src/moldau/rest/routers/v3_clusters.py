"""v3 clusters (the one cluster the proxy talks to) and its brokers."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..errors import RestError
from ..jsonbody import v3_json
from ..services import services
from .v3_common import checked_cluster, crn, listing, metadata, related, url


async def _cluster_body(request: Request) -> dict[str, Any]:
    meta = await services(request).admin.metadata()
    cid = meta.cluster_id or ""
    controller = meta.controller_id
    return {
        "kind": "KafkaCluster",
        "metadata": metadata(url(request, "clusters", cid), crn(("kafka", cid))),
        "cluster_id": cid,
        "controller": (related(url(request, "clusters", cid, "brokers", controller))
                       if controller is not None and controller >= 0 else None),
        "acls": related(url(request, "clusters", cid, "acls")),
        "brokers": related(url(request, "clusters", cid, "brokers")),
        "broker_configs": related(url(request, "clusters", cid, "broker-configs")),
        "consumer_groups": related(url(request, "clusters", cid, "consumer-groups")),
        "topics": related(url(request, "clusters", cid, "topics")),
        "partition_reassignments": related(
            url(request, "clusters", cid, "topics", "-", "partitions", "-", "reassignment")),
    }


async def list_clusters(request: Request) -> Response:
    return v3_json(listing("KafkaClusterList", url(request, "clusters"),
                           [await _cluster_body(request)]))


async def get_cluster(request: Request) -> Response:
    await checked_cluster(request)
    return v3_json(await _cluster_body(request))


def _broker_body(request: Request, cid: str, broker: Any) -> dict[str, Any]:
    return {
        "kind": "KafkaBroker",
        "metadata": metadata(url(request, "clusters", cid, "brokers", broker.id),
                             crn(("kafka", cid), ("broker", broker.id))),
        "cluster_id": cid,
        "broker_id": broker.id,
        "host": broker.host,
        "port": broker.port,
        "rack": None,
        "configs": related(url(request, "clusters", cid, "brokers", broker.id, "configs")),
        "partition_replicas": related(
            url(request, "clusters", cid, "brokers", broker.id, "partition-replicas")),
    }


async def list_brokers(request: Request) -> Response:
    cid = await checked_cluster(request)
    meta = await services(request).admin.metadata(fresh=True)
    return v3_json(listing("KafkaBrokerList", url(request, "clusters", cid, "brokers"),
                           [_broker_body(request, cid, b)
                            for _, b in sorted(meta.brokers.items())]))


async def get_broker(request: Request) -> Response:
    cid = await checked_cluster(request)
    meta = await services(request).admin.metadata(fresh=True)
    raw = request.path_params["broker_id"]
    broker = meta.brokers.get(int(raw)) if raw.isdigit() else None
    if broker is None:
        raise RestError(404, 404, f"Broker {raw} cannot be found.")
    return v3_json(_broker_body(request, cid, broker))


routes = [
    Route("/v3/clusters", list_clusters, methods=["GET"]),
    Route("/v3/clusters/{cluster_id}", get_cluster, methods=["GET"]),
    Route("/v3/clusters/{cluster_id}/brokers", list_brokers, methods=["GET"]),
    Route("/v3/clusters/{cluster_id}/brokers/{broker_id}", get_broker, methods=["GET"]),
]
