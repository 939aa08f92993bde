"""Partition (the replica layer): high watermark, ISR, epochs and acks=all over a real log.

No follower exists yet on the network; the leader's side of replication is driven here with
fake follower ids through ``update_follower_position``, as a follower's Fetch will drive it.
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from moldau.log import LogConfig, PartitionLog
from moldau.log.manager import LogManager
from moldau.log.partition_log import AppendOrigin
from moldau.replica import Partition, ReplicaError, ReplicaManager, Role
from moldau.replica.partition import LATEST_TIMESTAMP

from .batchgen import simple_batch

NOW = 1_700_000_000_000
ME, F1, F2 = 1, 2, 3
LAG_MS = 30_000


def make(tmp_path: Path, **overrides: Any) -> tuple[Partition, list[tuple[tuple[str, int], int]]]:
    config = dataclasses.replace(LogConfig(), **overrides)
    plog = PartitionLog.open(tmp_path / "t-0", config, 0, True, NOW)
    woken: list[tuple[tuple[str, int], int]] = []
    partition = Partition(plog, ME,
                          on_committed=lambda key, size, _stable: woken.append((key, size)))
    return partition, woken


def append(partition: Partition, count: int = 1, acks: int = -1) -> int:
    """Append ``count`` records as the leader; the offset after them."""
    result = partition.append_as_leader(simple_batch(count), AppendOrigin.CLIENT, acks, NOW)
    return result.last_offset + 1


def test_single_node_high_watermark_follows_the_log_end(tmp_path: Path) -> None:
    partition, woken = make(tmp_path)
    assert partition.make_leader(0, (ME,))
    end = append(partition, 3)
    assert end == 3 and partition.high_watermark == 3
    assert partition.acks_reached(end) is ErrorCode.none
    assert woken == [(("t", 0), len(simple_batch(3)))]


def test_high_watermark_is_the_lowest_end_in_the_isr(tmp_path: Path) -> None:
    partition, woken = make(tmp_path)
    partition.make_leader(0, (ME, F1, F2), now_ms=NOW)
    end = append(partition, 5)
    assert partition.high_watermark == 0, "followers have nothing yet"
    assert woken == []
    partition.update_follower_position(F1, 5, NOW + 1)
    assert partition.high_watermark == 0, "F2 is in the ISR and has nothing"
    partition.update_follower_position(F2, 2, NOW + 1)
    assert partition.high_watermark == 2
    assert len(woken) == 1
    partition.update_follower_position(F2, end, NOW + 2)
    assert partition.high_watermark == end
    # It never goes back, whatever a follower reports.
    partition.update_follower_position(F2, 1, NOW + 3)
    assert partition.high_watermark == end


def test_consumers_see_only_what_is_below_the_high_watermark(tmp_path: Path) -> None:
    partition, _ = make(tmp_path)
    partition.make_leader(0, (ME, F1), now_ms=NOW)
    append(partition, 1)
    assert partition.read(0, 1 << 20) is None, "not replicated yet"
    follower_view = partition.read(0, 1 << 20, fetch_only_committed=False)
    assert follower_view is not None and follower_view.size == len(simple_batch(1))
    assert partition.fetch_offset_for_timestamp(LATEST_TIMESTAMP) == (-1, 0, 0)
    partition.update_follower_position(F1, 1, NOW)
    assert partition.read(0, 1 << 20) is not None
    assert partition.fetch_offset_for_timestamp(LATEST_TIMESTAMP) == (-1, 1, 0)


def test_acks_all_waits_until_the_high_watermark_passes(tmp_path: Path) -> None:
    async def run() -> None:
        partition, _ = make(tmp_path)
        partition.make_leader(4, (ME, F1), now_ms=NOW)
        first = append(partition, 2)
        second = append(partition, 3)
        assert partition.acks_reached(first) is None
        w1, w2 = partition.wait_for_acks(first), partition.wait_for_acks(second)
        partition.update_follower_position(F1, first - 1, NOW)
        assert not w1.done() and not w2.done()
        partition.update_follower_position(F1, first, NOW)
        assert w1.done() and w1.result() is ErrorCode.none
        assert not w2.done()
        partition.update_follower_position(F1, second, NOW)
        assert w2.result() is ErrorCode.none
        # acks=1 never waits, and a waiter for what is committed is done at once.
        assert partition.wait_for_acks(second).result() is ErrorCode.none

    asyncio.run(run())


def test_acks_all_waiters_fail_when_leadership_moves(tmp_path: Path) -> None:
    async def run() -> None:
        partition, _ = make(tmp_path)
        partition.make_leader(1, (ME, F1), now_ms=NOW)
        waiter = partition.wait_for_acks(append(partition))
        assert partition.make_follower(F1, 2)
        assert waiter.result() is ErrorCode.not_leader_or_follower
        assert partition.role is Role.FOLLOWER and partition.leader_id == F1

    asyncio.run(run())


def test_not_enough_replicas_before_and_after_append(tmp_path: Path) -> None:
    async def run() -> None:
        partition, _ = make(tmp_path, min_insync_replicas=2)
        partition.make_leader(0, (ME,))
        with pytest.raises(ReplicaError) as refused:
            append(partition, acks=-1)
        assert refused.value.code is ErrorCode.not_enough_replicas
        assert partition.log_end_offset == 0, "nothing was written"
        assert append(partition, acks=1) == 1, "acks=1 does not need the ISR"

        partition.make_leader(1, (ME, F1), now_ms=NOW)
        partition.update_follower_position(F1, 1, NOW)
        end = append(partition, acks=-1)
        waiter = partition.wait_for_acks(end)
        # F1 stops fetching; once it lagged too long it leaves the ISR, the high watermark
        # then passes the records, but only one replica has them.
        assert partition.maybe_shrink_isr(NOW + LAG_MS + 1, LAG_MS) == {F1}
        assert partition.isr == {ME}
        assert waiter.result() is ErrorCode.not_enough_replicas_after_append

    asyncio.run(run())


def test_isr_shrinks_only_for_followers_behind_for_longer_than_the_lag(tmp_path: Path) -> None:
    partition, _ = make(tmp_path)
    partition.make_leader(0, (ME, F1, F2), now_ms=NOW)
    append(partition, 2)
    partition.update_follower_position(F1, 2, NOW + 1_000)  # caught up at NOW + 1 s
    # F2 never fetched: it counts as caught up when leadership began (NOW).
    assert partition.out_of_sync_replicas(NOW + LAG_MS, LAG_MS) == frozenset()
    assert partition.out_of_sync_replicas(NOW + LAG_MS + 1, LAG_MS) == {F2}
    append(partition, 1)  # F1 is now behind, but was caught up 1 s after NOW
    assert partition.out_of_sync_replicas(NOW + LAG_MS + 1_000, LAG_MS) == {F2}
    assert partition.maybe_shrink_isr(NOW + LAG_MS + 1_001, LAG_MS) == {F1, F2}
    assert partition.isr == {ME}
    assert partition.high_watermark == 3, "the leader alone now decides the high watermark"


def test_a_follower_reaching_the_previous_leader_end_counts_as_caught_up_then(
        tmp_path: Path) -> None:
    partition, _ = make(tmp_path)
    partition.make_leader(0, (ME, F1), now_ms=NOW)
    append(partition, 2)
    partition.update_follower_position(F1, 0, NOW + 10_000)  # leader end was 2 at that fetch
    append(partition, 2)  # leader end 4
    partition.update_follower_position(F1, 2, NOW + 20_000)
    # It reached what the leader had at its previous fetch: caught up as of NOW + 10 s.
    state = partition.follower(F1)
    assert state is not None and state.last_caught_up_ms == NOW + 10_000
    assert partition.out_of_sync_replicas(NOW + 10_000 + LAG_MS, LAG_MS) == frozenset()
    assert partition.out_of_sync_replicas(NOW + 10_001 + LAG_MS, LAG_MS) == {F1}


def test_isr_expands_once_the_follower_reaches_the_high_watermark(tmp_path: Path) -> None:
    changes: list[tuple[frozenset[int], frozenset[int]]] = []
    plog = PartitionLog.open(tmp_path / "t-0", LogConfig(), 0, True, NOW)
    partition = Partition(plog, ME, on_isr_change=lambda p, old: changes.append((old, p.isr)))
    partition.make_leader(3, (ME,), replicas=(ME, F1), now_ms=NOW)
    append(partition, 4)
    assert partition.high_watermark == 4
    partition.update_follower_position(F1, 3, NOW)
    assert partition.isr == {ME}, "below the high watermark"
    partition.update_follower_position(F1, 4, NOW)
    assert partition.isr == {ME, F1}
    assert changes == [(frozenset({ME}), frozenset({ME, F1}))]
    with pytest.raises(ReplicaError) as unknown:
        partition.update_follower_position(F2, 4, NOW)
    assert unknown.value.code is ErrorCode.unknown_server_error


def test_isr_expansion_waits_for_the_start_of_the_current_epoch(tmp_path: Path) -> None:
    partition, _ = make(tmp_path)
    partition.make_leader(1, (ME,), replicas=(ME, F1), now_ms=NOW)
    append(partition, 2)          # epoch 1 starts at 0
    partition.make_leader(2, (ME,), replicas=(ME, F1), now_ms=NOW)
    append(partition, 2)          # epoch 2 starts at 2
    # A follower that reports offset 2 may still hold epoch 1's divergent tail.
    partition.update_follower_position(F1, 2, NOW)
    assert F1 not in partition.isr
    partition.update_follower_position(F1, 4, NOW)
    assert F1 in partition.isr


@pytest.mark.parametrize(("current", "code"), [
    (4, ErrorCode.unknown_leader_epoch),
    (2, ErrorCode.fenced_leader_epoch),
])
def test_epoch_checks(tmp_path: Path, current: int, code: ErrorCode) -> None:
    partition, _ = make(tmp_path)
    partition.make_leader(3, (ME,))
    append(partition)
    for call in (
        lambda: partition.read(0, 1000, current_leader_epoch=current),
        lambda: partition.fetch_offset_for_timestamp(LATEST_TIMESTAMP, current),
        lambda: partition.last_offset_for_leader_epoch(current, 3),
    ):
        with pytest.raises(ReplicaError) as refused:
            call()
        assert refused.value.code is code
    assert partition.read(0, 1000, current_leader_epoch=3) is not None
    assert partition.read(0, 1000, current_leader_epoch=-1) is not None
    assert partition.last_offset_for_leader_epoch(-1, 3) == (3, 1)


def test_a_follower_refuses_consumers_and_producers(tmp_path: Path) -> None:
    partition, _ = make(tmp_path)
    partition.make_leader(1, (ME,))
    append(partition)
    assert partition.make_follower(F1, 2)
    assert not partition.make_leader(1, (ME,)), "a stale epoch changes nothing"
    assert partition.role is Role.FOLLOWER
    for call in (
        lambda: partition.read(0, 1000, current_leader_epoch=2),
        lambda: partition.fetch_offset_for_timestamp(LATEST_TIMESTAMP, 2),
        lambda: append(partition),
        lambda: partition.delete_records_on_leader(0),
        lambda: partition.update_follower_position(F2, 0, NOW),
    ):
        with pytest.raises(ReplicaError) as refused:
            call()
        assert refused.value.code is ErrorCode.not_leader_or_follower
    # The follower's epoch is still checked first (KIP-320).
    with pytest.raises(ReplicaError) as stale:
        partition.read(0, 1000, current_leader_epoch=1)
    assert stale.value.code is ErrorCode.fenced_leader_epoch


def test_the_high_watermark_survives_a_restart_in_the_checkpoint(tmp_path: Path) -> None:
    """The replica manager writes Kafka's replication-offset-checkpoint and reads it back."""
    logs = LogManager([tmp_path / "d"], cluster_id="c", node_id=ME)
    replicas = ReplicaManager(logs, ME)
    logs.create("t", 0, LogConfig())
    replicas.host_loaded()
    partition = replicas.get("t", 0)
    assert partition is not None and partition.is_leader
    partition.make_leader(1, (ME, F1), now_ms=NOW)
    append(partition, 3)
    partition.update_follower_position(F1, 2, NOW)
    replicas.checkpoint_high_watermarks()
    logs.close()
    text = (tmp_path / "d" / "replication-offset-checkpoint").read_text()
    assert text == "0\n1\nt 0 2\n"

    again = LogManager([tmp_path / "d"], cluster_id="c", node_id=ME)
    hosting = ReplicaManager(again, ME, lead_all=False)
    hosting.host_loaded()  # a cluster: wait for the controller
    reopened = hosting.get("t", 0)
    assert reopened is not None and reopened.role is Role.FOLLOWER
    assert (reopened.high_watermark, reopened.log_end_offset) == (2, 3)
    # A single broker leads at once: ISR = {self}, so the high watermark is the log end.
    single = ReplicaManager(again, ME)
    single.host_loaded()
    led = single.get("t", 0)
    assert led is not None and led.is_leader and led.leader_epoch == 1
    assert led.high_watermark == 3
    again.close()


def test_a_new_leader_tells_followers_where_their_older_epoch_ends_before_it_writes(
        tmp_path: Path) -> None:
    # An unclean election: this replica was behind (2 records of epoch 0) and now leads at
    # epoch 2 without having written anything; a follower that had epoch 1's records asks
    # where epoch 1 ends. The answer must be this log's end, so the follower drops its tail.
    partition, _ = make(tmp_path)
    partition.make_leader(0, (ME,), replicas=(ME, F1), now_ms=NOW)
    append(partition, 2)
    partition.make_follower(F1, 1)
    partition.make_leader(2, (ME,), replicas=(ME, F1), now_ms=NOW)
    assert partition.last_offset_for_leader_epoch(2, 1) == (0, 2)
    assert partition.last_offset_for_leader_epoch(2, 2) == (2, 2)


def test_a_stopped_partition_answers_later_acks_waiters_at_once(tmp_path: Path) -> None:
    """A reassignment (or a deletion) removes a partition while a deferred produce has
    appended but not yet started waiting: its wait must not last until the request timeout."""
    async def run() -> None:
        partition, _ = make(tmp_path)
        partition.make_leader(1, (ME, F1), now_ms=NOW)
        end = append(partition)
        early = partition.wait_for_acks(end)
        partition.stop()
        assert early.result() is ErrorCode.not_leader_or_follower
        assert partition.wait_for_acks(end).result() is ErrorCode.not_leader_or_follower
        assert partition.role is Role.FOLLOWER and partition.leader_id == -1

    asyncio.run(run())


def test_update_replicas_tracks_added_followers_and_keeps_isr_members(tmp_path: Path) -> None:
    partition, _ = make(tmp_path)
    partition.make_leader(1, (ME, F1), (ME, F1), now_ms=NOW)
    end = append(partition, 2)
    partition.update_replicas((F2, ME, F1), NOW)  # a reassignment adds F2
    assert partition.follower(F2) is not None and F2 not in partition.isr
    partition.update_follower_position(F1, end, NOW + 1)
    assert partition.high_watermark == end, "F2 is not in the ISR: it does not hold it back"
    partition.update_replicas((ME, F2), NOW)  # F1 removed, but still in the ISR
    assert partition.follower(F1) is not None, "kept until the controller drops it"
    # The controller's next state (epoch + 1, F1 out of the ISR) forgets it.
    assert partition.make_leader(2, (ME,), (ME, F2), now_ms=NOW + 2)
    assert partition.follower(F1) is None and partition.follower(F2) is not None
