"""The transaction coordinator on one broker, with confluent-kafka's transactional Producer.

Before the coordinator existed, ``init_transactions()`` waited on COORDINATOR_NOT_AVAILABLE
until it timed out; every test here failed there.
"""

from __future__ import annotations

import re
import time
from typing import Any

import pytest
from confluent_kafka import KafkaException
from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest
from kio.schema.errors import ErrorCode
from kio.schema.list_transactions.v2.request import ListTransactionsRequest

from tests.helpers import BrokerProcess

from .clients import create_topic, producer, unique, watermarks
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
    # 15 data records, plus a marker per partition per transaction when markers are written.
    total = sum(watermarks(broker.bootstrap, topic, part)[1] for part in range(2))
    assert total >= 15


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


def test_invalid_timeout_is_refused(broker: BrokerProcess) -> None:
    p = _txn_producer(broker.bootstrap, unique("tid"), **{"transaction.timeout.ms": 900_001})
    with pytest.raises(KafkaException) as info:
        p.init_transactions(30)
    assert "timeout" in str(info.value).lower()


def test_timed_out_transaction_is_aborted(broker: BrokerProcess) -> None:
    topic = unique("txn")
    create_topic(broker.bootstrap, topic)
    p = _txn_producer(broker.bootstrap, unique("tid"), **{"transaction.timeout.ms": 2000})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, value=b"left open")
    p.flush(30)
    time.sleep(4)  # the broker aborts it and fences this producer's epoch
    with pytest.raises(KafkaException):
        p.commit_transaction(30)
