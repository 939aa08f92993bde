"""v2 consumer instances: create, subscribe, assign, seek, poll records, offsets, delete."""

from __future__ import annotations

from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicPartition
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..consumers import (
    BEGINNING,
    DEFAULT_MAX_BYTES,
    DEFAULT_REQUEST_TIMEOUT_MS,
    END,
    ConsumerInstance,
    at_offset,
    illegal_state,
    poll_records,
    seek_all,
    topic_partitions,
)
from ..errors import RestError, unprocessable
from ..formats import accepted_format, check_plain_v2
from ..jsonbody import dumps, read_json, v2_json
from ..services import services


def _no_content() -> Response:
    return Response(status_code=204)


def _instance(request: Request) -> ConsumerInstance:
    return services(request).consumers.get(request.path_params["group"],
                                           request.path_params["instance"])


async def _body(request: Request, required: bool = True) -> dict[str, Any]:
    check_plain_v2(request.headers.get("content-type"))
    body = await read_json(request, required=required)
    if body is None:
        return {}
    if not isinstance(body, dict):
        raise unprocessable("The request body must be a JSON object")
    return body


async def create_instance(request: Request) -> Response:
    group = request.path_params["group"]
    body = await _body(request, required=False)
    instance = services(request).consumers.create(group, body)
    base_uri = f"{str(request.base_url).rstrip('/')}/consumers/{group}/instances/{instance.name}"
    return v2_json({"instance_id": instance.name, "base_uri": base_uri})


async def delete_instance(request: Request) -> Response:
    await services(request).consumers.delete(request.path_params["group"],
                                             request.path_params["instance"])
    return _no_content()


async def subscribe(request: Request) -> Response:
    instance = _instance(request)
    body = await _body(request)
    topics, pattern = body.get("topics"), body.get("topic_pattern")
    if instance.manual_assignment:
        raise illegal_state("Subscription to topics, partitions and pattern are mutually "
                            "exclusive")
    if pattern is not None:
        if not isinstance(pattern, str) or topics:
            raise unprocessable("Give either topics or topic_pattern")
        wanted = [pattern if pattern.startswith("^") else f"^{pattern}"]
    elif isinstance(topics, list) and topics and all(isinstance(t, str) for t in topics):
        wanted = topics
    else:
        raise unprocessable("topics must be a non-empty list of topic names")
    await instance.call(instance.consumer.subscribe, wanted)
    instance.subscription = wanted
    return _no_content()


async def get_subscription(request: Request) -> Response:
    return v2_json({"topics": _instance(request).subscription})


async def unsubscribe(request: Request) -> Response:
    instance = _instance(request)
    await instance.call(instance.consumer.unsubscribe)
    instance.subscription = []
    return _no_content()


async def assign(request: Request) -> Response:
    instance = _instance(request)
    body = await _body(request)
    partitions = topic_partitions(body.get("partitions"), with_offset=False)
    if instance.subscription:
        raise illegal_state("Subscription to topics, partitions and pattern are mutually "
                            "exclusive")
    await instance.call(instance.consumer.assign, partitions)
    instance.manual_assignment = partitions
    return _no_content()


async def get_assignments(request: Request) -> Response:
    instance = _instance(request)
    assigned: list[TopicPartition] = await instance.call(instance.consumer.assignment)
    return v2_json({"partitions": [{"topic": tp.topic, "partition": tp.partition}
                                   for tp in assigned]})


async def seek(request: Request) -> Response:
    instance = _instance(request)
    body = await _body(request)
    await instance.call(seek_all, instance, topic_partitions(body.get("offsets"), True))
    return _no_content()


async def seek_to_beginning(request: Request) -> Response:
    return await _seek_to(request, BEGINNING)


async def seek_to_end(request: Request) -> Response:
    return await _seek_to(request, END)


async def _seek_to(request: Request, offset: int) -> Response:
    instance = _instance(request)
    body = await _body(request)
    partitions = topic_partitions(body.get("partitions"), with_offset=False)
    await instance.call(seek_all, instance, at_offset(partitions, offset))
    return _no_content()


def _int_param(request: Request, name: str, default: int) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    try:
        return max(0, int(raw))
    except ValueError:
        raise RestError(400, 400, f"Query parameter {name} must be an integer") from None


async def records(request: Request) -> Response:
    instance = _instance(request)
    wanted = accepted_format(request.headers.get("accept"))
    if wanted is not None and wanted != instance.format:
        raise RestError(406, 40601, "The requested embedded data format does not match the "
                                    "deserializer for this consumer instance")
    timeout_ms = _int_param(request, "timeout", DEFAULT_REQUEST_TIMEOUT_MS)
    max_bytes = _int_param(request, "max_bytes", DEFAULT_MAX_BYTES)
    polled = await instance.call(poll_records, instance, timeout_ms, max_bytes,
                                 services(request).schemas)
    return Response(dumps(polled),
                    media_type=f"application/vnd.kafka.{instance.format}.v2+json")


def _commit(instance: ConsumerInstance, offsets: list[TopicPartition] | None) -> None:
    try:
        if offsets:
            instance.consumer.commit(offsets=offsets, asynchronous=False)
        else:
            instance.consumer.commit(asynchronous=False)
    except KafkaException as exc:
        err = exc.args[0] if exc.args else None
        if not (isinstance(err, KafkaError) and err.code() == KafkaError._NO_OFFSET):
            raise


async def commit_offsets(request: Request) -> Response:
    instance = _instance(request)
    body = await _body(request, required=False)
    offsets = (topic_partitions(body["offsets"], with_offset=True)
               if body.get("offsets") else None)
    await instance.call(_commit, instance, offsets)
    return Response(status_code=200)


async def committed_offsets(request: Request) -> Response:
    instance = _instance(request)
    body = await _body(request)
    partitions = topic_partitions(body.get("partitions"), with_offset=False)
    timeout = services(request).config.request_timeout_s
    committed: list[TopicPartition] = await instance.call(instance.consumer.committed,
                                                          partitions, timeout)
    return v2_json({"offsets": [{"topic": tp.topic, "partition": tp.partition,
                                 "offset": tp.offset, "metadata": tp.metadata or ""}
                                for tp in committed]})


_BASE = "/consumers/{group}/instances/{instance}"
routes = [
    Route("/consumers/{group}", create_instance, methods=["POST"]),
    Route(_BASE, delete_instance, methods=["DELETE"]),
    Route(f"{_BASE}/subscription", subscribe, methods=["POST"]),
    Route(f"{_BASE}/subscription", get_subscription, methods=["GET"]),
    Route(f"{_BASE}/subscription", unsubscribe, methods=["DELETE"]),
    Route(f"{_BASE}/assignments", assign, methods=["POST"]),
    Route(f"{_BASE}/assignments", get_assignments, methods=["GET"]),
    Route(f"{_BASE}/positions", seek, methods=["POST"]),
    Route(f"{_BASE}/positions/beginning", seek_to_beginning, methods=["POST"]),
    Route(f"{_BASE}/positions/end", seek_to_end, methods=["POST"]),
    Route(f"{_BASE}/records", records, methods=["GET"]),
    Route(f"{_BASE}/offsets", commit_offsets, methods=["POST"]),
    Route(f"{_BASE}/offsets", committed_offsets, methods=["GET"]),
]
