"""Frames built to crash the broker: each closes only the connection that sent it.

kio 0.6.5 reserves memory for an array as soon as it has read the count, so a compact count
of ``ff ff ff ff 0f`` made the broker process abort ("memory allocation of 34359738352 bytes
failed"): 20 bytes from any client took the broker down for everyone. A confluent-kafka
producer and consumer keep working on their own connections throughout.
"""

from __future__ import annotations

import struct
import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import TopicPartition

from moldau.protocol import codec
from moldau.protocol.apis import SUPPORTED
from moldau.protocol.schemas import request_schema as load_request_schema
from tests.helpers import BrokerProcess
from tests.unit.request_samples import full_sample, length_fields, length_position

from .clients import consume, consumer, create_topic, produce_all, producer, unique
from .wire import WireClient, frame, request_header

pytestmark = pytest.mark.timeout(120)

HUGE_VARINT = b"\xff\xff\xff\xff\x0f"


def killer(api_key: int, version: int, body_prefix: bytes = b"",
           client_id: str | None = None) -> bytes:
    """A request whose first array count is 2**32 - 2, after ``body_prefix``."""
    head = request_header(api_key, version, 1, client_id, flexible=True)
    return frame(head + body_prefix + HUGE_VARINT)


KILLERS = {
    # Metadata v12: the topics array comes first.
    "Metadata-v12": (3, 12, b""),
    # ListGroups v4: states_filter comes first.
    "ListGroups-v4": (16, 4, b""),
    # Produce v9: null transactional id, acks, timeout, then topic_data.
    "Produce-v9": (0, 9, b"\x00" + struct.pack(">hi", 1, 1000)),
}


def test_the_metadata_killer_is_20_bytes() -> None:
    assert len(killer(3, 12)) == 20


class Bystander:
    """A confluent-kafka producer and consumer that must not notice any of this."""

    def __init__(self, bootstrap: str) -> None:
        self.topic = unique("bystander")
        create_topic(bootstrap, self.topic)
        self.producer = producer(bootstrap)
        self.consumer = consumer(bootstrap)
        self.consumer.assign([TopicPartition(self.topic, 0, 0)])
        self.sent = 0

    def round_trip(self) -> None:
        values = [f"v{self.sent + i}".encode() for i in range(3)]
        reports = produce_all(self.producer, self.topic, [{"value": v} for v in values])
        assert not reports.failed, reports.failed
        got = consume(self.consumer, len(values))
        assert [m.value() for m in got] == values
        self.sent += len(values)

    def close(self) -> None:
        self.consumer.close()
        self.producer.flush(5)


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path_factory.mktemp("hostile-frames")).start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="module")
def bystander(target: BrokerProcess) -> Iterator[Bystander]:
    b = Bystander(target.bootstrap)
    b.round_trip()
    yield b
    b.close()


def _closed_by(target: BrokerProcess, payload: bytes) -> bool:
    with WireClient.to(target.bootstrap) as wire:
        wire.send_raw(payload)
        return wire.wait_closed(timeout=10)


def _log_lines_with(target: BrokerProcess, needle: str, timeout: float = 5.0) -> list[str]:
    deadline = time.monotonic() + timeout
    while True:
        lines = [ln for ln in target.stderr_text().splitlines() if needle in ln]
        if lines or time.monotonic() > deadline:
            return lines
        time.sleep(0.05)


@pytest.mark.parametrize("name", list(KILLERS))
def test_killer_frame_closes_only_its_connection(target: BrokerProcess, bystander: Bystander,
                                                 name: str) -> None:
    api_key, version, prefix = KILLERS[name]
    client = f"killer-{uuid.uuid4().hex[:8]}"
    assert _closed_by(target, killer(api_key, version, prefix, client))
    assert target.is_running(), target.stderr_text()[-2000:]
    lines = _log_lines_with(target, client)
    assert len(lines) == 1, lines
    api = SUPPORTED[api_key].name
    assert f"{api} v{version}" in lines[0] and "closing connection" in lines[0], lines[0]
    assert "Traceback" not in target.stderr_text()
    bystander.round_trip()


def _first_length_killer(api_key: int, version: int) -> bytes | None:
    """The full sample request with its first count or length replaced by a huge one."""
    cls = load_request_schema(api_key, version)
    fields = list(length_fields(cls))
    if not fields:
        return None
    body = full_sample(cls)
    p = length_position(cls, fields[0])
    flexible = codec.is_flexible(api_key, version)
    if flexible:
        body = body[:p] + HUGE_VARINT + body[p + 1:]
    elif fields[0].kind == "string":
        body = body[:p - 1] + b"\x7f\xff" + body[p + 1:]
    else:
        body = body[:p - 3] + b"\x7f\xff\xff\xff" + body[p + 1:]
    head = request_header(api_key, version, 1, "length-killer", flexible=flexible)
    return frame(head + body)


def test_every_version_with_a_killer_count(target: BrokerProcess,
                                           bystander: Bystander) -> None:
    sent = 0
    for api in SUPPORTED.values():
        for version in range(api.min_version, api.max_version + 1):
            payload = _first_length_killer(api.key, version)
            if payload is None:
                continue
            assert _closed_by(target, payload), f"{api.name} v{version} was answered"
            assert target.is_running(), (f"{api.name} v{version} killed the broker:\n"
                                         f"{target.stderr_text()[-2000:]}")
            sent += 1
    assert sent > 150
    assert "Traceback" not in target.stderr_text()
    bystander.round_trip()
