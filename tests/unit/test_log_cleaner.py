"""Log compaction: the cleaner's choices, its rewrite, its crash safety, and its thread."""

from __future__ import annotations

import asyncio
import dataclasses
import gzip
import itertools
import logging
import os
import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import cramjam
import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from moldau.log import InvalidRecordError, LogConfig, LogManager, PartitionLog
from moldau.log.cleaner import CLEANER_OFFSET_CHECKPOINT, CleanerConfig, LogCleaner, loop_owner
from moldau.log.partition_log import AppendOrigin

from ..helpers.bombs import bomb_batch
from .batchgen import Record, build_batch, decode_batches

NOW = 1_700_000_000_000
TOPIC = "compacted"
#: One record with a short key and value is about 80 bytes: a few records per segment.
SEGMENT_BYTES = 300
COMPACT = LogConfig(
    segment_bytes=SEGMENT_BYTES,
    cleanup_policy=("compact",),
    min_cleanable_dirty_ratio=0.0,
    delete_retention_ms=1_000,
    index_interval_bytes=100,
)

Entry = tuple[int, bytes | None, bytes | None]  # offset, key, value


class Harness:
    """A log manager with one compacted partition, a cleaner, and helpers to read it back."""

    def __init__(self, directory: Path, config: LogConfig = COMPACT, **overrides: Any) -> None:
        self.directory = directory
        self.config = dataclasses.replace(config, **overrides)
        self.manager = LogManager([directory], node_id=0, default_config=self.config,
                                  now_ms=NOW)
        self.log = self.manager.create(TOPIC, 0, self.config, now_ms=NOW)
        self.cleaner = LogCleaner(self.manager)

    def put(self, key: bytes | None, value: bytes | None, ts: int = NOW) -> int:
        return self.append(build_batch([Record(key, value, ts)]), ts)

    def append(self, batch: bytes, ts: int = NOW) -> int:
        return self.log.append(batch, leader_epoch=0, now_ms=ts).base_offset

    def clean(self, now: int = NOW) -> list[Any]:
        return self.cleaner.clean_once(now)

    def entries(self, plog: PartitionLog | None = None) -> list[Entry]:
        return [(o, r.key, r.value) for o, r in read_records(plog or self.log)]

    def reopen(self, clean_shutdown: bool = False) -> PartitionLog:
        """Open the partition again from disk, as after a crash (recovery on)."""
        return PartitionLog.open(self.log.directory, self.config, 0, clean_shutdown, NOW)


def plain(batch: bytes) -> bytes:
    """``batch`` with its records section decompressed (batchgen decodes plain batches)."""
    codec = struct.unpack_from(">h", batch, 21)[0] & 7
    if codec == 0:
        return batch
    section = batch[61:]
    if codec == 1:
        records = gzip.decompress(section)
    elif codec == 2:
        records = bytes(cramjam.snappy.decompress_raw(section))
    elif codec == 3:
        records = bytes(cramjam.lz4.decompress(section))
    else:
        records = bytes(cramjam.zstd.decompress(section))
    return recodec(batch[:61] + records, 0)


def recodec(batch: bytes, codec: int, records: bytes | None = None) -> bytes:
    """``batch`` re-framed with codec ``codec`` around ``records`` (default: its own)."""
    section = batch[61:] if records is None else records
    out = bytearray(batch[:61]) + section
    struct.pack_into(">i", out, 8, len(out) - 12)
    (attributes,) = struct.unpack_from(">h", out, 21)
    struct.pack_into(">h", out, 21, (attributes & ~7) | codec)
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[21:])))
    return bytes(out)


def compress(batch: bytes, codec: int) -> bytes:
    """A plain batch compressed with ``codec``, framed as Kafka clients write it."""
    records = batch[61:]
    if codec == 1:
        section = gzip.compress(records)
    elif codec == 2:
        section = bytes(cramjam.snappy.compress_raw(records))
    elif codec == 3:
        section = bytes(cramjam.lz4.compress(records))
    else:
        section = bytes(cramjam.zstd.compress(records))
    return recodec(batch, codec, section)


def raw_batches(plog: PartitionLog) -> Iterator[bytes]:
    """Every stored batch, as bytes, from the log start to the end."""
    offset = plog.log_start_offset
    while offset < plog.log_end_offset:
        chunk = plog.read(offset, 1 << 20)
        if chunk is None:
            return
        data = chunk.read()
        pos = 0
        while pos < len(data):
            size = 12 + struct.unpack_from(">i", data, pos + 8)[0]
            yield data[pos : pos + size]
            pos += size
        last = decode_batches(plain(data[pos - size : pos]))[0]
        offset = last.last_offset + 1


def read_records(plog: PartitionLog) -> Iterator[tuple[int, Record]]:
    for raw in raw_batches(plog):
        batch = decode_batches(plain(raw))[0]
        yield from zip(batch.offsets, batch.records, strict=True)


def latest(entries: list[Entry]) -> dict[bytes, bytes | None]:
    out: dict[bytes, bytes | None] = {}
    for _, key, value in entries:
        if key is not None:
            out[key] = value
    return out


def segment_bytes(plog: PartitionLog) -> list[bytes]:
    return [seg.log_path.read_bytes() for seg in plog.segments]


# -- what is kept -------------------------------------------------------------------------


def test_latest_value_per_key_survives_with_its_offset(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    for i in range(30):
        h.put(f"k{i % 4}".encode(), f"v{i}".encode(), NOW + i)
    before = h.entries()
    active = h.log.active_segment
    active_bytes = active.log_path.read_bytes()
    leo = h.log.log_end_offset
    assert len(h.log.segments) > 5

    [result] = h.clean(NOW + 100)

    after = h.entries()
    offsets = [o for o, _, _ in after]
    assert offsets == sorted(set(offsets))
    # Every key once below the active segment, at the offset of its last write there.
    cleaned = [e for e in after if e[0] < active.base_offset]
    expected = {}
    for entry in before:
        if entry[0] < active.base_offset:
            expected[entry[1]] = entry
    assert sorted(cleaned) == sorted(expected.values())
    # The active segment is the same object with the same bytes; the log end did not move.
    assert h.log.active_segment is active
    assert active.log_path.read_bytes() == active_bytes
    assert h.log.log_end_offset == leo
    assert [e for e in after if e[0] >= active.base_offset] == [
        e for e in before if e[0] >= active.base_offset
    ]
    assert latest(after) == latest(before)
    assert result.end_offset == active.base_offset
    assert result.records_removed == len(before) - len(after)
    assert result.bytes_after < result.bytes_before
    # The log is readable from every offset (gaps are stepped over).
    for offset in range(h.log.log_start_offset, leo):
        chunk = h.log.read(offset, 1 << 20)
        assert chunk is not None


def test_checkpoint_is_kafkas_file(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    for i in range(12):
        h.put(b"k", str(i).encode())
    [result] = h.clean()
    text = (tmp_path / CLEANER_OFFSET_CHECKPOINT).read_text()
    assert text == f"0\n1\n{TOPIC} 0 {result.end_offset}\n"
    # Nothing new is dirty: the next pass does nothing.
    assert h.clean() == []
    # A new cleaner (a restart) resumes from the checkpoint.
    again = LogCleaner(h.manager)
    assert again.clean_once(NOW) == []


def test_small_cleaned_segments_merge_on_a_later_pass(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    for i in range(40):
        h.put(f"k{i % 2}".encode(), b"x" * 20)
    h.clean()
    count = len(h.log.segments)
    h.put(b"k0", b"y")
    h.log.roll(NOW)
    h.clean()
    assert len(h.log.segments) < count
    assert latest(h.entries()) == {b"k0": b"y", b"k1": b"x" * 20}


def test_active_segment_is_never_cleaned(tmp_path: Path) -> None:
    h = Harness(tmp_path, segment_bytes=1 << 20)
    for i in range(20):
        h.put(b"same", str(i).encode())
    before = segment_bytes(h.log)
    assert h.clean() == []
    assert segment_bytes(h.log) == before
    assert len(h.entries()) == 20


def test_updates_in_the_active_segment_do_not_remove_older_values_yet(tmp_path: Path) -> None:
    h = Harness(tmp_path, segment_bytes=1 << 20)
    for i in range(8):
        h.put(f"k{i}".encode(), b"old")
    h.log.roll(NOW)
    for i in range(8):
        h.put(f"k{i}".encode(), b"new")
    h.clean()
    values = [v for _, _, v in h.entries()]
    assert values.count(b"old") == 8 and values.count(b"new") == 8


def test_null_keys_are_kept(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    for i in range(10):
        h.put(None, str(i).encode())
        h.put(b"k", str(i).encode())
    h.log.roll(NOW)
    h.clean()
    entries = h.entries()
    assert [v for _, k, v in entries if k is None] == [str(i).encode() for i in range(10)]
    assert [v for _, k, v in entries if k is not None] == [b"9"]


def test_batches_lose_records_but_keep_their_frame(tmp_path: Path) -> None:
    h = Harness(tmp_path, segment_bytes=1 << 20)
    records = [Record(f"k{i % 3}".encode(), f"v{i}".encode(), NOW + i) for i in range(9)]
    h.append(build_batch(records, producer_id=7, producer_epoch=2, base_sequence=40))
    h.append(build_batch([Record(b"z", b"z", NOW + 50)]))
    h.log.roll(NOW)
    h.clean(NOW + 100)
    [first, second] = [decode_batches(b)[0] for b in raw_batches(h.log)]
    assert (first.base_offset, first.last_offset_delta) == (0, 8)
    assert first.offset_deltas == [6, 7, 8]
    assert [r.value for r in first.records] == [b"v6", b"v7", b"v8"]
    assert (first.producer_id, first.producer_epoch, first.base_sequence) == (7, 2, 40)
    assert first.base_timestamp == NOW
    assert first.max_timestamp == NOW + 8
    assert second.base_offset == 9


# -- tombstones -----------------------------------------------------------------------------


def test_tombstones_stay_for_delete_retention_then_go(tmp_path: Path) -> None:
    h = Harness(tmp_path, delete_retention_ms=10_000)
    h.put(b"gone", b"v1", NOW)
    h.put(b"gone", b"v2", NOW)
    h.put(b"kept", b"v", NOW)
    h.put(b"gone", None, NOW)
    h.put(b"other", b"v", NOW)
    h.log.roll(NOW)
    # First clean: older values of the key go, the tombstone stays (it was dirty).
    h.clean(NOW + 1)
    assert latest(h.entries()) == {b"gone": None, b"kept": b"v", b"other": b"v"}
    assert [v for _, k, v in h.entries() if k == b"gone"] == [None]
    # Within delete.retention.ms, it stays, even when the log is cleaned again.
    h.put(b"other", b"w", NOW + 5_000)
    h.log.roll(NOW + 5_000)
    h.clean(NOW + 5_000)
    assert (b"gone", None) in [(k, v) for _, k, v in h.entries()]
    assert h.clean(NOW + 10_000) == []  # expiry is strict: not yet
    # Once it has passed, the next pass removes it, though nothing new is dirty.
    [result] = h.clean(NOW + 10_001)
    assert result.tombstones_removed == 1
    assert latest(h.entries()) == {b"kept": b"v", b"other": b"w"}
    assert h.clean(NOW + 20_000) == []


def test_old_tombstone_survives_its_first_clean(tmp_path: Path) -> None:
    h = Harness(tmp_path, delete_retention_ms=10)
    h.put(b"k", b"v", NOW)
    h.put(b"k", None, NOW)
    h.log.roll(NOW)
    h.clean(NOW + 1_000_000)
    assert h.entries() == [(1, b"k", None)]
    h.clean(NOW + 1_000_000)
    assert h.entries() == []
    assert h.log.log_end_offset == 2


# -- when to clean ----------------------------------------------------------------------------


def test_dirty_ratio_threshold(tmp_path: Path) -> None:
    h = Harness(tmp_path, min_cleanable_dirty_ratio=0.5)
    for i in range(20):
        h.put(f"k{i}".encode(), b"x" * 30)
    h.log.roll(NOW)
    [first] = h.clean()
    assert first.dirty_ratio == 1.0
    # A little dirt on a clean log: below the ratio, nothing happens.
    h.put(b"k0", b"y" * 30)
    h.log.roll(NOW)
    assert h.clean() == []
    # Enough dirt: cleaned.
    for i in range(1, 20):
        h.put(f"k{i}".encode(), b"y" * 30)
    h.log.roll(NOW)
    [second] = h.clean()
    assert second.dirty_ratio >= 0.5
    assert {v for _, _, v in h.entries()} == {b"y" * 30}


def test_max_compaction_lag_forces_a_clean(tmp_path: Path) -> None:
    h = Harness(tmp_path, min_cleanable_dirty_ratio=0.99, max_compaction_lag_ms=60_000)
    for i in range(20):
        h.put(f"k{i}".encode(), b"x", NOW)
    h.log.roll(NOW)
    h.clean(NOW)
    h.put(b"k0", b"y", NOW)
    h.log.roll(NOW)
    assert h.clean(NOW + 1_000) == []
    [result] = h.clean(NOW + 60_001)
    assert result.records_removed == 1


def test_min_compaction_lag_keeps_recent_records(tmp_path: Path) -> None:
    h = Harness(tmp_path, min_compaction_lag_ms=10_000)
    old, recent = NOW - 60_000, NOW - 1_000
    for i in range(10):
        h.put(b"k", f"old{i}".encode(), old + i)
    for i in range(10):
        h.put(b"k", f"new{i}".encode(), recent + i)
    h.log.roll(NOW)
    first_recent = 10
    [result] = h.clean(NOW)
    assert result.end_offset == first_recent  # the range stops before the first recent batch
    values = [v for _, _, v in h.entries()]
    assert values == [b"old9"] + [f"new{i}".encode() for i in range(10)]
    # Later, those records are old enough too.
    [result] = h.clean(NOW + 20_000)
    assert [v for _, _, v in h.entries()] == [b"new9"]


def test_non_compacted_logs_are_left_alone(tmp_path: Path) -> None:
    h = Harness(tmp_path, cleanup_policy=("delete",))
    for i in range(20):
        h.put(b"k", str(i).encode())
    assert h.clean() == []
    assert len(h.entries()) == 20


def test_compact_delete_policy_is_compacted(tmp_path: Path) -> None:
    h = Harness(tmp_path, cleanup_policy=("compact", "delete"))
    for i in range(20):
        h.put(b"k", str(i).encode())
    assert len(h.clean()) == 1


# -- batch kinds ------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", [1, 2, 3, 4], ids=["gzip", "snappy", "lz4", "zstd"])
def test_compressed_batches_are_cleaned_and_stay_compressed(tmp_path: Path, codec: int) -> None:
    h = Harness(tmp_path, segment_bytes=2_000)
    for round_ in range(6):
        records = [Record(f"key-{i}".encode(), f"value-{round_}-{i}".encode() * 4, NOW)
                   for i in range(round_, round_ + 8)]
        h.append(compress(build_batch(records), codec))
    h.log.roll(NOW)
    before = h.entries()
    h.clean()
    after = h.entries()
    assert latest(after) == latest(before)
    assert len({k for _, k, _ in after}) == len(after)
    for raw in raw_batches(h.log):
        header_codec = struct.unpack_from(">h", raw, 21)[0] & 7
        count = struct.unpack_from(">i", raw, 57)[0]
        assert header_codec == (codec if count else 0)
        assert crc32c.crc32c(raw[21:]) == struct.unpack_from(">I", raw, 17)[0]


def test_last_batch_of_a_producer_stays_as_an_empty_batch(tmp_path: Path) -> None:
    h = Harness(tmp_path, segment_bytes=1 << 20)
    h.append(build_batch([Record(b"k", b"1", NOW)], producer_id=5, producer_epoch=1,
                         base_sequence=0))
    h.append(build_batch([Record(b"k", b"2", NOW)], producer_id=5, producer_epoch=1,
                         base_sequence=1))
    h.append(build_batch([Record(b"k", b"3", NOW)]))
    h.append(build_batch([Record(b"j", b"4", NOW)]))
    h.log.roll(NOW)
    h.clean()
    batches = [decode_batches(b)[0] for b in raw_batches(h.log)]
    # Offset 0 goes entirely; offset 1 is the producer's last batch: kept, empty, with its
    # sequence; offset 3 is the last batch of the segment.
    assert [(b.base_offset, len(b.records)) for b in batches] == [(1, 0), (2, 1), (3, 1)]
    assert (batches[0].producer_id, batches[0].base_sequence) == (5, 1)
    assert h.entries() == [(2, b"k", b"3"), (3, b"j", b"4")]


def test_produce_without_key_to_compacted_topic_is_refused(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    batch = build_batch([Record(b"a", b"1", NOW), Record(None, b"2", NOW)])
    with pytest.raises(InvalidRecordError, match="without key"):
        h.log.append(batch, leader_epoch=0, now_ms=NOW, origin=AppendOrigin.CLIENT)
    h.log.append(build_batch([Record(b"a", None, NOW)]), leader_epoch=0, now_ms=NOW,
                 origin=AppendOrigin.CLIENT)
    gz = compress(build_batch([Record(None, b"x", NOW)]), 1)
    with pytest.raises(InvalidRecordError):
        h.log.append(gz, leader_epoch=0, now_ms=NOW, origin=AppendOrigin.CLIENT)
    # The broker's own writers and other policies are not checked.
    h.log.append(batch, leader_epoch=0, now_ms=NOW)
    other = Harness(tmp_path / "other", cleanup_policy=("delete",))
    other.log.append(batch, leader_epoch=0, now_ms=NOW, origin=AppendOrigin.CLIENT)


# -- concurrency with the log's owner ---------------------------------------------------------


def test_swap_is_refused_when_the_log_changed_meanwhile(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    for i in range(30):
        h.put(b"k", str(i).encode())
    before = h.entries()
    calls = 0

    def owner(fn: Callable[[], Any]) -> Any:
        nonlocal calls
        calls += 1
        if calls == 2:  # the first swap: the log is truncated just before it
            h.log.truncate_to(3)
        from moldau.log.cleaner import run_inline

        return run_inline(fn)

    cleaner = LogCleaner(h.manager, owner=owner)
    assert cleaner.clean_once(NOW) == []
    assert h.entries() == before[:3]
    leftovers = [p.name for p in h.log.directory.iterdir() if p.suffix in (".cleaned", ".swap")]
    assert leftovers == []
    assert not (tmp_path / CLEANER_OFFSET_CHECKPOINT).exists() or (
        f"{TOPIC} 0" not in (tmp_path / CLEANER_OFFSET_CHECKPOINT).read_text()
    )


def test_fetch_slices_of_replaced_segments_stay_readable(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    for i in range(30):
        h.put(b"k", str(i).encode())
    held = h.log.read(0, 1 << 20)
    assert held is not None
    data = held.read()
    h.clean()
    assert held.read() == data


def test_cleaner_thread_with_an_event_loop(tmp_path: Path) -> None:
    """The thread snapshots and swaps through the loop; stop() from the loop does not hang."""
    h = Harness(tmp_path)

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        cleaner = LogCleaner(h.manager, CleanerConfig(backoff_ms=10), owner=loop_owner(loop))
        cleaner.start()
        try:
            for round_ in range(20):
                for i in range(5):
                    h.put(f"k{i}".encode(), f"{round_}".encode())
                await asyncio.sleep(0.005)
            h.log.roll(NOW)
            for _ in range(400):
                if len(h.entries()) == 5:
                    break
                await asyncio.sleep(0.01)
        finally:
            cleaner.stop()  # on the loop thread, as Broker.close does
        assert sorted(h.entries()) == sorted(
            (o, k, v) for o, k, v in h.entries() if v == b"19")

    asyncio.run(scenario())
    assert latest(h.entries()) == {f"k{i}".encode(): b"19" for i in range(5)}


def test_stop_while_a_swap_waits_for_the_owner(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    for i in range(30):
        h.put(b"k", str(i).encode())
    before = h.entries()
    from concurrent.futures import Future

    pending: list[Future[Any]] = []

    def never_runs(fn: Callable[[], Any]) -> Future[Any]:
        if not pending:  # the snapshot is served, the swap is left waiting
            from moldau.log.cleaner import run_inline

            pending.append(Future())
            return run_inline(fn)
        future: Future[Any] = Future()
        pending.append(future)
        return future

    cleaner = LogCleaner(h.manager, CleanerConfig(backoff_ms=10), owner=never_runs)
    cleaner.start()
    for _ in range(200):
        if len(pending) > 1:
            break
        import time

        time.sleep(0.01)
    cleaner.stop(timeout=5)
    assert pending[-1].cancelled()
    assert h.entries() == before
    assert not [p for p in h.log.directory.iterdir() if p.suffix in (".cleaned", ".swap")]


# -- crashes ----------------------------------------------------------------------------------


class Crash(BaseException):
    """A simulated kill: not an Exception, so the cleaner's per-log error handling does not
    swallow it (as nothing would survive a real one)."""


def fill_for_crash(directory: Path) -> Harness:
    h = Harness(directory)
    for i in range(24):
        h.put(f"k{i % 3}".encode(), str(i).encode(), NOW + i)
    h.put(b"k0", None, NOW + 30)
    h.log.roll(NOW)
    h.log.flush()
    return h


class CrashingSwaps:
    """Counts the file operations of swaps (renames of .cleaned/.swap files, unlinks of
    replaced segment files) and raises :class:`Crash` instead of operation ``crash_at``.
    From then on the process is "dead": renames and unlinks (the cleaner's clean-up on the
    way out) do nothing, so the directory stays as a crash would leave it."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, crash_at: int) -> None:
        self.crash_at = crash_at
        self.steps = 0
        self.in_swap = False
        self.dead = False
        real_rename, real_unlink = os.rename, Path.unlink
        real_replace = PartitionLog.replace_segments

        def rename(src: Any, dst: Any) -> None:
            if str(src).endswith((".cleaned", ".swap")):
                self.step()
            real_rename(src, dst)

        def unlink(path: Path, missing_ok: bool = False) -> None:
            if self.in_swap and path.suffix in (".log", ".index", ".timeindex", ".txnindex"):
                self.step()
            if not self.dead:
                real_unlink(path, missing_ok=missing_ok)

        def replace(plog: PartitionLog, old: Any, cleaned: Any) -> bool:
            self.in_swap = True
            try:
                return real_replace(plog, old, cleaned)
            finally:
                self.in_swap = False

        monkeypatch.setattr(os, "rename", rename)
        monkeypatch.setattr(Path, "unlink", unlink)
        monkeypatch.setattr(PartitionLog, "replace_segments", replace)

    def step(self) -> None:
        if self.dead:
            raise Crash
        self.steps += 1
        if self.steps > self.crash_at:
            self.dead = True
            raise Crash


def test_crash_at_every_step_of_the_swap_leaves_a_valid_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kill the swap at each rename/unlink, reopen: every group is either old or cleaned."""
    reference = fill_for_crash(tmp_path / "reference")
    old = reference.entries()
    reference.clean()
    new = reference.entries()
    assert new != old
    seen_states = set()
    for crash_at in itertools.count():
        h = fill_for_crash(tmp_path / f"run-{crash_at}")
        with monkeypatch.context() as patch:
            CrashingSwaps(patch, crash_at)
            try:
                h.clean()
                finished = True
            except Crash:
                finished = False
        reopened = h.reopen()
        state = h.entries(reopened)
        assert latest(state) == latest(old)
        assert reopened.log_end_offset == h.log.log_end_offset
        assert all(entry in old for entry in state)
        assert all(entry in state for entry in new)
        names = [p.name for p in reopened.directory.iterdir()]
        assert not [n for n in names if n.endswith((".cleaned", ".swap"))]
        seen_states.add(tuple(state))
        if finished:
            assert state == new
            break
        assert crash_at < 200
    assert len(seen_states) > 2  # crashes before, between and after group swaps


def test_leftover_cleaned_and_orphan_swap_files_are_dropped(tmp_path: Path) -> None:
    h = fill_for_crash(tmp_path)
    before = h.entries()
    first = h.log.segments[0]
    directory = h.log.directory
    # A crash while writing: partial .cleaned files; a crash inside the rename to .swap:
    # an index already renamed, its log not.
    (directory / (first.log_path.name + ".cleaned")).write_bytes(first.log_path.read_bytes()[:50])
    (directory / (first.offset_index.path.name + ".cleaned")).write_bytes(b"")
    (directory / (first.time_index.path.name + ".swap")).write_bytes(b"\x00" * 12)
    reopened = h.reopen()
    assert h.entries(reopened) == before
    assert not [p for p in directory.iterdir() if p.suffix in (".cleaned", ".swap")]


def test_committed_swap_whose_old_segments_remain_is_completed(tmp_path: Path) -> None:
    """A .log.swap beside every old segment it replaces (crash right after step 1)."""
    h = fill_for_crash(tmp_path / "a")
    expected_dir = tmp_path / "b"
    reference = fill_for_crash(expected_dir)
    reference.clean()
    expected = reference.entries()
    # Put reference's first cleaned segment as a swap into h's directory.
    cleaned_first = reference.log.segments[0]
    for path in (cleaned_first.log_path, cleaned_first.offset_index.path,
                 cleaned_first.time_index.path):
        (h.log.directory / (path.name + ".swap")).write_bytes(path.read_bytes())
    reopened = h.reopen()
    state = h.entries(reopened)
    assert [e for e in state if e[0] < reference.log.segments[1].base_offset] == [
        e for e in expected if e[0] < reference.log.segments[1].base_offset
    ]
    assert latest(state) == latest(expected)


# -- the model --------------------------------------------------------------------------------

ops = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.lists(
            st.tuples(st.sampled_from([b"a", b"b", b"c", b"d", b"e"]),
                      st.one_of(st.none(), st.binary(min_size=0, max_size=30))),
            min_size=1, max_size=4)),
        st.tuples(st.just("roll")),
        st.tuples(st.just("clean"), st.integers(min_value=0, max_value=3_000)),
        st.tuples(st.just("reopen")),
    ),
    min_size=1,
    max_size=60,
)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=ops)
def test_model(tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[Any, ...]]) -> None:
    """Random writes, rolls, cleans (with time passing) and restarts agree with a model."""
    directory = tmp_path_factory.mktemp("model")
    h = Harness(directory, delete_retention_ms=1_000)
    appended: list[Entry] = []
    now = NOW
    checkpoint = 0
    for op in ops:
        if op[0] == "put":  # one batch of one or more records
            base = h.append(build_batch([Record(k, v, now) for k, v in op[1]]), now)
            appended.extend((base + i, k, v) for i, (k, v) in enumerate(op[1]))
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
            h.cleaner = LogCleaner(h.manager)
        stored = h.entries()
        offsets = [o for o, _, _ in stored]
        assert offsets == sorted(set(offsets))
        assert h.log.log_end_offset == len(appended)
        # Only records that were written, unchanged, at their offsets.
        assert set(stored) <= set(appended)
        # Nothing at or after the last clean point is lost.
        assert [e for e in appended if e[0] >= checkpoint] == [e for e in stored
                                                                if e[0] >= checkpoint]
        # The latest value of every key is there; a deleted key may be gone entirely.
        model = latest(appended)
        seen = latest(stored)
        for key, value in model.items():
            if value is None:
                assert seen.get(key) is None
            else:
                assert seen.get(key) == value
        # The latest record of each key is the very one last appended (not an older copy).
        last_offsets = {k: o for o, k, _ in appended}
        for key in seen:
            assert max(o for o, k, _ in stored if k == key) == last_offsets[key]
    h.manager.close()


def test_a_failing_log_does_not_stop_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    h = Harness(tmp_path)
    other = h.manager.create("other", 0, h.config, now_ms=NOW)
    for i in range(20):
        h.put(b"k", str(i).encode())
        other.append(build_batch([Record(b"k", str(i).encode(), NOW)]), leader_epoch=0,
                     now_ms=NOW)
    real = PartitionLog.replace_segments

    def broken(plog: PartitionLog, old: Any, cleaned: Any) -> bool:
        if plog.topic == TOPIC:
            raise OSError("disk on fire")
        return real(plog, old, cleaned)

    monkeypatch.setattr(PartitionLog, "replace_segments", broken)
    results = h.clean()
    assert [r.topic for r in results] == ["other"]
    assert len(h.entries()) == 20
    assert not [p for p in h.log.directory.iterdir() if p.suffix in (".cleaned", ".swap")]


def test_a_partition_created_again_does_not_inherit_the_old_checkpoint(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    for i in range(12):
        h.put(b"k", str(i).encode())
    [first] = h.clean()
    assert first.end_offset > 0
    h.manager.delete(TOPIC, 0)
    h.log = h.manager.create(TOPIC, 0, h.config, now_ms=NOW)
    for i in range(30):
        h.put(f"k{i % 3}".encode(), str(i).encode())
    [again] = h.clean()
    assert again.first_dirty_offset == 0
    below_active = [k for o, k, _ in h.entries() if o < h.log.active_segment.base_offset]
    assert len(below_active) == len(set(below_active))


def test_checkpoint_beyond_the_log_end_restarts_from_the_log_start(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    for i in range(30):
        h.put(b"k", str(i).encode())
    (tmp_path / CLEANER_OFFSET_CHECKPOINT).write_text(f"0\n1\n{TOPIC} 0 999\n")
    [result] = LogCleaner(h.manager).clean_once(NOW)
    assert result.first_dirty_offset == 0


def test_a_decompression_bomb_is_kept_as_it_is_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The cleaner cannot judge a batch it refuses to expand: it keeps it byte for byte."""
    h = Harness(tmp_path, segment_bytes=200_000)
    bomb = bomb_batch(4, 1 << 30, key=b"bomb")  # zstd: 1 GiB of zeros in 32 KB
    h.put(b"a", b"1")
    bomb_offset = h.append(bomb)
    h.put(b"a", b"2")
    h.log.roll(NOW)
    with caplog.at_level(logging.WARNING):
        h.clean()
    batches = {struct.unpack_from(">q", raw, 0)[0]: raw for raw in raw_batches(h.log)}
    counts = {offset: struct.unpack_from(">i", raw, 57)[0] for offset, raw in batches.items()}
    assert counts.get(0, 0) == 0 and counts[2] == 1  # the old "a" went, the new one stayed
    assert batches[bomb_offset][17:] == bomb[17:]  # kept byte for byte: same CRC and records
    assert any("decompression bomb" in r.getMessage() for r in caplog.records)
