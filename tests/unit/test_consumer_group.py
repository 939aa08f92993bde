"""The KIP-848 consumer group state machine and its assignors, driven by hand with a fake clock."""

from __future__ import annotations

import itertools

import pytest
from kio.schema.errors import ErrorCode

from moldau.coordinator.assignors import range_assign, uniform_assign
from moldau.coordinator.consumer_group import (
    ConsumerGroup,
    ConsumerGroupConfig,
    GroupState,
    HeartbeatRequest,
    HeartbeatResponse,
    MemberState,
    Partitions,
    validate_request,
)

TOPICS = {"t": 4}
SESSION = 45_000
REBALANCE = 30_000


class Harness:
    def __init__(self, topics: dict[str, int] | None = None) -> None:
        self.group = ConsumerGroup("g", ConsumerGroupConfig())
        self.topics = dict(topics or TOPICS)
        self.now = 0
        self._ids = (f"m{i}" for i in itertools.count(1))

    def hb(self, member_id: str, epoch: int, owned: Partitions | None = None,
           topics: tuple[str, ...] | None = None, **kw: object) -> HeartbeatResponse:
        req = HeartbeatRequest(member_id=member_id, member_epoch=epoch, owned_partitions=owned,
                               subscribed_topics=topics, **kw)  # type: ignore[arg-type]
        return self.group.heartbeat(req, self.topics, self.now, lambda: next(self._ids))

    def join(self, topics: tuple[str, ...] = ("t",), **kw: object) -> HeartbeatResponse:
        resp = self.hb("", 0, None, topics, rebalance_timeout_ms=REBALANCE, **kw)
        assert resp.error == ErrorCode.none
        return resp


def tps(*parts: int, topic: str = "t") -> Partitions:
    return frozenset((topic, p) for p in parts)


def test_first_member_gets_everything_and_converges() -> None:
    h = Harness()
    r = h.join()
    assert r.member_id == "m1"
    assert r.member_epoch == 1
    assert r.assignment == tps(0, 1, 2, 3)
    assert r.heartbeat_interval_ms == 5000
    assert h.group.state is GroupState.STABLE
    # A steady heartbeat reporting what it owns gets no assignment back.
    again = h.hb("m1", 1, tps(0, 1, 2, 3))
    assert again.error == ErrorCode.none and again.assignment is None and again.member_epoch == 1


def test_revocation_before_reassignment() -> None:
    h = Harness()
    h.join()
    r2 = h.join()
    assert r2.member_id == "m2"
    # m2 is at the new epoch but gets nothing yet: m1 still owns everything.
    assert r2.member_epoch == 2
    assert r2.assignment == frozenset()
    assert h.group.members["m2"].state is MemberState.UNRELEASED_PARTITIONS
    # m1 is asked to revoke two partitions; its epoch stays until it has.
    r1 = h.hb("m1", 1, tps(0, 1, 2, 3))
    assert r1.member_epoch == 1
    kept = r1.assignment
    assert kept is not None and len(kept) == 2
    assert h.group.members["m1"].state is MemberState.UNREVOKED_PARTITIONS
    # While m1 still reports the revoked ones, m2 gets nothing.
    assert h.hb("m2", 2, frozenset()).assignment is None
    assert h.hb("m1", 1, tps(0, 1, 2, 3)).member_epoch == 1
    # m1 revokes: it converges to epoch 2, and m2 can now take the released partitions.
    r1 = h.hb("m1", 1, kept)
    assert r1.member_epoch == 2
    r2 = h.hb("m2", 2, frozenset())
    assert r2.assignment == tps(0, 1, 2, 3) - kept
    assert h.group.state is GroupState.STABLE


def converge(h: Harness, rounds: int = 4) -> dict[str, Partitions]:
    """Heartbeat every member a few times, each reporting exactly what it was given."""
    owned = {m.member_id: m.assigned for m in h.group.members.values()}
    for _ in range(rounds):
        for member_id in list(h.group.members):
            member = h.group.members[member_id]
            r = h.hb(member_id, member.member_epoch, owned[member_id])
            assert r.error == ErrorCode.none
            if r.assignment is not None:
                owned[member_id] = r.assignment
    return owned


def test_partitions_are_never_owned_twice_and_group_converges() -> None:
    h = Harness({"t": 7})
    for _ in range(3):
        h.join()
    owned = converge(h)
    assert h.group.state is GroupState.STABLE
    allp = [tp for parts in owned.values() for tp in parts]
    assert sorted(allp) == sorted(tps(*range(7)))
    assert sorted(len(p) for p in owned.values()) == [2, 2, 3]


def test_partition_count_change_bumps_group_epoch() -> None:
    h = Harness()
    h.join()
    epoch = h.group.group_epoch
    h.topics["t"] = 6
    r = h.hb("m1", 1, tps(0, 1, 2, 3))
    assert h.group.group_epoch == epoch + 1
    assert r.assignment == tps(*range(6))
    assert r.member_epoch == h.group.group_epoch


def test_epoch_fencing() -> None:
    h = Harness()
    h.join()
    h.join()
    h.hb("m1", 1, tps(0, 1, 2, 3))  # asked to revoke; epoch stays 1
    assert h.hb("m1", 5, None).error == ErrorCode.fenced_member_epoch
    # Unknown member.
    assert h.hb("nobody", 3, None).error == ErrorCode.unknown_member_id
    # m2 is at epoch 2; an older epoch it never had is fenced.
    assert h.hb("m2", 1, frozenset()).error == ErrorCode.fenced_member_epoch


def test_previous_epoch_is_tolerated_once_response_was_lost() -> None:
    h = Harness()
    h.join()
    h.topics["t"] = 5
    h.hb("m1", 1, tps(0, 1, 2, 3))  # now at epoch 2 with 5 partitions; response "lost"
    r = h.hb("m1", 1, tps(0, 1, 2, 3))
    assert r.error == ErrorCode.none and r.member_epoch == 2 and r.assignment == tps(*range(5))
    # Without owned partitions the old epoch cannot be trusted.
    assert h.hb("m1", 1, None).error == ErrorCode.fenced_member_epoch


def test_session_expiry_fences_and_frees_partitions() -> None:
    h = Harness()
    h.join()
    h.now = 1000
    h.join()
    assert h.group.next_deadline() == SESSION
    h.now = SESSION
    assert h.group.expire(h.now) == ["m1"]
    assert "m1" not in h.group.members
    r = h.hb("m2", 2, frozenset())
    assert r.assignment == tps(0, 1, 2, 3)
    assert h.hb("m1", 1, None).error == ErrorCode.unknown_member_id


def test_member_that_does_not_revoke_in_time_is_fenced() -> None:
    h = Harness()
    h.join()
    h.join()
    h.hb("m1", 1, tps(0, 1, 2, 3))
    h.now = 10_000
    h.hb("m2", 2, frozenset())
    h.now = REBALANCE
    assert h.group.expire(h.now) == ["m1"]


def test_leave_gives_partitions_to_the_rest() -> None:
    h = Harness()
    h.join()
    h.join()
    owned = converge(h)
    assert all(len(p) == 2 for p in owned.values())
    r = h.hb("m1", h.group.members["m1"].member_epoch, None, None)
    left = h.group.heartbeat(HeartbeatRequest("m1", -1), h.topics, h.now, lambda: "x")
    assert left.error == ErrorCode.none and left.member_epoch == -1
    assert r.error == ErrorCode.none
    r2 = h.hb("m2", h.group.members["m2"].member_epoch, owned["m2"])
    assert r2.assignment == tps(0, 1, 2, 3)
    left2 = h.group.heartbeat(HeartbeatRequest("m2", -1), h.topics, h.now, lambda: "x")
    assert left2.error == ErrorCode.none
    assert h.group.state is GroupState.EMPTY


def test_static_member_leaves_and_returns_without_rebalance() -> None:
    h = Harness()
    h.join(instance_id="i1")
    epoch = h.group.group_epoch
    r = h.group.heartbeat(HeartbeatRequest("m1", -2, instance_id="i1"), h.topics, 0, lambda: "")
    assert r.error == ErrorCode.none
    # The instance id is taken while the old member is active, free once it left.
    back = h.join(instance_id="i1")
    assert back.member_id == "m2"
    assert back.assignment == tps(0, 1, 2, 3)
    assert h.group.group_epoch == epoch
    assert h.hb("", 0, None, ("t",), rebalance_timeout_ms=1,
                instance_id="i1").error == ErrorCode.unreleased_instance_id


def test_unsupported_assignor_and_range() -> None:
    h = Harness()
    r = h.hb("", 0, None, ("t",), rebalance_timeout_ms=1, server_assignor="sticky")
    assert r.error == ErrorCode.unsupported_assignor
    h.join(server_assignor="range")
    h.join(server_assignor="range")
    assert h.group.assignor == "range"
    assert h.group.target == {"m1": tps(0, 1), "m2": tps(2, 3)}


def test_validate_request() -> None:
    assert validate_request(HeartbeatRequest("", 0, rebalance_timeout_ms=1,
                                             subscribed_topics=("t",)), 0) is None
    assert validate_request(HeartbeatRequest("", 0, rebalance_timeout_ms=1,
                                             subscribed_topics=("t",)), 1) is not None
    assert validate_request(HeartbeatRequest("a", 0, subscribed_topics=("t",)), 1) is not None
    assert validate_request(HeartbeatRequest("a", 0, rebalance_timeout_ms=1), 1) is not None
    assert validate_request(HeartbeatRequest("a", 0, rebalance_timeout_ms=1,
                                             subscribed_topics=("t",),
                                             owned_partitions=tps(0)), 1) is not None
    assert validate_request(HeartbeatRequest("a", -2), 1) is not None
    assert validate_request(HeartbeatRequest("", 3), 0) is not None


def test_offset_commit_validation() -> None:
    h = Harness()
    assert h.group.validate_offset_commit("", -1) == ErrorCode.none
    h.join()
    h.join()
    assert h.group.validate_offset_commit("", -1) == ErrorCode.unknown_member_id
    assert h.group.validate_offset_commit("m1", 1) == ErrorCode.none
    assert h.group.validate_offset_commit("m2", 1) == ErrorCode.stale_member_epoch
    assert h.group.validate_offset_commit("m2", 9) == ErrorCode.fenced_member_epoch
    assert h.group.validate_offset_commit("zz", 1) == ErrorCode.unknown_member_id
    assert h.group.validate_offset_fetch("m2", 2) == ErrorCode.none
    assert h.group.validate_offset_fetch("m2", 1) == ErrorCode.stale_member_epoch


@pytest.mark.parametrize("members", [1, 2, 3, 5])
def test_uniform_is_balanced_and_sticky(members: int) -> None:
    subs = {f"m{i}": frozenset({"a", "b"}) for i in range(members)}
    counts = {"a": 5, "b": 3}
    first = uniform_assign(subs, counts, {})
    sizes = sorted(len(p) for p in first.values())
    assert sizes[-1] - sizes[0] <= 1
    assert sum(sizes) == 8
    # Adding a member moves only what it needs to.
    subs["new"] = frozenset({"a", "b"})
    second = uniform_assign(subs, counts, first)
    moved = sum(len(first[m] - second[m]) for m in first)
    assert moved == len(second["new"])


def test_uniform_heterogeneous() -> None:
    subs = {"x": frozenset({"a"}), "y": frozenset({"a", "b"})}
    result = uniform_assign(subs, {"a": 2, "b": 2}, {})
    assert result["x"] <= tps(0, 1, topic="a")
    assert len(result["x"]) == 2 or len(result["y"]) - len(result["x"]) <= 1
    assert result["x"] | result["y"] == tps(0, 1, topic="a") | tps(0, 1, topic="b")


def test_range_uneven() -> None:
    result = range_assign({"b": frozenset({"t"}), "a": frozenset({"t"})}, {"t": 5})
    assert result == {"a": tps(0, 1, 2), "b": tps(3, 4)}


def test_rebalances_count_new_target_assignment_epochs() -> None:
    """One per new assignment epoch (a join, a leave, more partitions); steady heartbeats and
    reconciliation steps add none."""
    h = Harness()
    h.join()
    assert h.group.rebalances == 1
    h.hb("m1", 1, tps(0, 1, 2, 3))
    assert h.group.rebalances == 1
    h.join()
    h.hb("m1", 1, tps(0, 1, 2, 3))  # revoking: the target is unchanged
    assert h.group.rebalances == 2
    h.topics["t"] = 6
    h.hb("m2", 2, frozenset())
    assert h.group.rebalances == 3
    h.hb("m2", -1)  # leaves
    assert h.group.rebalances == 4
