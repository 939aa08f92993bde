"""The cleaner's offset map: for every key written in the dirty range, its latest offset.

Kafka keeps a fixed-size hash table of key digests; a Python dict of the raw keys is simpler
and exact (no digest collisions to reason about). Its memory is bounded by ``max_entries``:
when the map is full, the cleanable range is cut at the next batch boundary, as Kafka cuts
it when its dedupe buffer is full, and the rest is left for the next pass.

Control batches (transaction markers) are not read, nor are the batches of aborted
transactions: an aborted record must never make an older committed value look obsolete.
Batches of committed transactions are mapped like any data. The range never reaches the log's
first unstable offset (:mod:`cleanable`), so every transaction in it is decided
(:mod:`txn_cleaning`).
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass, field

from .background import StopRequested
from .batch import CONTROL_BIT, TRANSACTIONAL_BIT
from .cleanable import CleanableRange, iter_headers_between
from .errors import CorruptRecordError
from .records import decode_records
from .txn_cleaning import TxnCleaning

log = logging.getLogger(__name__)

#: One attribute test keeps plain batches on the fast path.
_TXN_BITS = TRANSACTIONAL_BIT | CONTROL_BIT


@dataclass(slots=True)
class OffsetMap:
    """key -> latest offset over ``[first_offset, end_offset)``."""

    first_offset: int
    end_offset: int
    latest: dict[bytes, int] = field(default_factory=dict)

    def is_obsolete(self, key: bytes, offset: int) -> bool:
        """True when a later record of the same key exists in the mapped range."""
        newest = self.latest.get(key)
        return newest is not None and offset < newest


def build_offset_map(
    cleanable: CleanableRange, max_entries: int, txns: TxnCleaning,
    stop: threading.Event | None = None,
) -> OffsetMap:
    """Read the dirty range's records and map each key to its last offset.

    ``end_offset`` of the result is the cleanable range's end, or an earlier batch boundary
    when ``max_entries`` keys were reached first (at least one batch is always mapped, so each
    pass makes progress). A batch whose records do not decode is logged and left out: the
    rewrite then keeps it whole, which is always safe. ``txns`` tells aborted transactional
    batches from committed ones.
    """
    snapshot = cleanable.snapshot
    first, end = cleanable.first_dirty_offset, cleanable.first_uncleanable_offset
    offset_map = OffsetMap(first, end)
    latest = offset_map.latest
    start_at = snapshot.first_dirty_at
    for i, header in iter_headers_between(snapshot.segments, start_at, cleanable.uncleanable_at):
        if stop is not None and stop.is_set():
            raise StopRequested
        if header.base_offset >= end:
            break
        if header.attributes & _TXN_BITS and (
                header.is_control or txns.is_aborted(header.producer_id, header.base_offset)):
            continue
        batch = os.pread(snapshot.segments[i].fd, header.size, header.position)
        try:
            _, _, records = decode_records(batch)
        except CorruptRecordError as exc:
            log.warning("%s: batch at offset %d does not decode, kept as it is: %s",
                        snapshot.directory.name, header.base_offset, exc)
            continue
        for record in records:
            if record.key is not None and first <= record.offset < end:
                latest[record.key] = record.offset
        if len(latest) >= max_entries and header.next_offset < end:
            offset_map.end_offset = header.next_offset
            break
    return offset_map
