"""Transactional offsets through a kill -9 of the group coordinator, on three brokers.

The new leader of the group's ``__consumer_offsets`` partition replays it from its own copy:
offsets of a transaction whose COMMIT marker is there are committed, those of an aborted one
are gone, and those of a transaction still open are pending again (UNSTABLE_OFFSET_COMMIT for
a stable fetch) until its marker reaches the new leader. Raw requests play the transaction
coordinator (TxnOffsetCommit, WriteTxnMarkers), so only the group side is under test.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from tests.conftest import MakeBroker
from tests.integration.test_txn_offsets import (
    end_transaction,
    fetch,
    new_producer_id,
    plain_commit,
    txn_commit,
)
from tests.integration.wire import WireClient

from .helpers import eventually
from .test_cluster_brokers import describe
from .test_coordinator_failover import OFFSETS, _cluster


def _serves(client: WireClient, group: str, topic: str) -> bool:
    """Whether the broker answers the group's OffsetFetch (it knows it leads and loaded)."""
    try:
        fetch(client, group, topic, (0,), stable=False)
    except AssertionError:
        return False
    return True


def test_txn_offsets_survive_a_coordinator_kill9(make_broker: MakeBroker, zk_connect: str,
                                                 topic_name: str) -> None:
    brokers = _cluster(make_broker, zk_connect, topic_name)
    coordinator = describe(brokers[0], OFFSETS)[2][0][0]
    groups = {kind: f"{topic_name}-{kind}" for kind in ("commit", "abort", "open")}
    tp = (topic_name, 0)
    with WireClient.to(brokers[coordinator - 1].bootstrap) as client:
        pids = {kind: new_producer_id(client) for kind in groups}
        for kind, group in groups.items():
            plain_commit(client, group, topic_name, {0: 5})
            assert txn_commit(client, group, pids[kind], {tp: 10}) == {tp: ErrorCode.none}
        end_transaction(client, groups["commit"], pids["commit"], commit=True)
        end_transaction(client, groups["abort"], pids["abort"], commit=False)
    expected = {"commit": (10, ErrorCode.none), "abort": (5, ErrorCode.none),
                "open": (-1, ErrorCode.unstable_offset_commit)}
    brokers[coordinator - 1].kill9()
    survivors = [b for i, b in enumerate(brokers, 1) if i != coordinator]
    eventually(lambda: describe(survivors[0], OFFSETS)[2][0][0] not in (coordinator, -1),
               what="a new leader of the offsets partition")
    new_leader = describe(survivors[0], OFFSETS)[2][0][0]
    with WireClient.to(brokers[new_leader - 1].bootstrap) as client:
        eventually(lambda: _serves(client, groups["commit"], topic_name),
                   what="the new leader serving the group")
        for kind, group in groups.items():
            assert fetch(client, group, topic_name, (0,), stable=True) == {0: expected[kind]}, \
                kind
        # The open transaction ends on the new leader: its offsets become committed there.
        end_transaction(client, groups["open"], pids["open"], commit=True)
        assert fetch(client, groups["open"], topic_name, (0,), stable=True) == {
            0: (10, ErrorCode.none)}
