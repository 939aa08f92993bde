"""Transaction markers: the control batches that commit or abort a producer's transaction.

Kafka's format, byte for byte: a magic v2 batch with attributes bits 4 and 5 set
(transactional + control), the producer's id and epoch, base sequence -1, no compression,
and exactly one record whose key is ``version int16 = 0, type int16`` (0 = ABORT, 1 = COMMIT)
and whose value is ``version int16 = 0, coordinator epoch int32``.

The broker reads nothing but batch headers on its hot paths; a marker's one record is the
only record it ever decodes, and only for control batches, which are rare (one per
partition per transaction).
"""

from __future__ import annotations

import enum
import struct

import crc32c

from .batch import (
    ATTRIBUTES_POS,
    BATCH_HEADER_SIZE,
    CONTROL_BIT,
    CRC_POS,
    LOG_OVERHEAD,
    MAGIC_V2,
    TRANSACTIONAL_BIT,
)
from .errors import CorruptRecordError
from .records_writer import encode_record

_HEADER = struct.Struct(">qiibIhiqqqhii")
_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")
CONTROL_ATTRIBUTES = TRANSACTIONAL_BIT | CONTROL_BIT
_NO_SEQUENCE = -1


class ControlType(enum.IntEnum):
    ABORT = 0
    COMMIT = 1


def encode_marker(producer_id: int, producer_epoch: int, control: ControlType,
                  coordinator_epoch: int, timestamp_ms: int) -> bytes:
    """A marker batch at base offset 0 with leader epoch -1 (the append patches both; they
    sit outside the CRC)."""
    record = encode_record(_KEY.pack(0, int(control)), _VALUE.pack(0, coordinator_epoch), 0)
    batch = bytearray(BATCH_HEADER_SIZE) + record
    _HEADER.pack_into(batch, 0, 0, len(batch) - LOG_OVERHEAD, -1, MAGIC_V2, 0,
                      CONTROL_ATTRIBUTES, 0, timestamp_ms, timestamp_ms, producer_id,
                      producer_epoch, _NO_SEQUENCE, 1)
    struct.pack_into(">I", batch, CRC_POS, crc32c.crc32c(batch[ATTRIBUTES_POS:]))
    return bytes(batch)


def _varint(buf: memoryview, pos: int) -> tuple[int, int]:
    """A zigzag varint at ``pos``: (value, position after it)."""
    shift = 0
    raw = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise CorruptRecordError("truncated varint in a control record")
        byte = buf[pos]
        pos += 1
        raw |= (byte & 0x7F) << shift
        if not byte & 0x80:
            break
        shift += 7
    return (raw >> 1) ^ -(raw & 1), pos


def marker_of(batch: memoryview | bytes | bytearray) -> tuple[ControlType, int]:
    """(type, coordinator epoch) of a control batch (its bytes from the batch start).

    Raises CorruptRecordError for a control record Kafka could not read either: no record,
    a key that is not 4 bytes, an unknown type. A value too short for the coordinator epoch
    gives -1 (Kafka tolerates that too when it only needs the type).
    """
    view = memoryview(batch)
    if view[ATTRIBUTES_POS + 1] & 0x07:
        raise CorruptRecordError("a control batch must not be compressed")
    pos = BATCH_HEADER_SIZE
    _length, pos = _varint(view, pos)
    pos += 1  # record attributes
    _ts_delta, pos = _varint(view, pos)
    _offset_delta, pos = _varint(view, pos)
    key_len, pos = _varint(view, pos)
    if key_len < _KEY.size or pos + key_len > len(view):
        raise CorruptRecordError(f"control record key of {key_len} bytes")
    _version, kind = _KEY.unpack_from(view, pos)
    pos += key_len
    try:
        control = ControlType(kind)
    except ValueError:
        raise CorruptRecordError(f"unknown control record type {kind}") from None
    coordinator_epoch = -1
    value_len, pos = _varint(view, pos)
    if value_len >= _VALUE.size and pos + value_len <= len(view):
        _vversion, coordinator_epoch = _VALUE.unpack_from(view, pos)
    return control, coordinator_epoch
