"""v3 consumer groups: list, get, their consumers, lag summary and per-partition lags.

Lag is what Kafka's tools compute: a partition's log end offset minus the group's committed
offset (a partition without a committed offset is not listed), from the AdminClient's
ListConsumerGroupOffsets and ListOffsets(latest).
"""

from __future__ import annotations

from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import ConsumerGroupDescription, OffsetSpec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..errors import RestError
from ..jsonbody import v3_json
from ..services import services
from .v3_common import checked_cluster, crn, listing, metadata, related, url


def _state(value: Any) -> str:
    return str(getattr(value, "name", value) or "UNKNOWN").upper()


def _group_body(request: Request, cid: str, group: ConsumerGroupDescription
                ) -> dict[str, Any]:
    gid = group.group_id
    base = ("clusters", cid, "consumer-groups", gid)
    coordinator = group.coordinator
    return {
        "kind": "KafkaConsumerGroup",
        "metadata": metadata(url(request, *base),
                             crn(("kafka", cid), ("consumer-group", gid))),
        "cluster_id": cid,
        "consumer_group_id": gid,
        "is_simple": bool(group.is_simple_consumer_group),
        "partition_assignor": group.partition_assignor or "",
        "state": _state(group.state),
        "coordinator": (related(url(request, "clusters", cid, "brokers", coordinator.id))
                        if coordinator is not None else None),
        "consumers": related(url(request, *base, "consumers")),
        "lag_summary": related(url(request, *base, "lag-summary")),
    }


async def _describe(request: Request, group_ids: list[str]) -> list[ConsumerGroupDescription]:
    admin = services(request).admin
    if not group_ids:
        return []
    futures = admin.client.describe_consumer_groups(group_ids)
    return [await admin.result(futures[g]) for g in group_ids]


async def _group(request: Request) -> tuple[str, ConsumerGroupDescription]:
    cid = await checked_cluster(request)
    gid = request.path_params["group_id"]
    (group,) = await _describe(request, [gid])
    if _state(group.state) == "DEAD" and not group.members:
        raise RestError(404, 404, f"Consumer group {gid} could not be found.")
    return cid, group


async def list_groups(request: Request) -> Response:
    cid = await checked_cluster(request)
    admin = services(request).admin
    listed = await admin.result(admin.client.list_consumer_groups())
    groups = await _describe(request, sorted(g.group_id for g in listed.valid))
    return v3_json(listing("KafkaConsumerGroupList",
                           url(request, "clusters", cid, "consumer-groups"),
                           [_group_body(request, cid, g) for g in groups]))


async def get_group(request: Request) -> Response:
    cid, group = await _group(request)
    return v3_json(_group_body(request, cid, group))


async def list_consumers(request: Request) -> Response:
    cid, group = await _group(request)
    gid = group.group_id
    base = ("clusters", cid, "consumer-groups", gid, "consumers")
    data = [{
        "kind": "KafkaConsumer",
        "metadata": metadata(url(request, *base, m.member_id),
                             crn(("kafka", cid), ("consumer-group", gid),
                                 ("consumer", m.member_id))),
        "cluster_id": cid,
        "consumer_group_id": gid,
        "consumer_id": m.member_id,
        "instance_id": m.group_instance_id,
        "client_id": m.client_id,
        "assignments": related(url(request, *base, m.member_id, "assignments")),
    } for m in group.members]
    return v3_json(listing("KafkaConsumerList", url(request, *base), data))


async def _lags(request: Request, cid: str, group: ConsumerGroupDescription
                ) -> list[dict[str, Any]]:
    admin = services(request).admin
    gid = group.group_id
    (offsets_future,) = admin.client.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(gid)]).values()
    committed = [tp for tp in (await admin.result(offsets_future)).topic_partitions
                 if tp.offset >= 0]
    if not committed:
        return []
    ends = admin.client.list_offsets(
        {TopicPartition(tp.topic, tp.partition): OffsetSpec.latest() for tp in committed})
    end_offsets = {(tp.topic, tp.partition): (await admin.result(f)).offset
                   for tp, f in ends.items()}
    owners = {(tp.topic, tp.partition): m for m in group.members
              for tp in (m.assignment.topic_partitions if m.assignment else [])}
    lags = []
    for tp in sorted(committed, key=lambda t: (t.topic, t.partition)):
        end = end_offsets[(tp.topic, tp.partition)]
        owner = owners.get((tp.topic, tp.partition))
        lags.append({
            "kind": "KafkaConsumerLag",
            "metadata": metadata(
                url(request, "clusters", cid, "consumer-groups", gid, "lags", tp.topic,
                    tp.partition),
                crn(("kafka", cid), ("consumer-group", gid), ("lag", f"{tp.topic}-"
                                                                     f"{tp.partition}"))),
            "cluster_id": cid,
            "consumer_group_id": gid,
            "topic_name": tp.topic,
            "partition_id": tp.partition,
            "current_offset": tp.offset,
            "log_end_offset": end,
            "lag": max(0, end - tp.offset),
            "consumer_id": owner.member_id if owner else "",
            "instance_id": owner.group_instance_id if owner else None,
            "client_id": owner.client_id if owner else "",
        })
    return lags


async def list_lags(request: Request) -> Response:
    cid, group = await _group(request)
    return v3_json(listing(
        "KafkaConsumerLagList",
        url(request, "clusters", cid, "consumer-groups", group.group_id, "lags"),
        await _lags(request, cid, group)))


async def lag_summary(request: Request) -> Response:
    cid, group = await _group(request)
    gid = group.group_id
    lags = await _lags(request, cid, group)
    worst = max(lags, key=lambda lag: lag["lag"], default=None)
    base = ("clusters", cid, "consumer-groups", gid)
    return v3_json({
        "kind": "KafkaConsumerGroupLagSummary",
        "metadata": metadata(url(request, *base, "lag-summary"),
                             crn(("kafka", cid), ("consumer-group", gid), ("lag-summary", gid))),
        "cluster_id": cid,
        "consumer_group_id": gid,
        "max_lag_consumer_id": worst["consumer_id"] if worst else "",
        "max_lag_instance_id": worst["instance_id"] if worst else None,
        "max_lag_client_id": worst["client_id"] if worst else "",
        "max_lag_topic_name": worst["topic_name"] if worst else "",
        "max_lag_partition_id": worst["partition_id"] if worst else 0,
        "max_lag": worst["lag"] if worst else 0,
        "total_lag": sum(lag["lag"] for lag in lags),
        "max_lag_consumer": (related(url(request, *base, "consumers", worst["consumer_id"]))
                             if worst and worst["consumer_id"] else None),
        "max_lag_partition": (related(url(request, "clusters", cid, "topics",
                                          worst["topic_name"], "partitions",
                                          worst["partition_id"])) if worst else None),
    })


_GROUP = "/v3/clusters/{cluster_id}/consumer-groups/{group_id}"
routes = [
    Route("/v3/clusters/{cluster_id}/consumer-groups", list_groups, methods=["GET"]),
    Route(_GROUP, get_group, methods=["GET"]),
    Route(f"{_GROUP}/consumers", list_consumers, methods=["GET"]),
    Route(f"{_GROUP}/lag-summary", lag_summary, methods=["GET"]),
    Route(f"{_GROUP}/lags", list_lags, methods=["GET"]),
]
