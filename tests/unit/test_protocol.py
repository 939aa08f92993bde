"""Framing and codec: headers parsed by hand, bodies by kio, responses encoded per version."""

from __future__ import annotations

import io
import struct

import pytest
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.serial import entity_writer

from moldau.protocol import codec
from moldau.protocol.apis import SUPPORTED
from moldau.protocol.frames import (
    FrameError,
    parse_request_header,
    response_header,
    skip_tagged_fields,
)


def _header(api_key: int, version: int, correlation: int, client_id: str | None) -> bytes:
    raw = client_id.encode() if client_id is not None else None
    head = struct.pack(">hhih", api_key, version, correlation, -1 if raw is None else len(raw))
    return head + (raw or b"")


def test_header_with_client_id() -> None:
    frame = _header(3, 12, 77, "rdkafka") + b"\x00rest"
    header, offset = parse_request_header(frame)
    assert (header.api_key, header.api_version, header.correlation_id) == (3, 12, 77)
    assert header.client_id == "rdkafka"
    assert skip_tagged_fields(frame, offset) == offset + 1


def test_header_with_null_client_id() -> None:
    header, offset = parse_request_header(_header(18, 3, 1, None))
    assert header.client_id is None
    assert offset == 10


@pytest.mark.parametrize(
    "frame",
    [
        b"",
        b"\x00\x03",
        struct.pack(">hhih", 3, 1, 1, 50) + b"short",
        struct.pack(">hhih", 3, 1, 1, -7),
    ],
)
def test_malformed_headers_are_rejected(frame: bytes) -> None:
    with pytest.raises(FrameError):
        parse_request_header(frame)


def test_tagged_fields_running_past_the_end() -> None:
    with pytest.raises(FrameError):
        skip_tagged_fields(b"\x01\x00\x10abc", 0)


def test_decode_metadata_request_body() -> None:
    buf = io.BytesIO()
    request = MetadataRequest(
        topics=(MetadataRequestTopic(topic_id=None, name="orders"),),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    entity_writer(MetadataRequest)(buf, request)
    decoded = codec.decode_request(3, 12, buf.getvalue(), 0)
    assert decoded == request


def test_truncated_body_is_a_frame_error() -> None:
    with pytest.raises(FrameError):
        codec.decode_request(3, 12, b"\x02\x00", 0)


def test_build_drops_fields_a_version_lacks() -> None:
    v0 = codec.response_module(3, 0)
    broker = codec.build(v0.MetadataResponseBroker, node_id=1, host="h", port=9, rack="r")
    assert not hasattr(broker, "rack")


def test_response_header_versions() -> None:
    assert response_header(5, False) == b"\x00\x00\x00\x05"
    assert response_header(5, True) == b"\x00\x00\x00\x05\x00"


def test_every_advertised_version_has_a_kio_schema() -> None:
    for api in SUPPORTED.values():
        for version in range(api.min_version, api.max_version + 1):
            codec.request_reader(api.key, version)
            codec.response_writer(api.key, version)


def test_docs_api_table_is_what_is_advertised() -> None:
    """docs/protocol.md lists exactly the advertised APIs and versions."""
    import re
    from pathlib import Path

    text = (Path(__file__).parents[2] / "docs" / "protocol.md").read_text()
    rows = re.findall(r"^\| (\d+) \| (\w+) \| (\d+)-(\d+) \|", text, re.M)
    documented = {int(k): (name, int(lo), int(hi)) for k, name, lo, hi in rows}
    assert documented == {a.key: (a.name, a.min_version, a.max_version)
                          for a in SUPPORTED.values()}
