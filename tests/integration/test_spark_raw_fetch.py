"""The Spark source's raw Fetch client (moldau.spark.raw_fetch) against real brokers."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode

pytest.importorskip("pyspark", reason="the Spark source needs pip install -e '.[spark]'")

from moldau.spark import columnar
from moldau.spark.fetch import arrow_schema
from moldau.spark.raw_fetch import PartitionFetcher
from moldau.spark.schema import source_schema

from ..helpers.broker_process import free_port


def _fill(bootstrap: str, topic: str, count: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(count):
        producer.produce(topic, value=f"v{i}".encode(), key=None if i % 2 else b"k")
    assert producer.flush(30) == 0


def _values(fetcher: PartitionFetcher, offset: int, until: int) -> list[Any]:
    fetched = fetcher.fetch(offset, 100)
    assert fetched.error == ErrorCode.none
    decoded = columnar.decode_fetched(fetched.records, offset, until, topic=fetcher.topic,
                                      partition=0, schema=arrow_schema(source_schema(False)),
                                      include_headers=False, aborted=fetched.aborted)
    assert decoded.batch is not None
    return decoded.batch.column("value").to_pylist()


@pytest.mark.skipif(not columnar.AVAILABLE, reason="C decoder not built")
def test_reads_through_a_live_bootstrap_broker_after_a_dead_one(broker: Any,
                                                                 topic_name: str) -> None:
    _fill(broker.bootstrap, topic_name, 20)
    fetcher = PartitionFetcher(f"127.0.0.1:{free_port()},{broker.bootstrap}", topic_name, 0,
                               read_committed=True, max_bytes=1 << 20, timeout_s=10)
    try:
        assert fetcher.watermarks() == (0, 20)
        assert _values(fetcher, 5, 20) == [f"v{i}".encode() for i in range(5, 20)]
        assert fetcher.fetch(25, 100).error == ErrorCode.offset_out_of_range
    finally:
        fetcher.close()


def test_an_unknown_topic_fails_after_the_timeout(broker: Any, topic_name: str) -> None:
    fetcher = PartitionFetcher(broker.bootstrap, topic_name, 0, read_committed=False,
                               max_bytes=1 << 20, timeout_s=1)
    with pytest.raises(TimeoutError, match=f"{topic_name}-0: no answer within 1 s"):
        fetcher.watermarks()


@pytest.mark.skipif(not columnar.AVAILABLE, reason="C decoder not built")
def test_reconnects_when_the_broker_restarts(make_broker: Any, topic_name: str) -> None:
    server = make_broker()
    _fill(server.bootstrap, topic_name, 10)
    fetcher = PartitionFetcher(server.bootstrap, topic_name, 0, read_committed=False,
                               max_bytes=1 << 20, timeout_s=60)
    try:
        assert len(_values(fetcher, 0, 10)) == 10
        server.restart()
        assert _values(fetcher, 3, 10) == [f"v{i}".encode() for i in range(3, 10)]
    finally:
        fetcher.close()
