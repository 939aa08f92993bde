"""The Spark source's raw fetch client (moldau.spark.raw_fetch, the columnar reader's path)
on three real brokers: it reads part of a partition, the leader is killed with kill -9, and
the same fetcher goes on from where it stopped on the new leader, with read_committed, until
it has every acknowledged record once and in order."""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import Producer
from kio.schema.errors import ErrorCode

pytest.importorskip("pyspark", reason="the Spark source needs pip install -e '.[spark]'")

from moldau.spark import columnar
from moldau.spark.fetch import arrow_schema
from moldau.spark.raw_fetch import PartitionFetcher
from moldau.spark.schema import source_schema
from tests.conftest import MakeBroker

from .helpers import eventually
from .test_cluster_brokers import create_topic, describe, start_cluster

pytestmark = [pytest.mark.timeout(180),
              pytest.mark.skipif(not columnar.AVAILABLE, reason="C decoder not built")]

FIRST, SECOND = 200, 200


def _produce(bootstrap: str, topic: str, start: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 5})
    for i in range(start, start + count):
        producer.produce(topic, value=f"v{i}".encode())
    assert producer.flush(60) == 0


def _read(fetcher: PartitionFetcher, offset: int, until: int) -> list[Any]:
    """Values from ``offset`` to ``until`` (exclusive), fetch after fetch, as a columnar task
    reads its range."""
    values: list[Any] = []
    schema = arrow_schema(source_schema(False))
    deadline = time.monotonic() + 90
    while offset < until and time.monotonic() < deadline:
        fetched = fetcher.fetch(offset, 200)
        assert fetched.error == ErrorCode.none
        end = min(until, fetched.high_watermark)
        if end <= offset:
            continue
        decoded = columnar.decode_fetched(fetched.records, offset, end, topic=fetcher.topic,
                                          partition=0, schema=schema, include_headers=False,
                                          aborted=fetched.aborted)
        assert decoded.batch is not None
        got = decoded.batch.column("value").to_pylist()
        assert decoded.batch.column("offset").to_pylist() == list(
            range(offset, offset + len(got)))
        values += got
        offset += len(got)
    return values


def test_the_raw_fetcher_goes_on_from_a_new_leader_after_a_kill9(
        make_broker: MakeBroker, zk_connect: str, topic_name: str) -> None:
    brokers = start_cluster(make_broker, zk_connect, 3, "min.insync.replicas=2")
    eventually(lambda: describe(brokers[0], "-")[0] == [1, 2, 3], what="three brokers")
    create_topic(brokers[0], topic_name, 1, rf=3)
    eventually(lambda: len(describe(brokers[0], topic_name)[2].get(0, (-1, (), ()))[2]) == 3,
               what="a leader and a full ISR")
    bootstrap = ",".join(b.bootstrap for b in brokers)
    _produce(bootstrap, topic_name, 0, FIRST)
    fetcher = PartitionFetcher(bootstrap, topic_name, 0, read_committed=True,
                               max_bytes=1 << 20, timeout_s=60)
    try:
        assert _read(fetcher, 0, FIRST // 2) == [f"v{i}".encode() for i in range(FIRST // 2)]
        old = describe(brokers[0], topic_name)[2][0][0]
        brokers[old - 1].kill9()
        live = [b for b in brokers if b is not brokers[old - 1]]
        eventually(lambda: describe(live[0], topic_name)[2][0][0] not in (-1, old),
                   timeout=60, what="a new leader")
        _produce(",".join(b.bootstrap for b in live), topic_name, FIRST, SECOND)
        total = FIRST + SECOND
        assert _read(fetcher, FIRST // 2, total) == [
            f"v{i}".encode() for i in range(FIRST // 2, total)]
        assert fetcher.watermarks() == (0, total)
    finally:
        fetcher.close()
