"""The group coordinator's state machines, driven by hand with a fake clock.

A small harness plays the broker's part: it hands out waiter tokens, "appends" writes to an
in-memory list (or fails them on demand), feeds completions back and collects replies. Every
test can thus see exactly which request is answered when, and replay what was written.
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Iterable
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from moldau.coordinator.effects import Effects, JoinResponse, SyncResponse
from moldau.coordinator.group import (
    NEW_MEMBER_JOIN_TIMEOUT_MS,
    GroupLimits,
    GroupState,
    JoinRequest,
)
from moldau.coordinator.manager import (
    CommittedOffset,
    CoordinatorConfig,
    GroupCoordinator,
    GroupLoader,
)
from moldau.coordinator.records import GroupMetadataKey, OffsetCommitKey, decode_key

SESSION = 10_000
REBALANCE = 30_000
DAY = 24 * 3600 * 1000


def subscription(*topics: str) -> bytes:
    """ConsumerProtocolSubscription v0: the topics, then null user data."""
    out = struct.pack(">hi", 0, len(topics))
    for topic in topics:
        out += struct.pack(">h", len(topic)) + topic.encode()
    return out + struct.pack(">i", -1)


RANGE = (("range", subscription("orders")),)


class Harness:
    """The broker's side of the coordinator, in memory."""

    def __init__(self, **limits: Any) -> None:
        self.now = 1_000_000
        ids = itertools.count(1)
        config = CoordinatorConfig(
            limits=GroupLimits(**{"initial_rebalance_delay_ms": 0, **limits}),
            offsets_retention_ms=DAY,
            offsets_retention_check_interval_ms=60_000,
        )
        self.coordinator = GroupCoordinator(config, self.now,
                                            new_member_id=lambda p: f"{p}-{next(ids)}")
        self._tokens = itertools.count(1)
        self.replies: dict[int, JoinResponse | SyncResponse] = {}
        self.written: list[tuple[bytes, bytes | None]] = []
        self.fail_writes: ErrorCode | None = None

    def apply(self, effects: Effects) -> None:
        queue = [effects]
        while queue:
            current = queue.pop(0)
            for write in current.writes:
                if self.fail_writes is None:
                    self.written.extend(write.records)
                if write.completion is not None:
                    queue.append(self.coordinator.write_completed(
                        write.completion, self.fail_writes, self.now))
            for reply in current.replies:
                assert reply.token not in self.replies, "a request answered twice"
                self.replies[reply.token] = reply.response

    def join(self, member_id: str = "", *, group: str = "g", client: str = "c",
             instance: str | None = None, protocols: Any = RANGE, session: int = SESSION,
             rebalance: int = REBALANCE, protocol_type: str = "consumer",
             v4: bool = True, skip: bool = False) -> int:
        token = next(self._tokens)
        request = JoinRequest(member_id, instance, client, "/127.0.0.1", session, rebalance,
                              protocol_type, tuple(protocols), v4, skip)
        self.apply(self.coordinator.join_group(group, request, token, self.now))
        return token

    def sync(self, member_id: str, generation: int, assignments: dict[str, bytes] | None = None,
             *, group: str = "g", instance: str | None = None,
             protocol_name: str | None = None) -> int:
        token = next(self._tokens)
        self.apply(self.coordinator.sync_group(group, member_id, instance, generation, None,
                                               protocol_name, assignments or {}, token,
                                               self.now))
        return token

    def heartbeat(self, member_id: str, generation: int, *, group: str = "g",
                  instance: str | None = None) -> ErrorCode:
        code = self.coordinator.heartbeat(group, member_id, instance, generation, self.now)
        return code

    def leave(self, *members: tuple[str, str | None], group: str = "g") -> list[ErrorCode]:
        top, codes, effects = self.coordinator.leave_group(group, members, self.now)
        self.apply(effects)
        assert top is ErrorCode.none
        return codes

    def advance(self, ms: int) -> None:
        """Let ``ms`` pass, firing deadlines the way the broker's timer would."""
        end = self.now + ms
        while (deadline := self.coordinator.next_deadline()) <= end:
            self.now = max(self.now, deadline)
            self.apply(self.coordinator.on_timer(self.now))
        self.now = end

    def run(self, ms: int, *alive: tuple[str, int], step: int = 2000) -> None:
        """Let ``ms`` pass while the ``alive`` (member id, generation) pairs heartbeat."""
        end = self.now + ms
        while self.now < end:
            self.advance(min(step, end - self.now))
            for member_id, generation in alive:
                self.heartbeat(member_id, generation)

    def answer(self, token: int) -> Any:
        return self.replies.get(token)

    def member_id(self, **kwargs: Any) -> str:
        """A KIP-394 join: get the id, to join with next."""
        response = self.answer(self.join(**kwargs))
        assert response.error is ErrorCode.member_id_required
        return str(response.member_id)

    def stable_group(self, count: int, *, group: str = "g", **kwargs: Any) -> list[str]:
        """``count`` members that joined together and synced; returns ids, leader first."""
        ids = [self.member_id(group=group, client=f"c{i}", **kwargs) for i in range(count)]
        tokens = [self.join(mid, group=group, client=f"c{i}", **kwargs)
                  for i, mid in enumerate(ids)]
        self.advance(0)
        answers = [self.answer(t) for t in tokens]
        assert all(a is not None and a.error is ErrorCode.none for a in answers), answers
        leader = answers[0].leader
        generation = answers[0].generation_id
        assignment = {mid: f"part-of-{mid}".encode() for mid in ids}
        syncs = [self.sync(leader, generation, assignment, group=group)]
        syncs += [self.sync(mid, generation, group=group) for mid in ids if mid != leader]
        assert all(self.answer(t).error is ErrorCode.none for t in syncs)
        assert self.group(group).state is GroupState.STABLE
        return [leader, *[mid for mid in ids if mid != leader]]

    def group(self, group: str = "g") -> Any:
        return self.coordinator.group(group)

    def commit(self, offsets: Iterable[tuple[str, int, int]], *, group: str = "g",
               member: str = "", generation: int = -1, metadata: str | None = None,
               version_error: ErrorCode = ErrorCode.illegal_generation) -> dict[Any, ErrorCode]:
        plan = self.coordinator.prepare_commit(
            group, member, None, generation,
            [CommittedOffset(t, p, o, metadata=metadata) for t, p, o in offsets], self.now,
            unknown_group_error=version_error)
        if plan.write is not None and self.fail_writes is None:
            self.written.extend(plan.write.records)
        return self.coordinator.complete_commit(plan, self.fail_writes, self.now)

    def replayed(self) -> GroupCoordinator:
        """A new coordinator rebuilt from everything written so far (a broker restart)."""
        loader = GroupLoader()
        for key, value in self.written:
            loader.apply(key, value)
        fresh = GroupCoordinator(self.coordinator.config, self.now)
        fresh.load(loader, self.now)
        return fresh


@pytest.fixture
def h() -> Harness:
    return Harness()


# -- joining -------------------------------------------------------------------------------------


def test_kip394_member_id_required_then_join(h: Harness) -> None:
    first = h.answer(h.join(client="app"))
    assert first.error is ErrorCode.member_id_required
    assert first.member_id == "app-1" and first.generation_id == -1
    assert h.group().state is GroupState.EMPTY  # a pending id is not a member yet
    token = h.join(first.member_id, client="app")
    assert h.answer(token) is None  # parked until the (zero) initial delay passes
    h.advance(0)
    joined = h.answer(token)
    assert joined.error is ErrorCode.none
    assert (joined.generation_id, joined.leader, joined.member_id) == (1, "app-1", "app-1")
    assert joined.protocol_name == "range" and joined.protocol_type == "consumer"
    assert [m.member_id for m in joined.members] == ["app-1"]  # the leader sees everybody
    assert h.group().state is GroupState.COMPLETING_REBALANCE


def test_join_before_v4_gets_an_id_at_once(h: Harness) -> None:
    token = h.join(v4=False, client="old")
    h.advance(0)
    assert h.answer(token).member_id == "old-1" and h.answer(token).generation_id == 1


def test_pending_member_lapses_after_a_session(h: Harness) -> None:
    a, = h.stable_group(1)
    h.member_id()  # a newcomer that never comes back with its id
    token = h.join(a)  # the leader rejoins: a rebalance
    h.advance(SESSION - 1)
    assert h.answer(token) is None  # the rebalance waits for the pending id...
    h.advance(1)
    assert h.answer(token).generation_id == 2  # ...until it lapses


def test_pending_member_that_joins_completes_the_rebalance(h: Harness) -> None:
    a, = h.stable_group(1)
    newcomer = h.member_id()
    ta = h.join(a)
    assert h.answer(ta) is None
    tn = h.join(newcomer)
    assert h.answer(ta).generation_id == h.answer(tn).generation_id == 2


def test_leader_gets_members_followers_do_not_and_sync_waits_for_leader(h: Harness) -> None:
    a, b = h.member_id(client="a"), h.member_id(client="b")
    ta, tb = h.join(a, client="a"), h.join(b, client="b")
    h.advance(0)
    ja, jb = h.answer(ta), h.answer(tb)
    assert ja.leader == jb.leader == a
    assert {m.member_id for m in ja.members} == {a, b} and jb.members == ()
    assert all(m.metadata == RANGE[0][1] for m in ja.members)
    follower = h.sync(b, 1)
    assert h.answer(follower) is None  # waits for the leader's assignment
    leader = h.sync(a, 1, {a: b"A", b: b"B", "stranger": b"?"})
    assert h.answer(leader) == SyncResponse(ErrorCode.none, "consumer", "range", b"A")
    assert h.answer(follower).assignment == b"B"
    assert h.group().state is GroupState.STABLE
    # The assignment is on disk before anybody heard of it.
    key, value = h.written[-1]
    assert decode_key(key) == GroupMetadataKey("g") and value is not None


def test_sync_answers_only_after_the_write_and_a_failed_write_rebalances(h: Harness) -> None:
    a = h.member_id()
    token = h.join(a)
    h.advance(0)
    h.fail_writes = ErrorCode.coordinator_not_available
    sync = h.sync(a, 1, {a: b"x"})
    assert h.answer(sync).error is ErrorCode.coordinator_not_available
    assert h.group().state is GroupState.PREPARING_REBALANCE
    h.fail_writes = None
    assert h.answer(token).generation_id == 1
    again = h.join(a)
    assert h.answer(again).generation_id == 2  # only member rejoined: completes at once
    assert h.answer(h.sync(a, 2, {a: b"x"})).assignment == b"x"


def test_unloading_answers_parked_join_and_sync_not_coordinator(h: Harness) -> None:
    """The offsets partition is led elsewhere now: members waiting for an answer are told to
    look the coordinator up again (Kafka's onGroupUnloaded), not left hanging."""
    a, b = h.member_id(), h.member_id()
    h.join(a), h.join(b)
    h.advance(0)
    waiting_sync = h.sync(b, 1)  # waits for the leader's assignment
    h.apply(h.coordinator.unload(["g"]))
    assert h.answer(waiting_sync).error is ErrorCode.not_coordinator
    assert "g" not in h.coordinator.groups
    c = h.member_id(group="other")
    h.join(c, group="other")
    waiting_join = h.join(h.member_id(group="other"), group="other")  # in the initial delay
    h.apply(h.coordinator.unload(["other"]))
    assert h.answer(waiting_join).error is ErrorCode.not_coordinator


def test_missing_assignments_are_empty(h: Harness) -> None:
    a, b = h.member_id(), h.member_id()
    h.join(a), h.join(b)
    h.advance(0)
    follower = h.sync(b, 1)
    h.sync(a, 1, {a: b"only-me"})
    assert h.answer(follower).assignment == b""


def test_initial_rebalance_delay_waits_and_extends_but_not_past_rebalance_timeout() -> None:
    h = Harness(initial_rebalance_delay_ms=3000)
    first = h.join(v4=False, rebalance=8000)
    h.advance(2000)
    second = h.join(v4=False, rebalance=8000)  # extends the delay once more
    h.advance(1000)
    assert h.answer(first) is None and h.answer(second) is None
    third = h.join(v4=False, rebalance=8000)
    h.advance(2000)
    assert h.answer(first) is None  # extended: 3000 + 3000 so far
    h.advance(1000)
    assert h.answer(first) is None
    h.advance(2000)  # 8000 ms in: the rebalance timeout bounds the extensions
    assert {h.answer(t).generation_id for t in (first, second, third)} == {1}


def test_initial_delay_completes_without_new_members() -> None:
    h = Harness(initial_rebalance_delay_ms=3000)
    token = h.join(v4=False)
    h.advance(2999)
    assert h.answer(token) is None
    h.advance(1)
    assert h.answer(token).generation_id == 1


# -- heartbeats, sessions, rebalance timeouts ----------------------------------------------------


def test_heartbeat_errors(h: Harness) -> None:
    a, b = h.stable_group(2)
    assert h.heartbeat(a, 1) is ErrorCode.none
    assert h.heartbeat("nobody", 1) is ErrorCode.unknown_member_id
    assert h.heartbeat(a, 0) is ErrorCode.illegal_generation
    assert h.heartbeat(a, 1, group="other") is ErrorCode.unknown_member_id
    assert h.heartbeat(a, 1, group="") is ErrorCode.invalid_group_id
    h.join(b)  # b changes nothing, but b is not the leader: answered at once
    h.join(a)  # the leader rejoining starts a rebalance
    assert h.heartbeat(b, 1) is ErrorCode.rebalance_in_progress


def test_session_expiry_removes_a_silent_member_and_rebalances(h: Harness) -> None:
    a, b = h.stable_group(2)
    h.run(SESSION - 1, (a, 1))  # only a heartbeats
    assert b in h.group().members and h.heartbeat(a, 1) is ErrorCode.none
    h.advance(1)
    assert b not in h.group().members
    assert h.group().state is GroupState.PREPARING_REBALANCE
    assert h.heartbeat(b, 1) is ErrorCode.unknown_member_id
    assert h.heartbeat(a, 1) is ErrorCode.rebalance_in_progress
    token = h.join(a)
    assert h.answer(token).generation_id == 2 and h.answer(token).members[0].member_id == a


def test_members_that_do_not_rejoin_in_time_are_removed(h: Harness) -> None:
    a, b = h.stable_group(2)
    token = h.join(a)  # the leader forces a rebalance; b keeps heartbeating but never rejoins
    for _ in range(REBALANCE // 2000):
        h.advance(2000)
        h.heartbeat(b, 1)
    h.advance(2000)
    assert h.answer(token).generation_id == 2
    assert list(h.group().members) == [a]


def test_leader_that_does_not_rejoin_is_replaced(h: Harness) -> None:
    a, b = h.stable_group(2)
    token = h.join(b, protocols=(("range", subscription("orders", "more")),))
    h.run(REBALANCE, (a, 1))  # a is alive, but never rejoins
    assert h.answer(token).leader == b and h.group().leader_id == b
    assert list(h.group().members) == [b]


def test_members_awaiting_answers_do_not_expire_but_new_ones_give_up(h: Harness) -> None:
    a, _b = h.stable_group(2)
    token = h.join(a)
    h.advance(SESSION + 1)  # a is parked in JoinGroup: it cannot heartbeat, and stays
    assert a in h.group().members
    h.advance(REBALANCE)
    assert h.answer(token).error is ErrorCode.none
    # A new member parked in a rebalance that never ends is dropped after 5 minutes.
    h2 = Harness()
    x = h2.member_id()
    first = h2.join(x)
    h2.advance(0)
    h2.sync(x, 1, {x: b""})
    ghost = h2.join(v4=False, rebalance=10 * 60_000)
    assert h2.answer(ghost) is None
    h2.run(NEW_MEMBER_JOIN_TIMEOUT_MS - 1, (x, 1))  # x never rejoins: the rebalance hangs
    assert h2.answer(first).generation_id == 1 and h2.answer(ghost) is None
    h2.advance(1)
    assert h2.answer(ghost).error is ErrorCode.unknown_member_id


def test_member_that_never_syncs_is_removed_after_the_rebalance_timeout(h: Harness) -> None:
    a, b = h.member_id(), h.member_id()
    h.join(a), h.join(b)
    h.advance(0)
    h.sync(a, 1, {a: b"A", b: b"B"})
    assert h.group().state is GroupState.STABLE
    h.run(REBALANCE - 2000, (a, 1), (b, 1))  # b heartbeats, but never sends SyncGroup
    assert b in h.group().members
    h.run(2000, (a, 1), (b, 1))
    assert b not in h.group().members
    assert h.group().state is GroupState.PREPARING_REBALANCE


# -- leaving -------------------------------------------------------------------------------------


def test_leave_rebalances_and_the_last_one_out_leaves_an_empty_group(h: Harness) -> None:
    a, b = h.stable_group(2)
    assert h.leave((a, None)) == [ErrorCode.none]
    assert h.group().state is GroupState.PREPARING_REBALANCE and h.group().leader_id == b
    token = h.join(b)
    assert h.answer(token).leader == b and h.answer(token).generation_id == 2
    assert h.leave((b, None), ("ghost", None)) == [ErrorCode.none, ErrorCode.unknown_member_id]
    assert h.group().state is GroupState.EMPTY and h.group().generation_id == 3
    assert h.coordinator.leave_group("nope", [("x", None)], h.now)[1] == [
        ErrorCode.unknown_member_id]


def test_leave_of_a_member_parked_in_join_answers_it(h: Harness) -> None:
    a, b = h.stable_group(2)
    token = h.join(a)
    h.leave((b, None))
    assert h.answer(token).generation_id == 2  # everybody left has joined: completes


def test_batched_leave_by_instance_id(h: Harness) -> None:
    ids = h.stable_group(2)
    static = h.join(instance="s1")
    assert "s1" in h.group().static_members and h.answer(static) is None
    codes = h.leave(("", "s1"), (ids[0], None), ("", "unknown-instance"))
    assert codes == [ErrorCode.none, ErrorCode.none, ErrorCode.unknown_member_id]
    assert "s1" not in h.group().static_members


# -- static membership (KIP-345) -----------------------------------------------------------------


def test_static_member_restart_keeps_its_assignment_without_a_rebalance(h: Harness) -> None:
    t1 = h.join(instance="i1", client="a", v4=True)
    t2 = h.join(instance="i2", client="b", v4=True)
    h.advance(0)
    old_a, old_b = h.answer(t1).member_id, h.answer(t2).member_id
    assert old_a.startswith("i1-")  # static ids start with the instance id
    h.sync(old_a, 1, {old_a: b"A", old_b: b"B"})
    h.sync(old_b, 1)
    written = len(h.written)
    # The process behind i1 restarts: it knows no member id, only its instance id.
    restarted = h.answer(h.join(instance="i1", client="a"))
    assert restarted.error is ErrorCode.none and restarted.generation_id == 1
    assert restarted.member_id not in (old_a, "")
    assert restarted.leader == old_a  # the old leader id: it must not compute an assignment
    assert h.group().state is GroupState.STABLE
    assert len(h.written) == written + 1  # the new member id is persisted
    new_a = restarted.member_id
    assert h.answer(h.sync(new_a, 1, instance="i1")).assignment == b"A"
    assert h.heartbeat(old_b, 1) is ErrorCode.none  # the other member noticed nothing
    # The old incarnation is fenced everywhere.
    assert h.heartbeat(old_a, 1, instance="i1") is ErrorCode.fenced_instance_id
    assert h.answer(h.sync(old_a, 1, instance="i1")).error is ErrorCode.fenced_instance_id
    assert h.answer(h.join(old_a, instance="i1")).error is ErrorCode.fenced_instance_id
    assert h.leave((old_a, "i1")) == [ErrorCode.fenced_instance_id]


def test_static_leader_restart_with_skip_assignment(h: Harness) -> None:
    t1 = h.join(instance="i1")
    h.advance(0)
    old = h.answer(t1).member_id
    h.sync(old, 1, {old: b"A"})
    again = h.answer(h.join(instance="i1", skip=True))
    assert again.skip_assignment and again.leader == again.member_id != old
    assert [m.member_id for m in again.members] == [again.member_id]


def test_static_member_restart_that_changes_the_protocol_rebalances(h: Harness) -> None:
    t1 = h.join(instance="i1", protocols=(("range", b""), ("roundrobin", b"")))
    h.advance(0)
    h.sync(h.answer(t1).member_id, 1, {})
    token = h.join(instance="i1", protocols=(("roundrobin", b""),))
    answer = h.answer(token)
    assert answer.generation_id == 2 and answer.protocol_name == "roundrobin"


def test_offline_static_member_keeps_its_place_until_its_session_expires(h: Harness) -> None:
    ts = h.join(instance="s")
    td = h.join(v4=False)
    h.advance(0)
    static, dynamic = h.answer(ts).member_id, h.answer(td).member_id
    h.sync(static, 1, {static: b"S", dynamic: b"D"})
    h.sync(dynamic, 1)
    # The dynamic member changes its subscription; the static one never rejoins.
    token = h.join(dynamic, protocols=(("range", subscription("other")),))
    assert h.answer(token) is None
    h.advance(SESSION + 1)
    assert static not in h.group().members  # removed by its session, not by the rebalance
    assert h.answer(token).error is ErrorCode.none


# -- protocol selection and join errors ----------------------------------------------------------


def test_protocol_selection_by_votes_then_leader_preference(h: Harness) -> None:
    a, b, c = h.member_id(), h.member_id(), h.member_id()
    prefs = {a: ("rr", "range", "sticky"), b: ("range", "rr"), c: ("range", "sticky", "rr")}
    for mid, names in prefs.items():
        h.join(mid, protocols=[(n, b"") for n in names])
    h.advance(0)
    assert h.group().protocol_name == "range"  # 2 votes to 1; "sticky" is not common
    h2 = Harness()
    x, y = h2.member_id(), h2.member_id()
    h2.join(x, protocols=[("rr", b""), ("range", b"")])
    h2.join(y, protocols=[("range", b""), ("rr", b"")])
    h2.advance(0)
    assert h2.group().protocol_name == "rr"  # a tie: the leader's preference decides


def test_join_errors(h: Harness) -> None:
    assert h.answer(h.join(group="")).error is ErrorCode.invalid_group_id
    assert h.answer(h.join(session=5999)).error is ErrorCode.invalid_session_timeout
    assert h.answer(h.join(session=1_800_001)).error is ErrorCode.invalid_session_timeout
    assert h.coordinator.group("g") is None  # failed joins leave nothing behind
    assert h.answer(h.join("made-up")).error is ErrorCode.unknown_member_id
    assert h.answer(h.join(protocols=())).error is ErrorCode.inconsistent_group_protocol
    assert h.answer(h.join(protocol_type="")).error is ErrorCode.inconsistent_group_protocol
    a, _b = h.stable_group(2)
    assert h.answer(h.join(protocols=[("other", b"")], v4=False)).error is (
        ErrorCode.inconsistent_group_protocol)
    assert h.answer(h.join(protocol_type="connect", v4=False)).error is (
        ErrorCode.inconsistent_group_protocol)
    assert h.answer(h.join("unknown-member")).error is ErrorCode.unknown_member_id
    assert h.answer(h.join(a, instance="never-registered")).error is (
        ErrorCode.unknown_member_id)


def test_group_max_size() -> None:
    h = Harness(max_size=2)
    h.stable_group(2)
    over = h.answer(h.join(v4=False))
    assert over.error is ErrorCode.group_max_size_reached and over.member_id == ""
    assert len(h.group().members) == 2


def test_follower_rejoining_in_completing_rebalance_gets_the_same_answer(h: Harness) -> None:
    a, b = h.member_id(), h.member_id()
    h.join(a), h.join(b)
    h.advance(0)
    again = h.answer(h.join(b))
    assert again.generation_id == 1 and again.error is ErrorCode.none
    assert h.group().state is GroupState.COMPLETING_REBALANCE


def test_sync_errors(h: Harness) -> None:
    assert h.answer(h.sync("x", 1, group="")).error is ErrorCode.invalid_group_id
    assert h.answer(h.sync("x", 1, group="missing")).error is ErrorCode.unknown_member_id
    a, _b = h.stable_group(2)
    assert h.answer(h.sync("ghost", 1)).error is ErrorCode.unknown_member_id
    assert h.answer(h.sync(a, 7)).error is ErrorCode.illegal_generation
    assert h.answer(h.sync(a, 1, protocol_name="roundrobin")).error is (
        ErrorCode.inconsistent_group_protocol)
    h.join(a)
    assert h.answer(h.sync(a, 1)).error is ErrorCode.rebalance_in_progress


def test_a_rebalance_answers_parked_syncs_with_rebalance_in_progress(h: Harness) -> None:
    a, b = h.member_id(), h.member_id()
    h.join(a), h.join(b)
    h.advance(0)
    follower = h.sync(b, 1)
    h.leave((a, None))  # the leader leaves before assigning
    assert h.answer(follower).error is ErrorCode.rebalance_in_progress


# -- cooperative rebalancing ---------------------------------------------------------------------


def test_cooperative_two_phase_rebalance_needs_only_correct_generations(h: Harness) -> None:
    """The incremental protocol is client-side: members revoke, then rejoin at once."""
    sticky = (("cooperative-sticky", subscription("orders")),)
    a, b = h.stable_group(2, protocols=sticky)
    c = h.member_id(protocols=sticky)
    tc = h.join(c, protocols=sticky)
    assert h.heartbeat(a, 1) is ErrorCode.rebalance_in_progress
    ta, tb = h.join(a, protocols=sticky), h.join(b, protocols=sticky)
    assert all(h.answer(t).generation_id == 2 for t in (ta, tb, tc))
    for t in (h.sync(a, 2, {a: b"A", b: b"B", c: b""}), h.sync(b, 2), h.sync(c, 2)):
        assert h.answer(t).error is ErrorCode.none
    # Second round, after revoking: everybody rejoins with the same metadata.
    tokens = [h.join(m, protocols=sticky) for m in (a, b, c)]
    assert [h.answer(t).generation_id for t in tokens] == [3, 3, 3]


# -- offsets -------------------------------------------------------------------------------------


def test_simple_commit_creates_a_group_and_fetch_reads_it(h: Harness) -> None:
    errors = h.commit([("orders", 0, 5), ("orders", 1, 7)], metadata="m")
    assert set(errors.values()) == {ErrorCode.none}
    group = h.group()
    assert group.state is GroupState.EMPTY and group.protocol_type is None
    fetched = dict(h.coordinator.fetch_offsets("g", None))
    assert fetched[("orders", 1)].offset == 7 and fetched[("orders", 1)].metadata == "m"
    assert h.coordinator.fetch_offsets("g", [("orders", 9)]) == [(("orders", 9), None)]
    assert h.coordinator.fetch_offsets("none", [("orders", 0)]) == [(("orders", 0), None)]
    assert h.coordinator.fetch_offsets("none", None) == []


def test_member_commit_rules(h: Harness) -> None:
    assert h.commit([("t", 0, 1)], member="m", generation=3) == {
        ("t", 0): ErrorCode.illegal_generation}
    assert h.commit([("t", 0, 1)], member="m", generation=3,
                    version_error=ErrorCode.group_id_not_found) == {
        ("t", 0): ErrorCode.group_id_not_found}
    a, b = h.member_id(), h.member_id()
    h.join(a), h.join(b)
    h.advance(0)
    assert h.commit([("t", 0, 1)], member=a, generation=1) == {
        ("t", 0): ErrorCode.rebalance_in_progress}  # no assignment yet
    h.sync(a, 1, {a: b"", b: b""})
    assert h.commit([("t", 0, 1)], member=a, generation=1) == {("t", 0): ErrorCode.none}
    assert h.commit([("t", 0, 2)], member="ghost", generation=1) == {
        ("t", 0): ErrorCode.unknown_member_id}
    assert h.commit([("t", 0, 2)], member=a, generation=0) == {
        ("t", 0): ErrorCode.illegal_generation}
    assert h.commit([("t", 0, 2)]) == {("t", 0): ErrorCode.unknown_member_id}  # not Empty
    h.join(a)
    assert h.commit([("t", 0, 3)], member=b, generation=1) == {("t", 0): ErrorCode.none}


def test_commits_keep_members_alive(h: Harness) -> None:
    a, = h.stable_group(1)
    for _ in range(4):
        h.advance(SESSION // 2)
        h.commit([("t", 0, 1)], member=a, generation=1)
    assert a in h.group().members


def test_metadata_limit_and_failed_writes(h: Harness) -> None:
    errors = h.commit([("t", 0, 1)], metadata="x" * 4097)
    assert errors == {("t", 0): ErrorCode.offset_metadata_too_large}
    assert h.coordinator.group("g") is None  # nothing committed: no group is left behind
    assert h.commit([("t", 0, 1)], metadata="x" * 4096) == {("t", 0): ErrorCode.none}
    h.fail_writes = ErrorCode.coordinator_not_available
    assert h.commit([("t", 0, 9)]) == {("t", 0): ErrorCode.coordinator_not_available}
    assert h.coordinator.fetch_offsets("g", [("t", 0)])[0][1].offset == 1  # unchanged


def test_offset_delete_refuses_subscribed_topics(h: Harness) -> None:
    a, = h.stable_group(1)
    h.commit([("orders", 0, 1), ("other", 0, 2)], member=a, generation=1)
    top, errors, _ = h.coordinator.delete_offsets("g", [("orders", 0), ("other", 0)], h.now)
    assert top is ErrorCode.none
    assert errors == {("orders", 0): ErrorCode.group_subscribed_to_topic,
                      ("other", 0): ErrorCode.none}
    assert dict(h.coordinator.fetch_offsets("g", None)).keys() == {("orders", 0)}
    assert h.coordinator.delete_offsets("nope", [("t", 0)], h.now)[0] is (
        ErrorCode.group_id_not_found)
    h.leave((a, None))
    top, errors, effects = h.coordinator.delete_offsets("g", [("orders", 0)], h.now)
    assert errors == {("orders", 0): ErrorCode.none}
    # The last offset of an Empty group went: the group is gone too, tombstones say so.
    assert h.coordinator.group("g") is None
    keys = [decode_key(k) for k, v in effects.writes[0].records if v is None]
    assert keys == [OffsetCommitKey("g", "orders", 0), GroupMetadataKey("g")]


def test_non_consumer_groups_cannot_delete_offsets_while_active(h: Harness) -> None:
    a, = h.stable_group(1, protocol_type="connect")
    h.commit([("t", 0, 1)], member=a, generation=1)
    assert h.coordinator.delete_offsets("g", [("t", 0)], h.now)[0] is ErrorCode.non_empty_group


def test_offsets_expire_for_empty_groups_only(h: Harness) -> None:
    a, = h.stable_group(1, session=1_800_000)
    h.commit([("orders", 0, 1), ("gone", 0, 1)], member=a, generation=1)
    h.commit([("x", 0, 1)], group="simple")
    h.run(DAY + 60_000, (a, 1), step=600_000)
    # A Stable group keeps offsets of subscribed topics; "gone" is subscribed by nobody.
    assert dict(h.coordinator.fetch_offsets("g", None)).keys() == {("orders", 0)}
    assert h.coordinator.group("simple") is None  # simple group: per-commit expiry, then Dead
    h.leave((a, None))
    h.advance(DAY - 60_000)
    assert h.coordinator.fetch_offsets("g", None)
    h.advance(120_000)  # a day after the group became Empty
    assert h.coordinator.group("g") is None
    assert (decode_key(h.written[-1][0]), h.written[-1][1]) == (GroupMetadataKey("g"), None)


def test_explicit_retention_time_expires_at_its_own_time(h: Harness) -> None:
    plan = h.coordinator.prepare_commit("g", "", None, -1, [CommittedOffset("t", 0, 1)], h.now,
                                        retention_ms=120_000)
    h.coordinator.complete_commit(plan, None, h.now)
    h.advance(60_000)
    assert h.coordinator.fetch_offsets("g", None)
    h.advance(120_000)
    assert not h.coordinator.fetch_offsets("g", None)


# -- admin: list, describe, delete ---------------------------------------------------------------


def test_list_groups_with_filters(h: Harness) -> None:
    h.stable_group(1, group="live")
    h.commit([("t", 0, 1)], group="offsets-only")
    names = lambda groups: [g.group_id for g in groups]  # noqa: E731
    assert names(h.coordinator.list_groups()) == ["live", "offsets-only"]
    assert names(h.coordinator.list_groups(["STABLE"])) == ["live"]
    assert names(h.coordinator.list_groups(["empty", "dead"])) == ["offsets-only"]
    assert names(h.coordinator.list_groups(types=["Classic"])) == ["live", "offsets-only"]
    assert names(h.coordinator.list_groups(types=["consumer"])) == []


def test_delete_groups(h: Harness) -> None:
    h.stable_group(1, group="busy")
    h.commit([("t", 0, 1), ("t", 1, 2)], group="idle")
    results, effects = h.coordinator.delete_groups(["busy", "idle", "missing", ""], h.now)
    assert results == {"busy": ErrorCode.non_empty_group, "idle": ErrorCode.none,
                       "missing": ErrorCode.group_id_not_found,
                       "": ErrorCode.invalid_group_id}
    assert h.coordinator.group("idle") is None
    tombstones = [decode_key(k) for k, v in effects.writes[0].records if v is None]
    # Offsets only: a group of generation 0 never wrote a GroupMetadata record.
    assert tombstones == [OffsetCommitKey("idle", "t", 0), OffsetCommitKey("idle", "t", 1)]


# -- replay --------------------------------------------------------------------------------------


def test_replay_restores_groups_members_and_offsets(h: Harness) -> None:
    a, b = h.stable_group(2)
    h.commit([("orders", 0, 10), ("orders", 1, 20)], member=a, generation=1)
    h.commit([("orders", 0, 11)], member=b, generation=1, metadata="later")
    h.commit([("t", 0, 1)], group="simple")
    h.commit([("t", 0, 1), ("t", 1, 1)], group="deleted")
    _, effects = h.coordinator.delete_groups(["deleted"], h.now)
    h.apply(effects)
    restored = h.replayed()
    assert sorted(restored.groups) == ["g", "simple"]
    group = restored.group("g")
    assert group.state is GroupState.STABLE and group.generation_id == 1
    assert list(group.members) == [a, b] and group.leader_id == a
    assert group.members[b].assignment == f"part-of-{b}".encode()
    assert group.protocol_name == "range" and group.subscribed_topics == {"orders"}
    offsets = dict(restored.fetch_offsets("g", None))
    assert (offsets[("orders", 0)].offset, offsets[("orders", 0)].metadata) == (11, "later")
    assert offsets[("orders", 1)].offset == 20
    # Restored members carry on in their generation, or expire like any silent member.
    assert restored.heartbeat("g", a, None, 1, h.now + 1) is ErrorCode.none
    restored.on_timer(h.now + SESSION)
    assert list(restored.group("g").members) == [a]


def test_replay_of_an_emptied_group(h: Harness) -> None:
    a, = h.stable_group(1)
    h.commit([("orders", 0, 3)], member=a, generation=1)
    h.leave((a, None))
    restored = h.replayed()
    group = restored.group("g")
    assert group.state is GroupState.EMPTY and group.generation_id == 2
    assert group.protocol_type == "consumer" and not group.members
    # A new consumer of the group starts where the old one committed.
    assert restored.fetch_offsets("g", [("orders", 0)])[0][1].offset == 3


def test_replay_skips_unknown_record_types() -> None:
    loader = GroupLoader()
    loader.apply(b"\x00\x05whatever", b"\x00\x00")
    loader.apply(None, b"x")
    assert not loader.metadata and not loader.offsets


def test_deleted_topics_lose_their_offsets(h: Harness) -> None:
    h.commit([("gone", 0, 1), ("kept", 0, 2)], group="both")
    h.commit([("gone", 0, 1), ("gone", 1, 1)], group="only-gone")
    effects = h.coordinator.remove_topic("gone", h.now)
    assert dict(h.coordinator.fetch_offsets("both", None)).keys() == {("kept", 0)}
    assert h.coordinator.group("only-gone") is None  # Empty and nothing left: Dead
    tombstones = sorted((decode_key(k).group, decode_key(k).partition)
                        for w in effects.writes for k, v in w.records if v is None)
    assert tombstones == [("both", 0), ("only-gone", 0), ("only-gone", 1)]
