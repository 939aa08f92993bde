"""Transactional offset commits in the group coordinator (KIP-98, KIP-447), driven by hand.

A small harness plays the broker: it keeps an in-memory "log" of the batches and markers the
coordinator would append to ``__consumer_offsets`` (a batch's position is its index), so each
test can complete transactions, fail writes, and replay the log into a fresh coordinator as a
restart or failover would.
"""

from __future__ import annotations

from dataclasses import dataclass

import crc32c
import pytest
from kio.schema.errors import ErrorCode

from moldau.coordinator.manager import CommittedOffset, GroupCoordinator, GroupLoader
from moldau.log.batch import ATTRIBUTES_POS, read_header
from moldau.log.records_writer import encode_batch

from .test_group_coordinator import DAY
from .test_group_coordinator import Harness as GroupHarness

PID, OTHER = 4000, 4001
TP = ("in", 0)


@dataclass
class Entry:
    """One batch of the simulated log: records of a producer, or its marker."""

    producer_id: int
    transactional: bool
    records: tuple[tuple[bytes, bytes | None], ...] = ()
    commit: bool | None = None  # a marker when not None


class Harness:
    def __init__(self) -> None:
        #: The group coordinator's own test harness, for joining members.
        self.groups = GroupHarness()
        self.now = self.groups.now
        self.coordinator = self.groups.coordinator
        self.config = self.coordinator.config
        self.log: list[Entry] = []

    def txn_commit(self, group: str, offsets: dict[tuple[str, int], int], *,
                   producer_id: int = PID, member: str = "", generation: int = -1,
                   instance: str | None = None, fail: ErrorCode | None = None,
                   metadata: str = "") -> dict[tuple[str, int], ErrorCode]:
        plan = self.coordinator.prepare_txn_commit(
            group, member, instance, generation, producer_id, 0,
            [CommittedOffset(t, p, o, metadata=metadata) for (t, p), o in offsets.items()],
            self.now)
        if plan.write is not None:
            assert plan.write.producer == (producer_id, 0)
            self.log.append(Entry(producer_id, True, plan.write.records))
            self.coordinator.txn_commit_appended(plan, len(self.log) - 1)
        return self.coordinator.complete_commit(plan, fail, self.now)

    def commit(self, group: str, offsets: dict[tuple[str, int], int],
               ) -> dict[tuple[str, int], ErrorCode]:
        plan = self.coordinator.prepare_commit(
            group, "", None, -1,
            [CommittedOffset(t, p, o) for (t, p), o in offsets.items()], self.now)
        if plan.write is not None:
            self.log.append(Entry(-1, False, plan.write.records))
            plan.position = len(self.log) - 1
        return self.coordinator.complete_commit(plan, None, self.now)

    def end(self, producer_id: int, commit: bool, *, owned: bool = True) -> None:
        self.log.append(Entry(producer_id, True, commit=commit))
        self.coordinator.complete_transaction(producer_id, commit, lambda _g: owned, self.now)

    def offset(self, group: str, tp: tuple[str, int] = TP,
               coordinator: GroupCoordinator | None = None) -> int | None:
        found = (coordinator or self.coordinator).fetch_offsets(group, [tp])[0][1]
        return None if found is None else found.offset

    def replayed(self) -> GroupCoordinator:
        loader = GroupLoader()
        for position, entry in enumerate(self.log):
            if entry.commit is not None:
                loader.apply_marker(entry.producer_id, entry.commit)
                continue
            for key, value in entry.records:
                loader.apply(key, value, position=position, producer_id=entry.producer_id,
                             transactional=entry.transactional)
        fresh = GroupCoordinator(self.config, self.now)
        fresh.load(loader, self.now)
        return fresh


@pytest.fixture
def h() -> Harness:
    return Harness()


def test_pending_until_commit_marker(h: Harness) -> None:
    h.commit("g", {TP: 5})
    assert h.txn_commit("g", {TP: 10, ("in", 1): 3}) == {TP: ErrorCode.none,
                                                         ("in", 1): ErrorCode.none}
    assert h.offset("g") == 5  # the last committed value, not the pending one
    assert h.coordinator.unstable_partitions("g") == {TP, ("in", 1)}
    h.end(PID, commit=True)
    assert h.offset("g") == 10 and h.offset("g", ("in", 1)) == 3
    assert h.coordinator.unstable_partitions("g") == set()


def test_abort_marker_drops_pending(h: Harness) -> None:
    h.commit("g", {TP: 5})
    h.txn_commit("g", {TP: 10})
    h.end(PID, commit=False)
    assert h.offset("g") == 5
    assert h.coordinator.unstable_partitions("g") == set()
    h.end(PID, commit=True)  # a later marker of the same producer finds nothing pending
    assert h.offset("g") == 5


def test_markers_only_complete_their_producer_and_partition(h: Harness) -> None:
    h.txn_commit("g", {TP: 10})
    h.txn_commit("g", {("in", 1): 20}, producer_id=OTHER)
    h.end(PID, commit=True, owned=False)  # the marker is on another __consumer_offsets partition
    assert h.offset("g") is None
    h.end(OTHER, commit=True)
    assert h.offset("g", ("in", 1)) == 20 and h.offset("g") is None
    assert h.coordinator.unstable_partitions("g") == {TP}
    h.end(PID, commit=True)
    assert h.offset("g") == 10


def test_plain_commit_appended_later_wins(h: Harness) -> None:
    h.txn_commit("g", {TP: 10})
    h.commit("g", {TP: 7})  # appended after the transaction's offsets
    h.end(PID, commit=True)
    assert h.offset("g") == 7
    assert h.offset("g", coordinator=h.replayed()) == 7


def test_transaction_appended_later_wins(h: Harness) -> None:
    h.commit("g", {TP: 7})
    h.txn_commit("g", {TP: 10})
    h.end(PID, commit=True)
    assert h.offset("g") == 10
    assert h.offset("g", coordinator=h.replayed()) == 10


def test_failed_write_is_not_pending(h: Harness) -> None:
    errors = h.txn_commit("g", {TP: 10}, fail=ErrorCode.not_coordinator)
    assert errors == {TP: ErrorCode.not_coordinator}
    assert h.coordinator.unstable_partitions("g") == set()
    h.end(PID, commit=True)
    assert h.offset("g") is None


def test_kip447_member_checks(h: Harness) -> None:
    token = h.groups.join(instance="inst")
    h.groups.advance(0)
    member = h.groups.answer(token).member_id
    generation = h.groups.answer(token).generation_id
    h.groups.sync(member, generation, {member: b"A"})
    ok = h.txn_commit("g", {TP: 1}, member=member, generation=generation, instance="inst")
    assert ok == {TP: ErrorCode.none}
    assert h.txn_commit("g", {TP: 1}, member=member, generation=generation + 1) == \
        {TP: ErrorCode.illegal_generation}
    assert h.txn_commit("g", {TP: 1}, member="ghost", generation=generation) == \
        {TP: ErrorCode.unknown_member_id}
    assert h.txn_commit("g", {TP: 1}, member="old-incarnation", generation=generation,
                        instance="inst") == {TP: ErrorCode.fenced_instance_id}
    # A pre-KIP-447 producer (no member fields) may commit to a group with members.
    assert h.txn_commit("g", {TP: 2}) == {TP: ErrorCode.none}


def test_metadata_too_large(h: Harness) -> None:
    errors = h.txn_commit("g", {TP: 1}, metadata="x" * 5000)
    assert errors == {TP: ErrorCode.offset_metadata_too_large}
    assert h.coordinator.unstable_partitions("g") == set()
    assert h.coordinator.group("g") is None  # nothing was written for it


def test_pending_offsets_keep_a_group_and_do_not_expire(h: Harness) -> None:
    h.txn_commit("g", {TP: 10})
    h.coordinator.on_timer(h.now + 2 * DAY)
    assert h.coordinator.group("g") is not None
    assert h.coordinator.unstable_partitions("g") == {TP}
    h.end(PID, commit=False)
    assert h.coordinator.group("g") is None  # aborted: nothing left


def test_commit_after_long_transaction_then_expiry_by_its_own_time(h: Harness) -> None:
    h.commit("g", {TP: 1})
    h.txn_commit("g", {TP: 10})
    effects = h.coordinator.on_timer(h.now + 2 * DAY)
    assert h.coordinator.group("g") is not None  # still holds pending offsets
    assert any(v is None for w in effects.writes for _k, v in w.records)  # old one expired
    h.end(PID, commit=True)
    assert h.offset("g") == 10


def test_delete_group_drops_pending(h: Harness) -> None:
    h.txn_commit("g", {TP: 10, ("in", 1): 4})
    results, _ = h.coordinator.delete_groups(["g"], h.now)
    assert results == {"g": ErrorCode.none}
    assert h.coordinator.group("g") is None
    h.end(PID, commit=True)
    assert h.offset("g") is None


def test_offset_delete_and_topic_deletion_drop_pending(h: Harness) -> None:
    h.txn_commit("g", {TP: 10, ("other", 0): 4})
    top, errors, _ = h.coordinator.delete_offsets("g", [TP], h.now)
    assert top is ErrorCode.none and errors == {TP: ErrorCode.none}
    assert h.coordinator.unstable_partitions("g") == {("other", 0)}
    h.coordinator.remove_topic("other", h.now)
    assert h.coordinator.unstable_partitions("g") == set()
    h.end(PID, commit=True)
    assert h.offset("g") is None and h.offset("g", ("other", 0)) is None


def test_replay_applies_commits_drops_aborts_keeps_open(h: Harness) -> None:
    h.commit("a", {TP: 1})
    h.txn_commit("a", {TP: 10})
    h.end(PID, commit=True)
    h.txn_commit("b", {TP: 20})
    h.end(PID, commit=False)
    h.txn_commit("c", {TP: 30}, producer_id=OTHER)  # no marker yet: still pending
    fresh = h.replayed()
    assert h.offset("a", coordinator=fresh) == 10
    assert fresh.group("b") is None  # only aborted offsets: no group
    assert h.offset("c", coordinator=fresh) is None
    assert fresh.unstable_partitions("c") == {TP}
    fresh.complete_transaction(OTHER, True, lambda _g: True, h.now)
    assert h.offset("c", coordinator=fresh) == 30


def test_replay_later_plain_commit_wins(h: Harness) -> None:
    h.txn_commit("g", {TP: 10})
    h.commit("g", {TP: 7})
    h.end(PID, commit=True)
    assert h.offset("g", coordinator=h.replayed()) == 7


# -- the bytes ------------------------------------------------------------------------------


def test_transactional_batch_header() -> None:
    batch = encode_batch([(b"k", b"v")], 5, producer_id=PID, producer_epoch=3,
                         base_sequence=0, transactional=True)
    header = read_header(batch, 0, 0)
    assert header.is_transactional and not header.is_control
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (PID, 3, 0)
    assert crc32c.crc32c(batch[ATTRIBUTES_POS:]) == header.crc


def test_a_commit_being_stored_is_unstable_too(h: Harness) -> None:
    """Kafka's pendingOffsetCommits: between an OffsetCommit's append and its acks=all."""
    plan = h.coordinator.prepare_commit("g", "", None, -1, [CommittedOffset(*TP, 3)], h.now)
    assert h.coordinator.unstable_partitions("g") == {TP}
    h.coordinator.complete_commit(plan, ErrorCode.coordinator_not_available, h.now)
    assert h.coordinator.unstable_partitions("g") == set()
    assert h.offset("g") is None
