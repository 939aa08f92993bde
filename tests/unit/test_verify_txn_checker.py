"""The transactional checker (``moldau verify --transactional``) on synthetic histories.

A small model of a transactional log builds clean histories: every transaction's values are
appended in order (aborted ones too, as a broker does), a read_committed consumer returns the
values of committed transactions only, and a transaction in doubt was either written and
committed or never written. Each test then breaks one guarantee by hand, as a broken broker
would (an aborted value let through, a committed value dropped, a value twice, two values
swapped), and the checker must report exactly that kind.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from moldau.verify.checker import Verdict, check
from moldau.verify.history import (
    ABORTED,
    COMMITTED,
    IN_DOUBT,
    Ack,
    Failure,
    History,
    Read,
    Txn,
    encode_value,
)
from moldau.verify.report import as_dict, as_text, failing_kinds

RUN = "7a5c0de5"


@dataclass(frozen=True)
class Plan:
    """One transaction: its producer, the partition of each value, and how it ended.

    ``outcome`` is COMMITTED, ABORTED, or IN_DOUBT; ``in_doubt_written`` says what really
    happened to an in-doubt one (True: it was committed after all)."""

    producer: int
    partitions: tuple[int, ...]
    outcome: str
    in_doubt_written: bool = False
    chose_abort: bool = False


@dataclass
class Model:
    history: History
    #: Where each value of each outcome landed in the log: value -> (partition, offset).
    placed: dict[tuple[int, int], tuple[int, int]]


def model(plans: list[Plan], partitions: int = 3, consumers: int = 2, seed: int = 0) -> Model:
    """A clean transactional history for ``plans`` (see the module docstring)."""
    history = History(RUN, "t", partitions, start_offsets=dict.fromkeys(range(partitions), 0),
                      transactional=True)
    next_offset = dict.fromkeys(range(partitions), 0)
    next_seq: dict[int, int] = {}
    numbers: dict[int, int] = {}
    visible: list[tuple[int, int, bytes]] = []
    placed: dict[tuple[int, int], tuple[int, int]] = {}
    for plan in plans:
        first = next_seq.get(plan.producer, 0)
        written = plan.outcome != IN_DOUBT or plan.in_doubt_written
        touched: set[int] = set()
        for i, partition in enumerate(plan.partitions):
            ident = (plan.producer, first + i)
            history.sent.add(ident)
            if not written:
                history.failures.append(Failure(ident, "timed out"))
                continue
            offset = next_offset[partition]
            next_offset[partition] += 1
            touched.add(partition)
            placed[ident] = (partition, offset)
            history.acks.append(Ack(ident, partition, offset, 0.001))
            if plan.outcome == COMMITTED or (plan.outcome == IN_DOUBT and plan.in_doubt_written):
                visible.append((partition, offset, encode_value(RUN, *ident, size=24)))
        for partition in touched:  # the transaction's marker takes an offset too
            next_offset[partition] += 1
        next_seq[plan.producer] = first + len(plan.partitions)
        number = numbers.get(plan.producer, 0)
        numbers[plan.producer] = number + 1
        history.transactions.append(Txn(plan.producer, number, first,
                                        first + len(plan.partitions) - 1, plan.outcome,
                                        "", plan.chose_abort))
    for consumer in range(consumers):
        history.reads.extend(Read(consumer, p, o, v) for p, o, v in visible)
    random.Random(seed).shuffle(history.reads)
    return Model(history, placed)


def simple() -> Model:
    """Two producers, three partitions: committed, aborted (on purpose) and in-doubt ones."""
    return model([
        Plan(0, (0, 1, 2, 0), COMMITTED),
        Plan(1, (1, 1, 2), COMMITTED),
        Plan(0, (0, 2, 1), ABORTED, chose_abort=True),
        Plan(1, (2, 0), ABORTED),
        Plan(0, (1, 0, 0), COMMITTED),
        Plan(1, (0, 2), IN_DOUBT, in_doubt_written=True),
        Plan(0, (2, 2), IN_DOUBT, in_doubt_written=False),
        Plan(1, (1, 0, 2), COMMITTED),
    ])


def read_at(m: Model, value: tuple[int, int], consumer: int = 0) -> Read:
    partition, offset = m.placed[value]
    return Read(consumer, partition, offset, encode_value(RUN, *value, size=24))


def kinds_found(verdict: Verdict) -> dict[str, int]:
    return {kind: count for kind, count in verdict.anomaly_counts.items() if count}


def test_a_clean_transactional_history_is_clean_and_counted() -> None:
    m = simple()
    verdict = check(m.history)
    assert verdict.clean, (verdict.anomaly_counts, verdict.lost, verdict.inconsistent)
    assert verdict.transactional
    assert list(verdict.anomaly_counts) == ["aborted_read", "lost", "duplicated", "reordered",
                                            "inconsistent", "unexpected"]
    assert verdict.transactions == {COMMITTED: 4, ABORTED: 2, IN_DOUBT: 2}
    assert verdict.chosen_aborts == 1
    assert (verdict.committed_values, verdict.committed_values_read) == (13, 13)
    assert (verdict.aborted_values, verdict.aborted_values_acked) == (5, 5)
    # The in-doubt transaction that was written (committed after all) is read: information.
    assert verdict.in_doubt_values == 4
    assert sorted(r.value for r in verdict.in_doubt_read) == [(1, 5), (1, 6)]
    assert verdict.values_read == 15


def test_aborted_read_a_value_of_an_aborted_transaction_is_reported() -> None:
    m = simple()
    leaked = (0, 5)  # producer 0's aborted transaction holds seqs 4..6
    m.history.reads.append(read_at(m, leaked, consumer=1))
    verdict = check(m.history)
    assert kinds_found(verdict) == {"aborted_read": 1}
    assert [(r.value, *m.placed[leaked], r.txn) for r in verdict.aborted_read] == [
        (leaked, *m.placed[leaked], 1)]
    assert failing_kinds(verdict) == ["aborted_read"]
    text = as_text(verdict, m.history, {}, max_examples=5)
    assert "aborted_read (a value of an aborted transaction was read): 1" in text
    partition, offset = m.placed[leaked]
    assert f"producer 0 seq 5 (its transaction 1) read at {partition}:{offset}" in text
    assert text.rstrip().endswith("result: ANOMALIES FOUND")


def test_aborted_read_of_a_whole_aborted_transaction_by_every_consumer() -> None:
    """A broker that ignores read_committed (or a client that reads uncommitted)."""
    m = simple()
    aborted = [v for t in m.history.transactions if t.outcome == ABORTED
               for v in ((t.producer, s) for s in range(t.first_seq, t.last_seq + 1))]
    m.history.reads.extend(read_at(m, v, c) for v in aborted for c in (0, 1))
    verdict = check(m.history)
    assert kinds_found(verdict) == {"aborted_read": len(aborted)}
    assert sorted({r.value for r in verdict.aborted_read}) == sorted(aborted)


def test_lost_committed_write_a_committed_value_never_read() -> None:
    m = simple()
    gone = (1, 1)  # producer 1's first transaction, committed
    m.history.reads = [r for r in m.history.reads
                       if (r.partition, r.offset) != m.placed[gone]]
    verdict = check(m.history)
    assert kinds_found(verdict) == {"lost": 1}
    assert [(x.value, x.partition, x.offset) for x in verdict.lost] == [
        (gone, *m.placed[gone])]
    text = as_text(verdict, m.history, {}, max_examples=5)
    assert "lost (of a committed transaction, never read): 1" in text
    assert verdict.committed_values_read == verdict.committed_values - 1


def test_lost_committed_write_never_acknowledged_nor_read() -> None:
    """commit_transaction returned, yet a value has neither a delivery report nor a read."""
    m = simple()
    gone = (0, 8)
    m.history.acks = [a for a in m.history.acks if a.value != gone]
    m.history.reads = [r for r in m.history.reads
                       if (r.partition, r.offset) != m.placed[gone]]
    verdict = check(m.history)
    assert kinds_found(verdict) == {"lost": 1}
    assert [(x.value, x.partition, x.offset) for x in verdict.lost] == [(gone, -1, None)]
    assert as_dict(verdict, m.history, {}, 5)["examples"]["lost"] == [
        "producer 0 seq 8: never acknowledged"]


def test_aborted_values_never_read_are_not_lost() -> None:
    """The acks of aborted values name offsets no read_committed consumer returns."""
    m = simple()
    verdict = check(m.history)
    aborted_acks = [a for a in m.history.acks
                    if any(t.outcome == ABORTED and t.producer == a.value[0]
                           and t.first_seq <= a.value[1] <= t.last_seq
                           for t in m.history.transactions)]
    assert len(aborted_acks) == 5
    assert verdict.clean and not verdict.lost


def test_duplicated_a_committed_value_read_at_two_offsets() -> None:
    m = simple()
    twice = (0, 2)
    partition, _ = m.placed[twice]
    end = max(r.offset for r in m.history.reads if r.partition == partition) + 1
    m.history.reads.append(Read(0, partition, end, encode_value(RUN, *twice, size=24)))
    verdict = check(m.history)
    assert kinds_found(verdict) == {"duplicated": 1}
    assert verdict.duplicated[0].locations == (m.placed[twice], (partition, end))


def test_reordered_two_committed_values_swapped_within_a_partition() -> None:
    m = simple()
    a, b = (0, 0), (0, 3)  # both in partition 0, a sent first
    assert m.placed[a][0] == m.placed[b][0] == 0
    swap = {m.placed[a][1]: b, m.placed[b][1]: a}
    m.history.reads = [r._replace(value=encode_value(RUN, *swap[r.offset], size=24))
                       if r.partition == 0 and r.offset in swap else r for r in m.history.reads]
    m.history.acks = [x._replace(offset=m.placed[b][1]) if x.value == a else
                      x._replace(offset=m.placed[a][1]) if x.value == b else x
                      for x in m.history.acks]
    verdict = check(m.history)
    assert kinds_found(verdict) == {"reordered": 1}
    assert [(r.partition, r.producer, r.seq, r.after_seq) for r in verdict.reordered] == [
        (0, 0, 0, 3)]


def test_in_doubt_reads_are_information_not_anomalies() -> None:
    m = simple()
    verdict = check(m.history)
    assert verdict.clean and failing_kinds(verdict) == []
    assert len(verdict.in_doubt_read) == 2
    text = as_text(verdict, m.history, {}, max_examples=5)
    assert "transactions: 4 committed, 2 aborted (1 on purpose), 2 in doubt" in text
    assert "aborted values: 5, 5 of them written (acked), read 0" in text
    assert "values in doubt: 4, read 2 (information, no anomaly)" in text
    assert "  in doubt, read: producer 1 seq 5 (its transaction 2) read at" in text
    assert text.rstrip().endswith("result: clean")
    data = as_dict(verdict, m.history, {}, max_examples=1)
    assert data["anomalies"]["aborted_read"] == 0
    assert data["transactional"]["in_doubt_read"] == 2
    assert len(data["transactional"]["in_doubt_read_examples"]) == 1
    assert data["transactional"]["transactions"] == {COMMITTED: 4, ABORTED: 2, IN_DOUBT: 2}
    json.dumps(data)


def test_a_value_sent_outside_any_transaction_is_taken_as_in_doubt() -> None:
    m = simple()
    m.history.transactions = [t for t in m.history.transactions
                              if (t.producer, t.number) != (1, 0)]
    verdict = check(m.history)
    assert verdict.clean
    assert {r.value for r in verdict.in_doubt_read} >= {(1, 0), (1, 1), (1, 2)}
    assert all(r.txn == -1 for r in verdict.in_doubt_read if r.value[1] < 3)


def test_aborted_read_can_be_allowed_and_the_plain_mode_keeps_its_five_kinds() -> None:
    m = simple()
    m.history.reads.append(read_at(m, (1, 3)))
    verdict = check(m.history)
    assert failing_kinds(verdict, ("aborted_read",)) == []
    m.history.transactional = False
    plain = check(m.history)
    assert "aborted_read" not in plain.anomaly_counts
    assert "transactional" not in as_dict(plain, m.history, {}, 2)


plans_strategy = st.lists(
    st.builds(Plan, st.integers(0, 2), st.lists(st.integers(0, 3), min_size=1, max_size=6)
              .map(tuple), st.sampled_from([COMMITTED, COMMITTED, ABORTED, IN_DOUBT]),
              st.booleans()),
    max_size=40)


@settings(max_examples=100, deadline=None)
@given(plans=plans_strategy, consumers=st.integers(1, 3), seed=st.integers(0, 2**16))
def test_a_clean_model_never_reports_anomalies(plans: list[Plan], consumers: int,
                                               seed: int) -> None:
    m = model(plans, partitions=4, consumers=consumers, seed=seed)
    verdict = check(m.history)
    assert verdict.clean, verdict.anomaly_counts
    assert verdict.committed_values == verdict.committed_values_read == sum(
        len(p.partitions) for p in plans if p.outcome == COMMITTED)


@settings(max_examples=100, deadline=None)
@given(plans=plans_strategy, pick=st.integers(0, 10_000), seed=st.integers(0, 2**16))
def test_any_aborted_value_read_or_committed_value_dropped_is_reported(
        plans: list[Plan], pick: int, seed: int) -> None:
    m = model(plans, partitions=4, seed=seed)
    outcome = {(t.producer, s): t.outcome for t in m.history.transactions
               for s in range(t.first_seq, t.last_seq + 1)}
    aborted = sorted(v for v, o in outcome.items() if o == ABORTED)
    committed = sorted(v for v, o in outcome.items() if o == COMMITTED)
    if aborted:
        leaked = aborted[pick % len(aborted)]
        broken = model(plans, partitions=4, seed=seed)
        broken.history.reads.append(read_at(broken, leaked))
        verdict = check(broken.history)
        assert kinds_found(verdict) == {"aborted_read": 1}
        assert verdict.aborted_read[0].value == leaked
    if committed:
        gone = committed[pick % len(committed)]
        m.history.reads = [r for r in m.history.reads
                           if (r.partition, r.offset) != m.placed[gone]]
        verdict = check(m.history)
        assert kinds_found(verdict) == {"lost": 1}
        assert verdict.lost[0].value == gone
