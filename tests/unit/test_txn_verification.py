"""KIP-890 verification's pure parts: which batches are checked, and how the coordinator's
answer reaches a producer of each Produce version (Kafka's AddPartitionsToTxnManager and
ReplicaManager mapping)."""

from __future__ import annotations

from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from moldau.broker.txn_verification import (
    NOT_ADDED_MESSAGE,
    Refusal,
    _translate,
    producer_stamp,
    transactional_producer,
)
from moldau.log import LogConfig, PartitionLog
from moldau.log.control_batch import ControlType
from moldau.log.partition_log import AppendOrigin
from tests.unit.batchgen import Record, build_batch

NOW = 1_700_000_000_000
PID = 4000


def _batch(**kw: object) -> bytes:
    return build_batch([Record(key=None, value=b"v", timestamp=1)], **kw)  # type: ignore[arg-type]


def test_only_transactional_batches_are_candidates() -> None:
    assert transactional_producer(_batch(producer_id=7, producer_epoch=3, base_sequence=0,
                                         transactional=True)) == (7, 3)
    assert transactional_producer(_batch(producer_id=7, producer_epoch=3,
                                         base_sequence=0)) is None  # idempotent only
    assert transactional_producer(_batch()) is None
    assert transactional_producer(None) is None
    assert transactional_producer(b"\x00" * 10) is None  # left to the append to refuse


@pytest.mark.parametrize(("code", "version", "verify_only", "expected"), [
    (ErrorCode.none, 9, True, None),
    (ErrorCode.transaction_abortable, 10, True,
     Refusal(ErrorCode.invalid_txn_state, NOT_ADDED_MESSAGE)),
    (ErrorCode.transaction_abortable, 11, True, Refusal(ErrorCode.transaction_abortable, None)),
    (ErrorCode.invalid_txn_state, 11, True, Refusal(ErrorCode.transaction_abortable, None)),
    (ErrorCode.invalid_txn_state, 12, False,
     Refusal(ErrorCode.invalid_txn_state, NOT_ADDED_MESSAGE)),
    (ErrorCode.producer_fenced, 11, True, Refusal(ErrorCode.invalid_producer_epoch, None)),
    (ErrorCode.network_exception, 11, True, Refusal(ErrorCode.network_exception, None)),
    (ErrorCode.invalid_producer_id_mapping, 9, True,
     Refusal(ErrorCode.invalid_producer_id_mapping, None)),
])
def test_coordinator_answers_as_the_producer_version_knows_them(
        code: ErrorCode, version: int, verify_only: bool, expected: Refusal | None) -> None:
    assert _translate(code, version, verify_only) == expected


@pytest.mark.parametrize("code", [ErrorCode.concurrent_transactions,
                                  ErrorCode.coordinator_load_in_progress,
                                  ErrorCode.coordinator_not_available,
                                  ErrorCode.not_coordinator])
def test_a_coordinator_that_cannot_answer_now_is_retriable(code: ErrorCode) -> None:
    refusal = _translate(code, 11, True)
    assert refusal is not None and refusal.code is ErrorCode.not_enough_replicas
    assert refusal.message is not None and code.name.upper() in refusal.message


def test_the_guard_stamp_changes_when_a_marker_is_written(tmp_path: Path) -> None:
    """Kafka's verification guard: what the leader reads before asking the coordinator must
    differ after a marker for the producer was written meanwhile (so the verified batch is not
    appended into a transaction that ended), and stay equal when others write."""
    plog = PartitionLog.open(tmp_path / "guard-0", LogConfig(), 0, True, NOW)
    state = plog.producers
    assert producer_stamp(state, PID) is None  # unknown producer
    before = producer_stamp(state, PID)
    plog.append_marker(PID, 0, ControlType.ABORT, 3, leader_epoch=0, now_ms=NOW)
    assert producer_stamp(state, PID) != before  # a marker for an unknown producer
    plog.append(_batch(producer_id=PID, producer_epoch=0, base_sequence=0, transactional=True),
                leader_epoch=0, now_ms=NOW, origin=AppendOrigin.CLIENT)
    opened = producer_stamp(state, PID)
    plog.append(_batch(producer_id=PID + 1, producer_epoch=0, base_sequence=0),
                leader_epoch=0, now_ms=NOW, origin=AppendOrigin.CLIENT)
    assert producer_stamp(state, PID) == opened  # another producer's batch
    plog.append_marker(PID, 0, ControlType.COMMIT, 3, leader_epoch=0, now_ms=NOW)
    assert producer_stamp(state, PID) != opened  # same epochs and timestamp: the offset
