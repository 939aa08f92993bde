"""Moves between a broker's log dirs: the log manager's future replicas, its crash-safe swap,
and the replica layer's mover (copy, follow truncation and log start, swap)."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from moldau.log import LogConfig, LogError, LogManager
from moldau.log.manager import PROMOTED_MARKER
from moldau.log.partition_log import AppendOrigin
from moldau.replica.manager import ReplicaManager

from .batchgen import simple_batch

ME = 0
NOW = 1_700_000_000_000


def manager(*dirs: Path) -> LogManager:
    return LogManager(list(dirs), node_id=ME, cluster_id="c", now_ms=NOW)


def values(logs: LogManager, topic: str = "t") -> int:
    plog = logs.get(topic, 0)
    assert plog is not None
    return plog.log_end_offset


@pytest.mark.parametrize("marked", ["d1", "d2"])
def test_an_interrupted_swap_keeps_the_promoted_copy(tmp_path: Path, marked: str) -> None:
    """A crash between the swap's two renames leaves the partition live in both dirs; the
    copy with the marker wins whatever the load order, the other is removed."""
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    logs = manager(d1, d2)
    plog = logs.create("t", 0, LogConfig())
    home = plog.directory.parent
    other = d2 if home == d1 else d1
    plog.append(simple_batch(3), leader_epoch=0, now_ms=NOW)
    logs.close()
    shutil.copytree(home / "t-0", other / "t-0")
    promoted = tmp_path / marked
    (promoted / "t-0" / PROMOTED_MARKER).touch()
    stale = other if promoted == home else home
    again = manager(d1, d2)
    assert again.dir_of("t", 0) == promoted
    assert not (stale / "t-0").exists()
    assert not (promoted / "t-0" / PROMOTED_MARKER).exists()
    assert values(again) == 3
    again.close()


def test_two_unmarked_copies_stop_the_start(tmp_path: Path) -> None:
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    logs = manager(d1, d2)
    home = logs.create("t", 0, LogConfig()).directory.parent
    logs.close()
    shutil.copytree(home / "t-0", (d2 if home == d1 else d1) / "t-0")
    with pytest.raises(LogError, match="is in both"):
        manager(d1, d2)


def test_futures_load_with_their_partition_and_orphans_go(tmp_path: Path) -> None:
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    logs = manager(d1, d2)
    plog = logs.create("t", 0, LogConfig())
    target = d2 if plog.directory.parent == d1 else d1
    future = logs.create_future("t", 0, target)
    assert future.is_future and future.directory.name.endswith("-future")
    orphan = target / "gone-3.0123456789abcdef0123456789abcdef-future"
    orphan.mkdir()
    logs.close()
    again = manager(d1, d2)
    loaded = again.future("t", 0)
    assert loaded is not None and loaded.directory.parent == target
    assert not orphan.exists()
    rows = again.log_dir_sizes()
    assert [(tp, fut) for tp, _size, fut in rows[target]] == [(("t", 0), True)]
    again.discard_future("t", 0)
    assert not [p for p in target.iterdir() if p.name.endswith("-future")]
    again.close()


def _append(replicas: ReplicaManager, count: int) -> None:
    partition = replicas.get("t", 0)
    assert partition is not None
    partition.append_as_leader(simple_batch(count, value_size=2000), AppendOrigin.CLIENT,
                               required_acks=1, now_ms=NOW)


async def _until_moved(replicas: ReplicaManager, logs: LogManager, target: Path) -> None:
    for _ in range(2000):
        if logs.dir_of("t", 0) == target and logs.future("t", 0) is None:
            await asyncio.sleep(0.05)  # the old directory is removed on a thread
            return
        await asyncio.sleep(0.001)
    raise AssertionError("not moved")


def test_the_mover_copies_follows_and_swaps(tmp_path: Path) -> None:
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    config = LogConfig(segment_bytes=50_000)
    logs = manager(d1, d2)
    logs.create("t", 0, config)
    source = logs.dir_of("t", 0)
    assert source is not None
    target = d2 if source == d1 else d1
    replicas = ReplicaManager(logs, ME)
    replicas.host_loaded()
    partition = replicas.get("t", 0)
    assert partition is not None
    for _ in range(20):
        _append(replicas, 10)
    assert replicas.alter_log_dir("t", 0, "/nowhere") is ErrorCode.log_dir_not_found
    assert replicas.alter_log_dir("t", 0, str(source)) is ErrorCode.none
    assert logs.future("t", 0) is None
    assert replicas.alter_log_dir("u", 0, str(source)) is None  # not hosted here

    async def run() -> None:
        replicas.mover.rate = 100_000  # slow: a copy we can act on midway
        assert replicas.alter_log_dir("t", 0, str(target.resolve())) is ErrorCode.none
        future = logs.future("t", 0)
        assert future is not None
        for _ in range(1000):  # the first batch copied (the second waits its budget: 0.2 s)
            if future.log_end_offset:
                break
            await asyncio.sleep(0.01)
        assert 0 < future.log_end_offset < 200
        # The current log is truncated below the copy's end and grows again: the copy
        # follows (a follower's divergent tail).
        partition.log.truncate_to(future.log_end_offset - 5)
        _append(replicas, 7)
        _append(replicas, 3)
        assert partition.log.high_watermark >= 10
        partition.log.delete_records_before(10)
        replicas.mover.rate = 1 << 40
        await _until_moved(replicas, logs, target)

    asyncio.run(run())
    moved = replicas.get("t", 0)
    assert moved is partition and partition.log.directory == target / "t-0"
    assert partition.log_start_offset == 10
    expected_end = partition.log_end_offset
    assert not (source / "t-0").exists()
    assert [p.name for p in target.iterdir() if "t-0" in p.name] == ["t-0"]
    logs.close()
    # What was served after the swap survives a restart in the new dir.
    again = manager(d1, d2)
    assert again.dir_of("t", 0) == target
    reopened = again.get("t", 0)
    assert reopened is not None
    assert (reopened.log_start_offset, reopened.log_end_offset) == (10, expected_end)
    again.close()


def test_a_move_keeps_transactions(tmp_path: Path) -> None:
    """The copy carries the producers' transactions: aborted ones in the new segments'
    ``.txnindex``, an open one still open (the last stable offset unchanged)."""
    from moldau.log.control_batch import ControlType

    from .test_transactions_log import txn_batch

    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    logs = manager(d1, d2)
    plog = logs.create("t", 0, LogConfig(segment_bytes=400))
    source = plog.directory.parent
    target = d2 if source == d1 else d1
    replicas = ReplicaManager(logs, ME)
    replicas.host_loaded()
    aborted, open_pid = 7001, 7002
    for seq in range(0, 30, 3):
        plog.append(txn_batch(aborted, seq, 3), leader_epoch=0, now_ms=NOW,
                    origin=AppendOrigin.CLIENT)
    plog.append_marker(aborted, 0, ControlType.ABORT, 0, leader_epoch=0, now_ms=NOW)
    plog.append(txn_batch(open_pid, 0, 2), leader_epoch=0, now_ms=NOW,
                origin=AppendOrigin.CLIENT)
    plog.high_watermark = plog.log_end_offset
    end = plog.log_end_offset
    before = (plog.aborted_transactions(0, end), plog.first_unstable_offset,
              plog.last_stable_offset, len(plog.segments))
    assert before[0] and before[1] is not None and before[3] > 1

    async def run() -> None:
        assert replicas.alter_log_dir("t", 0, str(target)) is ErrorCode.none
        await _until_moved(replicas, logs, target)

    asyncio.run(run())
    moved = logs.get("t", 0)
    assert moved is not None and moved is not plog and moved.directory.parent == target
    assert (moved.aborted_transactions(0, end), moved.first_unstable_offset,
            moved.last_stable_offset, len(moved.segments)) == before
    assert moved.producers.ongoing_transaction(open_pid) == plog.producers.ongoing_transaction(
        open_pid)
    assert list(target.glob("t-0/*.txnindex"))
    logs.close()


def test_a_move_back_to_the_current_dir_cancels_it(tmp_path: Path) -> None:
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    logs = manager(d1, d2)
    plog = logs.create("t", 0, LogConfig())
    source = plog.directory.parent
    target = d2 if source == d1 else d1
    replicas = ReplicaManager(logs, ME)
    replicas.host_loaded()
    for _ in range(20):
        _append(replicas, 10)

    async def run() -> None:
        replicas.mover.rate = 10_000
        assert replicas.alter_log_dir("t", 0, str(target)) is ErrorCode.none
        await asyncio.sleep(0.05)
        assert plog.moving and logs.future("t", 0) is not None
        assert replicas.alter_log_dir("t", 0, str(source)) is ErrorCode.none
        await asyncio.sleep(0.05)
        assert logs.future("t", 0) is None and not plog.moving
        assert not replicas.mover.moving(("t", 0))

    asyncio.run(run())
    assert logs.dir_of("t", 0) == source
    assert not [p for p in target.iterdir() if p.name.endswith("-future")]
    logs.close()
