"""The transaction coordinator on one broker, with confluent-kafka's transactional Producer.

Before the coordinator existed, ``init_transactions()`` waited on COORDINATOR_NOT_AVAILABLE
until it timed out; every test here failed there.
"""

from __future__ import annotations

import re
import time
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition
from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest
from kio.schema.errors import ErrorCode
from kio.schema.list_transactions.v2.request import ListTransactionsRequest

from tests.conftest import MakeBroker
from tests.helpers import BrokerProcess

from .clients import consumer, create_topic, producer, unique, watermarks
from .wire import WireClient


def _txn_producer(bootstrap: str, transactional_id: str, **extra: Any) -> Any:
    return producer(bootstrap, **{"transactional.id": transactional_id,
                                  "transaction.timeout.ms": 60_000, "linger.ms": 2, **extra})


def describe(bootstrap: str, transactional_id: str) -> Any:
    """DescribeTransactions v0 for one id, over the wire."""
    with WireClient.to(bootstrap) as client:
        response = client.request(DescribeTransactionsRequest(
            transactional_ids=(transactional_id,)))
    return response.transaction_states[0]


def read_values(bootstrap: str, topic: str, partitions: int, isolation: str,
                timeout: float = 30) -> list[str]:
    """Every value up to the end (the LSO for read_committed) of each partition."""
    c = consumer(bootstrap, **{"isolation.level": isolation, "enable.partition.eof": True})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        values: list[str] = []
        ended: set[int] = set()
        deadline = time.monotonic() + timeout
        while len(ended) < partitions:
            assert time.monotonic() < deadline, f"read {len(values)} values, no end"
            for msg in c.consume(num_messages=1000, timeout=0.2):
                err = msg.error()
                if err is not None and err.code() == KafkaError._PARTITION_EOF:
                    ended.add(msg.partition())
                elif err is not None:
                    raise KafkaException(err)
                else:
                    values.append(msg.value().decode())
        return values
    finally:
        c.close()


def state_of(bootstrap: str, transactional_id: str) -> tuple[str, int] | None:
    """(state, producer id) from ListTransactions v2 (kio cannot decode the -1 start time
    DescribeTransactions rightly sends for an id without a transaction)."""
    with WireClient.to(bootstrap) as client:
        response = client.request(ListTransactionsRequest(
            transactional_id_pattern=re.escape(transactional_id)))
    assert response.error_code == ErrorCode.none
    found = [(t.transaction_state, t.producer_id) for t in response.transaction_states]
    return found[0] if found else None


def wait_state(bootstrap: str, transactional_id: str, state: str, timeout: float = 20) -> str:
    deadline = time.monotonic() + timeout
    while True:
        found = state_of(bootstrap, transactional_id)
        if (found is not None and found[0] == state) or time.monotonic() > deadline:
            return found[0] if found else "absent"
        time.sleep(0.1)


def test_commit_and_abort(broker: BrokerProcess) -> None:
    topic = unique("txn")
    create_topic(broker.bootstrap, topic, partitions=2)
    tid = unique("tid")
    p = _txn_producer(broker.bootstrap, tid)
    p.init_transactions(30)
    assert wait_state(broker.bootstrap, tid, "Empty", timeout=0) == "Empty"
    p.begin_transaction()
    for i in range(10):
        p.produce(topic, value=f"c{i}".encode(), partition=i % 2)
    p.flush(30)
    ongoing = describe(broker.bootstrap, tid)
    assert ongoing.transaction_state == "Ongoing"
    assert {(t.topic, part) for t in ongoing.topics for part in t.partitions} == \
        {(topic, 0), (topic, 1)}
    p.commit_transaction(30)
    assert wait_state(broker.bootstrap, tid, "CompleteCommit") == "CompleteCommit"
    p.begin_transaction()
    for i in range(4):
        p.produce(topic, value=f"a{i}".encode(), partition=i % 2)
    p.flush(30)
    p.abort_transaction(30)
    assert wait_state(broker.bootstrap, tid, "CompleteAbort") == "CompleteAbort"
    p.begin_transaction()
    p.produce(topic, value=b"last", partition=0)
    p.commit_transaction(30)
    # 15 data records and a marker per partition per transaction (2 + 2 + 1).
    assert sum(watermarks(broker.bootstrap, topic, part)[1] for part in range(2)) == 20
    committed = read_values(broker.bootstrap, topic, 2, "read_committed")
    assert sorted(committed) == sorted([f"c{i}" for i in range(10)] + ["last"])
    everything = read_values(broker.bootstrap, topic, 2, "read_uncommitted")
    assert sorted(everything) == sorted(committed + [f"a{i}" for i in range(4)])


def test_second_producer_fences_the_first(broker: BrokerProcess) -> None:
    topic = unique("txn")
    create_topic(broker.bootstrap, topic)
    tid = unique("tid")
    first = _txn_producer(broker.bootstrap, tid)
    first.init_transactions(30)
    first.begin_transaction()
    first.produce(topic, value=b"zombie")
    first.flush(30)
    second = _txn_producer(broker.bootstrap, tid)
    second.init_transactions(30)  # aborts the first's open transaction, bumps the epoch
    second.begin_transaction()
    second.produce(topic, value=b"fresh")
    second.commit_transaction(30)
    with pytest.raises(KafkaException) as info:
        first.produce(topic, value=b"late")
        first.commit_transaction(30)
    assert info.value.args[0].fatal() or "fenced" in str(info.value).lower()
    # The zombie's open transaction was aborted by the fencing.
    assert read_values(broker.bootstrap, topic, 1, "read_committed") == ["fresh"]


def test_invalid_timeout_is_refused(broker: BrokerProcess) -> None:
    p = _txn_producer(broker.bootstrap, unique("tid"), **{"transaction.timeout.ms": 900_001})
    with pytest.raises(KafkaException) as info:
        p.init_transactions(30)
    assert "timeout" in str(info.value).lower()


def test_timed_out_transaction_is_aborted(broker: BrokerProcess) -> None:
    topic = unique("txn")
    create_topic(broker.bootstrap, topic)
    tid = unique("tid")
    p = _txn_producer(broker.bootstrap, tid, **{"transaction.timeout.ms": 2000})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, value=b"left open")
    p.flush(30)
    # The broker aborts it (and fences this producer's epoch): read_committed consumers are
    # not held behind it, and never see it.
    assert wait_state(broker.bootstrap, tid, "CompleteAbort") == "CompleteAbort"
    assert read_values(broker.bootstrap, topic, 1, "read_committed") == []
    assert read_values(broker.bootstrap, topic, 1, "read_uncommitted") == ["left open"]
    with pytest.raises(KafkaException):
        p.commit_transaction(30)


def test_state_survives_a_restart(make_broker: MakeBroker) -> None:
    """kill -9 with transactions in every state: the restarted coordinator replays
    ``__transaction_state``; the one left between PrepareCommit and CompleteCommit gets its
    markers and completes, the ongoing one is still ongoing and can be committed."""
    b = make_broker("moldau.test.hold.transaction.markers=true")
    topic = unique("txn")
    create_topic(b.bootstrap, topic, partitions=2)
    held, open_, done = unique("held"), unique("open"), unique("done")
    p_done = _txn_producer(b.bootstrap, done)
    p_done.init_transactions(30)
    p_held = _txn_producer(b.bootstrap, held)
    p_held.init_transactions(30)
    p_held.begin_transaction()
    for i in range(6):
        p_held.produce(topic, value=f"h{i}".encode(), partition=i % 2)
    # EndTxn is answered once PrepareCommit is written; the markers are held back.
    p_held.commit_transaction(30)
    p_open = _txn_producer(b.bootstrap, open_)
    p_open.init_transactions(30)
    p_open.begin_transaction()
    p_open.produce(topic, value=b"o0", partition=0)
    p_open.flush(30)
    assert state_of(b.bootstrap, held) is not None
    assert [state_of(b.bootstrap, t)[0] for t in (held, open_, done)] == [  # type: ignore[index]
        "PrepareCommit", "Ongoing", "Empty"]
    assert read_values(b.bootstrap, topic, 2, "read_committed") == []  # the LSO waits
    b.kill9()
    b.overrides.remove("moldau.test.hold.transaction.markers=true")
    b.start()
    assert wait_state(b.bootstrap, held, "CompleteCommit") == "CompleteCommit"
    assert "resuming COMMIT markers on 2 partitions" in b.stderr_text()
    assert state_of(b.bootstrap, open_)[0] == "Ongoing"  # type: ignore[index]
    assert state_of(b.bootstrap, done)[0] == "Empty"  # type: ignore[index]
    # The producer of the ongoing transaction carries on against the restarted broker.
    p_open.produce(topic, value=b"o1", partition=1)
    p_open.commit_transaction(30)
    assert sorted(read_values(b.bootstrap, topic, 2, "read_committed")) == sorted(
        [f"h{i}" for i in range(6)] + ["o0", "o1"])
    for p in (p_done, p_held, p_open):
        p.flush(5)


def test_idle_transactional_id_expires(make_broker: MakeBroker) -> None:
    """An id idle past transactional.id.expiration.ms is removed with a tombstone: gone for
    the admin APIs, gone after a restart, and a new producer gets a fresh producer id."""
    b = make_broker("transactional.id.expiration.ms=1500")
    tid = unique("tid")
    p = _txn_producer(b.bootstrap, tid)
    p.init_transactions(30)
    before = state_of(b.bootstrap, tid)
    assert before is not None and before[0] == "Empty"
    deadline = time.monotonic() + 20
    while state_of(b.bootstrap, tid) is not None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert state_of(b.bootstrap, tid) is None
    assert "expired (idle longer than transactional.id.expiration.ms)" in b.stderr_text()
    p.flush(5)
    b.restart()
    assert state_of(b.bootstrap, tid) is None
    again = _txn_producer(b.bootstrap, tid)
    again.init_transactions(30)
    after = state_of(b.bootstrap, tid)
    assert after is not None and after[1] != before[1]
