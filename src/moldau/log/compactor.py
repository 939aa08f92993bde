"""Rewriting a log's inactive segments without the records that later ones made obsolete.

Segments from the log start up to the one holding the end of the cleanable range are
rewritten in groups (consecutive segments whose sizes add up to at most ``segment.bytes``, so
tiny segments left by earlier cleans merge back together). Each group becomes one cleaned
segment with the base offset of its first member. Within a batch, a record is kept unless

- a later record with the same key exists in the offset map (it is obsolete), or
- it is a tombstone (null value) in the part of the log that an earlier pass already cleaned,
  below the snapshot's tombstone bound, and its batch's maxTimestamp is older than
  ``delete.retention.ms``. This is the simple form of Kafka's delete horizon: a tombstone
  survives at least one clean and then as long as consumers may still need to see the delete,
  measured on the record's own clock. The bound is the replicas' part: in a cluster a
  tombstone stays until every replica of the partition has fetched past it, so no replica
  can keep an older value of the key without the delete that follows it (the replica layer
  computes the bound; here it is one offset folded into ``tombstone_end``).

Records without a key are always kept (producers cannot write them to a compacted topic, but
the topic may have been switched to compact later).

Transactions (:mod:`txn_cleaning`): batches of committed transactions are cleaned like any
data. Batches of aborted transactions lose every record. A marker (control batch) is copied
as it is until no batch of its transaction was read in a pass, and then removed under the
tombstones' conditions (cleaned before, below the tombstone bound, its maxTimestamp older than
``delete.retention.ms``); the ABORT markers a cleaned segment keeps take their ``.txnindex``
entries into its new index. Nothing at or after the end of the cleanable range, which never
passes the first unstable offset, is changed.

Offsets never change. A batch that loses some records is re-encoded with the same base offset,
lastOffsetDelta, base timestamp, producer id/epoch/base sequence and attributes, and the kept
records byte for byte (their deltas stay valid); only the record count, the maxTimestamp
(recomputed from the kept records under CreateTime), the length and the CRC change. It is
compressed again with its own codec. A batch that loses every record is dropped, except the
last batch of a group and the last batch of each producer in the rewritten range: those stay
as an empty batch (header only), as Kafka keeps them, so that the group still ends at the same
offset (which :mod:`swap` relies on to recover) and a producer's sequence state survives. A
producer's last batch here is its last *data* batch (Kafka's lastDataOffset): a marker is
never kept for that reason, and a kept empty transactional batch keeps its marker with it.
A marker that is the last batch of a group stays whole.
"""

from __future__ import annotations

import logging
import os
import struct
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import crc32c

from .background import StopRequested
from .batch import (
    ATTRIBUTES_POS,
    BATCH_HEADER_SIZE,
    COMPRESSION_MASK,
    CONTROL_BIT,
    CRC_POS,
    LOG_OVERHEAD,
    MIN_BATCH_LENGTH,
    TRANSACTIONAL_BIT,
    BatchHeader,
    iter_batch_headers,
    read_header,
)
from .cleanable import SegmentSnapshot
from .config import LogConfig
from .errors import CorruptRecordError
from .offset_map import OffsetMap
from .records import RecordView, compress_records, decode_records
from .segment import MAX_RELATIVE_OFFSET, LogSegment
from .swap import CLEANED_SUFFIX
from .txn_cleaning import TxnCleaning

log = logging.getLogger(__name__)

_HEADER = struct.Struct(">qiibIhiqqqhii")
_UINT32 = struct.Struct(">I")
#: Cleaned output is appended to the new segment in chunks of about this size.
_WRITE_CHUNK = 1 << 20
_READ_CHUNK = 1 << 20
#: One attribute test sends transactional and control batches off the plain path.
_TXN_BITS = TRANSACTIONAL_BIT | CONTROL_BIT


@dataclass(slots=True)
class RewriteStats:
    """What a rewrite removed; summed over groups."""

    records_removed: int = 0
    tombstones_removed: int = 0
    batches_removed: int = 0
    #: Records of aborted transactions removed (also counted in records_removed).
    aborted_records_removed: int = 0
    #: Transaction markers (control batches) removed (also counted in batches_removed).
    markers_removed: int = 0
    #: Smallest (batch maxTimestamp + delete.retention.ms) of the tombstones kept below the
    #: tombstone bound in the range that is clean after this pass: when the next pass could
    #: remove one. None: none. Markers whose transaction this pass removed count too.
    next_tombstone_expiry_ms: int | None = None
    #: Lowest offset of a tombstone (or such a marker) kept in that range only because it is
    #: at or above the tombstone bound: a later pass may remove it once the bound has passed
    #: it. None: none.
    lowest_held_tombstone: int | None = None


@dataclass(frozen=True, slots=True)
class CleaningRules:
    """Everything :func:`filter_batch` needs to decide about one record."""

    offset_map: OffsetMap
    #: Tombstones below this offset may go: the end of the part that was clean before this
    #: pass, or the tombstone bound if that is lower.
    tombstone_end: int
    #: Tombstones in batches with a maxTimestamp below this may go.
    tombstone_horizon_ms: int
    delete_retention_ms: int
    #: The snapshot's tombstone bound (None: no limit), to tell which kept tombstones wait
    #: for the replicas rather than for time.
    tombstone_bound: int | None = None

    @classmethod
    def of(cls, offset_map: OffsetMap, first_dirty_offset: int, now_ms: int,
           delete_retention_ms: int, tombstone_bound: int | None) -> CleaningRules:
        """The rules of a pass at ``now_ms`` whose dirty range starts at
        ``first_dirty_offset``."""
        end = first_dirty_offset if tombstone_bound is None else \
            min(first_dirty_offset, tombstone_bound)
        return cls(offset_map, end, now_ms - delete_retention_ms, delete_retention_ms,
                   tombstone_bound)


def group_segments(
    segments: Sequence[SegmentSnapshot], max_bytes: int
) -> list[list[SegmentSnapshot]]:
    """Consecutive runs of segments that fit one segment (bytes, int32 relative offsets)."""
    groups: list[list[SegmentSnapshot]] = []
    for snap in segments:
        if groups:
            group = groups[-1]
            size = sum(s.size for s in group) + snap.size
            span = snap.next_offset - 1 - group[0].base_offset
            if size <= max_bytes and span <= MAX_RELATIVE_OFFSET:
                group.append(snap)
                continue
        groups.append([snap])
    return groups


def iter_batches(fd: int, start: int, end: int) -> Iterator[tuple[BatchHeader, memoryview]]:
    """(header, whole batch bytes) of each batch in ``[start, end)``, read in large chunks.

    The views point into a chunk that is replaced on the next read: copy what must be kept.
    """
    pos = start
    while pos + BATCH_HEADER_SIZE <= end:
        view = memoryview(os.pread(fd, min(_READ_CHUNK, end - pos), pos))
        used = 0
        while used + BATCH_HEADER_SIZE <= len(view):
            header = read_header(view, used, pos + used)
            if header.batch_length < MIN_BATCH_LENGTH:
                return
            if used + header.size > len(view):
                if used == 0:  # a batch larger than a chunk: read it on its own
                    whole = os.pread(fd, header.size, pos)
                    if len(whole) < header.size:
                        return
                    yield header, memoryview(whole)
                    used = header.size
                break
            yield header, view[used : used + header.size]
            used += header.size
        if used == 0:
            return
        pos += used


def _max_timestamp(header: BatchHeader, kept: Sequence[RecordView]) -> int:
    """maxTimestamp of the batch holding only ``kept``: LogAppendTime and empty batches keep
    the header's, CreateTime takes the largest kept record timestamp."""
    if header.timestamp_type == 1 or not kept:
        return header.max_timestamp
    return max(r.timestamp for r in kept)


def _encode(header: BatchHeader, records: bytes, kept: Sequence[RecordView]) -> bytes:
    """The batch with only ``kept`` records (see the module docstring for what changes)."""
    codec = header.compression if kept else 0
    body = compress_records(codec, b"".join(records[r.start : r.end] for r in kept))
    attributes = (header.attributes & ~COMPRESSION_MASK) | codec
    out = bytearray(_HEADER.pack(
        header.base_offset, BATCH_HEADER_SIZE - LOG_OVERHEAD + len(body),
        header.partition_leader_epoch, header.magic, 0, attributes, header.last_offset_delta,
        header.base_timestamp, _max_timestamp(header, kept), header.producer_id,
        header.producer_epoch, header.base_sequence, len(kept),
    ))
    out += body
    _UINT32.pack_into(out, CRC_POS, crc32c.crc32c(memoryview(out)[ATTRIBUTES_POS:]))
    return bytes(out)


def filter_batch(
    header: BatchHeader, batch: memoryview, rules: CleaningRules, retain: bool,
    stats: RewriteStats, txns: TxnCleaning,
) -> bytes | memoryview | None:
    """The batch to write in place of ``batch`` (the same view when nothing changes), or
    None to drop it. ``retain``: keep at least an empty batch (see the module docstring).
    ``txns``: the pass's transactions, followed batch by batch from the log start."""
    if header.attributes & _TXN_BITS:
        if header.is_control:
            return _filter_marker(header, batch, rules, retain, stats, txns)
        aborted = txns.aborted_entry(header.producer_id, header.base_offset)
        if header.base_offset >= rules.offset_map.end_offset:
            txns.observe(header.producer_id, aborted, written=True)
            return batch
        if aborted is not None:
            txns.observe(header.producer_id, aborted, written=retain)
            stats.records_removed += header.records_count
            stats.aborted_records_removed += header.records_count
            if retain:
                return batch if header.records_count == 0 else _encode(header, b"", ())
            stats.batches_removed += 1
            return None
        result = _filter_data(header, batch, rules, retain, stats)
        txns.observe(header.producer_id, None, written=result is not None)
        return result
    return _filter_data(header, batch, rules, retain, stats)


def _filter_marker(
    header: BatchHeader, batch: memoryview, rules: CleaningRules, retain: bool,
    stats: RewriteStats, txns: TxnCleaning,
) -> memoryview | None:
    """A marker: dropped, or kept whole (see the module docstring)."""
    offset = header.base_offset
    aborted, seen = txns.close(header.producer_id, offset)
    if offset >= rules.offset_map.end_offset:  # past the cleanable end: untouched
        if aborted is not None:
            txns.keep_aborted(aborted)
        return batch
    expired = (offset < rules.tombstone_end
               and header.max_timestamp < rules.tombstone_horizon_ms)
    if not seen.observed and expired and not retain:
        stats.markers_removed += 1
        stats.batches_removed += 1
        return None
    if aborted is not None:
        txns.keep_aborted(aborted)
    if not seen.written and not (not seen.observed and expired):
        # Kept for a reason that will pass (its transaction's batches went in this pass, its
        # age, the replicas): schedule the pass that can remove it, as for a tombstone.
        _note_held(offset, header.max_timestamp, rules, stats)
    return batch


def _note_held(offset: int, max_timestamp: int, rules: CleaningRules,
               stats: RewriteStats) -> None:
    """Note a kept marker at ``offset`` (below the new clean point) for a later pass."""
    if offset >= rules.offset_map.end_offset:
        return
    bound = rules.tombstone_bound
    if bound is not None and offset >= bound:
        if stats.lowest_held_tombstone is None or offset < stats.lowest_held_tombstone:
            stats.lowest_held_tombstone = offset
        return
    expiry = max_timestamp + rules.delete_retention_ms
    current = stats.next_tombstone_expiry_ms
    stats.next_tombstone_expiry_ms = expiry if current is None else min(current, expiry)


def _filter_data(
    header: BatchHeader, batch: memoryview, rules: CleaningRules, retain: bool,
    stats: RewriteStats,
) -> bytes | memoryview | None:
    """A data batch without its obsolete records and expired tombstones."""
    if header.records_count == 0:  # left empty by an earlier clean: still needed?
        if retain:
            return batch
        stats.batches_removed += 1
        return None
    try:
        _, records, views = decode_records(batch)
    except CorruptRecordError as exc:
        # Cannot judge its records (damaged, or a decompression bomb): keeping them is safe.
        log.warning("batch at offset %d does not decode, kept as it is: %s",
                    header.base_offset, exc)
        return batch
    offset_map = rules.offset_map
    kept: list[RecordView] = []
    tombstones_removed = 0
    old_enough = header.max_timestamp < rules.tombstone_horizon_ms
    for record in views:
        key = record.key
        if key is not None:
            if offset_map.is_obsolete(key, record.offset):
                continue
            if (record.is_tombstone and old_enough
                    and record.offset < rules.tombstone_end):
                tombstones_removed += 1
                continue
        kept.append(record)
    _note_kept_tombstones(header, kept, rules, stats)
    if len(kept) == len(views):
        return batch
    stats.records_removed += len(views) - len(kept)
    stats.tombstones_removed += tombstones_removed
    if not kept and not retain:
        stats.batches_removed += 1
        return None
    return _encode(header, records, kept)


def _note_kept_tombstones(
    header: BatchHeader, kept: Sequence[RecordView], rules: CleaningRules, stats: RewriteStats
) -> None:
    """Remember when the earliest tombstone kept below the new clean point may go: after its
    expiry time, or (at or above the tombstone bound) once the bound has passed it."""
    end = rules.offset_map.end_offset
    bound = rules.tombstone_bound
    timed = False
    for r in kept:
        if not r.is_tombstone or r.key is None or r.offset >= end:
            continue
        if bound is not None and r.offset >= bound:
            if stats.lowest_held_tombstone is None:  # batches and records come in order
                stats.lowest_held_tombstone = r.offset
        else:
            timed = True
    if not timed:
        return
    expiry = _max_timestamp(header, kept) + rules.delete_retention_ms
    current = stats.next_tombstone_expiry_ms
    stats.next_tombstone_expiry_ms = expiry if current is None else min(current, expiry)


def last_batches(groups: Sequence[Sequence[SegmentSnapshot]]) -> set[int]:
    """Base offsets of the batches that must survive, at least empty: the last of each group
    and the last data batch of each producer id in the whole rewritten range (headers
    only)."""
    retained: set[int] = set()
    by_producer: dict[int, int] = {}
    for group in groups:
        last: int | None = None
        for snap in group:
            for header in iter_batch_headers(snap.fd, 0, snap.size):
                last = header.base_offset
                if header.producer_id >= 0 and not header.is_control:
                    by_producer[header.producer_id] = header.base_offset
        if last is not None:
            retained.add(last)
    retained.update(by_producer.values())
    return retained


def write_cleaned_group(
    group: Sequence[SegmentSnapshot],
    directory: Path,
    config: LogConfig,
    rules: CleaningRules,
    retained: set[int],
    stats: RewriteStats,
    txns: TxnCleaning,
    now_ms: int,
    stop: threading.Event | None = None,
) -> tuple[LogSegment, bool]:
    """Write one group's cleaned segment under the ``.cleaned`` suffix, sealed and fsynced,
    with the ``.txnindex`` entries of the ABORT markers it keeps.

    Returns the new segment and whether it differs from the input in any batch; the caller
    discards an unchanged single-segment group instead of swapping it in.
    """
    base = group[0].base_offset
    for stale in directory.glob(f"{base:020d}.*{CLEANED_SUFFIX}"):
        stale.unlink()
    cleaned = LogSegment.create(
        directory, base,
        index_interval_bytes=config.index_interval_bytes,
        segment_index_bytes=config.segment_index_bytes,
        now_ms=now_ms,
        file_suffix=CLEANED_SUFFIX,
        files=None,  # written on this thread; the loop adopts it (PartitionLog.replace_segments)
    )
    changed = len(group) > 1
    out = bytearray()
    headers: list[BatchHeader] = []
    try:
        for snap in group:
            for header, batch in iter_batches(snap.fd, 0, snap.size):
                if stop is not None and stop.is_set():
                    raise StopRequested
                result = filter_batch(header, batch, rules, header.base_offset in retained,
                                      stats, txns)
                if result is not batch:
                    changed = True
                if result is None:
                    continue
                headers.append(read_header(result, 0, len(out)))
                out += result
                if len(out) >= _WRITE_CHUNK:
                    cleaned.append((out,), headers)
                    out, headers = bytearray(), []
        if headers:
            cleaned.append((out,), headers)
        aborted = txns.take_kept_aborted()
        if aborted:
            cleaned.txn_index.rebuild(aborted)
        cleaned.seal()
        cleaned.flush()
    except BaseException:
        cleaned.delete()
        raise
    return cleaned, changed
