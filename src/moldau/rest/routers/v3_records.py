"""v3 produce: ``POST /v3/clusters/{id}/topics/{topic}/records``, one record or a stream.

The body is one ProduceRequest JSON object, or several one after the other; each gets one
JSON answer, in order, newline-separated. A record that cannot be produced gets an error
object (``{"error_code": 400, "message": ...}``) in its place and the others are still
produced; a single-record request answers with that error's status. A chunked request body
is streaming produce: the answer (200) is streamed too, each record answered as soon as it is
written while the client goes on sending.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import codecs
import datetime
import json
from collections.abc import AsyncIterator
from typing import Any

import orjson
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from ..errors import RestError
from ..jsonbody import dumps, read_body, v3_json
from ..producer import OutgoingRecord
from ..services import Services, services
from .v3_common import checked_cluster

_SCHEMA_TYPES = {"AVRO": "avro", "JSONSCHEMA": "jsonschema", "PROTOBUF": "protobuf"}


def _objects(body: bytes) -> list[Any]:
    """The JSON values of the body, one after the other (400 if one is malformed)."""
    try:
        return [orjson.loads(body)]
    except orjson.JSONDecodeError:
        pass
    decoder = json.JSONDecoder()
    text = body.decode("utf-8", errors="replace")
    values: list[Any] = []
    index = 0
    while True:
        while index < len(text) and text[index].isspace():
            index += 1
        if index >= len(text):
            return values
        try:
            value, index = decoder.raw_decode(text, index)
        except json.JSONDecodeError as exc:
            raise RestError(400, 400, f"Malformed JSON: {exc}") from None
        values.append(value)


def _timestamp_ms(value: Any) -> int | None:
    if value is None:
        return None
    try:
        moment = datetime.datetime.fromisoformat(str(value))
    except ValueError:
        raise RestError(400, 400, f"Invalid timestamp: {value!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return int(moment.timestamp() * 1000)


def _iso(ms: int | None) -> str | None:
    if ms is None or ms < 0:
        return None
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _encode_data(svc: Services, topic: str, field: str, data: Any
                 ) -> tuple[bytes | None, dict[str, Any] | None]:
    """The bytes of a ProduceRequest key or value, and its answer block (type, size)."""
    if data is None:
        return None, None
    if not isinstance(data, dict):
        raise RestError(400, 400, f"{field} must be an object with type and data")
    kind = str(data.get("type") or ("AVRO" if "schema_id" in data or "schema" in data
                                    else "JSON")).upper()
    payload = data.get("data")
    encoded: bytes | None
    if kind == "BINARY":
        if payload is not None and not isinstance(payload, str):
            raise RestError(400, 400, f"{field} data of type BINARY must be a base64 string")
        try:
            encoded = None if payload is None else base64.b64decode(payload, validate=True)
        except (binascii.Error, ValueError):
            raise RestError(400, 400, f"{field} data is not valid base64") from None
    elif kind == "JSON":
        encoded = None if payload is None else orjson.dumps(payload)
    elif kind == "STRING":
        if payload is not None and not isinstance(payload, str):
            raise RestError(400, 400, f"{field} data of type STRING must be a string")
        encoded = None if payload is None else payload.encode()
    elif kind in _SCHEMA_TYPES:
        if svc.schemas is None:
            raise RestError(400, 400, f"{kind} data needs a schema registry (--schema-registry)")
        fmt = _SCHEMA_TYPES[kind]
        schema_id = svc.schemas.schema_id(fmt, topic, field, data.get("schema"),
                                          data.get("schema_id"))
        encoded = svc.schemas.encoder(fmt, topic, field, schema_id)(payload)
    else:
        raise RestError(400, 400, f"Unknown {field} type {kind}")
    block: dict[str, Any] = {"type": kind, "size": len(encoded or b"")}
    return encoded, block


def _record(svc: Services, topic: str, partitions: set[int], request: Any
            ) -> tuple[OutgoingRecord, dict[str, Any] | None, dict[str, Any] | None]:
    if not isinstance(request, dict):
        raise RestError(400, 400, "Each produce request must be a JSON object")
    partition = request.get("partition_id")
    if partition is not None and (not isinstance(partition, int) or partition not in partitions):
        raise RestError(404, 404, "This server does not host this topic-partition.")
    headers = []
    for header in request.get("headers") or []:
        if not isinstance(header, dict) or not isinstance(header.get("name"), str):
            raise RestError(400, 400, f"Invalid header: {header!r}")
        value = header.get("value")
        try:
            headers.append((header["name"], None if value is None
                            else base64.b64decode(value, validate=True)))
        except (binascii.Error, ValueError, TypeError):
            raise RestError(400, 400, f"Header {header['name']} is not base64") from None
    key, key_block = _encode_data(svc, topic, "key", request.get("key"))
    value, value_block = _encode_data(svc, topic, "value", request.get("value"))
    record = OutgoingRecord(key, value, partition, headers or None,
                            _timestamp_ms(request.get("timestamp")))
    return record, key_block, value_block


async def _produce_all(svc: Services, cid: str, topic_name: str, partitions: set[int],
                       requests: list[Any]) -> list[tuple[int, dict[str, Any]]]:
    """Produce the records of ``requests``; one (status, answer) each, in order."""

    def encode_all() -> list[Any]:
        encoded: list[Any] = []
        for item in requests:
            try:
                encoded.append(_record(svc, topic_name, partitions, item))
            except RestError as exc:
                encoded.append(exc)
        return encoded

    encoded = (await asyncio.to_thread(encode_all) if svc.schemas is not None
               else encode_all())
    good = [e for e in encoded if not isinstance(e, RestError)]
    deliveries = iter(await svc.producer.produce(topic_name, [e[0] for e in good])
                      if good else [])
    answers: list[tuple[int, dict[str, Any]]] = []
    for item in encoded:
        if isinstance(item, RestError):
            answers.append((item.status, {"error_code": item.error_code,
                                          "message": item.message}))
            continue
        delivery = next(deliveries)
        if delivery.error_code is not None:
            answers.append((500, {"error_code": 500, "message": delivery.error}))
            continue
        answers.append((200, {
            "error_code": 200, "cluster_id": cid, "topic_name": topic_name,
            "partition_id": delivery.partition, "offset": delivery.offset,
            "timestamp": _iso(delivery.timestamp_ms), "key": item[1], "value": item[2],
        }))
    return answers


def _complete_objects(text: str) -> tuple[list[Any], str]:
    """The complete JSON values at the start of ``text``, and the rest (incomplete)."""
    decoder = json.JSONDecoder()
    values: list[Any] = []
    index = 0
    while True:
        while index < len(text) and text[index].isspace():
            index += 1
        try:
            value, index = decoder.raw_decode(text, index)
        except json.JSONDecodeError:
            return values, text[index:]
        values.append(value)


async def _streamed_answers(request: Request, svc: Services, cid: str, topic_name: str,
                            partitions: set[int]) -> AsyncIterator[bytes]:
    """Streaming produce: answer each record as soon as it is written, while the client is
    still sending. What is buffered unparsed stays under ``--max-request-bytes``."""
    limit = svc.config.max_request_bytes
    text = codecs.getincrementaldecoder("utf-8")(errors="replace")
    pending = ""
    try:
        async for chunk in request.stream():
            pending += text.decode(chunk)
            requests, pending = _complete_objects(pending)
            if requests:
                for _, answer in await _produce_all(svc, cid, topic_name, partitions,
                                                    requests):
                    yield dumps(answer) + b"\n"
            if len(pending) > limit:
                yield dumps({"error_code": 413, "message": f"A record is larger than the "
                                                           f"limit of {limit} bytes"}) + b"\n"
                return
    except ClientDisconnect:
        return  # the client went away mid-stream: what it sent so far is produced
    if pending.strip():
        yield dumps({"error_code": 400, "message": "Malformed JSON at the end of the "
                                                   "stream"}) + b"\n"


class _AnswerStream(Response):
    """Sends the answers as the generator yields them.

    Not Starlette's StreamingResponse: that one reads ``receive`` itself to notice a client
    going away, which would take the request body chunks the generator is reading.
    """

    def __init__(self, answers: AsyncIterator[bytes]) -> None:
        super().__init__(media_type="application/json")
        self.answers = answers

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = [(k, v) for k, v in self.raw_headers if k != b"content-length"]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        async for answer in self.answers:
            await send({"type": "http.response.body", "body": answer, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def produce_records(request: Request) -> Response:
    svc = services(request)
    cid = await checked_cluster(request)
    topic_name = request.path_params["topic"]
    topic = await svc.admin.topic(topic_name)
    if topic is None:
        raise RestError(404, 404, f"This server does not host this topic-partition: "
                                  f"{topic_name}")
    partitions = set(topic.partitions)
    if "chunked" in request.headers.get("transfer-encoding", "").lower():
        return _AnswerStream(_streamed_answers(request, svc, cid, topic_name, partitions))
    requests = _objects(await read_body(request))
    if not requests:
        raise RestError(400, 400, "The request body is empty")
    answers = await _produce_all(svc, cid, topic_name, partitions, requests)
    if len(answers) == 1:
        status, answer = answers[0]
        return v3_json(answer, status=status)
    return Response(b"\n".join(dumps(a) for _, a in answers) + b"\n",
                    media_type="application/json")


routes = [
    Route("/v3/clusters/{cluster_id}/topics/{topic}/records", produce_records,
          methods=["POST"]),
]
