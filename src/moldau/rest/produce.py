"""v2 produce requests (to a topic or to one partition): checks, encoding, answer.

Checks come first, as Confluent's proxy makes them: the content type names an embedded format
(415), the body is a JSON object with a ``records`` list (400/422), the schema formats have
their schemas (42201/42202), the topic (40401) and partition (40402) exist. Each record's
result is reported separately: partition and offset, or error_code and error.
"""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from .errors import RestError, partition_not_found, topic_not_found, unprocessable
from .formats import SCHEMA_FORMATS, encode_binary, encode_json, produce_format
from .jsonbody import read_json, v2_json
from .producer import Delivery, OutgoingRecord
from .services import Services, services


async def produce_v2(request: Request, topic: str, partition: int | None) -> Response:
    svc = services(request)
    fmt = produce_format(request.headers.get("content-type"))
    body = await read_json(request)
    if not isinstance(body, dict) or not isinstance(body.get("records"), list):
        raise unprocessable("The request body must be an object with a records list")
    raw_records: list[Any] = body["records"]
    if not raw_records:
        raise unprocessable("records may not be empty")
    if not all(isinstance(r, dict) for r in raw_records):
        raise unprocessable("Each record must be a JSON object")
    metadata = await svc.admin.topic(topic)
    if metadata is None:
        raise topic_not_found(topic)
    if partition is not None and partition not in metadata.partitions:
        raise partition_not_found()
    for record in raw_records:
        wanted = record.get("partition")
        if wanted is not None and (not isinstance(wanted, int)
                                   or wanted not in metadata.partitions):
            raise partition_not_found()
    key_schema_id = value_schema_id = None
    if fmt not in SCHEMA_FORMATS and all(r.get("key") is None and r.get("partition") is None
                                         for r in raw_records):
        encode_value = encode_json_field if fmt == "json" else encode_binary
        target = partition if partition is not None else svc.partitions.next(topic, metadata)
        results = await svc.producer.produce_to_partition(
            topic, target, [encode_value(r.get("value"), "value") for r in raw_records])
        return _answer_one_partition(target, results)
    if fmt in SCHEMA_FORMATS:
        records, key_schema_id, value_schema_id = await _encode_with_schemas(
            svc, fmt, topic, partition, body, raw_records)
    else:
        encode = encode_json_field if fmt == "json" else encode_binary
        records = [
            OutgoingRecord(encode(r.get("key"), "key"), encode(r.get("value"), "value"),
                           partition if partition is not None else r.get("partition"))
            for r in raw_records]
    deliveries = await svc.producer.produce(topic, records)
    return _answer(key_schema_id, value_schema_id, deliveries)


def _answer(key_schema_id: int | None, value_schema_id: int | None,
            deliveries: list[Delivery]) -> Response:
    return v2_json({
        "key_schema_id": key_schema_id,
        "value_schema_id": value_schema_id,
        "offsets": [_offset_entry(d) for d in deliveries],
    })


def _answer_one_partition(partition: int, results: list[int | Delivery]) -> Response:
    return v2_json({
        "key_schema_id": None,
        "value_schema_id": None,
        "offsets": [{"partition": partition, "offset": r, "error_code": None, "error": None}
                    if isinstance(r, int) else _offset_entry(r)
                    for r in results],
    })


def _offset_entry(delivery: Delivery) -> dict[str, Any]:
    return {"partition": delivery.partition, "offset": delivery.offset,
            "error_code": delivery.error_code, "error": delivery.error}


def encode_json_field(value: Any, _field: str) -> bytes | None:
    return encode_json(value)


async def _encode_with_schemas(svc: Services, fmt: str, topic: str, partition: int | None,
                               body: dict[str, Any], raw_records: list[Any]
                               ) -> tuple[list[OutgoingRecord], int | None, int | None]:
    has_keys = any(r.get("key") is not None for r in raw_records)
    has_values = any(r.get("value") is not None for r in raw_records)
    key_given = body.get("key_schema") is not None or body.get("key_schema_id") is not None
    value_given = (body.get("value_schema") is not None
                   or body.get("value_schema_id") is not None)
    if has_keys and not key_given:
        raise unprocessable("Request includes keys but does not include key schema", 42201)
    if has_values and not value_given:
        raise unprocessable("Request includes values but does not include value schema", 42202)
    schemas = svc.schemas
    if schemas is None:
        raise RestError(415, 415, f"The {fmt} embedded format needs a schema registry: start "
                                  "the proxy with --schema-registry URL")

    def encode_all() -> tuple[list[OutgoingRecord], int | None, int | None]:
        key_id = (schemas.schema_id(fmt, topic, "key", body.get("key_schema"),
                                    body.get("key_schema_id")) if key_given else None)
        value_id = (schemas.schema_id(fmt, topic, "value", body.get("value_schema"),
                                      body.get("value_schema_id")) if value_given else None)
        encode_key = (schemas.encoder(fmt, topic, "key", key_id) if key_id is not None
                      else lambda _v: None)
        encode_value = (schemas.encoder(fmt, topic, "value", value_id)
                        if value_id is not None else lambda _v: None)
        records = [OutgoingRecord(encode_key(r.get("key")), encode_value(r.get("value")),
                                  partition if partition is not None else r.get("partition"))
                   for r in raw_records]
        return records, key_id, value_id

    return await asyncio.to_thread(encode_all)
