"""Bad input on the wire: each mistake gets Kafka's answer (or a closed connection), and the
broker goes on serving everyone else without losing a record it acknowledged.

Real clients never send these requests, so they are written by hand: headers with ``struct``,
bodies with kio, record batches with :mod:`tests.unit.batchgen` (written from the format
description, independent of the broker's own batch code).
"""

from __future__ import annotations

import datetime
import os
import socket
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import crc32c
import pytest
from kio.schema.api_versions.v0.request import ApiVersionsRequest as ApiVersionsV0Request
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.create_topics.v7.request import (
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData

from tests.helpers import BrokerProcess
from tests.unit.batchgen import Record, build_batch, decode_batches

from .clients import unique
from .wire import WireClient, encode_body, frame, request_header

pytestmark = pytest.mark.timeout(60)

MAX_REQUEST = 1024 * 1024  # socket.request.max.bytes of the broker under test

NONE = 0
OFFSET_OUT_OF_RANGE = 1
CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
MESSAGE_TOO_LARGE = 10
INVALID_TOPIC_EXCEPTION = 17
UNSUPPORTED_VERSION = 35
INVALID_CONFIG = 40
INVALID_RECORD = 87
UNKNOWN_SERVER_ERROR = -1

CRC_OFFSET = 17  # of the CRC32C field in a v2 batch; it covers everything after itself

INVALID_NAMES = ["bad/name", "x" * 250, "..", ".", "with space", "ümlaut"]


def _ms(ms: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=ms)


def _now_ms() -> int:
    return int(time.time() * 1000)


# -- requests -------------------------------------------------------------------------------


def api_versions() -> ApiVersionsRequest:
    return ApiVersionsRequest(client_software_name="moldau-tests",
                              client_software_version="1.0")


def metadata(*names: str, auto_create: bool = True) -> MetadataRequest:
    return MetadataRequest(
        topics=tuple(MetadataRequestTopic(topic_id=None, name=n) for n in names),
        allow_auto_topic_creation=auto_create,
        include_topic_authorized_operations=False,
    )


def produce(topic: str, records: bytes, partition: int = 0, acks: int = -1) -> ProduceRequest:
    return ProduceRequest(
        transactional_id=None, acks=acks, timeout=_ms(10_000),
        topic_data=(TopicProduceData(name=topic, partition_data=(
            PartitionProduceData(index=partition, records=records),
        )),),
    )


def fetch(topic: str, offset: int, partition: int = 0, max_bytes: int = 50_000_000,
          max_wait_ms: int = 0) -> FetchRequest:
    return FetchRequest(
        max_wait=_ms(max_wait_ms), min_bytes=1, max_bytes=max_bytes,
        forgotten_topics_data=(),
        topics=(FetchTopic(topic=topic, partitions=(
            FetchPartition(partition=partition, fetch_offset=offset,
                           partition_max_bytes=max_bytes),
        )),),
    )


def create_topics(name: str, partitions: int = 1,
                  configs: dict[str, str] | None = None) -> CreateTopicsRequest:
    return CreateTopicsRequest(
        topics=(CreatableTopic(
            name=name, num_partitions=partitions, replication_factor=1, assignments=(),
            configs=tuple(CreatableTopicConfig(name=k, value=v)
                          for k, v in (configs or {}).items()),
        ),),
        timeout=_ms(10_000),
    )


def values_batch(values: list[bytes]) -> bytes:
    now = _now_ms()
    return build_batch([Record(key=None, value=v, timestamp=now + i)
                        for i, v in enumerate(values)])


def reseal(raw: bytearray) -> bytes:
    """Recompute the CRC32C after editing a batch, so only the meaning of the edit is bad."""
    struct.pack_into(">I", raw, CRC_OFFSET, crc32c.crc32c(bytes(raw[CRC_OFFSET + 4 :])))
    return bytes(raw)


def corrupt_crc(batch: bytes) -> bytes:
    """The same batch with its last payload byte flipped: the stored CRC no longer matches."""
    raw = bytearray(batch)
    raw[-1] ^= 0xFF
    return bytes(raw)


def produce_error(resp) -> tuple[int, int]:
    part = resp.responses[0].partition_responses[0]
    return int(part.error_code), int(part.base_offset)


# -- the broker and what it has acknowledged -------------------------------------------------


@dataclass
class Survivor:
    """A topic whose acknowledged records must outlive every bad request."""

    name: str
    values: list[bytes] = field(default_factory=list)


@pytest.fixture(scope="module")
def strict_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker with a small request limit and no topic auto-creation, shared by the module
    (``make_broker`` is per test; one start for the whole module keeps this file fast)."""
    process = BrokerProcess(tmp_path_factory.mktemp("strict-broker"), overrides=(
        f"socket.request.max.bytes={MAX_REQUEST}",
        "auto.create.topics.enable=false",
    )).start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="module")
def survivor(strict_broker) -> Survivor:
    s = Survivor(unique("survivor"))
    with WireClient.to(strict_broker.bootstrap) as wire:
        resp = wire.request(create_topics(s.name))
        assert int(resp.topics[0].error_code) == NONE, resp.topics[0].error_message
        for chunk in range(5):
            values = [f"acked-{chunk}-{i}".encode() for i in range(20)]
            code, base = produce_error(wire.request(produce(s.name, values_batch(values))))
            assert (code, base) == (NONE, len(s.values))
            s.values.extend(values)
    return s


def read_values(bootstrap: str, topic: str) -> list[bytes | None]:
    with WireClient.to(bootstrap) as wire:
        resp = wire.request(fetch(topic, 0))
    part = resp.responses[0].partitions[0]
    assert int(part.error_code) == NONE
    return [r.value for b in decode_batches(bytes(part.records or b"")) for r in b.records]


@pytest.fixture
def healthy(strict_broker, survivor) -> Iterator[WireClient]:
    """A connection opened before the bad input; afterwards it and new ones must still work."""
    bystander = WireClient.to(strict_broker.bootstrap)
    assert int(bystander.request(api_versions()).error_code) == NONE
    yield bystander
    try:
        assert int(bystander.request(api_versions()).error_code) == NONE
        resp = bystander.request(metadata(survivor.name, auto_create=False))
        assert int(resp.topics[0].error_code) == NONE
    finally:
        bystander.close()
    with WireClient.to(strict_broker.bootstrap) as fresh:
        assert int(fresh.request(api_versions()).error_code) == NONE
    assert read_values(strict_broker.bootstrap, survivor.name) == survivor.values


# -- framing ---------------------------------------------------------------------------------


def closing_lines(b: BrokerProcess) -> int:
    return b.stderr_text().count("closing connection")


@pytest.mark.parametrize("garbage", [
    pytest.param(b"\xde\xad\xbe\xef" * 64, id="negative-size"),
    pytest.param(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", id="http"),
    pytest.param(frame(b"\x00\x03"), id="two-byte-header"),
    pytest.param(frame(struct.pack(">hhih", 3, 12, 1, 500) + b"short"), id="client-id-overrun"),
    pytest.param(frame(struct.pack(">hhih", 3, 12, 1, -7)), id="client-id-length-negative"),
    pytest.param(frame(os.urandom(2000)), id="random-body"),
])
def test_garbage_closes_the_connection(strict_broker, healthy, garbage):
    logged = closing_lines(strict_broker)
    with WireClient.to(strict_broker.bootstrap) as bad:
        # "GET " reads as a 1.2 GB frame: over the limit, closed without waiting for it.
        bad.send_raw(garbage)
        assert bad.wait_closed()
    # One log line says which connection was closed and why.
    deadline = time.monotonic() + 2
    while closing_lines(strict_broker) <= logged and time.monotonic() < deadline:
        time.sleep(0.02)
    assert closing_lines(strict_broker) == logged + 1


def test_frame_over_socket_request_max_bytes(strict_broker, healthy, survivor):
    with WireClient.to(strict_broker.bootstrap) as bad:
        # Only the size prefix: the broker must not wait for 2 MiB before deciding.
        bad.send_raw(struct.pack(">i", 2 * MAX_REQUEST))
        assert bad.wait_closed()
    with WireClient.to(strict_broker.bootstrap) as bad:
        bad.send_raw(struct.pack(">i", MAX_REQUEST + 1) + b"\x00" * 1000)
        assert bad.wait_closed()
    # Just under the limit is a normal request: a ~900 KB produce is accepted.
    big = os.urandom(900_000)
    with WireClient.to(strict_broker.bootstrap) as ok:
        code, base = produce_error(ok.request(produce(survivor.name, values_batch([big]))))
    assert (code, base) == (NONE, len(survivor.values))
    survivor.values.append(big)


def test_truncated_frame_then_close(strict_broker, healthy):
    for cut in (2, 4, 10, 30):
        payload = request_header(18, 3, 1, flexible=True) + encode_body(api_versions())
        data = frame(payload)[:cut]
        with socket.create_connection((strict_broker.bootstrap.rsplit(":", 1)[0],
                                       strict_broker.port), timeout=5) as s:
            s.sendall(data)
    # Half-closed: the client says it is done sending in the middle of a frame.
    with WireClient.to(strict_broker.bootstrap) as half:
        half.send_raw(struct.pack(">i", 100) + b"\x00\x12\x00\x03")
        half.sock.shutdown(socket.SHUT_WR)
        assert half.wait_closed()


def test_unknown_api_key_closes(strict_broker, healthy):
    for key in (9999, 32000, -1):
        with WireClient.to(strict_broker.bootstrap) as bad:
            bad.send_raw(frame(request_header(key, 0, 7) + b"\x00" * 16))
            assert bad.wait_closed(), key


def test_unsupported_api_version_closes(strict_broker, healthy):
    with WireClient.to(strict_broker.bootstrap) as bad:
        assert int(bad.request(api_versions()).error_code) == NONE  # a working connection
        bad.send_raw(frame(request_header(3, 99, 8, flexible=True) + b"\x01\x00\x00"))
        assert bad.wait_closed()
    with WireClient.to(strict_broker.bootstrap) as bad:
        bad.send_raw(frame(request_header(0, 1, 9) + b"\x00" * 20))  # Produce v1: below min
        assert bad.wait_closed()


@pytest.mark.parametrize("version", [5, 99, 32767])
def test_api_versions_with_unsupported_version(strict_broker, healthy, version):
    with WireClient.to(strict_broker.bootstrap) as c:
        head = request_header(18, version, 4242, flexible=True)
        c.send_raw(frame(head + encode_body(api_versions())))
        resp = c.read_response(18, 0, 4242)  # v0 body with header v0 (KIP-511)
        assert int(resp.error_code) == UNSUPPORTED_VERSION
        keys = {int(a.api_key): (int(a.min_version), int(a.max_version)) for a in resp.api_keys}
        for key in (0, 1, 2, 3, 18):
            assert key in keys
        assert keys[18][0] == 0 and keys[18][1] < version
        # The client downgrades and goes on over the same connection.
        resp = c.request(ApiVersionsV0Request())
        assert int(resp.error_code) == NONE


def test_malformed_body_closes(strict_broker, healthy, survivor):
    cases = [
        # Metadata v12: compact array of 4 topics, then nothing.
        request_header(3, 12, 1, flexible=True) + b"\x05",
        # Produce v9 cut in the middle of its records.
        (request_header(0, 9, 2, flexible=True)
         + encode_body(produce(survivor.name, values_batch([b"never"] * 10)))[:60]),
        # Fetch v12 with nothing after the header.
        request_header(1, 12, 3, flexible=True),
        # CreateTopics v7 whose topic name length points past the end.
        request_header(19, 7, 4, flexible=True) + b"\x02\x7f\x7f",
    ]
    for payload in cases:
        with WireClient.to(strict_broker.bootstrap) as bad:
            bad.send_raw(frame(payload))
            assert bad.wait_closed(), payload[:12]


# -- request-level errors --------------------------------------------------------------------


def test_bad_crc_is_corrupt_message(strict_broker, healthy, survivor):
    good = values_batch([b"crc-a", b"crc-b"])
    with WireClient.to(strict_broker.bootstrap) as c:
        code, _ = produce_error(c.request(produce(survivor.name, corrupt_crc(good))))
        assert code == CORRUPT_MESSAGE
        # Nothing of it was written: the next good batch takes the next free offset.
        code, base = produce_error(c.request(produce(survivor.name, good)))
    assert (code, base) == (NONE, len(survivor.values))
    survivor.values.extend([b"crc-a", b"crc-b"])


def _with_attributes(batch: bytes, attributes: int) -> bytes:
    raw = bytearray(batch)
    struct.pack_into(">h", raw, 21, attributes)
    return reseal(raw)


@pytest.mark.parametrize("case", [
    pytest.param("control-batch", id="control-batch"),
    pytest.param("producer-id-without-sequence", id="producer-id-without-sequence"),
    pytest.param("two-batches", id="two-batches"),
    pytest.param("unknown-codec", id="unknown-codec"),
    pytest.param("lying-record-count", id="lying-record-count"),
    pytest.param("magic-1", id="magic-1"),
])
def test_batches_kafka_rejects(strict_broker, healthy, case):
    """CRC-valid batches whose content Kafka's LogValidator refuses: nothing may be stored."""
    topic = unique("rejects")
    good = values_batch([b"r1", b"r2"])
    bad = {
        "control-batch": lambda: build_batch([Record(None, b"c", _now_ms())], control=True),
        "producer-id-without-sequence": lambda: build_batch(
            [Record(None, b"p", _now_ms())], producer_id=4242, producer_epoch=0,
            base_sequence=-1),
        "two-batches": lambda: good + values_batch([b"r3"]),
        "unknown-codec": lambda: _with_attributes(good, 0x07),
        "lying-record-count": lambda: _recount(good, 5),
        "magic-1": lambda: good[:16] + b"\x01" + good[17:],
    }[case]()
    with WireClient.to(strict_broker.bootstrap) as c:
        assert int(c.request(create_topics(topic)).topics[0].error_code) == NONE
        code, _ = produce_error(c.request(produce(topic, bad)))
        assert code in {CORRUPT_MESSAGE, INVALID_RECORD}
        part = c.request(fetch(topic, 0)).responses[0].partitions[0]
        assert int(part.high_watermark) == 0, "a rejected batch was stored"
        code, base = produce_error(c.request(produce(topic, good)))
    assert (code, base) == (NONE, 0)


def _recount(batch: bytes, count: int) -> bytes:
    raw = bytearray(batch)
    struct.pack_into(">i", raw, 57, count)
    return reseal(raw)


def test_batch_over_max_message_bytes(strict_broker, healthy):
    topic = unique("small-max")
    with WireClient.to(strict_broker.bootstrap) as c:
        resp = c.request(create_topics(topic, configs={"max.message.bytes": "10000"}))
        assert int(resp.topics[0].error_code) == NONE
        code, _ = produce_error(c.request(produce(topic, values_batch([b"z" * 12_000]))))
        assert code == MESSAGE_TOO_LARGE
        code, _ = produce_error(c.request(produce(topic, values_batch([b"y" * 4000] * 3))))
        assert code == MESSAGE_TOO_LARGE  # the batch counts, not each record
        code, base = produce_error(c.request(produce(topic, values_batch([b"x" * 9000]))))
        assert (code, base) == (NONE, 0)
    assert read_values(strict_broker.bootstrap, topic) == [b"x" * 9000]


@pytest.mark.parametrize("name", INVALID_NAMES)
def test_invalid_topic_names(strict_broker, healthy, name):
    with WireClient.to(strict_broker.bootstrap) as c:
        resp = c.request(create_topics(name))
        assert int(resp.topics[0].error_code) == INVALID_TOPIC_EXCEPTION
        # Kafka answers INVALID_TOPIC_EXCEPTION in Metadata for an illegal name whether or
        # not auto-creation is allowed (KafkaApis checks Topic.validate first).
        for auto in (True, False):
            resp = c.request(metadata(name, auto_create=auto))
            assert int(resp.topics[0].error_code) == INVALID_TOPIC_EXCEPTION, auto
        code, _ = produce_error(c.request(produce(name, values_batch([b"nope"]))))
        # Kafka itself answers UNKNOWN_TOPIC_OR_PARTITION here (the topic cannot exist);
        # moldau checks the name first. Either way nothing may be written.
        assert code in (INVALID_TOPIC_EXCEPTION, UNKNOWN_TOPIC_OR_PARTITION)
        listed = {t.name for t in c.request(MetadataRequest(
            topics=None, allow_auto_topic_creation=False,
            include_topic_authorized_operations=False)).topics}
    assert name not in listed
    assert not any(p.name.startswith(name[:50]) for p in strict_broker.data_dir.iterdir()
                   if name not in (".", ".."))


def test_invalid_topic_names_with_auto_create(broker):
    """With auto-creation on, Metadata and Produce reject illegal names with 17 too."""
    with WireClient.to(broker.bootstrap) as c:
        for bad in INVALID_NAMES:
            resp = c.request(metadata(bad, auto_create=True))
            assert int(resp.topics[0].error_code) == INVALID_TOPIC_EXCEPTION, bad
            code, _ = produce_error(c.request(produce(bad, values_batch([b"nope"]))))
            assert code == INVALID_TOPIC_EXCEPTION, bad


def test_unknown_topic_without_auto_create(strict_broker, healthy):
    topic = unique("never-created")
    with WireClient.to(strict_broker.bootstrap) as c:
        for auto in (True, False):
            resp = c.request(metadata(topic, auto_create=auto))
            assert int(resp.topics[0].error_code) == UNKNOWN_TOPIC_OR_PARTITION
        code, _ = produce_error(c.request(produce(topic, values_batch([b"lost"]))))
        assert code == UNKNOWN_TOPIC_OR_PARTITION
        resp = c.request(fetch(topic, 0))
        assert int(resp.responses[0].partitions[0].error_code) == UNKNOWN_TOPIC_OR_PARTITION
        # Still unknown afterwards: none of those requests created it.
        resp = c.request(metadata(topic, auto_create=False))
        assert int(resp.topics[0].error_code) == UNKNOWN_TOPIC_OR_PARTITION


def test_unknown_partition_of_existing_topic(strict_broker, healthy, survivor):
    with WireClient.to(strict_broker.bootstrap) as c:
        code, _ = produce_error(c.request(produce(survivor.name, values_batch([b"p"]), 7)))
        assert code == UNKNOWN_TOPIC_OR_PARTITION
        resp = c.request(fetch(survivor.name, 0, partition=7))
        assert int(resp.responses[0].partitions[0].error_code) == UNKNOWN_TOPIC_OR_PARTITION


def test_fetch_beyond_the_end(strict_broker, healthy, survivor):
    with WireClient.to(strict_broker.bootstrap) as c:
        end = len(survivor.values)
        for offset in (end + 1, end + 1000, 10**12, -5):
            part = c.request(fetch(survivor.name, offset)).responses[0].partitions[0]
            assert int(part.error_code) == OFFSET_OUT_OF_RANGE, offset
            assert not part.records
        # At exactly the end there is nothing to read yet, and that is not an error.
        part = c.request(fetch(survivor.name, end)).responses[0].partitions[0]
        assert int(part.error_code) == NONE
        assert int(part.high_watermark) == end
        assert not part.records


@pytest.mark.parametrize("configs", [
    {"retention.ms": "forever"},
    {"cleanup.policy": "shred"},
    {"message.timestamp.type": "Whenever"},
    {"max.message.bytes": "-5"},
    {"min.insync.replicas": "0"},
    {"no.such.topic.config": "1"},
], ids=lambda c: next(iter(c)))
def test_create_topic_with_invalid_config(strict_broker, healthy, configs):
    topic = unique("badconf")
    with WireClient.to(strict_broker.bootstrap) as c:
        result = c.request(create_topics(topic, configs=configs)).topics[0]
        assert int(result.error_code) == INVALID_CONFIG
        assert result.error_message, "INVALID_CONFIG needs a message saying what is wrong"
        assert next(iter(configs)) in result.error_message
        resp = c.request(metadata(topic, auto_create=False))
        assert int(resp.topics[0].error_code) == UNKNOWN_TOPIC_OR_PARTITION


def test_failed_acks0_produce_closes_the_connection(strict_broker, healthy, survivor):
    """acks=0 has no response to carry an error, so the broker closes the connection (Kafka)."""
    topic = unique("acks0-unknown")
    with WireClient.to(strict_broker.bootstrap) as c:
        c.send_request(produce(topic, values_batch([b"nowhere"]), acks=0))
        assert c.wait_closed(), "the broker kept the connection after a failed acks=0 produce"
    with WireClient.to(strict_broker.bootstrap) as c:
        c.send_request(produce(survivor.name, values_batch([b"fire-and-forget"]), acks=0))
        # A successful acks=0 produce gets no response and the connection stays usable.
        code, _ = produce_error(c.request(produce(survivor.name, values_batch([b"acked"]))))
        assert code == NONE
    survivor.values += [b"fire-and-forget", b"acked"]


@pytest.mark.parametrize(("epoch", "code"), [(1, 75), (-1, NONE), (0, NONE)])
def test_fetch_checks_the_clients_leader_epoch(strict_broker, healthy, survivor, epoch, code):
    """A fetch from a newer epoch than the partition's gets UNKNOWN_LEADER_EPOCH (75), as in
    Kafka (KIP-320); -1 does not ask for a check. The single node leads at epoch 0."""
    with WireClient.to(strict_broker.bootstrap) as wire:
        resp = wire.request(FetchRequest(
            max_wait=_ms(0), min_bytes=1, max_bytes=1_000_000, forgotten_topics_data=(),
            topics=(FetchTopic(topic=survivor.name, partitions=(
                FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1_000_000,
                               current_leader_epoch=epoch),
            )),),
        ))
        part = resp.responses[0].partitions[0]
        assert int(part.error_code) == code
        if code == NONE:
            assert decode_batches(bytes(part.records)), "the records are served"
        else:
            assert not part.records and int(part.high_watermark) == -1
