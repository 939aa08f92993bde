"""The Spark source's two read paths return identical rows for random topics on a real broker.

Each example produces random records (null keys and values, headers with null values, every
codec, transactions that commit or abort) to a new topic, then reads a random offset range
with ``read_range`` through the row path (a confluent-kafka consumer) and through the
columnar path (raw Fetch + the C decoder), under both isolation levels. No SparkSession is
needed: ``read_range`` is what each Spark task runs.
"""

from __future__ import annotations

import gc
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("pyspark", reason="the Spark source needs pip install -e '.[spark]'")

import pyarrow as pa
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from moldau.spark import columnar
from moldau.spark.fetch import read_range
from moldau.spark.options import parse_source_options
from moldau.spark.planning import OffsetRange
from moldau.spark.schema import source_schema

pytestmark = pytest.mark.skipif(not columnar.AVAILABLE, reason="C decoder not built")

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")

record_st = st.fixed_dictionaries({
    "key": st.none() | st.binary(max_size=10),
    "value": st.none() | st.binary(max_size=30),
    "headers": st.lists(st.tuples(st.text(min_size=1, max_size=4),
                                  st.none() | st.binary(max_size=5)), max_size=3),
})
step_st = st.tuples(st.sampled_from(["plain", "commit", "abort"]), st.sampled_from(CODECS),
                    st.lists(record_st, min_size=1, max_size=8))


@pytest.fixture(scope="module")
def admin(broker: Any) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


@pytest.fixture(scope="module")
def producers(broker: Any) -> Iterator[dict[tuple[str, str], Producer]]:
    """A plain and a transactional producer per codec, shared by all examples."""
    made: dict[tuple[str, str], Producer] = {}
    for codec in CODECS:
        made[("plain", codec)] = Producer({"bootstrap.servers": broker.bootstrap,
                                           "compression.type": codec, "linger.ms": 2})
        txn = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": codec,
                        "linger.ms": 2, "transactional.id": f"cvr-{uuid.uuid4().hex}"})
        txn.init_transactions(30)
        made[("txn", codec)] = txn
    yield made
    for producer in made.values():
        producer.flush(10)
    made.clear()  # destroy the clients now, while the broker still runs
    gc.collect()


def _fill(admin: AdminClient, producers: dict[tuple[str, str], Producer],
          steps: list) -> str:
    topic = f"cvr-{uuid.uuid4().hex[:10]}"
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    for kind, codec, records in steps:
        producer = producers[("plain" if kind == "plain" else "txn", codec)]
        if kind != "plain":
            producer.begin_transaction()
        for record in records:
            producer.produce(topic, partition=0, **record)
        assert producer.flush(30) == 0
        if kind == "commit":
            producer.commit_transaction(30)
        elif kind == "abort":
            producer.abort_transaction(30)
    return topic


def _read(bootstrap: str, topic: str, start: int, until: int, decoder: str,
          isolation: str) -> list[dict]:
    options = parse_source_options({
        "kafka.bootstrap.servers": bootstrap, "subscribe": topic, "includeHeaders": "true",
        "kafka.isolation.level": isolation, "moldau.decoder": decoder,
        "kafka.fetch.wait.max.ms": "10", "kafkaConsumer.pollTimeoutMs": "20000"},
        streaming=False)
    batches = list(read_range(OffsetRange(topic, 0, start, until), options,
                              source_schema(True)))
    if not batches:
        return []
    return pa.Table.from_batches(batches).to_pylist()


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(steps=st.lists(step_st, min_size=1, max_size=5), data=st.data())
def test_both_paths_return_the_same_rows(broker: Any, admin: AdminClient,
                                         producers: dict[tuple[str, str], Producer],
                                         steps: list, data: st.DataObject) -> None:
    topic = _fill(admin, producers, steps)
    consumer_end = sum(len(records) + (kind != "plain") for kind, _, records in steps)
    start = data.draw(st.integers(0, consumer_end))
    until = data.draw(st.integers(start, consumer_end))
    for isolation in ("read_committed", "read_uncommitted"):
        rows = _read(broker.bootstrap, topic, start, until, "rows", isolation)
        assert _read(broker.bootstrap, topic, start, until, "columnar", isolation) == rows
