"""The transaction coordinator's rules (coordinator/transactions), case by case, and the
``__transaction_state`` record codec."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from moldau.coordinator.transactions import (
    Decision,
    TransactionCoordinator,
    TxnConfig,
    TxnSnapshot,
    TxnState,
)
from moldau.coordinator.transactions.records import (
    RecordFormatError,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)

TID = "tid"
T0 = 1_000_000


def _apply(c: TransactionCoordinator, decision: Decision, tid: str = TID,
           written: bool = True) -> Decision:
    """Carry a decision's write out as the service does (begin, then finish)."""
    assert decision.write is not None, decision
    c.begin(tid, decision.write, fencing=decision.fencing)
    c.finish(tid, decision.write, written)
    return decision


def _init(c: TransactionCoordinator, now: int = T0, fresh: int = 7,
          expected: tuple[int, int] | None = None, timeout: int = 60_000) -> Decision:
    d = c.init_producer_id(TID, timeout, expected, now)
    if d.need_producer_id:
        d = c.init_producer_id(TID, timeout, expected, now, fresh)
    if d.write is not None:
        _apply(c, d)
    return d


def _ongoing(c: TransactionCoordinator, now: int = T0) -> None:
    _init(c, now)
    _apply(c, c.add_partitions(TID, 7, 0, [("t", 0), ("t", 1)], now))


def _state(c: TransactionCoordinator) -> TxnState:
    return c.txns[TID].current.state


@pytest.fixture
def c() -> TransactionCoordinator:
    return TransactionCoordinator(TxnConfig(max_timeout_ms=900_000, id_expiration_ms=10_000))


# -- InitProducerId ----------------------------------------------------------------------------


def test_new_id_gets_a_fresh_producer_id_at_epoch_0(c: TransactionCoordinator) -> None:
    first = c.init_producer_id(TID, 60_000, None, T0)
    assert first.need_producer_id and first.write is None
    d = _init(c)
    assert (d.error, d.producer_id, d.producer_epoch) == (ErrorCode.none, 7, 0)
    assert _state(c) is TxnState.EMPTY


@pytest.mark.parametrize("timeout", [0, -1, 900_001])
def test_timeout_outside_bounds_is_invalid(c: TransactionCoordinator, timeout: int) -> None:
    d = c.init_producer_id(TID, timeout, None, T0, 7)
    assert d.error is ErrorCode.invalid_transaction_timeout and d.write is None


def test_empty_transactional_id_is_invalid_request(c: TransactionCoordinator) -> None:
    assert c.init_producer_id("", 1000, None, T0, 7).error is ErrorCode.invalid_request


def test_reinit_bumps_the_epoch(c: TransactionCoordinator) -> None:
    _init(c)
    d = _init(c)
    assert (d.producer_id, d.producer_epoch) == (7, 1)


def test_reinit_with_exhausted_epoch_gets_a_fresh_id(c: TransactionCoordinator) -> None:
    _init(c)
    c.txns[TID].current = c.txns[TID].current.but(producer_epoch=32766)
    d = _init(c, fresh=8)
    assert (d.producer_id, d.producer_epoch) == (8, 0)


def test_init_while_write_pending_is_concurrent(c: TransactionCoordinator) -> None:
    _init(c)
    d = c.init_producer_id(TID, 60_000, None, T0)
    assert d.write is not None
    c.begin(TID, d.write)
    assert c.init_producer_id(TID, 60_000, None, T0).error is ErrorCode.concurrent_transactions
    assert c.add_partitions(TID, 7, 0, [("t", 0)], T0).error is \
        ErrorCode.concurrent_transactions


def test_failed_first_write_forgets_the_id(c: TransactionCoordinator) -> None:
    d = c.init_producer_id(TID, 60_000, None, T0, 7)
    _apply(c, d, written=False)
    assert TID not in c.txns


def test_init_over_ongoing_fences_and_aborts(c: TransactionCoordinator) -> None:
    _ongoing(c)
    d = c.init_producer_id(TID, 60_000, None, T0 + 1)
    assert d.fencing and d.error_after_write is ErrorCode.concurrent_transactions
    assert d.write is not None
    assert d.write.state is TxnState.PREPARE_ABORT and d.write.producer_epoch == 1
    c.begin(TID, d.write, fencing=True)
    assert c.txns[TID].state is TxnState.PREPARE_EPOCH_FENCE
    c.finish(TID, d.write, True)
    marker = c.marker(TID)
    assert marker is not None and not marker.commit and marker.producer_epoch == 1
    assert marker.partitions == {("t", 0), ("t", 1)}
    # The old producer is fenced; a retry of InitProducerId waits for the abort.
    assert c.end_txn(TID, 7, 0, True, T0).error is ErrorCode.producer_fenced
    assert c.init_producer_id(TID, 60_000, (7, 0), T0).error is ErrorCode.producer_fenced
    assert c.init_producer_id(TID, 60_000, None, T0).error is ErrorCode.concurrent_transactions
    complete = c.complete(TID, T0 + 2)
    assert complete is not None and complete.state is TxnState.COMPLETE_ABORT
    _apply(c, Decision(write=complete))
    again = _init(c)
    assert (again.error, again.producer_id, again.producer_epoch) == (ErrorCode.none, 7, 2)


def test_kip360_stale_pair_is_fenced(c: TransactionCoordinator) -> None:
    _init(c)
    _init(c)  # epoch 1
    assert c.init_producer_id(TID, 60_000, (7, 5), T0).error is ErrorCode.producer_fenced
    assert c.init_producer_id(TID, 60_000, (9, 1), T0).error is ErrorCode.producer_fenced
    d = _init(c, expected=(7, 1))
    assert (d.error, d.producer_epoch) == (ErrorCode.none, 2)


def test_kip360_retry_gets_the_same_answer(c: TransactionCoordinator) -> None:
    _init(c)
    _init(c, expected=(7, 0))  # bumped to 1
    retry = c.init_producer_id(TID, 60_000, (7, 0), T0)
    assert (retry.error, retry.write, retry.producer_id, retry.producer_epoch) == \
        (ErrorCode.none, None, 7, 1)


def test_init_during_prepare_is_concurrent(c: TransactionCoordinator) -> None:
    _ongoing(c)
    _apply(c, c.end_txn(TID, 7, 0, True, T0))
    assert c.init_producer_id(TID, 60_000, None, T0).error is ErrorCode.concurrent_transactions


# -- AddPartitionsToTxn ------------------------------------------------------------------------


def test_add_partitions_starts_and_extends_the_transaction(c: TransactionCoordinator) -> None:
    _init(c)
    _apply(c, c.add_partitions(TID, 7, 0, [("t", 0)], T0 + 5))
    cur = c.txns[TID].current
    assert (cur.state, cur.start_ms, cur.partitions) == (TxnState.ONGOING, T0 + 5, {("t", 0)})
    again = c.add_partitions(TID, 7, 0, [("t", 0)], T0 + 6)
    assert again.write is None and again.error is ErrorCode.none
    _apply(c, c.add_partitions(TID, 7, 0, [("u", 3)], T0 + 7))
    cur = c.txns[TID].current
    assert cur.partitions == {("t", 0), ("u", 3)} and cur.start_ms == T0 + 5


@pytest.mark.parametrize(("pid", "epoch", "code"), [
    (8, 0, ErrorCode.invalid_producer_id_mapping),
    (7, 1, ErrorCode.producer_fenced),
])
def test_add_partitions_checks_the_producer(c: TransactionCoordinator, pid: int, epoch: int,
                                            code: ErrorCode) -> None:
    _init(c)
    assert c.add_partitions(TID, pid, epoch, [("t", 0)], T0).error is code


def test_add_partitions_unknown_id(c: TransactionCoordinator) -> None:
    assert c.add_partitions("nope", 1, 0, [("t", 0)], T0).error is \
        ErrorCode.invalid_producer_id_mapping


def test_add_partitions_during_prepare_is_concurrent(c: TransactionCoordinator) -> None:
    _ongoing(c)
    _apply(c, c.end_txn(TID, 7, 0, False, T0))
    assert c.add_partitions(TID, 7, 0, [("t", 2)], T0).error is \
        ErrorCode.concurrent_transactions


def test_verify_only(c: TransactionCoordinator) -> None:
    _ongoing(c)
    assert c.verify_partitions(TID, 7, 0, [("t", 0), ("t", 9)]) == {
        ("t", 0): ErrorCode.none, ("t", 9): ErrorCode.invalid_txn_state}
    assert c.verify_partitions(TID, 7, 1, [("t", 0)]) == {("t", 0): ErrorCode.producer_fenced}


# -- EndTxn ------------------------------------------------------------------------------------


@pytest.mark.parametrize("commit", [True, False])
def test_end_txn_prepares_then_completes(c: TransactionCoordinator, commit: bool) -> None:
    _ongoing(c)
    d = _apply(c, c.end_txn(TID, 7, 0, commit, T0 + 1))
    assert d.error is ErrorCode.none
    assert _state(c) is (TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT)
    assert c.pending_markers([TID])[0].commit is commit
    done = c.complete(TID, T0 + 2)
    assert done is not None and done.partitions == frozenset()
    _apply(c, Decision(write=done))
    assert _state(c) is (TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT)
    retry = c.end_txn(TID, 7, 0, commit, T0 + 3)
    assert retry.error is ErrorCode.none and retry.write is None
    assert c.end_txn(TID, 7, 0, not commit, T0 + 3).error is ErrorCode.invalid_txn_state


def test_end_txn_errors(c: TransactionCoordinator) -> None:
    assert c.end_txn(TID, 7, 0, True, T0).error is ErrorCode.invalid_producer_id_mapping
    _init(c)
    assert c.end_txn(TID, 7, 0, True, T0).error is ErrorCode.invalid_txn_state  # Empty
    _apply(c, c.add_partitions(TID, 7, 0, [("t", 0)], T0))
    assert c.end_txn(TID, 8, 0, True, T0).error is ErrorCode.invalid_producer_id_mapping
    assert c.end_txn(TID, 7, 3, True, T0).error is ErrorCode.producer_fenced
    _apply(c, c.end_txn(TID, 7, 0, True, T0))
    assert c.end_txn(TID, 7, 0, True, T0).error is ErrorCode.concurrent_transactions
    assert c.end_txn(TID, 7, 0, False, T0).error is ErrorCode.invalid_txn_state


def test_end_txn_v2_bumps_the_epoch(c: TransactionCoordinator) -> None:
    _ongoing(c)
    d = _apply(c, c.end_txn(TID, 7, 0, True, T0, version2=True))
    assert (d.error, d.producer_id, d.producer_epoch) == (ErrorCode.none, 7, 1)
    marker = c.marker(TID)
    assert marker is not None and marker.producer_epoch == 1
    done = c.complete(TID, T0)
    assert done is not None
    _apply(c, Decision(write=done))
    assert c.txns[TID].current.client_version == 2
    retry = c.end_txn(TID, 7, 0, True, T0, version2=True)
    assert (retry.error, retry.producer_id, retry.producer_epoch) == (ErrorCode.none, 7, 1)
    # Next transaction with the new epoch; an abort without partitions is allowed.
    abort = _apply(c, c.end_txn(TID, 7, 1, False, T0, version2=True))
    assert abort.producer_epoch == 2


def test_end_txn_v2_rolls_over_an_exhausted_epoch(c: TransactionCoordinator) -> None:
    _ongoing(c)
    c.txns[TID].current = c.txns[TID].current.but(producer_epoch=32766)
    d = c.end_txn(TID, 7, 32766, True, T0, version2=True)
    assert d.need_producer_id
    d = _apply(c, c.end_txn(TID, 7, 32766, True, T0, version2=True, fresh_id=9))
    assert (d.producer_id, d.producer_epoch) == (9, 0)
    done = c.complete(TID, T0)
    assert done is not None and (done.producer_id, done.producer_epoch) == (9, 0)
    assert done.previous_producer_id == 7


# -- timers ------------------------------------------------------------------------------------


def test_timed_out_transaction_is_aborted_with_a_bump(c: TransactionCoordinator) -> None:
    _ongoing(c)
    assert c.next_deadline() == T0 + 60_000
    assert c.timed_out(T0 + 59_999) == []
    [(tid, snapshot)] = c.timed_out(T0 + 60_000)
    assert tid == TID and snapshot.state is TxnState.PREPARE_ABORT
    assert snapshot.producer_epoch == 1
    _apply(c, Decision(write=snapshot, fencing=True))
    assert c.timed_out(T0 + 10**6) == []
    done = c.complete(TID, T0 + 60_001)
    assert done is not None
    _apply(c, Decision(write=done))
    # The timed-out producer is fenced, also when it asks again with its id and epoch.
    assert c.add_partitions(TID, 7, 0, [("t", 0)], T0).error is ErrorCode.producer_fenced
    assert c.init_producer_id(TID, 60_000, (7, 0), T0).error is ErrorCode.producer_fenced
    fresh = _init(c)
    assert (fresh.producer_id, fresh.producer_epoch) == (7, 2)


def test_idle_ids_expire(c: TransactionCoordinator) -> None:
    _init(c)
    assert c.next_deadline() == T0 + 10_000
    assert c.expired(T0 + 9_999) == []
    assert c.expired(T0 + 10_000) == [TID]
    tombstone = TxnSnapshot(producer_id=-1, producer_epoch=-1, timeout_ms=0,
                            state=TxnState.DEAD)
    _apply(c, Decision(write=tombstone))
    assert TID not in c.txns


def test_ongoing_ids_do_not_expire(c: TransactionCoordinator) -> None:
    _ongoing(c)
    assert c.expired(T0 + 10**9) == []


# -- replay and the codec ----------------------------------------------------------------------


def test_replay_and_pending_markers(c: TransactionCoordinator) -> None:
    snapshot = TxnSnapshot(producer_id=3, producer_epoch=2, timeout_ms=5000,
                           state=TxnState.PREPARE_COMMIT, partitions=frozenset({("t", 1)}),
                           last_update_ms=5, start_ms=4)
    c.replay("a", decode_value(encode_value(snapshot)))
    c.replay("b", snapshot.but(state=TxnState.EMPTY))
    c.replay("b", None)
    assert set(c.txns) == {"a"}
    [marker] = c.pending_markers(["a"])
    assert (marker.producer_id, marker.producer_epoch, marker.commit) == (3, 2, True)


def test_key_codec() -> None:
    key = encode_key("my-id")
    assert key == b"\x00\x00\x00\x05my-id"
    assert decode_key(key) == "my-id"
    assert decode_key(b"\x00\x01\x00\x01x") is None


def test_value_v0_bytes_are_kafkas() -> None:
    snapshot = TxnSnapshot(producer_id=1, producer_epoch=2, timeout_ms=3,
                           state=TxnState.ONGOING, partitions=frozenset({("t", 5)}),
                           last_update_ms=6, start_ms=4)
    data = encode_value(snapshot)
    assert data == (b"\x00\x00" + (1).to_bytes(8, "big") + b"\x00\x02" + b"\x00\x00\x00\x03"
                    + b"\x01" + b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\x00\x00\x00\x01"
                    + b"\x00\x00\x00\x05" + (6).to_bytes(8, "big") + (4).to_bytes(8, "big"))
    assert decode_value(data) == snapshot


def test_value_v1_round_trip_with_tagged_fields() -> None:
    snapshot = TxnSnapshot(producer_id=10, producer_epoch=0, timeout_ms=1000,
                           state=TxnState.PREPARE_ABORT,
                           partitions=frozenset({("a", 0), ("a", 2), ("b", 1)}),
                           last_update_ms=7, start_ms=6, previous_producer_id=9,
                           next_producer_id=11, client_version=2)
    data = encode_value(snapshot)
    assert data[:2] == b"\x00\x01"
    assert decode_value(data) == snapshot


@pytest.mark.parametrize("data", [b"", b"\x00", b"\x00\x02" + b"\x00" * 40,
                                  b"\x00\x00" + b"\x00" * 10,
                                  encode_value(TxnSnapshot(1, 1, 1, TxnState.EMPTY))[:-1]])
def test_bad_values_raise(data: bytes) -> None:
    with pytest.raises(RecordFormatError):
        decode_value(data)


def test_unknown_status_raises() -> None:
    data = bytearray(encode_value(TxnSnapshot(1, 1, 1, TxnState.EMPTY)))
    data[2 + 8 + 2 + 4] = 9
    with pytest.raises(RecordFormatError):
        decode_value(bytes(data))


def test_timer_skips_writes_in_flight_and_postponed_ids(c: TransactionCoordinator) -> None:
    """No deadline in the past while the abort is being written (the timer would spin), and
    a failed timer write waits before it is tried again."""
    _ongoing(c)
    [(tid, snapshot)] = c.timed_out(T0 + 60_000)
    c.begin(tid, snapshot, fencing=True)
    assert c.next_deadline() is None
    assert c.timed_out(T0 + 60_001) == []
    c.finish(tid, snapshot, False)
    assert c.next_deadline() == T0 + 60_000
    c.postpone(tid, T0 + 61_000)
    assert c.next_deadline() == T0 + 61_000
    assert c.timed_out(T0 + 60_999) == []
    assert [t for t, _ in c.timed_out(T0 + 61_000)] == [TID]
