"""Requests the wire fuzzer (tests/fuzz) found crashing a handler, one test per kind.

Each request is legal: it decodes, yet a handler used to raise on it (a field a version does
not have, a null the schema allows), which closed the connection with a traceback in the
broker's log. Each must now get Kafka's answer, and the log must stay free of tracebacks.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterator

import pytest
from kio.schema.fetch.v13.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.metadata.v11.request import MetadataRequest, MetadataRequestTopic
from kio.schema.produce.v7.request import PartitionProduceData, ProduceRequest, TopicProduceData

from tests.helpers import BrokerProcess
from tests.unit.batchgen import simple_batch

from .clients import unique
from .wire import WireClient

pytestmark = pytest.mark.timeout(60)

UNKNOWN_TOPIC_ID = 100
INVALID_REQUEST = 42
NONE = 0


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path_factory.mktemp("fuzz-findings"),
                            overrides=("auto.create.topics.enable=false",)).start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture
def clean_log(fuzzed: BrokerProcess) -> Iterator[None]:
    yield
    assert "Traceback" not in fuzzed.stderr_text()
    assert " ERROR " not in fuzzed.stderr_text()
    with WireClient.to(fuzzed.bootstrap) as wire:  # and the broker still answers
        assert wire.request(MetadataRequest(topics=None, include_topic_authorized_operations=False,
                                            allow_auto_topic_creation=False)).topics == ()


def test_fetch_by_zero_topic_id_is_unknown_topic_id(fuzzed, clean_log):
    """Fetch v13+ names topics by id only; a zero (null) id names none: UNKNOWN_TOPIC_ID."""
    request = FetchRequest(
        max_wait=datetime.timedelta(0), min_bytes=1, max_bytes=1 << 20, forgotten_topics_data=(),
        topics=(FetchTopic(topic_id=uuid.UUID(int=0), partitions=(
            FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20),)),),
    )
    with WireClient.to(fuzzed.bootstrap) as wire:
        response = wire.request(request)
    assert int(response.responses[0].partitions[0].error_code) == UNKNOWN_TOPIC_ID


def test_failed_acks0_produce_before_v8_closes_quietly(fuzzed, clean_log):
    """Produce v3-v7 responses have no error_message; acks=0 failures still close cleanly."""
    request = ProduceRequest(
        transactional_id=None, acks=0, timeout=datetime.timedelta(seconds=10),
        topic_data=(TopicProduceData(name=unique("nowhere"), partition_data=(
            PartitionProduceData(index=0, records=simple_batch(1)),)),),
    )
    with WireClient.to(fuzzed.bootstrap) as wire:
        wire.send_request(request)
        assert wire.wait_closed()
    assert "acks=0 produce failed" in fuzzed.stderr_text()


def test_metadata_v11_null_topic_name_is_invalid_request(fuzzed, clean_log):
    """Topic names are nullable in Metadata only from v12; Kafka answers INVALID_REQUEST."""
    request = MetadataRequest(
        topics=(MetadataRequestTopic(topic_id=None, name=None),),
        allow_auto_topic_creation=False, include_topic_authorized_operations=False,
    )
    with WireClient.to(fuzzed.bootstrap) as wire:
        response = wire.request(request)
        assert [(t.name, int(t.error_code)) for t in response.topics] == [("", INVALID_REQUEST)]
        # The connection goes on: an ordinary request on it is answered.
        ok = wire.request(MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                          include_topic_authorized_operations=False))
        assert ok.topics == ()
