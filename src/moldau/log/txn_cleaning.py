"""What the cleaner must know about transactions during one pass (Kafka's
``CleanedTransactionMetadata``).

Every transaction the cleaner meets below its cleanable end is decided: the end never passes
the log's first unstable offset, so each transaction starting below it has its COMMIT or ABORT
marker in the log (possibly further on). Which ones were aborted comes from the ``.txnindex``
files, handed over as the list of :class:`AbortedTxn` overlapping the rewritten segments;
every other transactional batch belongs to a committed transaction. Markers themselves are
never decoded: a control batch of producer P at offset O is the ABORT marker of the aborted
transaction of P whose last offset is O, and a COMMIT marker (or a marker that closed nothing)
otherwise.

- The offset map leaves aborted batches out (their keys must not make older committed values
  look obsolete) and maps committed ones like any data (:meth:`TxnCleaning.is_aborted`).
- The rewrite, which reads every batch from the log start, drops the records of aborted
  transactions and follows each transaction from its first batch to its marker. A marker is
  removable only when no batch of its transaction was *observed* in this pass (so the data
  goes in one pass, the marker in a later one: Kafka's two-pass rule), and then only under the
  tombstones' conditions (cleaned before, below the replicas' tombstone bound, older than
  ``delete.retention.ms``). :meth:`TxnCleaning.close` tells the rewrite what it observed, and
  also whether any of those batches was *written* to the output: when none was, the next pass
  finds the transaction gone, so the cleaner schedules that pass instead of waiting for new
  dirty data.
- ABORT markers kept in a cleaned segment take their index entries into that segment's new
  ``.txnindex`` (:meth:`TxnCleaning.take_kept_aborted`).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass, field

from .txn_index import AbortedTxn

__all__ = ["AbortedTxn", "TxnCleaning", "TxnProgress"]


@dataclass(slots=True)
class TxnProgress:
    """What the rewrite saw of one transaction so far."""

    #: Some batch of it was read in this pass.
    observed: bool = False
    #: Some batch of it was written to the cleaned output (so a later pass sees it again).
    written: bool = False


@dataclass(slots=True)
class TxnCleaning:
    """One pass's view of the transactions in the rewritten range; see the module docstring."""

    #: Per producer id: the first offsets of its aborted transactions, ascending, and the
    #: transactions in the same order.
    _firsts: dict[int, list[int]] = field(default_factory=dict)
    _entries: dict[int, list[AbortedTxn]] = field(default_factory=dict)
    #: The transaction each producer has open in the rewrite (keyed by producer id), with
    #: what was seen of it; closed by its marker.
    _open: dict[int, tuple[AbortedTxn | None, TxnProgress]] = field(default_factory=dict)
    #: ABORT markers kept in the group being written, in offset order.
    _kept_aborted: list[AbortedTxn] = field(default_factory=list)

    @classmethod
    def of(cls, aborted: Iterable[AbortedTxn]) -> TxnCleaning:
        tracker = cls()
        for entry in sorted(aborted, key=lambda e: (e.producer_id, e.first_offset)):
            tracker._firsts.setdefault(entry.producer_id, []).append(entry.first_offset)
            tracker._entries.setdefault(entry.producer_id, []).append(entry)
        return tracker

    def aborted_entry(self, producer_id: int, offset: int) -> AbortedTxn | None:
        """The aborted transaction of ``producer_id`` spanning ``offset`` (None: the offset
        belongs to a committed transaction, or to none)."""
        firsts = self._firsts.get(producer_id)
        if firsts is None:
            return None
        i = bisect.bisect_right(firsts, offset) - 1
        if i < 0:
            return None
        entry = self._entries[producer_id][i]
        return entry if offset <= entry.last_offset else None

    def is_aborted(self, producer_id: int, offset: int) -> bool:
        """True when the transactional batch of ``producer_id`` at ``offset`` was aborted."""
        return self.aborted_entry(producer_id, offset) is not None

    def observe(self, producer_id: int, entry: AbortedTxn | None, written: bool) -> None:
        """The rewrite read a data batch of ``producer_id``'s transaction ``entry`` (None:
        a committed one) and wrote it to the output or not."""
        current = self._open.get(producer_id)
        if current is None or current[0] is not entry:
            current = (entry, TxnProgress())
            self._open[producer_id] = current
        progress = current[1]
        progress.observed = True
        progress.written = progress.written or written

    def close(self, producer_id: int, offset: int) -> tuple[AbortedTxn | None, TxnProgress]:
        """The rewrite reached the marker of ``producer_id`` at ``offset``: the aborted
        transaction it closes (None for a COMMIT) and what was seen of the transaction."""
        entry = self.aborted_entry(producer_id, offset)
        if entry is not None and entry.last_offset != offset:
            entry = None  # not the marker of that transaction: cannot happen in a valid log
        current = self._open.pop(producer_id, None)
        if current is None or current[0] is not entry:
            return entry, TxnProgress()
        return entry, current[1]

    def keep_aborted(self, entry: AbortedTxn) -> None:
        """An ABORT marker stays in the group being written: its index entry goes with it."""
        self._kept_aborted.append(entry)

    def take_kept_aborted(self) -> list[AbortedTxn]:
        """The index entries of the group just written (and start the next group)."""
        kept, self._kept_aborted = self._kept_aborted, []
        return kept
