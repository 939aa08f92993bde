"""Idempotent producers: per producer id, the epoch and the last batches written to a partition.

Kafka's ``ProducerStateManager``. The leader checks each producer batch's header against it
before the append (:meth:`ProducerState.check`): a batch equal to one of the producer's last
:data:`BATCHES_PER_PRODUCER` batches is a retry and is answered with the original offsets
instead of being written again; a sequence that does not follow the last one is
OUT_OF_ORDER_SEQUENCE_NUMBER; an older producer epoch INVALID_PRODUCER_EPOCH; a newer epoch
must start at sequence 0. A producer with no state here (new, expired, or whose batches were
all removed) may start at any sequence, as Kafka does since KIP-360 (2.5), so a producer whose
state expired continues instead of failing with UNKNOWN_PRODUCER_ID.

Every replica builds the same state from the batch headers it appends (:meth:`update`), the
leader after its check and followers from what they fetch, so a new leader deduplicates a
retry first sent to the old one. Only the 61-byte headers are read: producer id, epoch, base
sequence, last offset delta; never a record.

The state survives restarts through snapshot files ``<20-digit offset>.snapshot`` in the
partition directory, in Kafka's layout and format (version 1): ``version int16, crc uint32
(CRC32C of everything after it), count int32`` and per producer ``producer id int64, epoch
int16, last sequence int32, last offset int64, offset delta int32, timestamp int64,
coordinator epoch int32, current transaction first offset int64``. Like Kafka's, a snapshot
keeps only each producer's last batch; the batches after the snapshot offset are rebuilt by
scanning the log's headers (:func:`rebuild`).

Transactions (KIP-98): a producer's first transactional batch on the partition opens its
transaction here (its base offset is the transaction's first offset); a control batch (a
COMMIT or ABORT marker, see log/control_batch.py) closes it. The first unstable offset is
Kafka's: the lowest first offset of the ongoing transactions and of the completed ones whose
marker is not yet below the high watermark; the last stable offset is the lower of it and
the high watermark. Each closed ABORT yields an :class:`AbortedTxn` for the segment's
``.txnindex``. The only record ever read is a marker's one control record, passed in by the
caller. Producers with an open transaction never expire. Snapshots carry the coordinator
epoch and the open transaction's first offset, so a restart restores ongoing transactions.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import struct
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import crc32c

from .batch import BatchHeader
from .control_batch import ControlType
from .errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from .txn_index import AbortedTxn

log = logging.getLogger(__name__)

#: How many of a producer's latest batches are remembered for deduplication (Kafka's
#: ProducerStateEntry.NUM_BATCHES_TO_RETAIN, matching max.in.flight.requests.per.connection).
BATCHES_PER_PRODUCER = 5
SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1
NO_PRODUCER_EPOCH = -1
_INT32_MAX = 0x7FFFFFFF

_SNAPSHOT_HEADER = struct.Struct(">hIi")  # version, crc, entry count
_SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")
_CRC_START = 6  # the CRC covers everything after version and itself

#: One batch of a producer: (first sequence, last sequence, base offset, last offset,
#: timestamp). A tuple, because the leader makes one per idempotent batch it appends.
BatchMetadata = tuple[int, int, int, int, int]

#: What a caller gives to read a control batch's marker: (type, coordinator epoch).
MarkerReader = Callable[[BatchHeader], tuple[ControlType, int]]


def snapshot_path(directory: Path, offset: int) -> Path:
    return directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"


def last_sequence(base_sequence: int, last_offset_delta: int) -> int:
    """The sequence of a batch's last record; sequences wrap from Int32.MAX_VALUE to 0."""
    seq = base_sequence + last_offset_delta
    return seq - _INT32_MAX - 1 if seq > _INT32_MAX else seq


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == _INT32_MAX)


@dataclass(slots=True)
class ProducerEntry:
    """What one partition knows of one producer."""

    producer_id: int
    epoch: int = NO_PRODUCER_EPOCH
    #: The producer's latest batches, oldest first (at most BATCHES_PER_PRODUCER).
    batches: collections.deque[BatchMetadata] = field(
        default_factory=lambda: collections.deque(maxlen=BATCHES_PER_PRODUCER))
    #: Timestamp of its last batch (for ``producer.id.expiration.ms``).
    last_timestamp: int = -1
    #: Epoch of the coordinator that wrote the producer's last marker here (-1: none).
    coordinator_epoch: int = -1
    #: First offset of the producer's open transaction on this partition (-1: none).
    txn_first_offset: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1][1] if self.batches else -1

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.epoch:
            return None
        for batch in self.batches:
            if batch[0] == first_seq and batch[1] == last_seq:
                return batch
        return None


class ProducerState:
    """The producers of one partition; see the module docstring."""

    def __init__(self, directory: Path, name: str) -> None:
        self.directory = directory
        self.name = name
        self.producers: dict[int, ProducerEntry] = {}
        #: Open transactions: producer id -> first offset (few; order does not matter).
        self.ongoing: dict[int, int] = {}
        #: Completed transactions whose marker may still be at or above the high watermark:
        #: (first offset, marker offset), in marker order. Pruned as the watermark passes.
        self.unstable_completed: collections.deque[tuple[int, int]] = collections.deque()

    def __len__(self) -> int:
        return len(self.producers)

    # -- the leader's check --------------------------------------------------------------

    def check(self, header: BatchHeader) -> BatchMetadata | None:
        """Check a producer's batch before the leader appends it: the batch it repeats (a
        retry: acknowledge that one, write nothing), or None to append it. Raises
        InvalidProducerEpochError, OutOfOrderSequenceError, or InvalidTxnStateError (a plain
        batch while the producer's transaction is open here). Only for producer ids >= 0."""
        pid = header.producer_id
        entry = self.producers.get(pid)
        if entry is None:
            return None  # unknown (new or expired): any sequence starts it (KIP-360)
        epoch = header.producer_epoch
        first = header.base_sequence
        last = last_sequence(first, header.last_offset_delta)
        duplicate = entry.find_duplicate(epoch, first, last)
        if duplicate is not None:
            return duplicate
        if entry.epoch != NO_PRODUCER_EPOCH and epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"epoch {epoch} of producer {pid} is older than its current epoch "
                f"{entry.epoch} in {self.name}")
        if epoch != entry.epoch:
            if first != 0 and entry.epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequenceError(
                    f"invalid sequence number {first} for the new epoch {epoch} of producer "
                    f"{pid} in {self.name}: a new epoch starts at 0 (current epoch "
                    f"{entry.epoch})")
        elif entry.batches and not _in_sequence(entry.last_seq, first):
            raise OutOfOrderSequenceError(
                f"out of order sequence number for producer {pid} in {self.name}: {first} "
                f"(incoming seq. number), {entry.last_seq} (current end sequence number)")
        if entry.txn_first_offset >= 0 and not header.is_transactional:
            raise InvalidTxnStateError(
                f"Expected transactional write from producer {pid} in partition {self.name} "
                f"(its transaction started at offset {entry.txn_first_offset})")
        return None

    # -- building the state --------------------------------------------------------------

    def update(self, header: BatchHeader) -> None:
        """Record a batch written to the log (its offsets assigned): by the leader after its
        check, by a follower or a rebuild for every producer batch it appends or scans."""
        pid = header.producer_id
        entry = self.producers.get(pid)
        if entry is None:
            entry = self.producers[pid] = ProducerEntry(pid)
        epoch = header.producer_epoch
        if epoch != entry.epoch:
            entry.epoch = epoch
            entry.batches.clear()
        if header.is_transactional and entry.txn_first_offset < 0:
            entry.txn_first_offset = header.base_offset
            self.ongoing[pid] = header.base_offset
        first = header.base_sequence
        timestamp = header.max_timestamp
        base = header.base_offset
        delta = header.last_offset_delta
        entry.batches.append((first, last_sequence(first, delta), base, base + delta,
                              timestamp))
        entry.last_timestamp = timestamp

    def update_all(self, headers: Iterable[BatchHeader], markers: MarkerReader | None = None,
                   from_offset: int = 0) -> list[AbortedTxn]:
        """:meth:`update` for every producer data batch ending at or after ``from_offset``,
        :meth:`complete` for every control batch (``markers`` reads its type; without it
        control batches are skipped); the aborted transactions closed."""
        aborted: list[AbortedTxn] = []
        for header in headers:
            if header.producer_id < 0 or header.base_offset + header.last_offset_delta < \
                    from_offset:
                continue
            if not header.is_control:
                self.update(header)
            elif markers is not None:
                control, coordinator_epoch = markers(header)
                done = self.complete(header, control, coordinator_epoch)
                if done is not None:
                    aborted.append(done)
        return aborted

    # -- transactions --------------------------------------------------------------------

    def check_marker(self, producer_id: int, producer_epoch: int,
                     coordinator_epoch: int) -> None:
        """The leader's check of a marker before writing it (Kafka's appendEndTxnMarker):
        an older producer epoch is INVALID_PRODUCER_EPOCH, an older coordinator epoch
        TRANSACTION_COORDINATOR_FENCED. A producer unknown here is fine (the marker is
        written anyway, as Kafka does)."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return
        if entry.epoch != NO_PRODUCER_EPOCH and producer_epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"marker epoch {producer_epoch} of producer {producer_id} is older than its "
                f"current epoch {entry.epoch} in {self.name}")
        if coordinator_epoch < entry.coordinator_epoch:
            raise TransactionCoordinatorFencedError(
                f"marker of producer {producer_id} from coordinator epoch {coordinator_epoch} "
                f"is older than {entry.coordinator_epoch} in {self.name}")

    def complete(self, header: BatchHeader, control: ControlType,
                 coordinator_epoch: int) -> AbortedTxn | None:
        """Apply a marker written at ``header.base_offset``: close the producer's transaction
        here; the aborted transaction for the index when it is an ABORT. A marker without an
        open transaction spans only itself (as in Kafka)."""
        pid = header.producer_id
        entry = self.producers.get(pid)
        if entry is None:
            entry = self.producers[pid] = ProducerEntry(pid)
        if header.producer_epoch != entry.epoch:
            entry.epoch = header.producer_epoch
            entry.batches.clear()
        marker_offset = header.base_offset
        first = entry.txn_first_offset if entry.txn_first_offset >= 0 else marker_offset
        entry.txn_first_offset = -1
        entry.coordinator_epoch = coordinator_epoch
        entry.last_timestamp = header.max_timestamp
        self.ongoing.pop(pid, None)
        self.unstable_completed.append((first, marker_offset))
        if control is not ControlType.ABORT:
            return None
        others = self.ongoing.values()
        lso = min(others) if others else marker_offset + 1
        return AbortedTxn(pid, first, marker_offset, lso)

    def ongoing_transaction(self, producer_id: int) -> int | None:
        """First offset of the producer's open transaction on this partition, or None."""
        return self.ongoing.get(producer_id)

    @property
    def has_transactions(self) -> bool:
        """Whether any transaction may hold the stable offset back (a cheap check)."""
        return bool(self.ongoing or self.unstable_completed)

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        """Kafka's first unstable offset, given the high watermark (completed transactions
        whose marker is below it are forgotten here); None when nothing is unstable."""
        done = self.unstable_completed
        while done and done[0][1] < high_watermark:
            done.popleft()
        if not self.ongoing and not done:
            return None
        lowest = min(self.ongoing.values()) if self.ongoing else None
        for first, _marker in done:
            if lowest is None or first < lowest:
                lowest = first
        return lowest

    def clear(self) -> None:
        self.producers.clear()
        self.ongoing.clear()
        self.unstable_completed.clear()

    def expire(self, now_ms: int, expiration_ms: int) -> int:
        """Forget producers whose last batch is older than ``producer.id.expiration.ms``
        (Kafka compares with the batch's timestamp), except those with an open transaction;
        the number forgotten."""
        expired = [pid for pid, entry in self.producers.items()
                   if now_ms - entry.last_timestamp >= expiration_ms
                   and entry.txn_first_offset < 0]
        for pid in expired:
            del self.producers[pid]
        return len(expired)

    # -- snapshots -----------------------------------------------------------------------

    def snapshot_bytes(self) -> bytes:
        """The state in Kafka's snapshot format (each producer's last batch)."""
        body = bytearray(_SNAPSHOT_HEADER.size + _SNAPSHOT_ENTRY.size * len(self.producers))
        _SNAPSHOT_HEADER.pack_into(body, 0, SNAPSHOT_VERSION, 0, len(self.producers))
        pos = _SNAPSHOT_HEADER.size
        for pid, entry in self.producers.items():
            if entry.batches:
                _first, last, base, last_offset, timestamp = entry.batches[-1]
            else:
                last, base, last_offset, timestamp = -1, -1, -1, entry.last_timestamp
            _SNAPSHOT_ENTRY.pack_into(body, pos, pid, entry.epoch, last, last_offset,
                                      last_offset - base, timestamp, entry.coordinator_epoch,
                                      entry.txn_first_offset)
            pos += _SNAPSHOT_ENTRY.size
        struct.pack_into(">I", body, 2, crc32c.crc32c(memoryview(body)[_CRC_START:]))
        return bytes(body)

    def write_snapshot(self, offset: int, *, sync: bool) -> Path:
        """Write ``<offset>.snapshot`` (the state as of that log end). Without ``sync`` the
        file is left to the page cache (at a segment roll, on the append path): a torn one
        fails its CRC at load and an older snapshot is used."""
        path = snapshot_path(self.directory, offset)
        data = self.snapshot_bytes()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, data)
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
        return path

    def load_snapshot(self, path: Path) -> None:
        """Replace the state by a snapshot's; raises ValueError if it is damaged."""
        data = path.read_bytes()
        if len(data) < _SNAPSHOT_HEADER.size:
            raise ValueError("too short")
        version, crc, count = _SNAPSHOT_HEADER.unpack_from(data, 0)
        if version != SNAPSHOT_VERSION:
            raise ValueError(f"unknown version {version}")
        if crc32c.crc32c(memoryview(data)[_CRC_START:]) != crc:
            raise ValueError("CRC mismatch")
        if count < 0 or len(data) != _SNAPSHOT_HEADER.size + count * _SNAPSHOT_ENTRY.size:
            raise ValueError(f"{len(data)} bytes do not hold {count} entries")
        self.clear()
        for values in _SNAPSHOT_ENTRY.iter_unpack(memoryview(data)[_SNAPSHOT_HEADER.size:]):
            pid, epoch, last, last_offset, delta, timestamp, coord_epoch, txn_first = values
            entry = self.producers[pid] = ProducerEntry(
                pid, epoch, last_timestamp=timestamp, coordinator_epoch=coord_epoch,
                txn_first_offset=txn_first if txn_first >= 0 else -1)
            if txn_first >= 0:
                self.ongoing[pid] = txn_first
            if last_offset >= 0:
                first = last - delta if last - delta >= 0 else last - delta + _INT32_MAX + 1
                entry.batches.append((first, last, last_offset - delta, last_offset, timestamp))

    def snapshot_offsets(self) -> list[int]:
        """Offsets of the snapshot files in the directory, ascending."""
        offsets = []
        with contextlib.suppress(FileNotFoundError):
            for name in os.listdir(self.directory):
                stem = name[: -len(SNAPSHOT_SUFFIX)]
                if name.endswith(SNAPSHOT_SUFFIX) and stem.isdigit():
                    offsets.append(int(stem))
        return sorted(offsets)

    def delete_snapshots(self, *, below: int | None = None, above: int | None = None) -> None:
        """Remove snapshot files below ``below`` (the log start moved past them) or above
        ``above`` (the log was truncated below them)."""
        for offset in self.snapshot_offsets():
            if (below is not None and offset < below) or (above is not None and offset > above):
                snapshot_path(self.directory, offset).unlink(missing_ok=True)

    def load_latest_snapshot(self, at_most: int) -> int | None:
        """Load the newest intact snapshot at or below ``at_most``; its offset, or None (the
        state is then empty). Damaged snapshots are removed with a warning."""
        for offset in reversed(self.snapshot_offsets()):
            if offset > at_most:
                continue
            path = snapshot_path(self.directory, offset)
            try:
                self.load_snapshot(path)
            except (OSError, ValueError, struct.error) as exc:
                log.warning("%s: removing damaged producer snapshot %s: %s", self.name,
                            path.name, exc)
                path.unlink(missing_ok=True)
                continue
            return offset
        self.clear()
        return None


def rebuild(state: ProducerState, start: int, headers: Iterator[BatchHeader],
            markers: MarkerReader | None = None) -> list[AbortedTxn]:
    """Apply the producer batches of ``headers`` from offset ``start`` to ``state`` (control
    batches through ``markers``); the aborted transactions closed on the way."""
    return state.update_all(headers, markers, start)
