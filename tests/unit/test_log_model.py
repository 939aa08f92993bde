"""Property test: random appends, rolls, restarts, truncations and reads agree with a model.

The model is the list of batches the log must hold (base offset, expected stored bytes) plus
the log start offset. Restarts are clean (close) or crashes (descriptors dropped without
flush), optionally with un-acknowledged bytes torn onto the active segment, which recovery
must cut away without touching acknowledged data.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import shutil
import struct
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from moldau.log import LogConfig, OffsetOutOfRangeError, PartitionLog, RecordListTooLargeError
from moldau.log.batch import parse_batches
from moldau.log.segment import LogSegment

from .batchgen import Record, build_batch

NOW = 1_700_000_000_000

batch_specs = st.lists(
    st.tuples(st.integers(1, 5), st.integers(0, 120)),  # (records, value size)
    min_size=1,
    max_size=3,
)


@dataclasses.dataclass
class ModelBatch:
    base_offset: int
    data: bytes

    @property
    def count(self) -> int:
        return struct.unpack_from(">i", self.data, 57)[0]

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.count - 1


class PartitionLogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="moldau-model-"))
        self.config = dataclasses.replace(
            LogConfig(), segment_bytes=900, index_interval_bytes=150, segment_index_bytes=8 * 6
        )
        self.plog = PartitionLog.open(self.root / "model-0", self.config, 0, True, NOW)
        self.batches: list[ModelBatch] = []
        self.log_start = 0
        self.leo = 0
        self.checkpointed_recovery_point = 0
        self.serial = 0

    def teardown(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    # -- operations -----------------------------------------------------------------------

    def _batch(self, count: int, size: int) -> bytes:
        self.serial += 1
        records = [
            Record(f"k{self.serial}-{i}".encode(), bytes([self.serial % 251]) * size,
                   NOW + self.serial, (("n", str(i).encode()),))
            for i in range(count)
        ]
        return build_batch(records)

    @rule(specs=batch_specs, epoch=st.integers(0, 2))
    def append(self, specs: list[tuple[int, int]], epoch: int) -> None:
        raw = [self._batch(count, size) for count, size in specs]
        records = b"".join(raw)
        if len(records) > self.config.segment_bytes:
            with pytest.raises(RecordListTooLargeError):
                self.plog.append(records, leader_epoch=epoch, now_ms=NOW)
            return
        result = self.plog.append(records, leader_epoch=epoch, now_ms=NOW)
        assert result.base_offset == self.leo
        offset = self.leo
        for data in raw:
            stored = bytearray(data)
            struct.pack_into(">qii", stored, 0, offset, len(data) - 12, epoch)
            self.batches.append(ModelBatch(offset, bytes(stored)))
            offset = self.batches[-1].last_offset + 1
        assert result.last_offset == offset - 1
        self.leo = offset
        self.plog.high_watermark = self.leo

    @rule()
    def roll(self) -> None:
        self.plog.roll(NOW)

    @rule()
    def flush(self) -> None:
        self.plog.flush(NOW)
        self.checkpointed_recovery_point = self.plog.recovery_point

    @rule(clean=st.booleans(), torn=st.one_of(st.none(), st.binary(min_size=1, max_size=90),
                                              st.integers(1, 60)))
    def restart(self, clean: bool, torn: bytes | int | None) -> None:
        if clean:
            self.plog.close()
            self.checkpointed_recovery_point = self.plog.recovery_point
        else:
            for segment in self.plog.segments:
                segment.close()
            if torn is not None:
                if isinstance(torn, int):  # a prefix of a real next batch: a torn write
                    torn = self._next_batch_prefix(torn)
                with self.plog.active_segment.log_path.open("ab") as f:
                    f.write(torn)
        self.plog = PartitionLog.open(
            self.root / "model-0", self.config, self.checkpointed_recovery_point, clean, NOW,
            log_start_offset=self.log_start,
        )

    def _next_batch_prefix(self, cut: int) -> bytes:
        data = bytearray(self._batch(2, 40))
        struct.pack_into(">q", data, 0, self.leo)
        return bytes(data[: min(cut, len(data) - 1)])

    @precondition(lambda self: self.leo > self.log_start)
    @rule(data=st.data())
    def delete_records(self, data: st.DataObject) -> None:
        offset = data.draw(st.integers(self.log_start, self.leo))
        assert self.plog.delete_records_before(offset) == offset
        self.log_start = offset

    @precondition(lambda self: any(b.base_offset >= self.log_start for b in self.batches))
    @rule(data=st.data())
    def truncate_at_batch_boundary(self, data: st.DataObject) -> None:
        bases = [b.base_offset for b in self.batches if b.base_offset >= self.log_start]
        offset = data.draw(st.sampled_from(bases))
        self.plog.truncate_to(offset)
        self.batches = [b for b in self.batches if b.base_offset < offset]
        self.leo = offset

    @rule(data=st.data(), max_bytes=st.integers(0, 2_000), min_one=st.booleans(),
          use_hw=st.booleans())
    def read(self, data: st.DataObject, max_bytes: int, min_one: bool, use_hw: bool) -> None:
        offset = data.draw(st.integers(self.log_start, self.leo))
        max_offset = data.draw(st.integers(offset, self.leo)) if use_hw else None
        sl = self.plog.read(offset, max_bytes, min_one_batch=min_one, max_offset=max_offset)
        limit = self.leo if max_offset is None else max_offset
        candidates = [b for b in self.batches if b.last_offset >= offset and
                      b.last_offset < limit]
        if sl is None:
            assert not candidates or (not min_one and len(candidates[0].data) > max_bytes)
            return
        got = sl.read()
        headers = parse_batches(got)
        assert headers, "a slice is never empty"
        expected = candidates[: len(headers)]
        assert [h.base_offset for h in headers] == [b.base_offset for b in expected]
        assert got == b"".join(b.data for b in expected)
        assert len(got) <= max_bytes or (min_one and len(headers) == 1)
        # Maximal: the next batch is in another segment, too big, or not below max_offset.
        if len(candidates) > len(headers):
            following = candidates[len(headers)]
            segment = self._segment_of(headers[0].base_offset)
            assert (following.base_offset >= segment.next_offset
                    or len(got) + len(following.data) > max_bytes)

    def _segment_of(self, offset: int) -> LogSegment:
        return [s for s in self.plog.segments if s.base_offset <= offset][-1]

    @rule()
    def out_of_range(self) -> None:
        for offset in (self.leo + 1, self.log_start - 1):
            if offset < 0:
                continue
            try:
                self.plog.read(offset, 100)
            except OffsetOutOfRangeError:
                continue
            raise AssertionError(f"offset {offset} should be out of range")

    # -- invariants -----------------------------------------------------------------------

    @invariant()
    def offsets_agree(self) -> None:
        assert self.plog.log_end_offset == self.leo
        assert self.plog.log_start_offset == self.log_start
        segments = self.plog.segments
        for a, b in itertools.pairwise(segments):
            assert a.next_offset == b.base_offset, "segments are contiguous"
            assert a.size <= self.config.segment_bytes

    @invariant()
    def leader_epochs_are_ordered(self) -> None:
        entries = self.plog.leader_epochs
        assert entries == sorted(entries) and len({e for e, _ in entries}) == len(entries)
        assert all(self.log_start <= start <= self.leo for _, start in entries)

    @invariant()
    def full_scan_matches(self) -> None:
        offset, got = self.log_start, bytearray()
        while True:
            sl = self.plog.read(offset, 1_000)
            if sl is None:
                break
            chunk = sl.read()
            got += chunk
            offset = parse_batches(chunk)[-1].last_offset + 1
        expected = [b for b in self.batches if b.last_offset >= self.log_start]
        assert bytes(got) == b"".join(b.data for b in expected)


PartitionLogMachine.TestCase.settings = settings(
    max_examples=int(os.environ.get("MOLDAU_MODEL_EXAMPLES", "60")),
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_partition_log_agrees_with_model = PartitionLogMachine.TestCase
