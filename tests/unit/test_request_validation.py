"""The request validator: valid requests of every advertised version pass untouched, and no
count or length that could make kio's native reader allocate more than the frame holds ever
reaches kio.

Positions of counts and lengths are found by diffing kio's own encodings
(:mod:`tests.unit.request_samples`), independently of the validator. The last test runs kio on
every mutated frame in a child process: on code without the validator that child aborts
("memory allocation of ... bytes failed").
"""

from __future__ import annotations

import dataclasses
import io
import os
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import Records

from moldau.protocol import codec
from moldau.protocol.apis import SUPPORTED
from moldau.protocol.frames import FrameError
from moldau.protocol.schemas import request_schema as load_request_schema
from moldau.protocol.validate import (
    MAX_ARRAY_ELEMENTS,
    InvalidRequest,
    encode_uvarint,
    validate_request,
)

from .request_samples import build, encode, full_sample, length_fields, length_position

st.register_type_strategy(Records, st.binary(max_size=64))

VERSIONS = [(api.key, v) for api in SUPPORTED.values()
            for v in range(api.min_version, api.max_version + 1)]
IDS = [f"{SUPPORTED[k].name}-v{v}" for k, v in VERSIONS]
FLEXIBLE = [(k, v) for k, v in VERSIONS if codec.is_flexible(k, v)]
HUGE_VARINT = b"\xff\xff\xff\xff\x0f"  # 2**32 - 1: 4,294,967,294 elements or bytes


@pytest.mark.parametrize(("api_key", "version"), VERSIONS, ids=IDS)
def test_full_sample_passes_and_decodes_identically(api_key: int, version: int) -> None:
    cls = load_request_schema(api_key, version)
    obj = build(cls)
    body = encode(obj)
    frame = b"header" + body
    assert validate_request(api_key, version, frame, 6) == len(frame)
    assert codec.decode_request(api_key, version, frame, 6) == obj


@pytest.mark.parametrize(("api_key", "version"), VERSIONS, ids=IDS)
def test_random_valid_requests_pass_and_decode_identically(api_key: int, version: int) -> None:
    cls = load_request_schema(api_key, version)
    writer, reader = entity_writer(cls), entity_reader(cls)

    @settings(max_examples=8, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.from_type(cls))
    def check(obj: object) -> None:
        buf = io.BytesIO()
        writer(buf, obj)
        body = buf.getvalue()
        assert validate_request(api_key, version, body, 0) == len(body)
        try:
            decoded = reader(body, 0)[0]
        except ValueError:
            # kio writes durations it cannot read back ("timedelta milliseconds overflow",
            # OffsetCommit v2-v4 retention times near 2**63 ms): a kio limit, not the
            # validator's; such a request is refused as malformed.
            reject()
        assert decoded == obj
        assert codec.decode_request(api_key, version, body, 0) == obj

    check()


def _oversized(api_key: int, version: int) -> list[tuple[str, bytes]]:
    """Every count and length of the full sample replaced by ones the frame cannot hold."""
    cls = load_request_schema(api_key, version)
    body = full_sample(cls)
    cases = []
    for field in length_fields(cls):
        p = length_position(cls, field)
        name = ".".join(field.path)
        if field.flexible or field.tagged:
            left = len(body) - p - 1
            cases.append((f"{name}=2**32-2", body[:p] + HUGE_VARINT + body[p + 1:]))
            cases.append((f"{name}=left+1", body[:p] + encode_uvarint(left + 2) + body[p + 1:]))
        elif field.kind == "string":
            start, left = p - 1, len(body) - p - 1
            for value in (0x7FFF, left + 1):
                cases.append((f"{name}={value}",
                              body[:start] + struct.pack(">h", value) + body[p + 1:]))
        else:
            start, left = p - 3, len(body) - p - 1
            for value in (0x7FFFFFFF, left + 1):
                cases.append((f"{name}={value}",
                              body[:start] + struct.pack(">i", value) + body[p + 1:]))
    return cases


@pytest.mark.parametrize(("api_key", "version"), VERSIONS, ids=IDS)
def test_oversized_counts_and_lengths_are_refused(api_key: int, version: int) -> None:
    cases = _oversized(api_key, version)
    for name, body in cases:
        with pytest.raises(InvalidRequest):
            validate_request(api_key, version, body, 0)
            pytest.fail(f"{name} passed")


@pytest.mark.parametrize(("api_key", "version"), VERSIONS, ids=IDS)
def test_null_where_not_nullable_is_refused(api_key: int, version: int) -> None:
    cls = load_request_schema(api_key, version)
    body = full_sample(cls)
    for field in length_fields(cls):
        if field.nullable or field.tagged:
            continue
        p = length_position(cls, field)
        if field.flexible:
            mutated = body[:p] + b"\x00" + body[p + 1:]
        elif field.kind == "string":
            mutated = body[:p - 1] + b"\xff\xff" + body[p + 1:]
        else:
            mutated = body[:p - 3] + b"\xff\xff\xff\xff" + body[p + 1:]
        with pytest.raises(InvalidRequest, match="not nullable"):
            validate_request(api_key, version, mutated, 0)


@pytest.mark.parametrize(("api_key", "version"), FLEXIBLE,
                         ids=[f"{SUPPORTED[k].name}-v{v}" for k, v in FLEXIBLE])
def test_strings_over_32767_bytes_are_refused(api_key: int, version: int) -> None:
    """Kafka's readers refuse them in every version, so they never enter the broker's state."""
    cls = load_request_schema(api_key, version)
    for field in length_fields(cls):
        if field.kind != "string":
            continue
        at_limit = encode(build(cls, field.path, size=0x7FFF))
        assert validate_request(api_key, version, at_limit, 0) == len(at_limit)
        over = encode(build(cls, field.path, size=0x8000))
        with pytest.raises(InvalidRequest, match="32767"):
            validate_request(api_key, version, over, 0)


def test_array_over_a_million_elements_is_refused() -> None:
    # Metadata v12 with 1,000,001 topics of 18 bytes would need an 18 MB frame; the count
    # alone is refused before anything is read.
    body = encode_uvarint(MAX_ARRAY_ELEMENTS + 2) + b"\x00" * (18 * (MAX_ARRAY_ELEMENTS + 1) + 3)
    with pytest.raises(InvalidRequest, match="at most 1000000"):
        validate_request(3, 12, body, 0)


def _delete_records_v0(topics: int, partitions: int) -> bytes:
    topic = b"\x00\x01t" + struct.pack(">i", partitions) + bytes(12 * partitions)
    return struct.pack(">i", topics) + topic * topics + struct.pack(">i", 1000)


def test_a_request_holds_at_most_a_million_elements() -> None:
    # Each array is within bounds and the bytes are there; the sum is what is refused,
    # because every element becomes a Python object.
    fits = _delete_records_v0(2, 499_999)
    assert validate_request(21, 0, fits, 0) == len(fits)
    with pytest.raises(InvalidRequest, match="over 1000000 array elements"):
        validate_request(21, 0, _delete_records_v0(2, 500_000), 0)


def test_too_many_and_unknown_tagged_fields_are_refused() -> None:
    # Metadata v12: null topics, two booleans, then the tagged-field section.
    head = b"\x00\x01\x00"
    with pytest.raises(InvalidRequest, match="tagged fields"):
        validate_request(3, 12, head + encode_uvarint(10_001) + b"\x00\x00" * 10_001, 0)
    # Fetch v12 knows tag 0 (cluster_id) at the top level; the body ends with its section.
    plain = encode(dataclasses.replace(build(load_request_schema(1, 12)), cluster_id=None))
    assert plain.endswith(b"\x00")
    with pytest.raises(InvalidRequest, match="bytes left"):
        validate_request(1, 12, plain[:-1] + b"\x01\x00" + HUGE_VARINT, 0)
    with pytest.raises(InvalidRequest, match="declares 3 bytes"):
        validate_request(1, 12, plain[:-1] + b"\x01\x00\x03\x02s\x00", 0)
    ok = plain[:-1] + b"\x01\x00\x02\x02s"
    assert codec.decode_request(1, 12, ok, 0).cluster_id == "s"


def _without_top_level_tags(cls: type) -> Any:
    obj = build(cls)
    defaults = {f.name: f.default for f in dataclasses.fields(cls) if "tag" in f.metadata}
    return dataclasses.replace(obj, **defaults)


@pytest.mark.parametrize(("api_key", "version"), FLEXIBLE,
                         ids=[f"{SUPPORTED[k].name}-v{v}" for k, v in FLEXIBLE])
def test_unknown_tagged_fields_are_ignored_as_kafka_does(api_key: int, version: int) -> None:
    obj = _without_top_level_tags(load_request_schema(api_key, version))
    body = encode(obj)
    assert body[-1:] == b"\x00"  # the request's own (empty) tagged-field section ends it
    extra = body[:-1] + b"\x02" + b"\x63\x02zz" + b"\x64\x00"  # tags 99 and 100
    assert codec.decode_request(api_key, version, b"head" + extra, 4) == obj


def test_unknown_tagged_fields_beside_known_and_nested_ones() -> None:
    fetch = load_request_schema(1, 12)
    obj = _without_top_level_tags(fetch)
    body = encode(obj)
    mixed = body[:-1] + b"\x02" + b"\x63\x01z" + b"\x00\x02\x02s"  # tag 99, cluster_id
    assert codec.decode_request(1, 12, mixed, 0) == dataclasses.replace(obj, cluster_id="s")
    # Produce v9: an unknown tag in a partition's section, deep in the request.
    produce = (b"\x00" + struct.pack(">hi", 1, 1000) + b"\x02\x02t\x02" + struct.pack(">i", 3)
               + b"\x01" + b"\x01\x63\x01z" + b"\x00\x00")
    decoded = codec.decode_request(0, 9, produce, 0)
    partition = decoded.topic_data[0].partition_data[0]
    assert (decoded.topic_data[0].name, partition.index, partition.records) == ("t", 3, b"")
    # Inside a known tagged field's value it cannot be cut without resizing that field.
    fetch15 = load_request_schema(1, 15)
    body = encode(_without_top_level_tags(fetch15))
    state = struct.pack(">iq", 1, 1) + b"\x01\x63\x00"
    nested = body[:-1] + b"\x01\x01" + bytes([len(state)]) + state
    with pytest.raises(InvalidRequest, match="unknown tagged field 99"):
        validate_request(1, 15, nested, 0)


def test_header_with_too_many_tagged_fields_is_refused() -> None:
    from moldau.protocol.frames import skip_tagged_fields

    with pytest.raises(FrameError, match="tagged fields"):
        skip_tagged_fields(encode_uvarint(10_001) + b"\x00\x00" * 10_001, 0)


def test_truncated_bodies_are_refused_everywhere() -> None:
    for api_key, version in VERSIONS:
        body = full_sample(load_request_schema(api_key, version))
        for cut in range(len(body)):
            with pytest.raises(InvalidRequest):
                validate_request(api_key, version, body[:cut], 0)


def test_garbage_values_are_ordinary_errors() -> None:
    """What the validator lets through and kio still refuses is a FrameError, not a crash."""
    metadata = load_request_schema(3, 12)
    body = full_sample(metadata)
    # topics[0].name is the one-byte string "s" after a 16-byte topic id.
    at = body.index(b"\x02s") + 1
    bad_utf8 = body[:at] + b"\xff" + body[at + 1:]
    with pytest.raises(FrameError, match="InvalidUnicode"):
        codec.decode_request(3, 12, bad_utf8, 0)
    bad_bool = body[:-3] + b"\x02" + body[-2:]
    with pytest.raises(FrameError):
        codec.decode_request(3, 12, bad_bool, 0)
    # Any 16 bytes are a uuid; all zeros is kio's null uuid.
    zero_id = body[:1] + b"\x00" * 16 + body[17:]
    assert codec.decode_request(3, 12, zero_id, 0).topics[0].topic_id is None
    # OffsetCommit v2's retention time becomes a timedelta: int64 max overflows it.
    commit = load_request_schema(8, 2)
    obj = build(commit)
    raw = encode(obj)
    fixed = struct.pack(">i", obj.generation_id_or_member_epoch) + b"\x00\x01s"
    at = raw.index(fixed) + len(fixed)
    overflow = raw[:at] + struct.pack(">q", 2**63 - 1) + raw[at + 8:]
    with pytest.raises(FrameError):
        codec.decode_request(8, 2, overflow, 0)


_CHILD = r"""
import sys
from moldau.protocol import codec
from moldau.protocol.apis import SUPPORTED
from moldau.protocol.frames import FrameError
from tests.unit.request_samples import full_sample
from tests.unit.test_request_validation import VERSIONS, _oversized
from moldau.protocol.schemas import request_schema as load_request_schema

PATTERNS = (b"\xff\xff\xff\xff\x0f", b"\x7f\xff\xff\xff", b"\x80\x80\x80\x80\x08", b"\x00")
decoded = refused = 0
for api_key, version in VERSIONS:
    frames = [body for _, body in _oversized(api_key, version)]
    base = full_sample(load_request_schema(api_key, version))
    for i in range(len(base)):
        for pattern in PATTERNS:
            frames.append(base[:i] + pattern + base[i + len(pattern):])
    for body in frames:
        try:
            codec.decode_request(api_key, version, body, 0)
            decoded += 1
        except FrameError:
            refused += 1
print(decoded, refused)
"""


def test_kio_never_sees_a_killer_count() -> None:
    """Decode every oversized and overwritten sample for real, in a child process."""
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(root / "src"), str(root), os.environ.get("PYTHONPATH", "")]))
    child = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True,
                           env=env, timeout=110, cwd=root)
    assert child.returncode == 0, child.stderr[-2000:]
    decoded, refused = map(int, child.stdout.split())
    assert refused > 1000 and decoded > 0
