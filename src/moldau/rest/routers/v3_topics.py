"""v3 topics (list, create, get, delete), their configs, and their partitions."""

from __future__ import annotations

from typing import Any

from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    TopicMetadata,
)
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..errors import RestError, partition_not_found, topic_not_found
from ..jsonbody import read_json, v3_json
from ..kafka_admin import topic_name
from ..services import services
from .v3_common import checked_cluster, crn, listing, metadata, related, url


def topic_body(request: Request, cid: str, topic: TopicMetadata) -> dict[str, Any]:
    name = topic_name(topic)
    first = topic.partitions.get(0)
    return {
        "kind": "KafkaTopic",
        "metadata": metadata(url(request, "clusters", cid, "topics", name),
                             crn(("kafka", cid), ("topic", name))),
        "cluster_id": cid,
        "topic_name": name,
        "is_internal": name.startswith("__"),
        "replication_factor": len(first.replicas) if first is not None else 0,
        "partitions_count": len(topic.partitions),
        "partitions": related(url(request, "clusters", cid, "topics", name, "partitions")),
        "configs": related(url(request, "clusters", cid, "topics", name, "configs")),
        "partition_reassignments": related(
            url(request, "clusters", cid, "topics", name, "partitions", "-", "reassignment")),
        "authorized_operations": [],
    }


async def _topic(request: Request) -> tuple[str, TopicMetadata]:
    cid = await checked_cluster(request)
    name = request.path_params["topic"]
    topic = await services(request).admin.topic(name)
    if topic is None:
        raise topic_not_found(name, v3=True)
    return cid, topic


async def list_topics(request: Request) -> Response:
    cid = await checked_cluster(request)
    meta = await services(request).admin.metadata(fresh=True)
    return v3_json(listing("KafkaTopicList", url(request, "clusters", cid, "topics"),
                           [topic_body(request, cid, t) for _, t in sorted(meta.topics.items())]))


async def create_topic(request: Request) -> Response:
    cid = await checked_cluster(request)
    body = await read_json(request)
    name = body.get("topic_name") if isinstance(body, dict) else None
    if not isinstance(name, str) or not name:
        raise RestError(400, 400, "topic_name is required")
    try:
        partitions = int(body.get("partitions_count", -1))
        replication = int(body.get("replication_factor", -1))
        configs = {str(c["name"]): str(c["value"]) for c in body.get("configs") or []}
    except (TypeError, ValueError, KeyError):
        raise RestError(400, 400, "partitions_count and replication_factor must be integers "
                                  "and configs a list of {name, value}") from None
    admin = services(request).admin
    new_topic = NewTopic(name, num_partitions=partitions, replication_factor=replication,
                         config=configs)
    validate_only = bool(body.get("validate_only", False))
    (future,) = admin.client.create_topics([new_topic], validate_only=validate_only).values()
    await admin.result(future)
    admin.forget()
    topic = await admin.topic(name)
    if topic is None:
        raise RestError(500, 50002, f"Kafka error: topic {name} was created but is not in "
                                    "the metadata yet")
    return v3_json(topic_body(request, cid, topic), status=201)


async def get_topic(request: Request) -> Response:
    cid, topic = await _topic(request)
    return v3_json(topic_body(request, cid, topic))


async def delete_topic(request: Request) -> Response:
    _, topic = await _topic(request)
    admin = services(request).admin
    (future,) = admin.client.delete_topics([topic_name(topic)]).values()
    await admin.result(future)
    admin.forget()
    return Response(status_code=204)


def _config_body(request: Request, cid: str, topic: str, entry: ConfigEntry) -> dict[str, Any]:
    def source(value: Any) -> str:
        try:
            return ConfigSource(value).name
        except ValueError:
            return "UNKNOWN"

    return {
        "kind": "KafkaTopicConfig",
        "metadata": metadata(url(request, "clusters", cid, "topics", topic, "configs",
                                 entry.name),
                             crn(("kafka", cid), ("topic", topic), ("config", entry.name))),
        "cluster_id": cid,
        "topic_name": topic,
        "name": entry.name,
        "value": None if entry.is_sensitive else entry.value,
        "is_default": bool(entry.is_default),
        "is_read_only": bool(entry.is_read_only),
        "is_sensitive": bool(entry.is_sensitive),
        "source": source(entry.source),
        "synonyms": [{"name": s.name, "value": s.value, "source": source(s.source)}
                     for s in (entry.synonyms or {}).values()],
    }


async def _configs(request: Request, topic: str) -> dict[str, ConfigEntry]:
    admin = services(request).admin
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    (future,) = admin.client.describe_configs([resource]).values()
    entries: dict[str, ConfigEntry] = await admin.result(future)
    return entries


async def list_configs(request: Request) -> Response:
    cid, topic = await _topic(request)
    entries = await _configs(request, topic_name(topic))
    return v3_json(listing("KafkaTopicConfigList",
                           url(request, "clusters", cid, "topics", topic_name(topic), "configs"),
                           [_config_body(request, cid, topic_name(topic), e)
                            for _, e in sorted(entries.items())]))


async def get_config(request: Request) -> Response:
    cid, topic = await _topic(request)
    name = request.path_params["name"]
    entry = (await _configs(request, topic_name(topic))).get(name)
    if entry is None:
        raise RestError(404, 404, f"Config {name} cannot be found for topic {topic_name(topic)}.")
    return v3_json(_config_body(request, cid, topic_name(topic), entry))


async def _alter(request: Request, topic: str, changes: list[ConfigEntry]) -> None:
    admin = services(request).admin
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=changes)
    (future,) = admin.client.incremental_alter_configs([resource]).values()
    await admin.result(future)


async def update_config(request: Request) -> Response:
    _, topic = await _topic(request)
    body = await read_json(request)
    if not isinstance(body, dict) or "value" not in body:
        raise RestError(400, 400, "The request body must be {\"value\": ...}")
    await _alter(request, topic_name(topic), [ConfigEntry(
        request.path_params["name"], str(body["value"]),
        incremental_operation=AlterConfigOpType.SET)])
    return Response(status_code=204)


async def reset_config(request: Request) -> Response:
    _, topic = await _topic(request)
    await _alter(request, topic_name(topic), [ConfigEntry(
        request.path_params["name"], None, incremental_operation=AlterConfigOpType.DELETE)])
    return Response(status_code=204)


async def alter_configs(request: Request) -> Response:
    _, topic = await _topic(request)
    body = await read_json(request)
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        raise RestError(400, 400, "The request body must be {\"data\": [{name, value}, ...]}")
    changes = []
    for item in data:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise RestError(400, 400, f"Invalid config entry: {item!r}")
        operation = str(item.get("operation") or "SET").upper()
        if operation == "DELETE":
            changes.append(ConfigEntry(item["name"], None,
                                       incremental_operation=AlterConfigOpType.DELETE))
        elif operation == "SET" and "value" in item:
            changes.append(ConfigEntry(item["name"], str(item["value"]),
                                       incremental_operation=AlterConfigOpType.SET))
        else:
            raise RestError(400, 400, f"Invalid config entry: {item!r}")
    await _alter(request, topic_name(topic), changes)
    return Response(status_code=204)


def _partition_body(request: Request, cid: str, topic: str, partition: int) -> dict[str, Any]:
    base = ("clusters", cid, "topics", topic, "partitions", partition)
    return {
        "kind": "KafkaPartition",
        "metadata": metadata(url(request, *base),
                             crn(("kafka", cid), ("topic", topic), ("partition", partition))),
        "cluster_id": cid,
        "topic_name": topic,
        "partition_id": partition,
        "leader": related(url(request, *base, "replicas", "leader")),
        "replicas": related(url(request, *base, "replicas")),
        "reassignment": related(url(request, *base, "reassignment")),
    }


async def list_partitions(request: Request) -> Response:
    cid, topic = await _topic(request)
    name = topic_name(topic)
    return v3_json(listing(
        "KafkaPartitionList", url(request, "clusters", cid, "topics", name, "partitions"),
        [_partition_body(request, cid, name, p) for p in sorted(topic.partitions)]))


async def get_partition(request: Request) -> Response:
    cid, topic = await _topic(request)
    raw = request.path_params["partition"]
    if not raw.isdigit() or int(raw) not in topic.partitions:
        raise partition_not_found(v3=True)
    return v3_json(_partition_body(request, cid, topic_name(topic), int(raw)))


_TOPIC = "/v3/clusters/{cluster_id}/topics/{topic}"
routes = [
    Route("/v3/clusters/{cluster_id}/topics", list_topics, methods=["GET"]),
    Route("/v3/clusters/{cluster_id}/topics", create_topic, methods=["POST"]),
    Route(_TOPIC, get_topic, methods=["GET"]),
    Route(_TOPIC, delete_topic, methods=["DELETE"]),
    Route(f"{_TOPIC}/configs", list_configs, methods=["GET"]),
    Route(f"{_TOPIC}/configs:alter", alter_configs, methods=["POST"]),
    Route(f"{_TOPIC}/configs/{{name}}", get_config, methods=["GET"]),
    Route(f"{_TOPIC}/configs/{{name}}", update_config, methods=["PUT"]),
    Route(f"{_TOPIC}/configs/{{name}}", reset_config, methods=["DELETE"]),
    Route(f"{_TOPIC}/partitions", list_partitions, methods=["GET"]),
    Route(f"{_TOPIC}/partitions/{{partition}}", get_partition, methods=["GET"]),
]
