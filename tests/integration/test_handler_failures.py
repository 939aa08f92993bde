"""A handler that fails unexpectedly answers its request with UNKNOWN_SERVER_ERROR, as Kafka
does, and the connection carries on; the broker logs one line (API, version, client, peer)
and keeps the traceback for DEBUG.

The failure is a real one: a stray regular file where a new partition's directory must go
makes the partition log's creation raise (NotADirectoryError or FileExistsError) inside the
CreateTopics handler. Before, the broker logged a traceback and closed the connection.
"""

from __future__ import annotations

import datetime

import pytest
from kio.schema.create_topics.v7.request import CreatableTopic, CreateTopicsRequest
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic

from .clients import unique
from .wire import WireClient

pytestmark = pytest.mark.timeout(60)

UNKNOWN_SERVER_ERROR = -1


def _create(name: str) -> CreateTopicsRequest:
    return CreateTopicsRequest(
        topics=(CreatableTopic(name=name, num_partitions=1, replication_factor=1,
                               assignments=(), configs=()),),
        timeout=datetime.timedelta(seconds=10), validate_only=False)


def test_failing_handler_answers_unknown_server_error(make_broker) -> None:
    broker = make_broker()
    topic = unique("stray")
    (broker.data_dir / f"{topic}-0").write_text("not a partition directory\n")
    with WireClient.to(broker.bootstrap) as wire:
        resp = wire.request(_create(topic))
        assert [(t.name, int(t.error_code)) for t in resp.topics] == [
            (topic, UNKNOWN_SERVER_ERROR)]
        assert resp.topics[0].error_message is None  # the exception stays in the broker log
        # The same connection goes on serving.
        other = unique("fine")
        resp = wire.request(_create(other))
        assert int(resp.topics[0].error_code) == 0
        resp = wire.request(MetadataRequest(
            topics=(MetadataRequestTopic(topic_id=None, name=other),),
            allow_auto_topic_creation=False, include_topic_authorized_operations=False))
        assert int(resp.topics[0].error_code) == 0
    assert broker.is_running()
    log = broker.stderr_text()
    lines = [ln for ln in log.splitlines() if "CreateTopics v7" in ln]
    assert len(lines) == 1, lines
    assert "client 'moldau-tests'" in lines[0] and "127.0.0.1" in lines[0]
    assert "UNKNOWN_SERVER_ERROR" in lines[0]
    assert "Traceback" not in log
