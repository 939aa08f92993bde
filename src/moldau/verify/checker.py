"""Pure analysis of a :class:`History`: which guarantees did the cluster break?

No broker is needed here, so every kind of anomaly is unit-tested on synthetic histories.
The kinds, as a user of acks=all expects them to hold:

- lost: acknowledged, never read at any offset;
- duplicated: one sent value read at two different offsets;
- reordered: within a partition, a producer's values read in another order than it sent them
  (idempotent producers keep send order per partition, even with 5 requests in flight);
- inconsistent: one offset read with two different values (across consumers or reads), an
  acknowledged offset that holds another value, or a value read elsewhere than acknowledged;
- unexpected: a value carrying this run's id that no producer ever sent.

An acknowledgement without an offset (librdkafka's implicit ack, see ``Ack``) is checked
only for loss and for its partition: it names no offset to compare.

Sends that were not acknowledged are indeterminate: they may be missing or present, and are
only counted. Records of other writers (values without this run's id) are counted as foreign.

A transactional run (``history.transactional``, read with isolation.level=read_committed)
judges each value by its transaction's outcome instead of by its ack:

- aborted_read: a value of an aborted transaction was read (the broker's LSO, aborted list or
  markers let it through, or the coordinator committed what it was asked to abort);
- lost (committed writes): a value of a committed transaction never read;
- duplicated, reordered, inconsistent, unexpected: as above (acks are compared with the log
  only for committed values: an aborted value is in the log but never read);
- values of a transaction in doubt (its commit or abort was not confirmed) may be read or
  not: those read are counted and listed as information (``in_doubt_read``), no anomaly.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import NamedTuple

from .history import ABORTED, COMMITTED, IN_DOUBT, Ack, History, Txn, ValueId, decode_value

Location = tuple[int, int]  # (partition, offset)


class Lost(NamedTuple):
    value: ValueId
    partition: int
    #: None: acknowledged without an offset.
    offset: int | None


class Duplicated(NamedTuple):
    value: ValueId
    locations: tuple[Location, ...]


class Reordered(NamedTuple):
    partition: int
    producer: int
    offset: int
    seq: int
    #: The highest sequence number of this producer read at a lower offset of the partition.
    after_seq: int


class Inconsistent(NamedTuple):
    partition: int
    offset: int
    reason: str


class Unexpected(NamedTuple):
    value: ValueId
    partition: int
    offset: int


class TxnRead(NamedTuple):
    """A value read whose transaction was aborted (an anomaly) or is in doubt (information)."""

    value: ValueId
    partition: int
    offset: int
    #: The producer's transaction number (``Txn.number``); -1 when none holds the value.
    txn: int


@dataclass
class Verdict:
    """Counts and anomalies of one run; ``clean`` when no anomaly of any kind was found."""

    sent: int = 0
    acked: int = 0
    #: Acknowledgements the client gave without an offset (implicit acks, see ``Ack``).
    acked_without_offset: int = 0
    failed: int = 0
    #: Failed sends that were read back anyway (allowed: the outcome of a failed send is open).
    failed_but_read: int = 0
    records_read: int = 0
    values_read: int = 0
    foreign: int = 0
    read_errors: int = 0
    read_complete: bool = True
    produce_seconds: float = 0.0
    read_seconds: float = 0.0
    latency_ms: dict[str, float] = field(default_factory=dict)
    lost: list[Lost] = field(default_factory=list)
    duplicated: list[Duplicated] = field(default_factory=list)
    reordered: list[Reordered] = field(default_factory=list)
    inconsistent: list[Inconsistent] = field(default_factory=list)
    unexpected: list[Unexpected] = field(default_factory=list)
    #: A transactional run: ``aborted_read`` is one more anomaly kind, and the figures below.
    transactional: bool = False
    aborted_read: list[TxnRead] = field(default_factory=list)
    #: Information, no anomaly: values of transactions in doubt that were read.
    in_doubt_read: list[TxnRead] = field(default_factory=list)
    #: Transactions per outcome (committed, aborted, in-doubt), and how many of the aborted
    #: ones were aborted on purpose (the others after a failed commit).
    transactions: dict[str, int] = field(default_factory=dict)
    chosen_aborts: int = 0
    committed_values: int = 0
    committed_values_read: int = 0
    #: Values of aborted transactions, and those the broker acknowledged (in its log, so
    #: a read_committed consumer had to skip them: what makes a clean run meaningful).
    aborted_values: int = 0
    aborted_values_acked: int = 0
    in_doubt_values: int = 0

    ANOMALY_KINDS = ("lost", "duplicated", "reordered", "inconsistent", "unexpected")
    #: Every kind of either mode (what ``--allow`` accepts).
    ALL_KINDS = ("aborted_read", *ANOMALY_KINDS)

    @property
    def kinds(self) -> tuple[str, ...]:
        """The anomaly kinds this run is judged by (``aborted_read`` only when transactional)."""
        return self.ALL_KINDS if self.transactional else self.ANOMALY_KINDS

    @property
    def anomaly_counts(self) -> dict[str, int]:
        return {kind: len(getattr(self, kind)) for kind in self.kinds}

    @property
    def clean(self) -> bool:
        return not any(self.anomaly_counts.values())

    #: Acks of sends made after the clock started (the warm-up sends are not timed).
    timed_acks: int = 0

    @property
    def acked_per_second(self) -> float:
        return self.timed_acks / self.produce_seconds if self.produce_seconds > 0 else 0.0


def percentiles(samples: list[float], points: tuple[float, ...] = (50, 95, 99)) -> dict[str, float]:
    """Nearest-rank percentiles (and the maximum) of ``samples``; empty when there are none."""
    if not samples:
        return {}
    ordered = sorted(samples)
    result = {f"p{p:g}": ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)] for p in points}
    result["max"] = ordered[-1]
    return result


def check(history: History) -> Verdict:
    """Analyse ``history``; every list in the verdict is sorted, so output is stable."""
    timed = [a.latency_s * 1000 for a in history.acks if a.latency_s >= 0]
    verdict = Verdict(
        timed_acks=len(timed),
        sent=len(history.sent),
        acked=len(history.acks),
        acked_without_offset=sum(1 for a in history.acks if a.offset is None),
        failed=len(history.failures),
        records_read=len(history.reads),
        read_errors=len(history.read_errors),
        read_complete=history.read_complete,
        produce_seconds=history.produce_seconds,
        read_seconds=history.read_seconds,
        # Warm-up sends (before the clock started) carry a negative latency: not measured.
        latency_ms=percentiles(timed),
    )
    # What was read where: raw values per offset, and every location of each of our values.
    at_offset: dict[Location, set[bytes | None]] = defaultdict(set)
    ours_at: dict[Location, ValueId] = {}
    locations: dict[ValueId, set[Location]] = defaultdict(set)
    for read in history.reads:
        where = (read.partition, read.offset)
        at_offset[where].add(read.value)
        decoded = decode_value(read.value)
        if decoded is None or decoded[0] != history.run_id:
            continue
        ident = (decoded[1], decoded[2])
        ours_at.setdefault(where, ident)
        locations[ident].add(where)

    verdict.foreign = sum(1 for where in at_offset if where not in ours_at)
    verdict.values_read = len(locations)

    for where in sorted(at_offset):
        values = at_offset[where]
        if len(values) > 1:
            shown = ", ".join(sorted(_show(v, history.run_id) for v in values))
            verdict.inconsistent.append(
                Inconsistent(*where, f"read with {len(values)} different values: {shown}"))

    if history.transactional:
        _check_transactions(history, locations, ours_at, verdict)
    else:
        _check_acks(history, history.acks, locations, ours_at, verdict)
    failed_values = {failure.value for failure in history.failures}
    verdict.failed_but_read = sum(1 for value in failed_values if value in locations)

    for ident in sorted(locations):
        where_all = locations[ident]
        if len(where_all) > 1:
            verdict.duplicated.append(Duplicated(ident, tuple(sorted(where_all))))
        if ident not in history.sent:
            verdict.unexpected.extend(Unexpected(ident, *w) for w in sorted(where_all))
    verdict.reordered = _reorderings(ours_at)
    return verdict


def _check_acks(history: History, acks: list[Ack], locations: dict[ValueId, set[Location]],
                ours_at: dict[Location, ValueId], verdict: Verdict) -> None:
    """Lost and inconsistent acknowledgements: each acked value must be read where acked."""
    acked_at: dict[Location, ValueId] = {}
    for ack in sorted(acks, key=lambda a: (a.partition, _offset_key(a.offset),
                                                   a.value)):
        if ack.offset is None:
            _check_offsetless_ack(ack.value, ack.partition, locations, verdict)
            continue
        where = (ack.partition, ack.offset)
        other = acked_at.setdefault(where, ack.value)
        if other != ack.value:
            verdict.inconsistent.append(Inconsistent(
                *where, f"acknowledged for two values: {_ident(other)} and {_ident(ack.value)}"))
        found = locations.get(ack.value)
        if not found:
            verdict.lost.append(Lost(ack.value, *where))
        elif where in ours_at and ours_at[where] != ack.value:
            verdict.inconsistent.append(Inconsistent(
                *where, f"acknowledged for {_ident(ack.value)} but holds "
                        f"{_ident(ours_at[where])}"))
        elif where not in found:
            elsewhere = ", ".join(f"{p}:{o}" for p, o in sorted(found))
            verdict.inconsistent.append(Inconsistent(
                *where, f"acknowledged for {_ident(ack.value)}, which was read at {elsewhere}"))


def _transaction_of(history: History) -> dict[ValueId, Txn]:
    """Each sent value's transaction (a producer's transactions hold disjoint seq ranges)."""
    result: dict[ValueId, Txn] = {}
    for txn in history.transactions:
        for seq in range(txn.first_seq, txn.last_seq + 1):
            result[(txn.producer, seq)] = txn
    return result


def _check_transactions(history: History, locations: dict[ValueId, set[Location]],
                        ours_at: dict[Location, ValueId], verdict: Verdict) -> None:
    """Judge every value by its transaction's outcome (see the module docstring).

    A value sent but in no transaction (the run ended between a send and the bookkeeping of
    its transaction, which the workload avoids) is taken as in doubt, never as committed."""
    verdict.transactional = True
    txn_of = _transaction_of(history)
    outcomes = [txn.outcome for txn in history.transactions]
    verdict.transactions = {o: outcomes.count(o) for o in (COMMITTED, ABORTED, IN_DOUBT)}
    verdict.chosen_aborts = sum(1 for txn in history.transactions
                                if txn.chose_abort and txn.outcome == ABORTED)
    committed = {v for v, txn in txn_of.items() if txn.outcome == COMMITTED}
    verdict.committed_values = len(committed)
    verdict.committed_values_read = sum(1 for v in committed if v in locations)
    aborted = {v for v, txn in txn_of.items() if txn.outcome == ABORTED}
    verdict.aborted_values = len(aborted)
    verdict.aborted_values_acked = len({a.value for a in history.acks if a.value in aborted})
    verdict.in_doubt_values = sum(1 for v in history.sent
                                  if v not in txn_of or txn_of[v].outcome == IN_DOUBT)
    # Acks of committed values must agree with the log; the others name offsets of records
    # a read_committed consumer never returns.
    committed_acks = [a for a in history.acks if a.value in committed]
    _check_acks(history, committed_acks, locations, ours_at, verdict)
    acked = {a.value for a in committed_acks}
    # A committed value never acknowledged (commit_transaction returned, so the client had
    # every delivery report): lost without a known partition if never read either.
    verdict.lost.extend(Lost(v, -1, None) for v in sorted(committed - acked)
                        if v not in locations)
    verdict.lost.sort(key=lambda x: (x.partition, _offset_key(x.offset), x.value))
    for ident in sorted(locations):
        if ident not in history.sent:
            continue  # unexpected, reported as such
        txn = txn_of.get(ident)
        outcome = txn.outcome if txn is not None else IN_DOUBT
        if outcome == COMMITTED:
            continue
        into = verdict.aborted_read if outcome == ABORTED else verdict.in_doubt_read
        number = txn.number if txn is not None else -1
        into.extend(TxnRead(ident, p, o, number) for p, o in sorted(locations[ident]))


def _offset_key(offset: int | None) -> int:
    return -1 if offset is None else offset


def _check_offsetless_ack(value: ValueId, partition: int,
                          locations: dict[ValueId, set[Location]], verdict: Verdict) -> None:
    """An ack without an offset: the value must be read, and in the partition it was sent to
    (reading it at offset 0 of that partition, as the offset's absence used to be taken, is
    not required: the offset is unknown)."""
    found = locations.get(value)
    if not found:
        verdict.lost.append(Lost(value, partition, None))
    elif all(p != partition for p, _ in found):
        elsewhere = ", ".join(f"{p}:{o}" for p, o in sorted(found))
        verdict.inconsistent.append(Inconsistent(
            partition, -1, f"acknowledged (without an offset) for {_ident(value)} in "
                           f"partition {partition}, which was read at {elsewhere}"))


def _reorderings(ours_at: dict[Location, ValueId]) -> list[Reordered]:
    """Per partition in offset order, each producer's sequence numbers must only grow.

    Only the first occurrence of a value counts: a later duplicate is reported as duplicated,
    not once more as out of order.
    """
    result: list[Reordered] = []
    highest: dict[tuple[int, int], int] = {}
    seen: set[ValueId] = set()
    for (partition, offset), (producer, seq) in sorted(ours_at.items()):
        if (producer, seq) in seen:
            continue
        seen.add((producer, seq))
        key = (partition, producer)
        top = highest.get(key)
        if top is not None and seq < top:
            result.append(Reordered(partition, producer, offset, seq, top))
        else:
            highest[key] = seq
    return result


def _ident(value: ValueId) -> str:
    return f"producer {value[0]} seq {value[1]}"


def _show(value: bytes | None, run_id: str) -> str:
    decoded = decode_value(value)
    if decoded is not None and decoded[0] == run_id:
        return _ident((decoded[1], decoded[2]))
    if value is None:
        return "null"
    return repr(value[:40])
