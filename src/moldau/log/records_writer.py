"""Encode record batches for the broker's own writes (coordinator records), uncompressed.

Client data never passes through here: producers send finished batches that the log keeps
as opaque bytes. The group coordinator, however, has to write ``__consumer_offsets`` records
itself, as a Kafka broker does, and those are ordinary magic v2 batches: the log then assigns
offsets and the leader epoch exactly as for a produce request (both fields sit outside the
CRC). No compression: the records are small, and replay stays trivial.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import crc32c

from .batch import ATTRIBUTES_POS, BATCH_HEADER_SIZE, CRC_POS, LOG_OVERHEAD, MAGIC_V2

_HEADER = struct.Struct(">qiibIhiqqqhii")
_NO_PRODUCER_ID = -1
_NO_PRODUCER_EPOCH = -1
_NO_SEQUENCE = -1
_NO_PARTITION_LEADER_EPOCH = -1


def zigzag_varint(value: int) -> bytes:
    """A signed varint (zigzag, then 7 bits a byte), as record fields use."""
    z = (value << 1) ^ (value >> 63)
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def _nullable_bytes(value: bytes | None) -> bytes:
    return zigzag_varint(-1) if value is None else zigzag_varint(len(value)) + value


def encode_record(key: bytes | None, value: bytes | None, offset_delta: int,
                  timestamp_delta: int = 0) -> bytes:
    """One record without headers: length, attributes, deltas, key, value, header count."""
    body = (
        b"\x00"
        + zigzag_varint(timestamp_delta)
        + zigzag_varint(offset_delta)
        + _nullable_bytes(key)
        + _nullable_bytes(value)
        + zigzag_varint(0)
    )
    return zigzag_varint(len(body)) + body


#: Attributes bit 4: the batch belongs to a transaction.
_TRANSACTIONAL = 0x10


def encode_batch(records: Sequence[tuple[bytes | None, bytes | None]], timestamp_ms: int, *,
                 producer_id: int = _NO_PRODUCER_ID, producer_epoch: int = _NO_PRODUCER_EPOCH,
                 base_sequence: int = _NO_SEQUENCE, transactional: bool = False) -> bytes:
    """One uncompressed v2 batch of (key, value) records, all stamped ``timestamp_ms``.

    A None value is a tombstone. Base offset 0 and leader epoch -1 are placeholders that
    :meth:`PartitionLog.append` overwrites. The producer fields and the transactional flag
    are for the coordinator's transactional offset commits (TxnOffsetCommit), which Kafka
    writes as a batch of the committing producer.
    """
    if not records:
        raise ValueError("a record batch needs at least one record")
    body = b"".join(encode_record(k, v, i) for i, (k, v) in enumerate(records))
    batch = bytearray(BATCH_HEADER_SIZE) + body
    _HEADER.pack_into(
        batch, 0,
        0,                                   # baseOffset
        len(batch) - LOG_OVERHEAD,           # batchLength
        _NO_PARTITION_LEADER_EPOCH,
        MAGIC_V2,
        0,                                   # crc, filled below
        _TRANSACTIONAL if transactional else 0,  # no compression, CreateTime
        len(records) - 1,                    # lastOffsetDelta
        timestamp_ms,                        # baseTimestamp
        timestamp_ms,                        # maxTimestamp
        producer_id,
        producer_epoch,
        base_sequence,
        len(records),
    )
    struct.pack_into(">I", batch, CRC_POS, crc32c.crc32c(batch[ATTRIBUTES_POS:]))
    return bytes(batch)
