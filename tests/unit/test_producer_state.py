"""Idempotent producer state: Kafka's sequence and epoch rules, snapshots, rebuilds.

Real logs in a temporary directory and real v2 batches (tests/unit/batchgen.py); each rule is
checked through ``PartitionLog.append`` as the leader applies it.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from moldau.log import LogConfig, PartitionLog
from moldau.log.errors import InvalidProducerEpochError, OutOfOrderSequenceError
from moldau.log.partition_log import AppendOrigin
from moldau.log.producer_state import ProducerState, last_sequence, snapshot_path

from .batchgen import Record, build_batch

NOW = 1_700_000_000_000
PID = 4000


def open_log(tmp_path: Path, clean: bool = True, **overrides: object) -> PartitionLog:
    config = dataclasses.replace(LogConfig(), **overrides)
    return PartitionLog.open(tmp_path / "idem-0", config, 0, clean, NOW)


def batch(seq: int, count: int = 1, *, pid: int = PID, epoch: int = 0, ts: int = NOW) -> bytes:
    records = [Record(b"k", f"v{seq + i}".encode(), ts) for i in range(count)]
    return build_batch(records, producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def produce(plog: PartitionLog, data: bytes, epoch: int = 0):  # type: ignore[no-untyped-def]
    return plog.append(data, leader_epoch=epoch, now_ms=NOW, origin=AppendOrigin.CLIENT)


def test_in_sequence_batches_append_and_a_retry_gets_its_original_offsets(
        tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    first = produce(plog, batch(0, 3))
    second = produce(plog, batch(3, 2))
    assert (first.base_offset, second.base_offset, plog.log_end_offset) == (0, 3, 5)
    retry = produce(plog, batch(0, 3))
    assert retry.duplicate and (retry.base_offset, retry.last_offset) == (0, 2)
    assert plog.log_end_offset == 5  # nothing written again


def test_any_of_the_last_five_batches_is_a_duplicate_the_sixth_is_not(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    for seq in range(6):
        produce(plog, batch(seq))
    for seq in range(1, 6):
        assert produce(plog, batch(seq)).base_offset == seq
    with pytest.raises(OutOfOrderSequenceError):
        produce(plog, batch(0))  # older than the last five: Kafka cannot tell, refuses
    assert plog.log_end_offset == 6


def test_a_gap_is_out_of_order(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    produce(plog, batch(0, 2))
    with pytest.raises(OutOfOrderSequenceError, match=r"3 \(incoming seq. number\), 1"):
        produce(plog, batch(3))
    assert plog.log_end_offset == 2


def test_an_older_epoch_is_fenced_and_a_new_epoch_starts_at_zero(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    produce(plog, batch(0, epoch=1))
    with pytest.raises(InvalidProducerEpochError):
        produce(plog, batch(1, epoch=0))
    with pytest.raises(OutOfOrderSequenceError, match="new epoch"):
        produce(plog, batch(5, epoch=2))
    assert produce(plog, batch(0, epoch=2)).base_offset == 1
    # The same first sequence at the new epoch is a new batch, not a retry of epoch 1's.
    assert not produce(plog, batch(1, epoch=2)).duplicate


def test_an_unknown_producer_may_start_at_any_sequence(tmp_path: Path) -> None:
    # KIP-360 (Kafka 2.5+): a producer whose state expired continues; no UNKNOWN_PRODUCER_ID.
    plog = open_log(tmp_path)
    assert produce(plog, batch(1234)).base_offset == 0
    assert produce(plog, batch(1235)).base_offset == 1


def test_expiry_forgets_idle_producers(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    produce(plog, batch(0, ts=NOW - 10_000))
    produce(plog, batch(0, pid=PID + 1, ts=NOW))
    assert plog.expire_producers(NOW, 5_000) == 1
    assert set(plog.producers.producers) == {PID + 1}
    assert produce(plog, batch(7)).base_offset == 2  # forgotten: starts anew


def test_sequences_wrap_at_int32_max(tmp_path: Path) -> None:
    assert last_sequence(0x7FFFFFFF, 0) == 0x7FFFFFFF
    assert last_sequence(0x7FFFFFFE, 2) == 0
    plog = open_log(tmp_path)
    produce(plog, batch(0x7FFFFFFF))
    assert produce(plog, batch(0)).base_offset == 1


def test_non_idempotent_batches_skip_the_checks(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    data = build_batch([Record(b"k", b"v", NOW)])
    produce(plog, data)
    assert not produce(plog, data).duplicate
    assert plog.log_end_offset == 2 and len(plog.producers) == 0


def test_state_survives_a_clean_restart_through_a_snapshot(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    produce(plog, batch(0, 2))
    produce(plog, batch(2))
    plog.close()
    assert snapshot_path(plog.directory, 3).exists()
    again = open_log(tmp_path)
    assert produce(again, batch(2)).duplicate  # the last batch is in Kafka's snapshot
    assert produce(again, batch(3)).base_offset == 3


def test_state_is_rebuilt_from_the_log_after_a_crash(tmp_path: Path) -> None:
    plog = open_log(tmp_path, segment_bytes=200)
    for seq in range(0, 12, 2):
        produce(plog, batch(seq, 2))
    assert len(plog.segments) > 2
    plog.flush()  # no clean close: no snapshot at the log end
    snapshots = plog.producers.snapshot_offsets()
    assert snapshots and snapshots[-1] < plog.log_end_offset
    again = open_log(tmp_path, clean=False, segment_bytes=200)
    # All five last batches come back from the header scan, not only the snapshot's one.
    for seq in range(2, 12, 2):
        assert produce(again, batch(seq, 2)).base_offset == seq
    assert again.log_end_offset == 12


def test_truncation_rebuilds_the_state_below_the_truncation_point(tmp_path: Path) -> None:
    plog = open_log(tmp_path, segment_bytes=300)
    for seq in range(0, 10, 2):
        produce(plog, batch(seq, 2))
    plog.truncate_to(6)  # a follower dropping a divergent tail
    assert all(o <= 6 for o in plog.producers.snapshot_offsets())
    # Batches 6.. are gone: their retry is written again, in sequence.
    assert produce(plog, batch(6, 2)).base_offset == 6
    assert produce(plog, batch(4, 2)).duplicate


def test_followers_build_the_same_state_from_replicated_batches(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "leader")
    follower = open_log(tmp_path / "follower")
    produce(leader, batch(0, 2))
    produce(leader, batch(2))
    data = b"".join(os.pread(s.fd, s.size, 0) for s in leader.segments)
    follower.append_replicated(data, NOW)
    result = follower.append(batch(2), leader_epoch=1, now_ms=NOW, origin=AppendOrigin.CLIENT)
    assert result.duplicate and result.base_offset == 2


def test_a_damaged_snapshot_is_dropped_and_the_log_scanned(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    produce(plog, batch(0))
    plog.close()
    path = snapshot_path(plog.directory, 1)
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    again = open_log(tmp_path)
    assert not path.exists()
    assert produce(again, batch(0)).duplicate  # rebuilt from the log's headers instead


def test_snapshot_format_is_kafkas(tmp_path: Path) -> None:
    state = ProducerState(tmp_path, "t-0")
    data = state.snapshot_bytes()
    assert data == bytes.fromhex("0001") + data[2:6] + bytes(4)  # version 1, crc, 0 entries
