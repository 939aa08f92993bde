"""The partition side of transactions: markers, the last stable offset, the aborted index.

Real logs in a temporary directory and real v2 batches (tests/unit/batchgen.py). Kafka's
rules: a producer's first transactional batch opens its transaction, a control batch closes
it; the first unstable offset counts completed transactions until their marker is below the
high watermark; ABORTs go to the segment's 34-byte ``.txnindex`` entries; producers with an
open transaction never expire; snapshots and crash rebuilds restore all of it.
"""

from __future__ import annotations

import dataclasses
import struct
from pathlib import Path

import pytest

from moldau.log import LogConfig, PartitionLog
from moldau.log.batch import parse_batches
from moldau.log.control_batch import ControlType, encode_marker, marker_of
from moldau.log.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    TransactionCoordinatorFencedError,
)
from moldau.log.partition_log import AppendOrigin
from moldau.log.txn_index import AbortedTxn, TransactionIndex

from .batchgen import Record, build_batch

NOW = 1_700_000_000_000
A, B = 7001, 7002


def open_log(tmp_path: Path, clean: bool = True, **overrides: object) -> PartitionLog:
    config = dataclasses.replace(LogConfig(), **overrides)
    return PartitionLog.open(tmp_path / "txn-0", config, 0, clean, NOW)


def txn_batch(pid: int, seq: int, count: int = 1, epoch: int = 0) -> bytes:
    records = [Record(b"k", f"{pid}-{seq + i}".encode(), NOW) for i in range(count)]
    return build_batch(records, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                       transactional=True)


def produce(plog: PartitionLog, data: bytes) -> int:
    result = plog.append(data, leader_epoch=0, now_ms=NOW, origin=AppendOrigin.CLIENT)
    plog.high_watermark = plog.log_end_offset
    return result.base_offset


def marker(plog: PartitionLog, pid: int, control: ControlType, epoch: int = 0,
           coordinator_epoch: int = 0) -> int:
    result = plog.append_marker(pid, epoch, control, coordinator_epoch, leader_epoch=0,
                                now_ms=NOW)
    return result.base_offset


def test_marker_bytes_are_kafkas_control_batch() -> None:
    data = encode_marker(42, 3, ControlType.COMMIT, 17, NOW)
    (header,) = parse_batches(data)
    assert header.is_control and header.is_transactional
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (42, 3, -1)
    assert header.records_count == 1 and header.last_offset_delta == 0
    assert marker_of(data) == (ControlType.COMMIT, 17)
    # key = version 0, type 1; value = version 0, coordinator epoch 17 (Kafka's layout)
    assert struct.pack(">hh", 0, 1) + b"\x0c" + struct.pack(">hi", 0, 17) in data
    assert marker_of(encode_marker(1, 0, ControlType.ABORT, -1, NOW))[0] is ControlType.ABORT


def test_open_transaction_holds_the_lso_until_its_marker_is_below_the_high_watermark(
        tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    produce(plog, build_batch([Record(b"k", b"plain", NOW)]))  # offset 0, no producer
    assert plog.last_stable_offset == 1 and plog.first_unstable_offset is None
    first = produce(plog, txn_batch(A, 0, 2))  # 1-2
    produce(plog, txn_batch(A, 2))  # 3
    assert plog.producers.ongoing_transaction(A) == first == 1
    assert plog.first_unstable_offset == 1 and plog.last_stable_offset == 1
    at = plog.append_marker(A, 0, ControlType.COMMIT, 0, leader_epoch=0, now_ms=NOW)
    assert plog.producers.ongoing_transaction(A) is None
    # The marker (offset 4) is not below the high watermark yet: still unstable.
    assert plog.high_watermark == 4 and plog.last_stable_offset == 1
    plog.high_watermark = at.last_offset + 1
    assert plog.last_stable_offset == 5 and plog.first_unstable_offset is None


def test_lso_is_the_oldest_of_several_transactions(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    produce(plog, txn_batch(A, 0))  # 0
    produce(plog, txn_batch(B, 0))  # 1
    produce(plog, txn_batch(A, 1))  # 2
    assert plog.last_stable_offset == 0
    marker(plog, A, ControlType.ABORT)  # 3
    plog.high_watermark = plog.log_end_offset
    assert plog.last_stable_offset == 1  # B's transaction still open
    marker(plog, B, ControlType.COMMIT)  # 4
    plog.high_watermark = plog.log_end_offset
    assert plog.last_stable_offset == 5
    # A's abort, with the LSO at the time (B's first offset), in the segment's index.
    assert plog.aborted_transactions(0, 5) == [AbortedTxn(A, 0, 3, 1)]
    assert plog.aborted_transactions(4, 5) == []
    data = (plog.directory / f"{0:020d}.txnindex").read_bytes()
    assert data == struct.pack(">hqqqq", 0, A, 0, 3, 1)


def test_marker_checks_producer_and_coordinator_epochs(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    produce(plog, txn_batch(A, 0, epoch=2))
    with pytest.raises(InvalidProducerEpochError):
        marker(plog, A, ControlType.ABORT, epoch=1)
    marker(plog, A, ControlType.ABORT, epoch=2, coordinator_epoch=5)
    with pytest.raises(TransactionCoordinatorFencedError):
        marker(plog, A, ControlType.COMMIT, epoch=2, coordinator_epoch=4)
    # A marker for a producer without an open transaction is written anyway (Kafka).
    end = plog.log_end_offset
    marker(plog, B, ControlType.COMMIT)
    assert plog.log_end_offset == end + 1


def test_fenced_transactional_batch_is_refused(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    produce(plog, txn_batch(A, 0, epoch=3))
    with pytest.raises(InvalidProducerEpochError):
        produce(plog, txn_batch(A, 1, epoch=2))


def test_open_transaction_keeps_its_producer_from_expiring(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    produce(plog, txn_batch(A, 0))
    produce(plog, build_batch([Record(b"k", b"v", NOW)], producer_id=B, producer_epoch=0,
                              base_sequence=0))
    assert plog.expire_producers(NOW + 10**9, 1000) == 1
    assert A in plog.producers.producers and B not in plog.producers.producers


def test_snapshot_carries_the_open_transaction_and_coordinator_epoch(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    produce(plog, txn_batch(A, 0))
    marker(plog, A, ControlType.COMMIT, coordinator_epoch=9)
    first = produce(plog, txn_batch(A, 1))
    produce(plog, txn_batch(B, 0))
    plog.close()
    reopened = open_log(tmp_path)
    assert reopened.producers.ongoing_transaction(A) == first
    assert reopened.producers.ongoing_transaction(B) == first + 1
    assert reopened.producers.producers[A].coordinator_epoch == 9
    assert reopened.last_stable_offset == first
    with pytest.raises(TransactionCoordinatorFencedError):
        marker(reopened, A, ControlType.COMMIT, coordinator_epoch=8)


def test_crash_rebuild_restores_ongoing_transactions_and_the_aborted_index(
        tmp_path: Path) -> None:
    plog = open_log(tmp_path, segment_bytes=300)  # several segments, snapshots at rolls
    for seq in range(4):
        produce(plog, txn_batch(A, seq))
        produce(plog, txn_batch(B, seq))
        marker(plog, A, ControlType.ABORT)
        plog.high_watermark = plog.log_end_offset
    open_b = plog.producers.ongoing_transaction(B)
    aborted = plog.aborted_transactions(0, plog.log_end_offset)
    assert len(aborted) == 4 and len(plog.segments) > 2
    plog.flush()
    # A crash: no clean-shutdown snapshot, and the index entries of the last two segments
    # lost (the scan from the snapshot before the last one must find them again).
    for segment in plog.segments[-2:]:
        segment.txn_index.path.unlink(missing_ok=True)
    for segment in plog.segments:
        segment.close()
    crashed = open_log(tmp_path, clean=False, segment_bytes=300)
    assert crashed.producers.ongoing_transaction(B) == open_b
    assert crashed.aborted_transactions(0, crashed.log_end_offset) == aborted
    assert crashed.last_stable_offset == open_b


def test_truncation_drops_markers_and_reopens_transactions(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    produce(plog, txn_batch(A, 0))  # 0
    at = marker(plog, A, ControlType.ABORT)  # 1
    plog.high_watermark = plog.log_end_offset
    assert plog.aborted_transactions(0, 2) == [AbortedTxn(A, 0, 1, 2)]
    plog.truncate_to(at)
    assert plog.aborted_transactions(0, 2) == []
    assert plog.producers.ongoing_transaction(A) == 0
    assert plog.last_stable_offset == 0
    assert not (plog.directory / f"{0:020d}.txnindex").exists()


def test_follower_builds_the_same_state_from_replicated_batches(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "l")
    produce(leader, txn_batch(A, 0, 3))
    produce(leader, txn_batch(B, 0))
    marker(leader, A, ControlType.ABORT)
    leader.high_watermark = leader.log_end_offset
    data = b"".join(s.file_slice().read() for s in leader.segments)
    follower = open_log(tmp_path / "f")
    follower.append_replicated(data, NOW)
    follower.high_watermark = leader.high_watermark
    assert follower.aborted_transactions(0, 10) == leader.aborted_transactions(0, 10)
    assert follower.last_stable_offset == leader.last_stable_offset == 3
    assert follower.producers.ongoing_transaction(B) == 3


def test_txn_index_file_round_trip_and_torn_tail(tmp_path: Path) -> None:
    index = TransactionIndex(tmp_path / "x.txnindex")
    index.append(AbortedTxn(1, 10, 20, 21))
    index.append(AbortedTxn(2, 15, 30, 31))
    with open(index.path, "ab") as f:
        f.write(b"\x00" * 10)  # torn entry
    again = TransactionIndex(index.path)
    again.load()
    assert again.entries == [AbortedTxn(1, 10, 20, 21), AbortedTxn(2, 15, 30, 31)]
    again.truncate(30)
    assert again.entries == [AbortedTxn(1, 10, 20, 21)]
    assert index.path.stat().st_size == 34


def test_read_committed_lists_only_the_aborts_overlapping_what_it_returns(
        tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    produce(plog, txn_batch(A, 0))  # 0
    marker(plog, A, ControlType.ABORT)  # 1
    for _ in range(4):
        produce(plog, build_batch([Record(b"k", b"plain", NOW)]))  # 2-5
    produce(plog, txn_batch(B, 0))  # 6
    marker(plog, B, ControlType.ABORT)  # 7
    produce(plog, txn_batch(A, 1))  # 8, left open
    plog.high_watermark = plog.log_end_offset
    assert plog.last_stable_offset == 8
    data, aborted = plog.read_committed(0, 1)  # one batch: offset 0 only
    assert data is not None and aborted == [AbortedTxn(A, 0, 1, 2)]
    data, aborted = plog.read_committed(2, 1)
    assert data is not None and aborted == []
    data, aborted = plog.read_committed(0, 1 << 20)
    assert data is not None and [t.producer_id for t in aborted] == [A, B]
    assert len(parse_batches(data.read())) == 8  # stops at the LSO: not the open batch
    assert plog.read_committed(8, 1 << 20) == (None, [])


def test_lso_does_not_fall_below_the_log_start(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    produce(plog, txn_batch(A, 0))  # 0, left open
    for _ in range(3):
        produce(plog, build_batch([Record(b"k", b"plain", NOW)]))  # 1-3
    assert plog.last_stable_offset == 0
    plog.delete_records_before(2)
    assert plog.last_stable_offset == 2  # as Kafka: max(first unstable, log start)
    assert plog.producers.ongoing_transaction(A) == 0


def test_plain_batch_during_an_open_transaction_is_invalid_txn_state(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    produce(plog, txn_batch(A, 0))
    plain = build_batch([Record(b"k", b"v", NOW)], producer_id=A, producer_epoch=0,
                        base_sequence=1)
    with pytest.raises(InvalidTxnStateError):
        produce(plog, plain)
    marker(plog, A, ControlType.COMMIT)
    produce(plog, plain)  # after the marker it is fine




def test_a_follower_forgets_completed_transactions_once_its_high_watermark_passes(
        tmp_path: Path) -> None:
    from moldau.replica.partition import Partition

    leader = open_log(tmp_path / "l")
    for seq in range(50):
        produce(leader, txn_batch(A, seq))
        marker(leader, A, ControlType.COMMIT)
    data = b"".join(s.file_slice().read() for s in leader.segments)
    follower = Partition(open_log(tmp_path / "f"), 2)
    follower.make_follower(1, 0)
    follower.append_as_follower(data, 0, NOW)
    assert len(follower.log.producers.unstable_completed) == 50
    follower.append_as_follower(b"", leader.log_end_offset, NOW)
    assert len(follower.log.producers.unstable_completed) == 0
    assert follower.last_stable_offset == leader.log_end_offset

def test_log_dump_prints_the_aborted_transactions_of_a_txnindex(tmp_path: Path) -> None:
    from ..helpers.cli import ok, run_moldau

    plog = open_log(tmp_path)
    produce(plog, txn_batch(A, 0, 2))
    marker(plog, A, ControlType.ABORT)
    plog.close()
    path = plog.directory / f"{0:020d}.txnindex"
    result = ok(run_moldau("log", "dump", str(plog.directory)))
    assert f"Dumping {path}" in result.stdout
    assert f"producerId: {A} firstOffset: 0 lastOffset: 2 lastStableOffset: 3" in result.stdout
    as_json = ok(run_moldau("log", "dump", str(path), "--format", "json"))
    assert '"type": "aborted_txn"' in as_json.stdout
