"""DeleteRecords across replicas (the replica layer): the leader's answer waits for the lowest
log start offset of the ISR, and followers take the leader's log start from its fetches."""

from __future__ import annotations

import asyncio
from pathlib import Path

from kio.schema.errors import ErrorCode

from moldau.log import LogConfig, PartitionLog
from moldau.log.partition_log import AppendOrigin
from moldau.replica import Partition

from .batchgen import simple_batch

NOW = 1_700_000_000_000
ME, F1, F2 = 1, 2, 3


def make(tmp_path: Path, name: str = "l", local_id: int = ME) -> Partition:
    return Partition(PartitionLog.open(tmp_path / name / "t-0", LogConfig(), 0, True, NOW),
                     local_id)


def leader_with_ten(tmp_path: Path, isr: tuple[int, ...] = (ME, F1, F2)) -> Partition:
    partition = make(tmp_path)
    partition.make_leader(0, isr, now_ms=NOW)
    partition.append_as_leader(simple_batch(10), AppendOrigin.CLIENT, 1, NOW)
    for follower in isr[1:]:
        partition.update_follower_position(follower, 10, NOW)
    assert partition.high_watermark == 10
    return partition


def test_the_answer_waits_for_every_isr_replicas_log_start(tmp_path: Path) -> None:
    async def run() -> None:
        partition = leader_with_ten(tmp_path)
        assert partition.delete_records_on_leader(6) == (6, -1), "followers not heard of"
        assert partition.log_start_offset == 6
        done = partition.wait_for_low_watermark(6)
        partition.update_follower_log_start(F1, 0)
        partition.update_follower_log_start(F2, 0)
        assert partition.low_watermark() == 0 and not done.done()
        partition.update_follower_log_start(F1, 6)
        assert not done.done()
        partition.update_follower_log_start(F2, 6)
        assert done.result() is ErrorCode.none and partition.low_watermark() == 6
        # -1 means the high watermark, and an offset below the start is already done.
        assert partition.delete_records_on_leader(-1) == (10, 6)
        assert partition.delete_records_on_leader(3) == (3, 6)
        assert partition.wait_for_low_watermark(3).result() is ErrorCode.none

    asyncio.run(run())


def test_a_follower_leaving_the_isr_no_longer_holds_it_back(tmp_path: Path) -> None:
    async def run() -> None:
        partition = leader_with_ten(tmp_path)
        partition.update_follower_log_start(F1, 0)
        partition.update_follower_log_start(F2, 0)
        partition.delete_records_on_leader(4)
        done = partition.wait_for_low_watermark(4)
        partition.update_follower_log_start(F1, 4)
        assert not done.done()
        partition.set_isr((ME, F1))  # F2 paused: ZooKeeper's ISR shrank
        assert done.result() is ErrorCode.none

    asyncio.run(run())


def test_losing_leadership_answers_not_leader(tmp_path: Path) -> None:
    async def run() -> None:
        partition = leader_with_ten(tmp_path)
        partition.delete_records_on_leader(5)
        done = partition.wait_for_low_watermark(5)
        partition.make_follower(F1, 1)
        assert done.result() is ErrorCode.not_leader_or_follower

    asyncio.run(run())


def test_a_single_broker_answers_at_once(tmp_path: Path) -> None:
    async def run() -> None:
        partition = leader_with_ten(tmp_path, (ME,))
        assert partition.delete_records_on_leader(7) == (7, 7)
        assert partition.wait_for_low_watermark(7).result() is ErrorCode.none

    asyncio.run(run())


def test_a_follower_follows_the_leaders_log_start_up_to_its_high_watermark(
        tmp_path: Path) -> None:
    leader = leader_with_ten(tmp_path, (ME,))
    follower = make(tmp_path, "f", F1)
    follower.make_follower(ME, 0)
    data = leader.read(0, 1 << 20, fetch_only_committed=False)
    assert data is not None
    follower.append_as_follower(data.read(), 6, NOW)
    assert follower.high_watermark == 6
    follower.follow_log_start(8)
    assert follower.log_start_offset == 6, "not beyond what it knows is committed"
    follower.follow_log_start(3)
    assert follower.log_start_offset == 6, "never back"
    follower.follow_high_watermark(10)
    follower.follow_log_start(8)
    assert follower.log_start_offset == 8
    # A leader does not take anyone's log start.
    leader.follow_log_start(9)
    assert leader.log_start_offset == 0
