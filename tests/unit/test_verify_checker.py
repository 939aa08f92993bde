"""The verify checker on synthetic histories: each anomaly kind is found, clean is clean.

Histories come from a small model of a log (partitions that append in order), so a clean one
is clean by construction; each anomaly test breaks one guarantee of that model by hand.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from moldau.verify.checker import check, percentiles
from moldau.verify.history import Ack, Failure, History, Read, decode_value, encode_value
from moldau.verify.report import as_dict, as_text, failing_kinds

RUN = "0badcafe"


@dataclass(frozen=True)
class Send:
    producer: int
    partition: int
    #: "acked", "failed-present" (the broker wrote it, the client saw an error) or
    #: "failed-absent"; "foreign" is a record of another writer, interleaved in the log.
    outcome: str


def model(sends: list[Send], partitions: int = 3, consumers: int = 2,
          start: int = 0, shuffle_seed: int = 0) -> History:
    """A clean history: what a cluster that keeps its promises would show for ``sends``."""
    history = History(RUN, "t", partitions, start_offsets=dict.fromkeys(range(partitions), start))
    next_offset = dict.fromkeys(range(partitions), start)
    next_seq: dict[int, int] = {}
    log: list[tuple[int, int, bytes]] = []
    for send in sends:
        if send.outcome == "foreign":
            value = b"another writer %d" % len(log)
        else:
            seq = next_seq.get(send.producer, 0)
            next_seq[send.producer] = seq + 1
            ident = (send.producer, seq)
            history.sent.add(ident)
            value = encode_value(RUN, *ident, size=24)
            if send.outcome != "acked":
                history.failures.append(Failure(ident, "timed out"))
        if send.outcome != "failed-absent":
            offset = next_offset[send.partition]
            next_offset[send.partition] += 1
            log.append((send.partition, offset, value))
            if send.outcome == "acked":
                history.acks.append(Ack(ident, send.partition, offset, 0.001 * len(log)))
    for consumer in range(consumers):
        history.reads.extend(Read(consumer, p, o, v) for p, o, v in log)
    random.Random(shuffle_seed).shuffle(history.reads)
    return history


def simple() -> History:
    """Two producers, three partitions, everything acknowledged and read by two consumers."""
    return model([Send(i % 2, i % 3, "acked") for i in range(30)])


def ack_of(history: History, producer: int, seq: int) -> Ack:
    return next(a for a in history.acks if a.value == (producer, seq))


def test_a_clean_history_is_clean_and_counted() -> None:
    verdict = check(simple())
    assert verdict.clean, verdict.anomaly_counts
    assert (verdict.sent, verdict.acked, verdict.failed) == (30, 30, 0)
    assert (verdict.records_read, verdict.values_read, verdict.foreign) == (60, 30, 0)
    assert verdict.latency_ms["max"] == 30.0


def test_lost_an_acknowledged_value_never_read() -> None:
    history = simple()
    gone = ack_of(history, 1, 4)
    history.reads = [r for r in history.reads if (r.partition, r.offset) !=
                     (gone.partition, gone.offset)]
    verdict = check(history)
    assert [(x.value, x.partition, x.offset) for x in verdict.lost] == [
        ((1, 4), gone.partition, gone.offset)]
    assert verdict.anomaly_counts == {"lost": 1, "duplicated": 0, "reordered": 0,
                                      "inconsistent": 0, "unexpected": 0}


def test_duplicated_one_value_at_two_offsets() -> None:
    history = simple()
    twice = ack_of(history, 0, 2)
    end = max(r.offset for r in history.reads if r.partition == twice.partition) + 1
    history.reads.append(Read(0, twice.partition, end, encode_value(RUN, 0, 2)))
    verdict = check(history)
    assert [d.locations for d in verdict.duplicated] == [
        ((twice.partition, twice.offset), (twice.partition, end))]
    assert verdict.anomaly_counts["reordered"] == 0  # the later copy is not also "out of order"
    assert sum(verdict.anomaly_counts.values()) == 1


def test_reordered_a_producer_values_swapped_within_a_partition() -> None:
    history = simple()
    first, second = ack_of(history, 0, 0), ack_of(history, 0, 3)  # both in partition 0
    assert first.partition == second.partition == 0
    # The broker wrote (and acknowledged) seq 3 before seq 0: consistent, but out of order.
    swap = {first.offset: second.value, second.offset: first.value}
    history.reads = [r._replace(value=encode_value(RUN, *swap[r.offset], size=24))
                     if r.partition == 0 and r.offset in swap else r for r in history.reads]
    history.acks = [a._replace(offset=second.offset) if a == first else
                    a._replace(offset=first.offset) if a == second else a for a in history.acks]
    verdict = check(history)
    assert [(r.partition, r.producer, r.seq, r.after_seq) for r in verdict.reordered] == [
        (0, 0, 0, 3)]
    assert sum(verdict.anomaly_counts.values()) == 1


def test_inconsistent_two_consumers_read_two_values_at_one_offset() -> None:
    history = simple()
    target = ack_of(history, 1, 1)
    history.reads = [r._replace(value=b"something else")
                     if (r.consumer, r.partition, r.offset) == (1, target.partition, target.offset)
                     else r for r in history.reads]
    verdict = check(history)
    assert [(i.partition, i.offset) for i in verdict.inconsistent] == [
        (target.partition, target.offset)]
    assert "2 different values" in verdict.inconsistent[0].reason
    assert not verdict.lost


def test_inconsistent_acknowledged_offset_holds_another_value() -> None:
    history = simple()
    a, b = ack_of(history, 0, 0), ack_of(history, 1, 0)
    # The delivery report of a claimed b's offset: the log holds b there, a elsewhere.
    history.acks = [x._replace(offset=b.offset, partition=b.partition) if x == a else x
                    for x in history.acks]
    verdict = check(history)
    reasons = [i.reason for i in verdict.inconsistent]
    assert any("acknowledged for two values" in r for r in reasons), reasons
    assert any("holds producer" in r for r in reasons), reasons
    assert not verdict.lost


def test_inconsistent_value_read_elsewhere_than_acknowledged() -> None:
    history = simple()
    moved = ack_of(history, 1, 2)
    end = max(r.offset for r in history.reads if r.partition == moved.partition) + 5
    history.reads = [r._replace(offset=end) if (r.partition, r.offset) ==
                     (moved.partition, moved.offset) else r for r in history.reads]
    verdict = check(history)
    assert [i.offset for i in verdict.inconsistent] == [moved.offset]
    assert f"read at {moved.partition}:{end}" in verdict.inconsistent[0].reason


def test_unexpected_a_value_of_this_run_that_was_never_sent() -> None:
    history = simple()
    history.reads.append(Read(0, 2, 99, encode_value(RUN, 7, 0)))
    verdict = check(history)
    assert [(u.value, u.partition, u.offset) for u in verdict.unexpected] == [((7, 0), 2, 99)]
    assert sum(verdict.anomaly_counts.values()) == 1


def test_failed_sends_and_other_writers_are_no_anomaly() -> None:
    sends = [Send(0, 0, "acked"), Send(0, 0, "failed-present"), Send(1, 1, "failed-absent"),
             Send(0, 0, "foreign"), Send(1, 1, "acked"), Send(0, 0, "acked")]
    history = model(sends, partitions=2)
    history.reads.append(Read(0, 1, 40, encode_value("otherrun", 0, 0)))
    verdict = check(history)
    assert verdict.clean, verdict.anomaly_counts
    assert (verdict.failed, verdict.failed_but_read, verdict.foreign) == (2, 1, 2)


sends_strategy = st.lists(
    st.builds(Send, st.integers(0, 3), st.integers(0, 3),
              st.sampled_from(["acked", "acked", "acked", "failed-present", "failed-absent",
                               "foreign"])),
    max_size=200)


@settings(max_examples=150, deadline=None)
@given(sends=sends_strategy, consumers=st.integers(1, 3), start=st.integers(0, 1000),
       seed=st.integers(0, 2**16))
def test_a_clean_history_from_the_model_never_reports_anomalies(
        sends: list[Send], consumers: int, start: int, seed: int) -> None:
    history = model(sends, partitions=4, consumers=consumers, start=start, shuffle_seed=seed)
    verdict = check(history)
    assert verdict.clean, verdict.anomaly_counts
    assert verdict.acked == sum(s.outcome == "acked" for s in sends)
    assert verdict.values_read == sum(s.outcome in ("acked", "failed-present") for s in sends)


@settings(max_examples=100, deadline=None)
@given(sends=sends_strategy, drop=st.integers(0, 10_000))
def test_dropping_any_acknowledged_record_is_reported_lost(sends: list[Send], drop: int) -> None:
    history = model(sends, partitions=4)
    if not history.acks:
        return
    gone = sorted(history.acks)[drop % len(history.acks)]
    history.reads = [r for r in history.reads if (r.partition, r.offset) !=
                     (gone.partition, gone.offset)]
    verdict = check(history)
    assert [x.value for x in verdict.lost] == [gone.value]
    assert sum(verdict.anomaly_counts.values()) == 1


def test_values_round_trip_and_junk_is_not_ours() -> None:
    assert decode_value(encode_value(RUN, 3, 12345, size=100)) == (RUN, 3, 12345)
    assert len(encode_value(RUN, 3, 12345, size=100)) == 100
    for junk in (None, b"", b"mv1:x:1", b"mv1:x:a:1:", b"hello:world:1:2:", b"mv1:\xff:1:2:"):
        assert decode_value(junk) is None


def test_percentiles_nearest_rank() -> None:
    assert percentiles([]) == {}
    got = percentiles([float(x) for x in range(1, 101)])
    assert got == {"p50": 50.0, "p95": 95.0, "p99": 99.0, "max": 100.0}


def test_reports_give_counts_and_cut_examples() -> None:
    history = simple()
    history.reads = [r for r in history.reads if r.partition != 0]
    verdict = check(history)
    text = as_text(verdict, history, {"acks": "all"}, max_examples=2)
    assert "lost 10" in text and "... 8 more" in text and "ANOMALIES FOUND" in text
    data = as_dict(verdict, history, {"acks": "all"}, max_examples=2)
    assert data["anomalies"]["lost"] == 10 and len(data["examples"]["lost"]) == 2
    assert data["clean"] is False
    json.dumps(data)


def test_allowed_kinds_are_reported_but_do_not_fail_the_run() -> None:
    history = simple()
    twice = ack_of(history, 0, 2)
    end = max(r.offset for r in history.reads if r.partition == twice.partition) + 1
    history.reads.append(Read(0, twice.partition, end, encode_value(RUN, 0, 2)))
    verdict = check(history)
    assert failing_kinds(verdict) == ["duplicated"]
    assert failing_kinds(verdict, ("duplicated",)) == []
    text = as_text(verdict, history, {}, max_examples=2, allowed=("duplicated",))
    assert "duplicated 1" in text and "result: only allowed anomalies (duplicated 1" in text
    data = as_dict(verdict, history, {}, max_examples=2, allowed=("duplicated",))
    assert data["clean"] is False and data["failing"] == [] and data["allowed"] == ["duplicated"]
    # Loss is never excused by allowing another kind.
    history.reads = [r for r in history.reads if r.partition != 0]
    assert "lost" in failing_kinds(check(history), ("duplicated",))


# -- acknowledgements without an offset (librdkafka's implicit acks) -----------------------------
#
# A CI run reported "lost: producer 1 seq 3062 acked at 1:0" and "inconsistent: 1:0 acknowledged
# for two values: producer 1 seq 0 and producer 1 seq 3062". The delivery report of seq 3062 had
# no offset: librdkafka confirms a request whose outcome was uncertain (timed out, connection
# lost) without an offset once a later request of the partition succeeds, trusting the broker to
# refuse a batch after a sequence gap. The workload took the missing offset (None) for 0.


def test_a_delivery_report_without_offset_is_recorded_as_unknown_not_zero() -> None:
    from confluent_kafka import Message

    from moldau.verify.workload import WorkloadConfig, _ProducerWorker

    config = WorkloadConfig(client_config={}, topic="t", producers=1, consumers=1, records=4)
    worker = _ProducerWorker(1, config, clock=None)  # type: ignore[arg-type]
    worker.sent_at = [-1.0] * 4
    # What confluent-kafka hands the callback: -1001 (RD_KAFKA_OFFSET_INVALID) reads as None.
    implicit = Message(topic="t", partition=1, offset=-1001, value=encode_value(RUN, 1, 3))
    explicit = Message(topic="t", partition=1, offset=0, value=encode_value(RUN, 1, 0))
    assert implicit.offset() is None
    worker._on_delivery(None, explicit)
    worker._on_delivery(None, implicit)
    assert [(a.value, a.partition, a.offset) for a in worker.acks] == [
        ((1, 0), 1, 0), ((1, 3), 1, None)]


def with_implicit_ack(history: History, producer: int, seq: int) -> History:
    """``history`` where the ack of (producer, seq) came without an offset."""
    history.acks = [a._replace(offset=None) if a.value == (producer, seq) else a
                    for a in history.acks]
    return history


def test_an_ack_without_offset_read_back_is_no_anomaly() -> None:
    history = with_implicit_ack(simple(), 1, 4)
    verdict = check(history)
    assert verdict.clean, (verdict.anomaly_counts, verdict.inconsistent)
    assert (verdict.acked, verdict.acked_without_offset) == (30, 1)
    assert as_dict(verdict, history, {}, max_examples=2)["acked_without_offset"] == 1
    assert "acked without an offset" in as_text(verdict, history, {}, max_examples=2)


def test_an_ack_without_offset_never_read_is_lost_and_nothing_else() -> None:
    history = with_implicit_ack(simple(), 1, 4)
    gone = ack_of(simple(), 1, 4)
    history.reads = [r for r in history.reads if (r.partition, r.offset) !=
                     (gone.partition, gone.offset)]
    verdict = check(history)
    assert verdict.anomaly_counts == {"lost": 1, "duplicated": 0, "reordered": 0,
                                      "inconsistent": 0, "unexpected": 0}
    assert [(x.value, x.partition, x.offset) for x in verdict.lost] == [
        ((1, 4), gone.partition, None)]
    data = as_dict(verdict, history, {}, max_examples=2)
    assert data["examples"]["lost"] == [
        f"producer 1 seq 4 acked in partition {gone.partition} without an offset"]


def test_an_ack_without_offset_read_in_another_partition_is_inconsistent() -> None:
    history = with_implicit_ack(simple(), 1, 4)
    acked = ack_of(simple(), 1, 4)
    history.acks = [a._replace(partition=(acked.partition + 1) % 3) if a.value == (1, 4) else a
                    for a in history.acks]
    verdict = check(history)
    assert [(i.partition, "without an offset" in i.reason) for i in verdict.inconsistent] == [
        ((acked.partition + 1) % 3, True)]
    assert not verdict.lost
    assert as_dict(verdict, history, {}, max_examples=2)["examples"]["inconsistent"][0].startswith(
        f"partition {(acked.partition + 1) % 3}: ")
