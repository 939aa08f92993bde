"""Reassignment arithmetic and checks (Kafka's ReplicaAssignment and validateReplicas), and the
replication throttle's budget, without a cluster."""

from __future__ import annotations

import time

from kio.schema.errors import ErrorCode

from moldau.cluster.reassignment import ReplicaAssignment, validate
from moldau.replica.throttle import ALL, ReplicationQuota, throttled_partitions


def test_reassign_to_builds_kafkas_union_adding_and_removing() -> None:
    now = ReplicaAssignment((1, 2))
    moving = now.reassign_to([2, 3])
    assert moving == ReplicaAssignment((2, 3, 1), adding=(3,), removing=(1,))
    assert moving.being_reassigned and moving.origin == (2, 1) and moving.target == (2, 3)
    # Cancelling reverts to the original replicas, in the union's order (as Kafka does).
    assert moving.reassign_to(moving.origin) == ReplicaAssignment((2, 1))
    # A new target replaces the old one; the original replicas stay the origin.
    assert moving.reassign_to([3, 4]) == ReplicaAssignment((3, 4, 2, 1), (3, 4), (2, 1))
    assert not now.reassign_to([2, 1]).being_reassigned


def test_validate_refuses_what_kafka_refuses() -> None:
    now = ReplicaAssignment((1, 2))
    live = {1, 2, 3}
    assert validate([2, 3], now, live) is None
    assert validate([], now, live) == (ErrorCode.invalid_replica_assignment,
                                       "Empty replica list specified in partition reassignment.")
    code, message = validate([2, 2], now, live) or (None, "")
    assert code == ErrorCode.invalid_replica_assignment and "Duplicate replica ids" in message
    code, message = validate([1, -1], now, live) or (None, "")
    assert code == ErrorCode.invalid_replica_assignment and "Invalid broker id" in message
    code, message = validate([1, 9], now, live) or (None, "")
    assert code == ErrorCode.invalid_replica_assignment
    assert message == ("Replica assignment has brokers that are not alive. Replica list: "
                       "ArrayBuffer(9), live broker list: Set(1, 2, 3)")
    # Replicas already assigned may be dead: only new ones must be alive.
    assert validate([2, 1], now, {1}) is None
    code, _ = validate([1, 2, 3], now, live, allow_replication_factor_change=False) or (None, "")
    assert code == ErrorCode.invalid_replication_factor
    assert validate([2, 3], now, live, allow_replication_factor_change=False) is None


def test_throttled_partitions_of_this_broker() -> None:
    assert throttled_partitions(("*",), 1) is ALL
    assert throttled_partitions(("0:1", "1:2", "2:1"), 1) == {0, 2}
    assert throttled_partitions(("0:1", "1:2"), 3) == frozenset()
    assert throttled_partitions((), 3) == frozenset()


def test_quota_budget() -> None:
    quota = ReplicationQuota()
    assert not quota.active
    quota.set_topic("t", frozenset({0}))
    assert not quota.active  # no rate yet
    quota.set_rate(1000)
    assert quota.active and quota.is_throttled(("t", 0)) and not quota.is_throttled(("t", 1))
    assert not quota.exceeded() and 0 < quota.available() <= 1000
    quota.record(3000)  # a whole batch may overshoot the budget
    assert quota.exceeded() and quota.available() == 0
    assert 1.5 < quota.delay_s() <= 2.1
    quota.set_topic("t", ALL)
    assert quota.is_throttled(("t", 7))
    quota.set_topic("t", frozenset())
    assert not quota.active
    fast = ReplicationQuota()
    fast.set_rate(1_000_000)
    fast.set_topic("t", ALL)
    fast.record(1_100_000)
    time.sleep(0.2)
    assert not fast.exceeded()  # 0.2 s refilled 200,000 bytes
