"""The transaction coordinator's answers over raw requests, version by version: Kafka's
errors for each wrong request, the admin APIs' filters, EndTxn v5's epoch bump, and
AddPartitionsToTxn v4+ with several transactions and ``verify_only``.

Before the coordinator existed these APIs were not served at all (UNSUPPORTED_VERSION) and
FindCoordinator answered key type 1 with COORDINATOR_NOT_AVAILABLE.
"""

from __future__ import annotations

import datetime
import re
import time
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from moldau.protocol import apis
from moldau.protocol.codec import build
from tests.conftest import MakeBroker
from tests.helpers import BrokerProcess

from .clients import create_topic, unique
from .wire import WireClient, request_class


def _req(api_key: int, version: int, **fields: Any) -> Any:
    cls = request_class(api_key, version)
    nested = {name: value(cls) if callable(value) else value for name, value in fields.items()}
    return build(cls, **nested)


def _module(api_key: int, version: int) -> Any:
    import importlib
    cls = request_class(api_key, version)
    return importlib.import_module(cls.__module__)


def _find(client: WireClient, tid: str) -> None:
    response = client.request(_req(apis.FIND_COORDINATOR, 4, key_type=1,
                                   coordinator_keys=(tid,)))
    assert response.coordinators[0].error_code == ErrorCode.none


def _init(client: WireClient, tid: str, *, version: int = 4, timeout_ms: int = 60_000,
          pid: int = -1, epoch: int = -1) -> Any:
    return client.request(_req(apis.INIT_PRODUCER_ID, version, transactional_id=tid,
                               transaction_timeout=datetime.timedelta(milliseconds=timeout_ms),
                               producer_id=pid, producer_epoch=epoch))


def _add_v3(client: WireClient, version: int, tid: str, pid: int, epoch: int,
            partitions: dict[str, list[int]]) -> dict[tuple[str, int], ErrorCode]:
    m = _module(apis.ADD_PARTITIONS_TO_TXN, version)
    response = client.request(build(
        m.AddPartitionsToTxnRequest, v3_and_below_transactional_id=tid,
        v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=tuple(build(m.AddPartitionsToTxnTopic, name=t, partitions=tuple(ps))
                                  for t, ps in partitions.items())))
    return {(t.name, p.partition_index): p.partition_error_code
            for t in response.results_by_topic_v3_and_below for p in t.results_by_partition}


def _end(client: WireClient, version: int, tid: str, pid: int, epoch: int,
         commit: bool) -> Any:
    return client.request(_req(apis.END_TXN, version, transactional_id=tid, producer_id=pid,
                               producer_epoch=epoch, committed=commit))


def _list(client: WireClient, version: int = 2, **filters: Any) -> Any:
    return client.request(_req(apis.LIST_TRANSACTIONS, version, **filters))


@pytest.fixture
def topic(broker: BrokerProcess) -> str:
    name = unique("txnwire")
    create_topic(broker.bootstrap, name, partitions=2)
    return name


def test_errors_of_add_partitions_and_end_txn(broker: BrokerProcess, topic: str) -> None:
    tid = unique("tid")
    with WireClient.to(broker.bootstrap) as client:
        _find(client, tid)
        assert _init(client, tid, timeout_ms=900_001).error_code == \
            ErrorCode.invalid_transaction_timeout
        assert _init(client, tid, timeout_ms=0).error_code == \
            ErrorCode.invalid_transaction_timeout
        init = _init(client, tid)
        assert init.error_code == ErrorCode.none
        pid, epoch = init.producer_id, init.producer_epoch
        # Unknown id, wrong producer id, old epoch (v1: INVALID_PRODUCER_EPOCH, KIP-588).
        assert set(_add_v3(client, 3, unique("nope"), pid, epoch, {topic: [0]}).values()) == \
            {ErrorCode.invalid_producer_id_mapping}
        assert set(_add_v3(client, 3, tid, pid + 1000, epoch, {topic: [0]}).values()) == \
            {ErrorCode.invalid_producer_id_mapping}
        assert set(_add_v3(client, 1, tid, pid, epoch + 1, {topic: [0]}).values()) == \
            {ErrorCode.invalid_producer_epoch}
        assert set(_add_v3(client, 2, tid, pid, epoch + 1, {topic: [0]}).values()) == \
            {ErrorCode.producer_fenced}
        # An unknown partition fails the request; the others are not attempted.
        assert _add_v3(client, 3, tid, pid, epoch, {topic: [0, 7], "no-such-topic": [0]}) == {
            (topic, 0): ErrorCode.operation_not_attempted,
            (topic, 7): ErrorCode.unknown_topic_or_partition,
            ("no-such-topic", 0): ErrorCode.unknown_topic_or_partition}
        # Nothing added yet: EndTxn is INVALID_TXN_STATE.
        assert _end(client, 3, tid, pid, epoch, True).error_code == ErrorCode.invalid_txn_state
        assert _add_v3(client, 3, tid, pid, epoch, {topic: [0, 1]}) == {
            (topic, 0): ErrorCode.none, (topic, 1): ErrorCode.none}
        assert _end(client, 1, tid, pid, epoch + 1, True).error_code == \
            ErrorCode.invalid_producer_epoch
        assert _end(client, 3, tid, pid, epoch + 1, True).error_code == ErrorCode.producer_fenced
        assert _end(client, 3, tid, pid, epoch, True).error_code == ErrorCode.none
        # A retried commit succeeds; the opposite decision does not.
        deadline = time.monotonic() + 20
        while (_end(client, 3, tid, pid, epoch, True).error_code ==
               ErrorCode.concurrent_transactions and time.monotonic() < deadline):
            time.sleep(0.05)
        assert _end(client, 3, tid, pid, epoch, True).error_code == ErrorCode.none
        assert _end(client, 3, tid, pid, epoch, False).error_code == ErrorCode.invalid_txn_state
        # KIP-360: a stale pair is fenced (v3: INVALID_PRODUCER_EPOCH), the current one bumps.
        assert _init(client, tid, version=3, pid=pid, epoch=epoch + 5).error_code == \
            ErrorCode.invalid_producer_epoch
        assert _init(client, tid, version=4, pid=pid, epoch=epoch + 5).error_code == \
            ErrorCode.producer_fenced
        bumped = _init(client, tid, pid=pid, epoch=epoch)
        assert (bumped.error_code, bumped.producer_id, bumped.producer_epoch) == \
            (ErrorCode.none, pid, epoch + 1)


def test_add_offsets_and_end_txn_v5(broker: BrokerProcess, topic: str) -> None:
    tid = unique("tid")
    with WireClient.to(broker.bootstrap) as client:
        _find(client, tid)
        init = _init(client, tid)
        pid, epoch = init.producer_id, init.producer_epoch
        response = client.request(_req(apis.ADD_OFFSETS_TO_TXN, 4, transactional_id=tid,
                                       producer_id=pid, producer_epoch=epoch,
                                       group_id=unique("grp")))
        assert response.error_code == ErrorCode.none
        stale = client.request(_req(apis.ADD_OFFSETS_TO_TXN, 1, transactional_id=tid,
                                    producer_id=pid, producer_epoch=epoch + 1, group_id="g"))
        assert stale.error_code == ErrorCode.invalid_producer_epoch
        [listed] = _list(client, transactional_id_pattern=re.escape(tid)).transaction_states
        assert listed.transaction_state == "Ongoing"
        # Transactions version 2: the epoch is bumped by the commit itself.
        end = _end(client, 5, tid, pid, epoch, True)
        assert (end.error_code, end.producer_id, end.producer_epoch) == \
            (ErrorCode.none, pid, epoch + 1)
        deadline = time.monotonic() + 20
        while _list(client, transactional_id_pattern=re.escape(tid)).transaction_states[0] \
                .transaction_state != "CompleteCommit" and time.monotonic() < deadline:
            time.sleep(0.05)
        # Its retry (with the epoch it used) gets the same answer.
        retry = _end(client, 5, tid, pid, epoch, True)
        assert (retry.error_code, retry.producer_id, retry.producer_epoch) == \
            (ErrorCode.none, pid, epoch + 1)


def test_add_partitions_v4_batches_and_verify_only(broker: BrokerProcess, topic: str) -> None:
    tids = [unique("tid"), unique("tid")]
    m = _module(apis.ADD_PARTITIONS_TO_TXN, 5)

    def txn(tid: str, pid: int, epoch: int, verify_only: bool) -> Any:
        return build(m.AddPartitionsToTxnTransaction, transactional_id=tid, producer_id=pid,
                     producer_epoch=epoch, verify_only=verify_only,
                     topics=(build(m.AddPartitionsToTxnTopic, name=topic, partitions=(0, 1)),))

    with WireClient.to(broker.bootstrap) as client:
        producers = []
        for tid in tids:
            _find(client, tid)
            init = _init(client, tid)
            producers.append((init.producer_id, init.producer_epoch))

        def send(*transactions: Any) -> dict[str, set[ErrorCode]]:
            response = client.request(build(m.AddPartitionsToTxnRequest,
                                            transactions=transactions))
            assert response.error_code == ErrorCode.none
            return {r.transactional_id: {p.partition_error_code for t in r.topic_results
                                         for p in t.results_by_partition}
                    for r in response.results_by_transaction}

        (p0, e0), (p1, e1) = producers
        assert send(txn(tids[0], p0, e0, True), txn(tids[1], p1, e1, True)) == {
            tids[0]: {ErrorCode.invalid_txn_state}, tids[1]: {ErrorCode.invalid_txn_state}}
        assert send(txn(tids[0], p0, e0, False), txn(tids[1], p1, e1 + 1, False)) == {
            tids[0]: {ErrorCode.none}, tids[1]: {ErrorCode.producer_fenced}}
        assert send(txn(tids[0], p0, e0, True)) == {tids[0]: {ErrorCode.none}}


def test_describe_and_list_filters(broker: BrokerProcess, topic: str) -> None:
    ongoing, empty = unique("tid"), unique("tid")
    with WireClient.to(broker.bootstrap) as client:
        for tid in (ongoing, empty):
            _find(client, tid)
        first = _init(client, ongoing)
        second = _init(client, empty)
        assert set(_add_v3(client, 3, ongoing, first.producer_id, first.producer_epoch,
                           {topic: [1]}).values()) == {ErrorCode.none}
        described = client.request(_req(apis.DESCRIBE_TRANSACTIONS, 0,
                                        transactional_ids=(ongoing, unique("nope"))))
        found, missing = described.transaction_states
        assert (found.error_code, found.transaction_state, found.producer_id) == \
            (ErrorCode.none, "Ongoing", first.producer_id)
        assert found.transaction_timeout == datetime.timedelta(minutes=1)
        assert [(t.topic, tuple(t.partitions)) for t in found.topics] == [(topic, (1,))]
        assert missing.error_code == ErrorCode.transactional_id_not_found

        def ids(response: Any) -> set[str]:
            return {t.transactional_id for t in response.transaction_states} & {ongoing, empty}

        assert ids(_list(client, 0)) == {ongoing, empty}
        by_state = _list(client, 0, state_filters=("Ongoing", "Bogus"))
        assert ids(by_state) == {ongoing}
        assert tuple(by_state.unknown_state_filters) == ("Bogus",)
        assert ids(_list(client, 0, producer_id_filters=(second.producer_id,))) == {empty}
        time.sleep(0.3)
        # v1: only transactions running longer than the duration (on the start time).
        assert ongoing in ids(_list(client, 1, duration_filter=100))
        assert ongoing not in ids(_list(client, 1, duration_filter=3_600_000))
        # v2: the id pattern is a regular expression over the whole id.
        assert ids(_list(client, 2, transactional_id_pattern=re.escape(empty))) == {empty}
        bad = _list(client, 2, transactional_id_pattern="(")
        assert bad.error_code == ErrorCode.invalid_regular_expression


def test_state_topic_made_by_hand_is_coordinated(make_broker: MakeBroker) -> None:
    """A lone broker coordinates ``__transaction_state`` however it was created (here by
    CreateTopics before any FindCoordinator)."""
    b = make_broker()
    create_topic(b.bootstrap, "__transaction_state", partitions=3)
    tid = unique("tid")
    with WireClient.to(b.bootstrap) as client:
        _find(client, tid)
        init = _init(client, tid)
        assert (init.error_code, init.producer_epoch) == (ErrorCode.none, 0)
