"""Transaction-aware compaction: aborted data goes, committed data is compacted, markers
stay until their transaction is gone and delete.retention.ms (and the replicas) allow, the
cleaner never passes the first unstable offset, and cleaned segments carry their own
``.txnindex``."""

from __future__ import annotations

import dataclasses
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from moldau.log import LogManager, PartitionLog
from moldau.log.cleaner import LogCleaner
from moldau.log.control_batch import ControlType

from .batchgen import DecodedBatch, Record, build_batch, decode_batches
from .test_log_cleaner import TOPIC, Crash, CrashingSwaps, Harness, latest, raw_batches

NOW = 1_700_000_000_000
RETENTION = 1_000

Entry = tuple[int, bytes | None, bytes | None]


class TxnHarness(Harness):
    """A compacted log written by plain producers and transactional ones (epoch 0), with
    markers as the coordinator writes them, on a lone broker (high watermark = log end)."""

    def __init__(self, directory: Path, **overrides: Any) -> None:
        overrides.setdefault("delete_retention_ms", RETENTION)
        super().__init__(directory, **overrides)
        self.sequences: dict[int, int] = {}

    def put(self, key: bytes | None, value: bytes | None, ts: int = NOW) -> int:
        base = super().put(key, value, ts)
        self.log.high_watermark = self.log.log_end_offset
        return base

    def txn(self, pid: int, records: list[tuple[bytes, bytes | None]], ts: int = NOW) -> int:
        """One transactional batch of producer ``pid``; its base offset."""
        seq = self.sequences.get(pid, 0)
        self.sequences[pid] = seq + len(records)
        batch = build_batch([Record(k, v, ts) for k, v in records], producer_id=pid,
                            producer_epoch=0, base_sequence=seq, transactional=True)
        base = self.append(batch, ts)
        self.log.high_watermark = self.log.log_end_offset
        return base

    def end(self, pid: int, commit: bool, ts: int = NOW) -> int:
        """The coordinator's marker for ``pid``'s transaction; its offset."""
        control = ControlType.COMMIT if commit else ControlType.ABORT
        result = self.log.append_marker(pid, 0, control, 0, leader_epoch=0, now_ms=ts)
        self.log.high_watermark = self.log.log_end_offset
        return result.base_offset

    def batches(self, plog: PartitionLog | None = None) -> list[DecodedBatch]:
        return [decode_batches(b)[0] for b in raw_batches(plog or self.log)]

    def data(self, plog: PartitionLog | None = None) -> list[Entry]:
        """Every data record (markers left out): (offset, key, value)."""
        return [(o, r.key, r.value) for b in self.batches(plog) if not is_control(b)
                for o, r in zip(b.offsets, b.records, strict=True)]


def is_control(batch: DecodedBatch) -> bool:
    return bool(batch.attributes & 0x20)


def is_transactional(batch: DecodedBatch) -> bool:
    return bool(batch.attributes & 0x10)


def marker_type(batch: DecodedBatch) -> ControlType:
    key = batch.records[0].key
    assert key is not None
    return ControlType(struct.unpack(">hh", key)[1])


def read_committed(plog: PartitionLog, batches: list[DecodedBatch]) -> list[Entry]:
    """What a read_committed consumer gets from the log start to the last stable offset,
    with the aborted transactions the broker would send (Kafka's consumer algorithm)."""
    end = plog.last_stable_offset
    pending = sorted(plog.aborted_transactions(plog.log_start_offset, end),
                     key=lambda e: e.first_offset)
    aborted_pids: set[int] = set()
    out: list[Entry] = []
    for batch in batches:
        if batch.base_offset >= end:
            break
        if batch.producer_id >= 0:
            while pending and pending[0].first_offset <= batch.last_offset:
                aborted_pids.add(pending.pop(0).producer_id)
            if is_control(batch):
                if batch.records and marker_type(batch) is ControlType.ABORT:
                    aborted_pids.discard(batch.producer_id)
                continue
            if is_transactional(batch) and batch.producer_id in aborted_pids:
                continue
        out.extend((o, r.key, r.value) for o, r in zip(batch.offsets, batch.records,
                                                       strict=True))
    return out


def every_txn_batch_has_its_marker(batches: list[DecodedBatch], open_pids: set[int]) -> None:
    """No transactional data batch is left without the marker that decides it (unless its
    transaction is still open)."""
    waiting: dict[int, int] = {}
    for batch in batches:
        if is_control(batch):
            waiting.pop(batch.producer_id, None)
        elif is_transactional(batch):
            waiting.setdefault(batch.producer_id, batch.base_offset)
    assert set(waiting) <= open_pids, f"batches without a marker: {waiting}"


# -- what is kept ---------------------------------------------------------------------------


def test_aborted_records_go_and_committed_ones_are_compacted(tmp_path: Path) -> None:
    h = TxnHarness(tmp_path, segment_bytes=1 << 20)
    h.put(b"k", b"plain-1")                     # 0
    h.txn(1, [(b"k", b"aborted"), (b"j", b"aborted")])  # 1-2
    h.txn(2, [(b"k", b"committed-1")])          # 3
    h.end(1, commit=False)                      # 4
    h.txn(2, [(b"j", b"committed-2")])          # 5
    h.end(2, commit=True)                       # 6
    h.txn(3, [(b"k", b"later")])                # 7
    h.end(3, commit=True)                       # 8
    h.log.roll(NOW)
    before = read_committed(h.log, h.batches())
    assert latest(before) == {b"k": b"later", b"j": b"committed-2"}

    [result] = h.clean(NOW + 1)

    batches = h.batches()
    values = [r.value for b in batches for r in b.records if not is_control(b)]
    assert b"aborted" not in values
    assert result.aborted_records_removed == 2
    # k's older values are obsolete (committed data is compacted like any data).
    assert values == [b"committed-2", b"later"]
    assert latest(read_committed(h.log, batches)) == latest(before)
    # Producer 1's only batch was its last one: kept empty, with its sequence, and so is
    # its ABORT marker and the index entry for it; producer 2's first batch goes.
    by_offset = {b.base_offset: b for b in batches}
    assert by_offset[1].records == [] and by_offset[1].base_sequence == 0
    assert is_transactional(by_offset[1])
    assert 3 not in by_offset
    assert {o for o, b in by_offset.items() if is_control(b)} == {4, 6, 8}
    [entry] = h.log.aborted_transactions(0, h.log.log_end_offset)
    assert (entry.producer_id, entry.first_offset, entry.last_offset) == (1, 1, 4)
    every_txn_batch_has_its_marker(batches, set())


def test_the_cleaner_stops_at_the_first_unstable_offset(tmp_path: Path) -> None:
    h = TxnHarness(tmp_path, segment_bytes=1 << 20)
    h.put(b"k", b"old")                         # 0
    h.txn(1, [(b"t", b"open")])                 # 1: an open transaction
    h.put(b"k", b"new")                         # 2
    h.put(b"t", b"plain")                       # 3
    h.log.roll(NOW)
    assert h.log.first_unstable_offset == 1
    [result] = h.clean(NOW + 1)
    # Nothing at or after offset 1 counts: "old" is not obsolete yet, nothing changed.
    assert result.end_offset == 1
    assert [(o, v) for o, _, v in h.data()] == [(0, b"old"), (1, b"open"), (2, b"new"),
                                                (3, b"plain")]
    # The transaction aborts: the next clean removes its record and the obsolete "old".
    h.end(1, commit=False)                      # 4
    h.put(b"x", b"y")                           # 5
    h.log.roll(NOW)
    h.clean(NOW + 2)
    assert [(o, v) for o, _, v in h.data()] == [(2, b"new"), (3, b"plain"), (5, b"y")]


def test_a_marker_above_the_high_watermark_keeps_its_transaction_unstable(
        tmp_path: Path) -> None:
    h = TxnHarness(tmp_path, segment_bytes=1 << 20)
    h.txn(1, [(b"k", b"aborted")])              # 0
    h.put(b"k", b"plain")                       # 1
    h.end(1, commit=False)                      # 2
    h.put(b"z", b"z")                           # 3
    h.log.roll(NOW)
    h.log.high_watermark = 2  # the marker is not replicated yet: the outcome may change
    assert h.log.first_unstable_offset == 0
    h.clean(NOW + 1)
    assert [v for _, _, v in h.data()] == [b"aborted", b"plain", b"z"]


def test_markers_go_in_a_later_pass_after_delete_retention(tmp_path: Path) -> None:
    h = TxnHarness(tmp_path, segment_bytes=1 << 20)
    h.txn(1, [(b"k", b"aborted")])              # 0
    h.end(1, commit=False)                      # 1
    h.txn(2, [(b"k", b"committed")])            # 2
    h.end(2, commit=True)                       # 3
    h.txn(1, [(b"k", b"last")])                 # 4: producer 1 goes on (its last batch)
    h.end(1, commit=True)                       # 5
    h.txn(2, [(b"p", b"plain")])                # 6: so does producer 2
    h.end(2, commit=True)                       # 7
    h.put(b"q", b"x")                           # 8
    h.log.roll(NOW)
    # First pass: the aborted record and the obsolete committed one go; their markers
    # stay, since batches of their transactions were still read in this pass.
    first = h.clean(NOW + 1)
    assert first[0].markers_removed == 0
    markers = [b.base_offset for b in h.batches() if is_control(b)]
    assert markers == [1, 3, 5, 7]
    assert [v for _, _, v in h.data()] == [b"last", b"plain", b"x"]
    # The next pass comes by itself (no new dirty data) once delete.retention.ms passed,
    # not before.
    assert h.clean(NOW + RETENTION - 1) == []
    [second] = h.clean(NOW + RETENTION + 1)
    assert second.markers_removed == 2
    batches = h.batches()
    assert [b.base_offset for b in batches if is_control(b)] == [5, 7]
    assert h.log.aborted_transactions(0, h.log.log_end_offset) == []
    assert latest(read_committed(h.log, batches)) == {b"k": b"last", b"p": b"plain",
                                                      b"q": b"x"}
    every_txn_batch_has_its_marker(batches, set())
    assert h.clean(NOW + 10 * RETENTION) == []


def test_a_marker_stays_until_every_replica_fetched_past_it(tmp_path: Path) -> None:
    bound: list[int | None] = [-1]
    h = TxnHarness(tmp_path, segment_bytes=1 << 20)
    h.cleaner = LogCleaner(h.manager, tombstone_bound=lambda plog: bound[0])
    h.txn(1, [(b"k", b"aborted")])              # 0
    h.end(1, commit=False)                      # 1
    h.put(b"k", b"v")                           # 2
    h.txn(1, [(b"w", b"w")])                    # 3
    h.end(1, commit=True)                       # 4
    h.put(b"p", b"q")                           # 5
    h.log.roll(NOW)
    h.clean(NOW + 1)
    late = NOW + 100 * RETENTION
    h.clean(late)
    assert [b.base_offset for b in h.batches() if is_control(b)] == [1, 4]
    assert h.clean(late + 1) == []
    bound[0] = 6  # every replica has everything
    [result] = h.clean(late + 2)
    assert result.markers_removed == 1
    assert [v for _, _, v in h.data()] == [b"v", b"w", b"q"]
    assert [b.base_offset for b in h.batches() if is_control(b)] == [4]


def fill_txns(directory: Path) -> TxnHarness:
    """Six transactions of one producer, every other one aborted, between plain writes,
    over many small segments, then one left open; cleaned in groups of several segments."""
    h = TxnHarness(directory, segment_bytes=200)
    for i in range(6):
        h.txn(7, [(b"a", b"x%d" % i)])
        h.end(7, commit=i % 2 == 0)
        h.put(b"plain%d" % i, b"p")
    h.txn(7, [(b"tail", b"open")])
    h.log.roll(NOW)
    h.log.flush()
    # Cleaned groups span several of those segments: index entries change files.
    h.config = dataclasses.replace(h.config, segment_bytes=1_000)
    h.manager.update_config(TOPIC, h.config)
    return h


def abort_markers(batches: list[DecodedBatch]) -> list[int]:
    return [b.base_offset for b in batches
            if is_control(b) and marker_type(b) is ControlType.ABORT]


def test_cleaned_segments_carry_their_txnindex_across_a_restart(tmp_path: Path) -> None:
    h = fill_txns(tmp_path)
    before = h.log.aborted_transactions(0, h.log.log_end_offset)
    h.clean(NOW + 1)
    after = h.log.aborted_transactions(0, h.log.log_end_offset)
    # One pass removes the aborted data; every ABORT marker stays with its index entry,
    # now in the cleaned segment that holds the marker.
    assert after == before
    assert [e.last_offset for e in after] == abort_markers(h.batches())
    assert not [v for _, _, v in h.data() if v in (b"x1", b"x3", b"x5")]
    holders = {seg.base_offset for seg in h.log.segments
               if any(seg.base_offset <= e.last_offset < seg.next_offset for e in after)}
    assert sorted(int(p.name.split(".")[0]) for p in tmp_path.glob("*/*.txnindex")) == \
        sorted(holders)
    h.manager.close()
    reopened = h.reopen(clean_shutdown=True)
    assert reopened.aborted_transactions(0, reopened.log_end_offset) == after
    assert reopened.producers.ongoing_transaction(7) is not None
    reopened.close()


def test_a_crash_during_a_swap_keeps_each_segment_with_its_txnindex(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kill the swap at each rename/unlink and reopen: whatever mix of old and cleaned
    segments results, read_committed sees the same records, and no .swap file is left."""
    reference = fill_txns(tmp_path / "reference")
    expected = read_committed(reference.log, reference.batches())
    reference.clean(NOW + 1)
    assert read_committed(reference.log, reference.batches()) != []
    for crash_at in range(200):
        h = fill_txns(tmp_path / f"run-{crash_at}")
        with monkeypatch.context() as patch:
            CrashingSwaps(patch, crash_at)
            try:
                h.clean(NOW + 1)
                finished = True
            except Crash:
                finished = False
        # Unclean, with everything below the recovery point (as it is, flushed): the
        # segments' .txnindex files are what read_committed fetches rely on.
        reopened = PartitionLog.open(h.log.directory, h.config, h.log.log_end_offset, False,
                                     NOW)
        reopened.high_watermark = reopened.log_end_offset
        batches = h.batches(reopened)
        assert latest(read_committed(reopened, batches)) == latest(expected)
        assert not [p for p in reopened.directory.iterdir()
                    if p.name.endswith((".cleaned", ".swap"))]
        assert [e.last_offset for e in reopened.aborted_transactions(
            0, reopened.log_end_offset)] == abort_markers(batches)
        reopened.close()
        if finished:
            break
    else:
        pytest.fail("the clean never finished")


# -- the model --------------------------------------------------------------------------------

ops = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.sampled_from([b"a", b"b", b"c"]),
                  st.one_of(st.none(), st.binary(min_size=0, max_size=8))),
        st.tuples(st.just("txn"), st.integers(min_value=1, max_value=3),
                  st.lists(st.tuples(st.sampled_from([b"a", b"b", b"c"]),
                                     st.binary(min_size=1, max_size=8)),
                           min_size=1, max_size=3)),
        st.tuples(st.just("end"), st.integers(min_value=1, max_value=3), st.booleans()),
        st.tuples(st.just("roll")),
        st.tuples(st.just("clean"), st.integers(min_value=0, max_value=1_500)),
        st.tuples(st.just("reopen")),
    ),
    min_size=1,
    max_size=50,
)


@dataclass
class Model:
    """What was written, and each transaction's fate."""

    appended: list[tuple[int, int, bytes, bytes | None]] = field(default_factory=list)
    #: pid -> offsets of its open transaction's records.
    open: dict[int, list[int]] = field(default_factory=dict)
    committed: set[int] = field(default_factory=set)
    aborted: set[int] = field(default_factory=set)

    def visible_latest(self, below: int) -> dict[bytes, bytes | None]:
        """Latest value per key among committed data below ``below``."""
        out: dict[bytes, bytes | None] = {}
        for offset, _pid, key, value in self.appended:
            if offset < below and offset not in self.aborted and (
                    offset in self.committed or _pid < 0):
                out[key] = value
        return out


@settings(max_examples=50, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=ops)
def test_model(tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[Any, ...]]) -> None:
    """Random plain writes, transactions committed and aborted, rolls, cleans with time
    passing and restarts: read_committed sees exactly the committed latest values, no
    aborted record survives a clean, no transactional batch loses its marker."""
    directory = tmp_path_factory.mktemp("txnmodel")
    h = TxnHarness(directory, segment_bytes=250)
    m = Model()
    now = NOW
    checkpoint = 0
    for op in ops:
        if op[0] == "put":
            offset = h.put(op[1], op[2], now)
            m.appended.append((offset, -1, op[1], op[2]))
        elif op[0] == "txn":
            base = h.txn(op[1], op[2], now)
            offsets = list(range(base, base + len(op[2])))
            m.open.setdefault(op[1], []).extend(offsets)
            m.appended.extend((o, op[1], k, v) for o, (k, v) in zip(offsets, op[2],
                                                                    strict=True))
        elif op[0] == "end":
            if op[1] not in m.open:
                continue
            h.end(op[1], op[2], now)
            (m.committed if op[2] else m.aborted).update(m.open.pop(op[1]))
        elif op[0] == "roll":
            h.log.roll(now)
        elif op[0] == "clean":
            now += op[1]
            for result in h.clean(now):
                checkpoint = result.end_offset
        else:
            h.log.close()
            h.manager = LogManager([directory], node_id=0, default_config=h.config, now_ms=now)
            h.log = h.manager.get(TOPIC, 0) or h.log
            h.log.high_watermark = h.log.log_end_offset
            h.cleaner = LogCleaner(h.manager)
        batches = h.batches()
        stored = [(o, r.key, r.value) for b in batches if not is_control(b)
                  for o, r in zip(b.offsets, b.records, strict=True)]
        written = {(o, k, v) for o, _p, k, v in m.appended}
        assert set(stored) <= written
        # No aborted record below the clean point survives; nothing at or after it is lost.
        assert not [e for e in stored if e[0] in m.aborted and e[0] < checkpoint]
        assert [e for e in sorted(written) if e[0] >= checkpoint] == [
            e for e in stored if e[0] >= checkpoint]
        every_txn_batch_has_its_marker(batches, set(m.open))
        # read_committed: the committed latest values below the last stable offset.
        lso = h.log.last_stable_offset
        model = m.visible_latest(lso)
        seen = latest(read_committed(h.log, batches))
        for key, value in model.items():
            assert seen.get(key) == value if value is not None else seen.get(key) is None
        assert set(seen) <= set(model)
    h.manager.close()
