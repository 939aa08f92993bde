"""Tombstones across replicas: the cleaner keeps every tombstone at or above the bound it is
given, and a leader's bound is the lowest position every assigned replica fetched to."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from moldau.log import LogConfig, PartitionLog
from moldau.log.cleaner import LogCleaner
from moldau.log.partition_log import AppendOrigin
from moldau.replica import Partition

from .batchgen import simple_batch
from .test_log_cleaner import NOW, Harness, latest

ME, F1, F2 = 1, 2, 3


def bounded(tmp_path: Path, bound: list[int | None]) -> Harness:
    """A compacted log whose cleaner is told ``bound[0]`` as the log's tombstone bound."""
    h = Harness(tmp_path, delete_retention_ms=10)
    h.cleaner = LogCleaner(h.manager, tombstone_bound=lambda plog: bound[0])
    return h


def test_a_tombstone_stays_until_the_bound_passes_it(tmp_path: Path) -> None:
    bound: list[int | None] = [1]  # every replica has offset 0 only
    h = bounded(tmp_path, bound)
    h.put(b"k", b"v", NOW)           # 0
    h.put(b"k", None, NOW)           # 1: the tombstone
    h.put(b"other", b"x", NOW)       # 2
    h.log.roll(NOW)
    h.clean(NOW + 1_000_000)         # the old value goes at once; the tombstone was dirty
    assert h.entries() == [(1, b"k", None), (2, b"other", b"x")]
    # Long past delete.retention.ms, but some replica has not fetched offset 1: it stays,
    # and the cleaner does not keep rewriting the log for it.
    h.clean(NOW + 2_000_000)
    assert h.entries() == [(1, b"k", None), (2, b"other", b"x")]
    assert h.clean(NOW + 3_000_000) == []
    # Every replica fetched past it: the next pass removes it, with nothing new to clean.
    bound[0] = 2
    [result] = h.clean(NOW + 4_000_000)
    assert result.tombstones_removed == 1
    assert latest(h.entries()) == {b"other": b"x"}
    assert h.clean(NOW + 5_000_000) == []


def test_a_bound_of_minus_one_keeps_every_tombstone(tmp_path: Path) -> None:
    bound: list[int | None] = [-1]  # a follower, or a leader that has not heard from a replica
    h = bounded(tmp_path, bound)
    for i in range(3):
        h.put(b"k%d" % i, b"v", NOW)
        h.put(b"k%d" % i, None, NOW)
    h.log.roll(NOW)
    h.clean(NOW + 1_000_000)
    h.clean(NOW + 2_000_000)
    assert [(k, v) for _, k, v in h.entries()] == [(b"k0", None), (b"k1", None), (b"k2", None)]
    # No bound at all (a lone broker) is today's rule: time alone.
    bound[0] = None
    h.clean(NOW + 3_000_000)
    assert h.entries() == []


def test_the_bound_and_delete_retention_both_apply(tmp_path: Path) -> None:
    bound: list[int | None] = [100]
    h = bounded(tmp_path, bound)
    h.config = dataclasses.replace(h.config, delete_retention_ms=10_000)
    h.log.update_config(h.config)
    h.put(b"k", b"v", NOW)
    h.put(b"k", None, NOW)
    h.log.roll(NOW)
    h.clean(NOW + 1)
    h.clean(NOW + 5_000)
    assert h.entries() == [(1, b"k", None)], "below the bound, but not old enough yet"
    [result] = h.clean(NOW + 10_001)
    assert result.tombstones_removed == 1 and h.entries() == []


def test_a_leaders_bound_is_the_lowest_position_of_the_assigned_replicas(
        tmp_path: Path) -> None:
    plog = PartitionLog.open(tmp_path / "t-0", LogConfig(), 0, True, NOW)
    partition = Partition(plog, ME)
    assert partition.tombstone_bound() == -1, "a follower of nobody keeps every tombstone"
    # Replicas 1, 2, 3 with only 1 and 2 in the ISR: 3 is assigned, so it counts too.
    partition.make_leader(0, (ME, F1), (ME, F1, F2), now_ms=NOW)
    partition.append_as_leader(simple_batch(5), AppendOrigin.CLIENT, -1, NOW)
    assert partition.tombstone_bound() == -1, "no follower has fetched yet"
    partition.update_follower_position(F1, 5, NOW)
    assert partition.tombstone_bound() == -1, "F2 never fetched"
    partition.update_follower_position(F2, 3, NOW)
    assert partition.tombstone_bound() == 3
    partition.update_follower_position(F2, 5, NOW)
    assert partition.tombstone_bound() == 5
    # A new epoch: what the leader knew of its followers is forgotten until they fetch again.
    partition.make_leader(1, (ME, F1), (ME, F1, F2), now_ms=NOW)
    assert partition.tombstone_bound() == -1
    # A follower knows nobody's position but its own.
    partition.make_follower(F1, 2)
    assert partition.tombstone_bound() == -1
    # Alone (replicas = {self}), the log end: every tombstone in inactive segments may go.
    partition.make_leader(3, (ME,), (ME,))
    assert partition.tombstone_bound() == 5
