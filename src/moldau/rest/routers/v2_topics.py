"""v2 topics, partitions, brokers, and produce to a topic or partition."""

from __future__ import annotations

from typing import Any

from confluent_kafka import TopicPartition
from confluent_kafka.admin import ConfigResource, OffsetSpec, PartitionMetadata, TopicMetadata
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..errors import partition_not_found, topic_not_found
from ..jsonbody import v2_json
from ..kafka_admin import topic_name
from ..produce import produce_v2
from ..services import services


def _partition_body(partition: PartitionMetadata) -> dict[str, Any]:
    return {
        "partition": partition.id,
        "leader": partition.leader,
        "replicas": [{"broker": b, "leader": b == partition.leader, "in_sync": b in partition.isrs}
                     for b in partition.replicas],
    }


async def _topic(request: Request) -> TopicMetadata:
    name = request.path_params["topic"]
    topic = await services(request).admin.topic(name)
    if topic is None:
        raise topic_not_found(name)
    return topic


def _partition_id(request: Request, topic: TopicMetadata) -> int:
    raw = request.path_params["partition"]
    try:
        partition = int(raw)
    except ValueError:
        raise partition_not_found() from None
    if partition not in topic.partitions:
        raise partition_not_found()
    return partition


async def list_topics(request: Request) -> Response:
    metadata = await services(request).admin.metadata(fresh=True)
    return v2_json(sorted(metadata.topics))


async def get_topic(request: Request) -> Response:
    topic = await _topic(request)
    admin = services(request).admin
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic_name(topic))
    (future,) = admin.client.describe_configs([resource]).values()
    entries = await admin.result(future)
    return v2_json({
        "name": topic_name(topic),
        "configs": {name: entry.value for name, entry in entries.items()},
        "partitions": [_partition_body(p) for _, p in sorted(topic.partitions.items())],
    })


async def list_partitions(request: Request) -> Response:
    topic = await _topic(request)
    return v2_json([_partition_body(p) for _, p in sorted(topic.partitions.items())])


async def get_partition(request: Request) -> Response:
    topic = await _topic(request)
    return v2_json(_partition_body(topic.partitions[_partition_id(request, topic)]))


async def partition_offsets(request: Request) -> Response:
    topic = await _topic(request)
    tp = TopicPartition(topic_name(topic), _partition_id(request, topic))
    admin = services(request).admin
    earliest = admin.client.list_offsets({tp: OffsetSpec.earliest()})
    latest = admin.client.list_offsets({tp: OffsetSpec.latest()})
    beginning = await admin.result(next(iter(earliest.values())))
    end = await admin.result(next(iter(latest.values())))
    return v2_json({"beginning_offset": beginning.offset, "end_offset": end.offset})


async def produce_to_topic(request: Request) -> Response:
    return await produce_v2(request, request.path_params["topic"], None)


async def produce_to_partition(request: Request) -> Response:
    raw = request.path_params["partition"]
    if not raw.isdigit():
        raise partition_not_found()
    return await produce_v2(request, request.path_params["topic"], int(raw))


async def list_brokers(request: Request) -> Response:
    metadata = await services(request).admin.metadata(fresh=True)
    return v2_json({"brokers": sorted(metadata.brokers)})


routes = [
    Route("/topics", list_topics, methods=["GET"]),
    Route("/topics/{topic}", get_topic, methods=["GET"]),
    Route("/topics/{topic}", produce_to_topic, methods=["POST"]),
    Route("/topics/{topic}/partitions", list_partitions, methods=["GET"]),
    Route("/topics/{topic}/partitions/{partition}", get_partition, methods=["GET"]),
    Route("/topics/{topic}/partitions/{partition}", produce_to_partition, methods=["POST"]),
    Route("/topics/{topic}/partitions/{partition}/offsets", partition_offsets,
          methods=["GET"]),
    Route("/brokers", list_brokers, methods=["GET"]),
]
