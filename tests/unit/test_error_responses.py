"""Kafka's generic error response for every advertised API version: it encodes, decodes to
the same value, and carries the error where the client looks for it (top level, or one entry
per requested topic, partition, group or resource, with the request's keys)."""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader
from kio.static.primitive import Records

from moldau.broker.error_responses import error_response
from moldau.protocol import apis, codec
from moldau.protocol.apis import SUPPORTED
from moldau.protocol.schemas import request_schema as load_request_schema
from moldau.protocol.schemas import response_schema as load_response_schema

from .request_samples import build

st.register_type_strategy(Records, st.binary(max_size=16))

VERSIONS = [(api.key, v) for api in SUPPORTED.values()
            for v in range(api.min_version, api.max_version + 1)]
IDS = [f"{SUPPORTED[k].name}-v{v}" for k, v in VERSIONS]


def _round_trip(api_key: int, version: int, response: Any) -> None:
    body = codec.encode_body(api_key, version, response)
    decoded, size = entity_reader(load_response_schema(api_key, version))(body, 0)
    assert size == len(body)
    assert decoded == response


def _error_codes(value: Any) -> list[ErrorCode]:
    codes = []
    if dataclasses.is_dataclass(value):
        for field in dataclasses.fields(value):
            item = getattr(value, field.name)
            if field.name in ("error_code", "partition_error_code"):
                codes.append(item)
            else:
                codes.extend(_error_codes(item))
    elif isinstance(value, tuple):
        for item in value:
            codes.extend(_error_codes(item))
    return codes


@pytest.mark.parametrize(("api_key", "version"), VERSIONS, ids=IDS)
def test_error_response_encodes_and_carries_the_error(api_key: int, version: int) -> None:
    request = build(load_request_schema(api_key, version))
    response = error_response(api_key, version, request)
    _round_trip(api_key, version, response)
    top = getattr(response, "error_code", None)
    if top is not None:
        assert top == ErrorCode.unknown_server_error
    elif api_key == apis.DESCRIBE_LOG_DIRS:
        # v1-v2 have no field for it: Kafka answers with no results, and so does moldau.
        assert response.results == ()
    else:
        # One entry per requested element, each with the error.
        assert ErrorCode.unknown_server_error in _error_codes(response), response
    if top is None:
        assert ErrorCode.none not in _error_codes(response), response


@pytest.mark.parametrize(("api_key", "version"), VERSIONS, ids=IDS)
def test_error_response_for_random_requests(api_key: int, version: int) -> None:
    cls = load_request_schema(api_key, version)

    @settings(max_examples=5, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.from_type(cls))
    def check(request: Any) -> None:
        _round_trip(api_key, version, error_response(api_key, version, request))

    check()


def test_produce_error_mirrors_topics_and_partitions() -> None:
    mod = codec.request_module(0, 9)
    request = mod.ProduceRequest(
        transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=1),
        topic_data=(mod.TopicProduceData(name="a", partition_data=(
            mod.PartitionProduceData(index=0, records=b""),
            mod.PartitionProduceData(index=3, records=b""))),
            mod.TopicProduceData(name="b", partition_data=())))
    response = error_response(0, 9, request)
    assert [(t.name, [(p.index, p.error_code, p.base_offset) for p in t.partition_responses])
            for t in response.responses] == [
        ("a", [(0, ErrorCode.unknown_server_error, -1), (3, ErrorCode.unknown_server_error, -1)]),
        ("b", [])]


def test_group_lists_and_top_level_errors() -> None:
    describe = codec.request_module(15, 5).DescribeGroupsRequest(
        groups=("g1", "g2"), include_authorized_operations=False)
    response = error_response(15, 5, describe)
    assert [(g.group_id, g.error_code) for g in response.groups] == [
        ("g1", ErrorCode.unknown_server_error), ("g2", ErrorCode.unknown_server_error)]
    join = build(load_request_schema(11, 9))
    response = error_response(11, 9, join, ErrorCode.not_coordinator)
    assert (response.error_code, response.generation_id, response.members) == (
        ErrorCode.not_coordinator, -1, ())
