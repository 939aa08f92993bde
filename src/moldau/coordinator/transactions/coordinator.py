"""The transaction coordinator's rules, as a pure state machine (no I/O, no clock).

Each request method looks at the transactional id's metadata and returns a
:class:`Decision`: an error to answer at once, or a new :class:`TxnSnapshot` to write to
``__transaction_state`` first. The service (broker/transaction_service.py) marks the write as
pending (:meth:`TransactionCoordinator.begin`), appends it with acks=all, and reports the
outcome (:meth:`TransactionCoordinator.finish`); only then does the new state count. While a
write is pending every other request for that id is answered CONCURRENT_TRANSACTIONS, as
Kafka's ``pendingState`` does.

The rules follow Kafka's TransactionCoordinator (KIP-98, KIP-360, KIP-588, KIP-890):

- InitProducerId: a new id gets a fresh producer id at epoch 0; a known one in Empty or
  Complete* has its epoch bumped (a fresh producer id once the epoch is exhausted); one with
  an Ongoing transaction is fenced: the epoch is bumped and the transaction aborted, and the
  caller is told CONCURRENT_TRANSACTIONS until the abort completes. With KIP-360 the caller
  names the id and epoch it holds: a stale pair is PRODUCER_FENCED, a retry of the last
  bump gets the same answer again.
- AddPartitionsToTxn / AddOffsetsToTxn move Empty/Complete* to Ongoing (the transaction's
  start time) or add to an Ongoing transaction.
- EndTxn writes PrepareCommit/PrepareAbort; the service then has the markers written and
  calls :meth:`TransactionCoordinator.complete`, which writes CompleteCommit/CompleteAbort.
  Transactions version 2 (EndTxn v5) bumps the epoch at every prepare and tells the client
  the new id and epoch.
- Ongoing transactions older than their timeout are aborted with an epoch bump (fencing the
  producer); ids idle in Empty/Complete* longer than ``transactional.id.expiration.ms`` are
  removed with a tombstone.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from .state import (
    LAST_USABLE_EPOCH,
    MAX_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TopicPartition,
    TransactionMetadata,
    TxnSnapshot,
    TxnState,
)


@dataclass(frozen=True, slots=True)
class TxnConfig:
    max_timeout_ms: int = 900_000
    id_expiration_ms: int = 604_800_000


@dataclass(frozen=True, slots=True)
class Decision:
    """What to do for one request.

    ``write``: the snapshot to append (None: nothing to write). Once written, the request is
    answered ``error_after_write`` if set, else NONE with ``producer_id``/``producer_epoch``;
    a failed write is answered with the write's error. ``need_producer_id``: ask again with a
    fresh producer id (the service allocates one; allocation may cost a ZooKeeper round trip).
    """

    error: ErrorCode = ErrorCode.none
    write: TxnSnapshot | None = None
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    error_after_write: ErrorCode | None = None
    need_producer_id: bool = False
    fencing: bool = False


@dataclass(frozen=True, slots=True)
class Marker:
    """Markers to write for a transaction in Prepare*: one per partition."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    partitions: frozenset[TopicPartition]


@dataclass(slots=True)
class TransactionCoordinator:
    config: TxnConfig
    txns: dict[str, TransactionMetadata] = field(default_factory=dict)

    # -- loading -----------------------------------------------------------------------------

    def replay(self, transactional_id: str, snapshot: TxnSnapshot | None) -> None:
        """Apply one ``__transaction_state`` record (None: a tombstone)."""
        if snapshot is None or snapshot.state is TxnState.DEAD:
            self.txns.pop(transactional_id, None)
            return
        self.txns[transactional_id] = TransactionMetadata(transactional_id, snapshot)

    def unload(self, transactional_ids: Iterable[str]) -> None:
        for transactional_id in list(transactional_ids):
            self.txns.pop(transactional_id, None)

    def pending_markers(self, transactional_ids: Iterable[str]) -> list[Marker]:
        """The markers still owed by transactions in Prepare* (after a load)."""
        found = []
        for transactional_id in transactional_ids:
            meta = self.txns.get(transactional_id)
            if meta is not None and meta.pending is None and meta.current.state.is_prepare:
                found.append(self._marker(meta))
        return found

    # -- writes ------------------------------------------------------------------------------

    def begin(self, transactional_id: str, snapshot: TxnSnapshot, *, fencing: bool = False
              ) -> None:
        """``snapshot`` is being written for ``transactional_id``."""
        meta = self.txns.get(transactional_id)
        if meta is None:
            # A new id: it exists (pending) from now on, so concurrent requests wait.
            meta = self.txns[transactional_id] = TransactionMetadata(
                transactional_id, snapshot.but(state=TxnState.DEAD))
        meta.pending = snapshot
        meta.fencing = fencing

    def finish(self, transactional_id: str, snapshot: TxnSnapshot, written: bool) -> None:
        """The write of ``snapshot`` ended: make it current, or drop it."""
        meta = self.txns.get(transactional_id)
        if meta is None or meta.pending is not snapshot:
            return  # unloaded meanwhile
        meta.pending = None
        meta.fencing = False
        if written and snapshot.state is TxnState.DEAD:
            del self.txns[transactional_id]  # the tombstone of an expired id
        elif written:
            meta.current = snapshot
        elif meta.current.state is TxnState.DEAD:
            del self.txns[transactional_id]  # a new id whose first write failed

    # -- InitProducerId ----------------------------------------------------------------------

    def init_producer_id(self, transactional_id: str, timeout_ms: int,
                         expected: tuple[int, int] | None, now: int,
                         fresh_id: int | None = None) -> Decision:
        if not transactional_id:
            return Decision(ErrorCode.invalid_request)
        if timeout_ms <= 0 or timeout_ms > self.config.max_timeout_ms:
            return Decision(ErrorCode.invalid_transaction_timeout)
        meta = self.txns.get(transactional_id)
        if meta is None:
            if fresh_id is None:
                return Decision(need_producer_id=True)
            snapshot = TxnSnapshot(producer_id=fresh_id, producer_epoch=0,
                                   timeout_ms=timeout_ms, state=TxnState.EMPTY,
                                   last_update_ms=now)
            return Decision(write=snapshot, producer_id=fresh_id, producer_epoch=0)
        if meta.pending is not None:
            return Decision(ErrorCode.concurrent_transactions)
        cur = meta.current
        if expected is not None and not self._valid_expected(cur, expected):
            return Decision(ErrorCode.producer_fenced)
        state = cur.state
        if state.is_prepare or state is TxnState.DEAD:
            return Decision(ErrorCode.concurrent_transactions)
        if state is TxnState.ONGOING:
            # Fence the producer that runs the transaction: bump the epoch, abort it. The
            # caller retries (CONCURRENT_TRANSACTIONS) until the abort completes.
            epoch = cur.producer_epoch + 1 if cur.producer_epoch < MAX_EPOCH \
                else cur.producer_epoch
            snapshot = cur.but(state=TxnState.PREPARE_ABORT, producer_epoch=epoch,
                               last_producer_epoch=NO_PRODUCER_EPOCH, last_update_ms=now)
            return Decision(write=snapshot, error_after_write=ErrorCode.concurrent_transactions,
                            fencing=True)
        # Empty, CompleteCommit, CompleteAbort.
        if expected is not None and expected[1] == cur.last_producer_epoch \
                and expected[0] == cur.producer_id and cur.last_producer_epoch >= 0:
            # A retry of the bump already made: the same answer.
            return Decision(producer_id=cur.producer_id, producer_epoch=cur.producer_epoch)
        if cur.producer_epoch >= LAST_USABLE_EPOCH:
            if fresh_id is None:
                return Decision(need_producer_id=True)
            producer_id, epoch, last = fresh_id, 0, NO_PRODUCER_EPOCH
        else:
            producer_id, epoch, last = cur.producer_id, cur.producer_epoch + 1, \
                cur.producer_epoch
        snapshot = TxnSnapshot(producer_id=producer_id, producer_epoch=epoch,
                               timeout_ms=timeout_ms, state=TxnState.EMPTY, last_update_ms=now,
                               previous_producer_id=NO_PRODUCER_ID,
                               client_version=cur.client_version, last_producer_epoch=last)
        return Decision(write=snapshot, producer_id=producer_id, producer_epoch=epoch)

    @staticmethod
    def _valid_expected(cur: TxnSnapshot, expected: tuple[int, int]) -> bool:
        """KIP-360: the id and epoch a producer presents must be its current pair, or the
        pair before the last bump (a retry), or (TV2) the id before a rollover."""
        producer_id, epoch = expected
        if producer_id == cur.producer_id:
            return epoch in (cur.producer_epoch, cur.last_producer_epoch)
        return producer_id == cur.previous_producer_id and producer_id != NO_PRODUCER_ID

    # -- AddPartitionsToTxn / AddOffsetsToTxn ------------------------------------------------

    def _check_producer(self, meta: TransactionMetadata | None, producer_id: int,
                        epoch: int) -> ErrorCode:
        if meta is None or meta.current.state is TxnState.DEAD:
            return ErrorCode.invalid_producer_id_mapping
        if meta.current.producer_id != producer_id:
            return ErrorCode.invalid_producer_id_mapping
        if meta.current.producer_epoch != epoch:
            return ErrorCode.producer_fenced
        return ErrorCode.none

    def add_partitions(self, transactional_id: str, producer_id: int, epoch: int,
                       partitions: Sequence[TopicPartition], now: int) -> Decision:
        if not transactional_id:
            return Decision(ErrorCode.invalid_request)
        meta = self.txns.get(transactional_id)
        code = self._check_producer(meta, producer_id, epoch)
        if code is not ErrorCode.none:
            return Decision(code)
        assert meta is not None
        if meta.pending is not None or meta.current.state.is_prepare:
            return Decision(ErrorCode.concurrent_transactions)
        cur = meta.current
        if cur.state is TxnState.ONGOING and set(partitions) <= cur.partitions:
            return Decision(producer_id=producer_id, producer_epoch=epoch)
        if cur.state is TxnState.ONGOING:
            snapshot = cur.but(partitions=cur.partitions | frozenset(partitions),
                               last_update_ms=now)
        else:
            snapshot = cur.but(state=TxnState.ONGOING, partitions=frozenset(partitions),
                               start_ms=now, last_update_ms=now)
        return Decision(write=snapshot, producer_id=producer_id, producer_epoch=epoch)

    def verify_partitions(self, transactional_id: str, producer_id: int, epoch: int,
                          partitions: Sequence[TopicPartition]
                          ) -> dict[TopicPartition, ErrorCode]:
        """AddPartitionsToTxn with verify_only (a leader checking a transactional produce,
        KIP-890): each partition must be in the producer's ongoing transaction."""
        meta = self.txns.get(transactional_id)
        code = self._check_producer(meta, producer_id, epoch)
        if code is ErrorCode.none:
            assert meta is not None
            if meta.pending is not None and meta.pending.state is TxnState.ONGOING:
                cur = meta.pending  # partitions being added count: the add was answered
            else:
                cur = meta.current
            return {tp: ErrorCode.none if cur.state is TxnState.ONGOING and tp in cur.partitions
                    else ErrorCode.invalid_txn_state for tp in partitions}
        return dict.fromkeys(partitions, code)

    # -- EndTxn ------------------------------------------------------------------------------

    def end_txn(self, transactional_id: str, producer_id: int, epoch: int, commit: bool,
                now: int, *, version2: bool = False, fresh_id: int | None = None) -> Decision:
        if not transactional_id:
            return Decision(ErrorCode.invalid_request)
        meta = self.txns.get(transactional_id)
        if meta is None or meta.current.state is TxnState.DEAD:
            return Decision(ErrorCode.invalid_producer_id_mapping)
        cur = meta.current
        wanted = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        done = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        if version2:
            return self._end_txn_v2(meta, producer_id, epoch, commit, now, fresh_id)
        if cur.producer_id != producer_id:
            return Decision(ErrorCode.invalid_producer_id_mapping)
        if cur.producer_epoch != epoch:
            return Decision(ErrorCode.producer_fenced)
        if meta.pending is not None:
            return Decision(ErrorCode.concurrent_transactions)
        if cur.state is TxnState.ONGOING:
            snapshot = cur.but(state=wanted, last_update_ms=now)
            return Decision(write=snapshot, producer_id=producer_id, producer_epoch=epoch)
        if cur.state is done:
            return Decision(producer_id=producer_id, producer_epoch=epoch)  # a retry
        if cur.state is wanted:
            return Decision(ErrorCode.concurrent_transactions)
        return Decision(ErrorCode.invalid_txn_state)

    def _end_txn_v2(self, meta: TransactionMetadata, producer_id: int, epoch: int,
                    commit: bool, now: int, fresh_id: int | None) -> Decision:
        """Transactions version 2: every prepare bumps the epoch (a fresh producer id once it
        is exhausted); a retry of an EndTxn already done presents the epoch before the bump."""
        cur = meta.current
        wanted = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        done = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        retry = (producer_id == cur.producer_id and epoch == cur.last_producer_epoch
                 and cur.last_producer_epoch >= 0) or \
            (producer_id == cur.previous_producer_id and producer_id != NO_PRODUCER_ID)
        if not retry:
            if producer_id != cur.producer_id:
                return Decision(ErrorCode.invalid_producer_id_mapping)
            if epoch != cur.producer_epoch:
                return Decision(ErrorCode.producer_fenced)
        if meta.pending is not None:
            return Decision(ErrorCode.concurrent_transactions)
        if retry:
            if cur.state is done:
                return Decision(producer_id=cur.producer_id, producer_epoch=cur.producer_epoch)
            if cur.state is wanted:
                return Decision(ErrorCode.concurrent_transactions)
            return Decision(ErrorCode.invalid_txn_state)
        if cur.state is TxnState.ONGOING or (cur.state is not TxnState.ONGOING and not commit
                                             and not cur.state.is_prepare):
            # An abort is allowed with nothing added (the client may have failed before
            # its first send); it still bumps the epoch.
            if cur.producer_epoch >= LAST_USABLE_EPOCH:
                if fresh_id is None:
                    return Decision(need_producer_id=True)
                snapshot = cur.but(state=wanted, producer_epoch=MAX_EPOCH,
                                   next_producer_id=fresh_id, last_update_ms=now,
                                   client_version=2, last_producer_epoch=cur.producer_epoch)
                return Decision(write=snapshot, producer_id=fresh_id, producer_epoch=0)
            partitions = cur.partitions if cur.state is TxnState.ONGOING else frozenset()
            snapshot = cur.but(state=wanted, producer_epoch=cur.producer_epoch + 1,
                               partitions=partitions, last_update_ms=now, client_version=2,
                               last_producer_epoch=cur.producer_epoch)
            return Decision(write=snapshot, producer_id=cur.producer_id,
                            producer_epoch=cur.producer_epoch + 1)
        if cur.state is wanted:
            return Decision(ErrorCode.concurrent_transactions)
        return Decision(ErrorCode.invalid_txn_state)

    # -- after the markers -------------------------------------------------------------------

    def marker(self, transactional_id: str) -> Marker | None:
        meta = self.txns.get(transactional_id)
        if meta is None or meta.pending is not None or not meta.current.state.is_prepare:
            return None
        return self._marker(meta)

    @staticmethod
    def _marker(meta: TransactionMetadata) -> Marker:
        cur = meta.current
        return Marker(meta.transactional_id, cur.producer_id, cur.producer_epoch,
                      cur.state is TxnState.PREPARE_COMMIT, cur.partitions)

    def complete(self, transactional_id: str, now: int) -> TxnSnapshot | None:
        """Every marker is written: the Complete* snapshot to write (None if the
        transaction is no longer in Prepare*, e.g. unloaded)."""
        meta = self.txns.get(transactional_id)
        if meta is None or meta.pending is not None or not meta.current.state.is_prepare:
            return None
        cur = meta.current
        state = TxnState.COMPLETE_COMMIT if cur.state is TxnState.PREPARE_COMMIT \
            else TxnState.COMPLETE_ABORT
        snapshot = cur.but(state=state, partitions=frozenset(), last_update_ms=now)
        if cur.next_producer_id != NO_PRODUCER_ID:
            # TV2 rollover: the fresh id takes over at epoch 0.
            snapshot = snapshot.but(producer_id=cur.next_producer_id, producer_epoch=0,
                                    previous_producer_id=cur.producer_id,
                                    next_producer_id=NO_PRODUCER_ID, last_producer_epoch=-1)
        return snapshot

    # -- timers ------------------------------------------------------------------------------

    def timed_out(self, now: int) -> list[tuple[str, TxnSnapshot]]:
        """Ongoing transactions past their timeout: the PrepareAbort to write for each,
        with the epoch bumped so the producer is fenced (as Kafka). A fence forgets the
        epoch before it: the fenced producer's KIP-360 retry is PRODUCER_FENCED, not taken
        for a retry of the bump."""
        found = []
        for transactional_id, meta in self.txns.items():
            cur = meta.current
            if meta.pending is None and cur.state is TxnState.ONGOING \
                    and cur.start_ms + cur.timeout_ms <= now and meta.retry_at <= now:
                epoch = cur.producer_epoch + 1 if cur.producer_epoch < MAX_EPOCH \
                    else cur.producer_epoch
                found.append((transactional_id, cur.but(
                    state=TxnState.PREPARE_ABORT, producer_epoch=epoch,
                    last_producer_epoch=NO_PRODUCER_EPOCH, last_update_ms=now)))
        return found

    def expired(self, now: int) -> list[str]:
        """Ids idle (Empty or Complete*) for longer than ``transactional.id.expiration.ms``:
        to be removed with a tombstone."""
        limit = now - self.config.id_expiration_ms
        return [transactional_id for transactional_id, meta in self.txns.items()
                if meta.pending is None and meta.retry_at <= now
                and (meta.current.state is TxnState.EMPTY or meta.current.state.is_complete)
                and meta.current.last_update_ms <= limit]

    def postpone(self, transactional_id: str, until: int) -> None:
        """A timer's write for the id failed: try again no sooner than ``until``."""
        meta = self.txns.get(transactional_id)
        if meta is not None:
            meta.retry_at = until

    def next_deadline(self) -> int | None:
        """The earliest time a transaction times out or an id expires (None: nothing to do)."""
        deadline: int | None = None
        for meta in self.txns.values():
            cur = meta.current
            if meta.pending is not None:
                continue  # being written: its outcome sets the next deadline
            if cur.state is TxnState.ONGOING:
                due = cur.start_ms + cur.timeout_ms
            elif cur.state is TxnState.EMPTY or cur.state.is_complete:
                due = cur.last_update_ms + self.config.id_expiration_ms
            else:
                continue
            due = max(due, meta.retry_at)
            deadline = due if deadline is None else min(deadline, due)
        return deadline
