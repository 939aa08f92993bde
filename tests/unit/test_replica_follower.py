"""A follower's side of a partition: replicated appends keep the leader's offsets and epochs,
the high watermark follows the leader's, ISR changes wait for ZooKeeper in a cluster."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from moldau.log import LogConfig, PartitionLog
from moldau.log.errors import InvalidRecordError
from moldau.log.partition_log import AppendOrigin
from moldau.replica import Partition

from .batchgen import simple_batch

NOW = 1_700_000_000_000
LEADER, FOLLOWER, OTHER = 1, 2, 3


def make(tmp_path: Path, name: str, local_id: int) -> Partition:
    plog = PartitionLog.open(tmp_path / name / "t-0", dataclasses.replace(LogConfig()), 0,
                             True, NOW)
    return Partition(plog, local_id)


def leader_bytes(leader: Partition, start: int) -> bytes:
    data = leader.read(start, 1 << 20, fetch_only_committed=False)
    assert data is not None
    return data.read()


def test_replicated_batches_keep_offsets_and_epochs(tmp_path: Path) -> None:
    leader = make(tmp_path, "l", LEADER)
    leader.make_leader(3, (LEADER,))
    leader.append_as_leader(simple_batch(4), AppendOrigin.CLIENT, 1, NOW)
    leader.make_leader(5, (LEADER,))
    leader.append_as_leader(simple_batch(2), AppendOrigin.CLIENT, 1, NOW)
    follower = make(tmp_path, "f", FOLLOWER)
    follower.make_follower(LEADER, 5)
    end = follower.append_as_follower(leader_bytes(leader, 0), 4, NOW)
    assert end == 6
    assert follower.log.leader_epochs == leader.log.leader_epochs == [(3, 0), (5, 4)]
    assert follower.high_watermark == 4  # the leader's, as far as this log reaches
    assert leader_bytes(leader, 0) == leader_bytes_of(follower)
    # Truncation for a new leader cuts whole batches and the epochs after them.
    follower.truncate_to(4)
    assert follower.log_end_offset == 4 and follower.log.leader_epochs == [(3, 0)]


def leader_bytes_of(partition: Partition) -> bytes:
    data = partition.log.read(0, 1 << 20, max_offset=None)
    assert data is not None
    return data.read()


def test_an_overlap_is_refused_and_a_compaction_gap_accepted(tmp_path: Path) -> None:
    leader = make(tmp_path, "l", LEADER)
    leader.make_leader(0, (LEADER,))
    for _ in range(3):
        leader.append_as_leader(simple_batch(2), AppendOrigin.CLIENT, 1, NOW)
    follower = make(tmp_path, "f", FOLLOWER)
    follower.make_follower(LEADER, 0)
    follower.append_as_follower(leader_bytes(leader, 0)[:len(simple_batch(2))], 0, NOW)
    assert follower.log_end_offset == 2
    with pytest.raises(InvalidRecordError):  # starts below the log end: not a copy
        follower.append_as_follower(leader_bytes(leader, 0), 6, NOW)
    assert follower.log_end_offset == 2
    # The leader's cleaner removed offsets 2-3 (whole batches go, offsets never change):
    # a follower at 2 gets the batch at 4, as Kafka's followers do.
    follower.append_as_follower(leader_bytes(leader, 4), 6, NOW)
    assert follower.log_end_offset == 6 and follower.high_watermark == 6
    data = follower.log.read(2, 1 << 20, max_offset=None)
    assert data is not None and data.read() == leader_bytes(leader, 4)


def test_in_a_cluster_a_shrink_waits_for_zookeeper(tmp_path: Path) -> None:
    leader = make(tmp_path, "l", LEADER)
    proposed: list[frozenset[int]] = []
    leader.propose_isr = lambda _p, isr: proposed.append(isr)
    leader.make_leader(0, (LEADER, FOLLOWER, OTHER), (LEADER, FOLLOWER, OTHER), now_ms=NOW)
    leader.append_as_leader(simple_batch(1), AppendOrigin.CLIENT, -1, NOW)
    leader.update_follower_position(FOLLOWER, 1, NOW + 10)
    assert leader.maybe_shrink_isr(NOW + 100_000, 30_000) == {OTHER}
    assert proposed == [frozenset({LEADER, FOLLOWER})]
    assert leader.isr == {LEADER, FOLLOWER, OTHER}, "not shrunk before ZooKeeper has it"
    assert leader.high_watermark == 0
    leader.set_isr((LEADER, FOLLOWER))  # the write came back through the watch
    assert leader.isr == {LEADER, FOLLOWER} and leader.high_watermark == 1


@pytest.mark.parametrize("own_epoch_records", [3, 0])
def test_truncation_asks_again_when_the_leader_answers_an_epoch_the_follower_lacks(
        tmp_path: Path, own_epoch_records: int) -> None:
    """Leader epochs [0@0, 1@4, 3@8]; the follower has epoch 0 up to 6 (records the leader
    never had) and its own epoch 2 from 6. Asked for 2, the leader answers epoch 1 ending at 8;
    cutting at 8 would keep the follower's epoch-0 records 4-5 where the leader has epoch 1.
    The follower cuts back to where its epoch 0 ends (6), asks for epoch 0 and cuts at 4.
    The same when it led epoch 2 without writing anything (the epoch starts at its log end:
    the first cut removes no record but must remove that epoch, or it would ask forever)."""
    from moldau.replica.fetcher import truncation_offset

    leader = make(tmp_path, "l", LEADER)
    for epoch, count in ((0, 4), (1, 4), (3, 2)):
        leader.make_leader(epoch, (LEADER,))
        leader.append_as_leader(simple_batch(count), AppendOrigin.CLIENT, 1, NOW)
    follower = make(tmp_path, "f", FOLLOWER)
    for epoch, count in ((0, 4), (0, 2), (2, own_epoch_records)):  # truncation cuts batches
        follower.make_leader(epoch, (FOLLOWER,))
        if count:
            follower.append_as_leader(simple_batch(count), AppendOrigin.CLIENT, 1, NOW)
    assert follower.log.leader_epochs == [(0, 0), (2, 6)]
    follower.make_follower(LEADER, 3)
    rounds = []
    while len(rounds) < 5:
        asked = follower.log.latest_epoch
        epoch, end = leader.last_offset_for_leader_epoch(-1, asked)
        target, complete = truncation_offset(follower, epoch, end)
        rounds.append((asked, epoch, end, target))
        follower.truncate_to(target)
        if complete:
            break
    assert rounds == [(2, 1, 8, 6), (0, 0, 4, 4)]
    assert follower.log_end_offset == 4 and follower.log.leader_epochs == [(0, 0)]
    assert leader_bytes_of(follower) == leader_bytes(leader, 0)[:len(leader_bytes_of(follower))]
