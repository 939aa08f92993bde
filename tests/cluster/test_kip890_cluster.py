"""KIP-890 verification and DescribeProducers on three brokers over ZooKeeper.

The partition leaders here are not the transaction coordinator, so each leader verifies a
transaction's first batch with an AddPartitionsToTxn v5 to the coordinator's broker (peer
connections), and DescribeProducers is answered by leaders only.
"""

from __future__ import annotations

from kio.schema.describe_producers.v0.request import DescribeProducersRequest, TopicRequest
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v3.request import FindCoordinatorRequest

from tests.conftest import MakeBroker
from tests.integration.clients import unique
from tests.integration.kip890_wire import (
    add_partitions,
    end_txn,
    init_producer,
    produce,
    txn_batch,
)
from tests.integration.wire import WireClient

from .helpers import eventually
from .test_cluster_brokers import create_topic, describe, leaders_known, start_cluster

PARTITIONS = 6


def _coordinator(bootstrap: str, tid: str) -> int:
    found: list[int] = []

    def known() -> bool:
        with WireClient.to(bootstrap) as wire:
            r = wire.request(FindCoordinatorRequest(key=tid, key_type=1))
        found[:] = [int(r.node_id)] if r.error_code is ErrorCode.none else []
        return bool(found)

    eventually(known, what=f"a coordinator for {tid}")
    return found[0]


def test_leaders_verify_with_a_remote_coordinator(make_broker: MakeBroker,
                                                  zk_connect: str) -> None:
    brokers = start_cluster(make_broker, zk_connect)
    by_id = {i: b for i, b in enumerate(brokers, start=1)}
    topic = unique("kip890-cl")
    create_topic(brokers[0], topic, PARTITIONS, rf=2)
    eventually(leaders_known(brokers, topic, PARTITIONS), what="leaders on every broker")
    _, _, parts = describe(brokers[0], topic)
    # A transactional id whose coordinator leads neither of two partitions.
    for _ in range(50):
        tid = unique("kip890-cl-txn")
        coordinator = _coordinator(brokers[0].bootstrap, tid)
        remote = [p for p, (leader, _, _) in sorted(parts.items()) if leader != coordinator]
        if len(remote) >= 2:
            break
    added, other = remote[0], remote[1]
    leader_added, leader_other = parts[added][0], parts[other][0]

    with WireClient.to(by_id[coordinator].bootstrap) as coord:
        producer = init_producer(coord, tid)
        assert add_partitions(coord, tid, producer, topic, (added,)) == [ErrorCode.none]
        with WireClient.to(by_id[leader_added].bootstrap) as wire:
            answers = produce(wire, 11, tid, topic, {added: txn_batch(producer, 0, b"in")})
            assert answers[added].error_code is ErrorCode.none
        with WireClient.to(by_id[leader_other].bootstrap) as wire:
            answers = produce(wire, 11, tid, topic, {other: txn_batch(producer, 0, b"out")})
            assert answers[other].error_code is ErrorCode.transaction_abortable

        request = DescribeProducersRequest(topics=(
            TopicRequest(name=topic, partition_indexes=(added,)),))
        with WireClient.to(by_id[leader_added].bootstrap) as wire:
            (p,) = wire.request(request).topics[0].partitions
        assert p.error_code is ErrorCode.none
        (state,) = p.active_producers
        assert (state.producer_id, state.current_txn_start_offset) == (producer[0], 0)
        follower = next(r for r in parts[added][1] if r != leader_added)
        with WireClient.to(by_id[follower].bootstrap) as wire:
            (p,) = wire.request(request).topics[0].partitions
        assert p.error_code is ErrorCode.not_leader_or_follower
        assert end_txn(coord, 3, tid, producer, commit=False).error_code is ErrorCode.none
