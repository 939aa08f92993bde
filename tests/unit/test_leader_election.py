"""The election rules of cluster/leader_election.py, as Kafka 3.9's controller applies them,
and the /admin/preferred_replica_election znode as Kafka's tools write it."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from moldau.cluster import znodes
from moldau.cluster.leader_election import (
    PREFERRED,
    UNCLEAN,
    choose_leader,
    election_needed,
    imbalanced,
    not_available,
)


def state(leader: int, *isr: int) -> znodes.PartitionState:
    return znodes.PartitionState(leader, 4, tuple(isr), 1, zk_version=7)


def test_preferred_needs_the_first_replica_live_and_in_sync() -> None:
    replicas = [1, 2, 3]
    assert election_needed(PREFERRED, replicas, state(2, 1, 2, 3), {1, 2, 3})
    assert not election_needed(PREFERRED, replicas, state(1, 1, 2, 3), {2, 3})  # leads, dead
    assert choose_leader(PREFERRED, replicas, state(2, 3, 2, 1), {1, 2, 3}) == (1, (3, 2, 1))
    assert choose_leader(PREFERRED, replicas, state(2, 2, 3), {1, 2, 3}) is None  # not in ISR
    assert choose_leader(PREFERRED, replicas, state(2, 1, 2, 3), {2, 3}) is None  # not live
    assert choose_leader(PREFERRED, replicas, state(-1, 1), {1}) == (1, (1,))  # offline


def test_unclean_acts_only_without_a_live_leader() -> None:
    replicas = [1, 2, 3]
    assert not election_needed(UNCLEAN, replicas, state(2, 2), {1, 2, 3})
    assert election_needed(UNCLEAN, replicas, state(-1, 1), {2})
    assert election_needed(UNCLEAN, replicas, state(1, 1, 3), {2, 3})  # the leader is dead
    # An in-sync live replica first; dead ones leave the ISR.
    assert choose_leader(UNCLEAN, replicas, state(1, 1, 3), {2, 3}) == (3, (3,))
    # Else the first live replica, alone in the ISR.
    assert choose_leader(UNCLEAN, replicas, state(-1, 1), {3, 2}) == (2, (2,))
    assert choose_leader(UNCLEAN, replicas, state(-1, 1), set()) is None


def test_failures_carry_kafkas_codes_and_messages() -> None:
    preferred = not_available(PREFERRED, ("t", 3))
    assert preferred.code == ErrorCode.preferred_leader_not_available
    assert preferred.message == ("Failed to elect leader for partition t-3 under strategy "
                                 "PreferredReplicaPartitionLeaderElectionStrategy")
    unclean = not_available(UNCLEAN, ("t", 0))
    assert unclean.code == ErrorCode.eligible_leaders_not_available
    assert unclean.message is not None and unclean.message.endswith(
        "OfflinePartitionLeaderElectionStrategy(true)")


def test_imbalance_is_per_broker_and_strictly_above_the_percentage() -> None:
    by_preferred = {1: [("a", p) for p in range(10)], 2: [("b", 0), ("b", 1)]}
    leaders = {("a", p): 1 for p in range(10)} | {("b", 0): 2, ("b", 1): 1}
    leaders[("a", 0)] = 2  # 10 % of broker 1's partitions led elsewhere: not above 10 %
    assert imbalanced(by_preferred, leaders, 10) == [("b", 1)]  # 50 % for broker 2
    leaders[("a", 1)] = 3
    assert imbalanced(by_preferred, leaders, 10) == [("a", 0), ("a", 1), ("b", 1)]
    assert imbalanced(by_preferred, leaders, 50) == []
    # A partition without a state yet is not led elsewhere.
    assert imbalanced({3: [("c", 0)]}, {}, 0) == []


def test_preferred_replica_election_znode_as_kafka_writes_it() -> None:
    data = znodes.encode_preferred_replica_election([("t", 0), ("u", 2)])
    assert data == (b'{"version":1,"partitions":[{"topic":"t","partition":0},'
                    b'{"topic":"u","partition":2}]}')
    assert znodes.decode_preferred_replica_election(data) == {("t", 0), ("u", 2)}
    for bad in (b"", b"{", b'{"version":1}', b'{"partitions":[{"topic":"t"}]}', b"[1]"):
        with pytest.raises(ValueError):
            znodes.decode_preferred_replica_election(bad)
