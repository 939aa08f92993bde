"""The partition side of transactions on a real broker, driven over the wire.

No coordinator is involved: each test picks producer ids, writes transactional batches and
ends them with WriteTxnMarkers as a coordinator would (tests/integration/txn_wire.py). Real
clients then read: confluent-kafka and kafka-python with read_committed see only committed
records and stop at the last stable offset; read_uncommitted sees everything; ListOffsets
answers per isolation level; a broker killed with kill -9 rebuilds its ongoing transactions
and aborted-transaction index. Before this, markers were refused (WriteTxnMarkers unknown)
and read_committed fetches returned aborted and open transactions' records.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import kafka
from confluent_kafka import TopicPartition
from kio.schema.errors import ErrorCode

from tests.helpers import BrokerProcess

from .clients import consume, consumer, create_topic, unique
from .txn_wire import fetch, latest, produce_txn, write_markers
from .wire import WireClient

P1, P2, P3 = 880_001, 880_002, 880_003


def _values(bootstrap: str, topic: str, count: int, isolation: str,
            timeout: float = 20.0) -> list[str]:
    c = consumer(bootstrap, **{"isolation.level": isolation})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        return [m.value().decode() for m in consume(c, count, timeout)]
    finally:
        c.close()


def _quiet_values(bootstrap: str, topic: str, isolation: str, wait: float = 1.5) -> list[str]:
    """Everything a confluent consumer gets within ``wait`` seconds."""
    c = consumer(bootstrap, **{"isolation.level": isolation})
    got: list[str] = []
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                got.append(m.value().decode())
    finally:
        c.close()
    return got


def _kafka_python_values(bootstrap: str, topic: str, isolation: str,
                         wait: float = 2.0) -> list[str]:
    c = kafka.KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation,
                            enable_auto_commit=False, consumer_timeout_ms=int(wait * 1000))
    try:
        tp = kafka.TopicPartition(topic, 0)
        c.assign([tp])
        c.seek(tp, 0)
        return [m.value.decode() for m in c]
    finally:
        c.close()


def _scenario(client: WireClient, topic: str) -> dict[str, int]:
    """P1 commits a1 a2; P2 aborts b1 b2; P3 opens c1 (left open); then plain d1."""
    offsets = {"a": produce_txn(client, topic, P1, 0, ["a1", "a2"])}
    offsets["b"] = produce_txn(client, topic, P2, 0, ["b1"])
    produce_txn(client, topic, P1, 2, ["a3"])
    produce_txn(client, topic, P2, 1, ["b2"])
    assert write_markers(client, topic, P1, True) == [ErrorCode.none]
    assert write_markers(client, topic, P2, False) == [ErrorCode.none]
    offsets["c"] = produce_txn(client, topic, P3, 0, ["c1"])
    offsets["d"] = produce_txn(client, topic, -1, -1, ["d1"], transactional=False)
    return offsets


def test_read_committed_hides_aborted_and_stops_at_the_lso(broker: BrokerProcess) -> None:
    topic = unique("txn-rc")
    create_topic(broker.bootstrap, topic, 1)
    with WireClient.to(broker.bootstrap) as client:
        offsets = _scenario(client, topic)
        hw = latest(client, topic, isolation=0)
        assert hw == offsets["d"] + 1
        assert latest(client, topic, isolation=1) == offsets["c"]  # the LSO
        part = fetch(client, topic, 0, isolation=1)
        assert part.error_code == ErrorCode.none
        assert (part.high_watermark, part.last_stable_offset) == (hw, offsets["c"])
        assert [(t.producer_id, t.first_offset) for t in part.aborted_transactions] == \
            [(P2, offsets["b"])]
        part = fetch(client, topic, 0, isolation=0)
        assert part.last_stable_offset == offsets["c"] and part.aborted_transactions is None

        everything = ["a1", "a2", "b1", "a3", "b2", "c1", "d1"]
        assert _values(broker.bootstrap, topic, 7, "read_uncommitted") == everything
        assert _quiet_values(broker.bootstrap, topic, "read_committed") == ["a1", "a2", "a3"]
        assert _kafka_python_values(broker.bootstrap, topic, "read_committed") == \
            ["a1", "a2", "a3"]
        assert _kafka_python_values(broker.bootstrap, topic, "read_uncommitted") == everything

        assert write_markers(client, topic, P3, True) == [ErrorCode.none]
        assert latest(client, topic, isolation=1) == latest(client, topic, isolation=0)
    committed = ["a1", "a2", "a3", "c1", "d1"]
    assert _values(broker.bootstrap, topic, 5, "read_committed") == committed
    assert _kafka_python_values(broker.bootstrap, topic, "read_committed") == committed


def test_waiting_read_committed_fetch_wakes_when_the_marker_lands(
        broker: BrokerProcess) -> None:
    topic = unique("txn-wake")
    create_topic(broker.bootstrap, topic, 1)
    with WireClient.to(broker.bootstrap) as client, \
            WireClient.to(broker.bootstrap, timeout=30) as waiter:
        produce_txn(client, topic, P1, 0, ["x1"])
        got: dict[str, Any] = {}

        def wait() -> None:
            start = time.monotonic()
            got["part"] = fetch(waiter, topic, 0, isolation=1, max_wait_ms=20_000)
            got["s"] = time.monotonic() - start

        thread = threading.Thread(target=wait)
        thread.start()
        time.sleep(0.5)
        assert "part" not in got  # parked: nothing stable yet
        assert write_markers(client, topic, P1, True) == [ErrorCode.none]
        thread.join(25)
        assert got["s"] < 15, got  # woken by the marker, not by max_wait
        assert got["part"].last_stable_offset == 2 and len(got["part"].records) > 0


def test_write_txn_markers_errors_are_kafkas(broker: BrokerProcess) -> None:
    topic = unique("txn-err")
    create_topic(broker.bootstrap, topic, 1)
    with WireClient.to(broker.bootstrap) as client:
        produce_txn(client, topic, P1, 0, ["x"], epoch=3)
        assert write_markers(client, unique("nope"), P1, True) == \
            [ErrorCode.unknown_topic_or_partition]
        assert write_markers(client, topic, P1, True, partitions=(0, 5), epoch=3) == \
            [ErrorCode.none, ErrorCode.unknown_topic_or_partition]
        assert write_markers(client, topic, P1, False, epoch=2) == \
            [ErrorCode.invalid_producer_epoch]
        assert write_markers(client, topic, P1, False, epoch=3, coordinator_epoch=4) == \
            [ErrorCode.none]
        assert write_markers(client, topic, P1, False, epoch=3, coordinator_epoch=3) == \
            [ErrorCode.transaction_coordinator_fenced]


def _same_state(broker: BrokerProcess, topic: str, offsets: dict[str, int]) -> None:
    with WireClient.to(broker.bootstrap) as client:
        assert latest(client, topic, isolation=1) == offsets["c"]
        part = fetch(client, topic, 0, isolation=1)
        assert part.last_stable_offset == offsets["c"]
        assert [(t.producer_id, t.first_offset) for t in part.aborted_transactions] == \
            [(P2, offsets["b"])]


def test_restarts_keep_ongoing_transactions_and_the_aborted_index(make_broker: Any) -> None:
    broker = make_broker()
    topic = unique("txn-restart")
    create_topic(broker.bootstrap, topic, 1)
    with WireClient.to(broker.bootstrap) as client:
        offsets = _scenario(client, topic)
    # A clean restart: the state comes back from the snapshot at the log end (which now
    # carries the open transaction's first offset), with nothing scanned.
    broker.restart()
    snapshots = list((broker.data_dir).rglob(f"{topic}-0/*.snapshot"))
    assert snapshots, "no producer snapshot written at the clean shutdown"
    _same_state(broker, topic, offsets)
    # kill -9, and neither snapshots nor the .txnindex left: the scan of the log rebuilds
    # the open transaction and the aborted index.
    broker.kill9()
    indexes = list((broker.data_dir).rglob(f"{topic}-0/*.txnindex"))
    assert indexes
    for path in (*snapshots, *indexes):
        path.unlink()
    broker.start()
    _same_state(broker, topic, offsets)
    with WireClient.to(broker.bootstrap) as client:
        assert write_markers(client, topic, P3, False) == [ErrorCode.none]
        assert latest(client, topic, isolation=1) == latest(client, topic, isolation=0)
    assert _values(broker.bootstrap, topic, 4, "read_committed") == ["a1", "a2", "a3", "d1"]
