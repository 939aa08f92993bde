"""Transaction states and the per-transactional-id metadata the coordinator keeps.

Kafka's coordinator moves a transactional id through these states (KIP-98); the byte each
state is stored as in ``__transaction_state`` (TransactionLogValue.TransactionStatus) and the
name DescribeTransactions/ListTransactions report are Kafka's own.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import IntEnum

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
#: The highest epoch a producer may use: Short.MAX_VALUE is kept for one last fencing bump.
LAST_USABLE_EPOCH = 32767 - 1
MAX_EPOCH = 32767

TopicPartition = tuple[str, int]


class TxnState(IntEnum):
    """TransactionStatus bytes, as Kafka stores them."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def display(self) -> str:
        """The name the admin APIs use (``Ongoing``, ``PrepareCommit``, ...)."""
        return _NAMES[self]

    @classmethod
    def from_display(cls, name: str) -> TxnState | None:
        for state, text in _NAMES.items():
            if text == name:
                return state
        return None

    @property
    def is_prepare(self) -> bool:
        return self in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)

    @property
    def is_complete(self) -> bool:
        return self in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)


_NAMES = {
    TxnState.EMPTY: "Empty",
    TxnState.ONGOING: "Ongoing",
    TxnState.PREPARE_COMMIT: "PrepareCommit",
    TxnState.PREPARE_ABORT: "PrepareAbort",
    TxnState.COMPLETE_COMMIT: "CompleteCommit",
    TxnState.COMPLETE_ABORT: "CompleteAbort",
    TxnState.DEAD: "Dead",
    TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}


@dataclass(frozen=True, slots=True)
class TxnSnapshot:
    """One transactional id's state as stored in a TransactionLogValue (and proposed by a
    transition before it is written)."""

    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition] = frozenset()
    last_update_ms: int = -1
    start_ms: int = -1
    #: The id before an epoch-exhaustion rollover (TV2), for retries of the last EndTxn.
    previous_producer_id: int = NO_PRODUCER_ID
    #: The id the next Complete* moves to (TV2 rollover while Prepare*).
    next_producer_id: int = NO_PRODUCER_ID
    #: 0/1: transactions version 1; 2: KIP-890 transactions version 2 (EndTxn v5).
    client_version: int = 0
    #: The epoch the producer used before the last bump (not stored: Kafka keeps it in
    #: memory to recognise a retried InitProducerId or EndTxn).
    last_producer_epoch: int = NO_PRODUCER_EPOCH

    def but(self, **changes: object) -> TxnSnapshot:
        return replace(self, **changes)  # type: ignore[arg-type]


@dataclass(slots=True)
class TransactionMetadata:
    """What the coordinator knows of one transactional id.

    ``current`` is the state as written to ``__transaction_state``; ``pending`` is a
    transition being written (acks=all) — while it is, every other request for the id gets
    CONCURRENT_TRANSACTIONS, as Kafka's ``pendingState``.
    """

    transactional_id: str
    current: TxnSnapshot
    pending: TxnSnapshot | None = None
    #: An abort of a fenced or timed-out transaction follows the in-memory fence bump.
    fencing: bool = False
    #: A timer's write for this id failed: its timeout/expiry is not acted on again before
    #: this time (ms), so a coordinator that cannot write does not retry in a tight loop.
    retry_at: int = 0

    @property
    def state(self) -> TxnState:
        """The state the admin APIs report: PrepareEpochFence while the abort that fences
        a producer is being written."""
        if self.pending is not None and self.fencing:
            return TxnState.PREPARE_EPOCH_FENCE
        return self.current.state

    @property
    def producer_id(self) -> int:
        return self.current.producer_id

    @property
    def producer_epoch(self) -> int:
        return self.current.producer_epoch
