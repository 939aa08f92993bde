"""Walk the records inside one batch, for the few queries that need more than the header.

The broker treats batches as opaque (see :mod:`batch`); produce and fetch never come here.
ListOffsets does: Kafka answers a timestamp lookup with the first *record* whose timestamp is
at or after the target, and MAX_TIMESTAMP with the offset of the record that carries the
largest timestamp. Both can lie inside a batch, so once the index and header scan have found
the one candidate batch, this module decodes just enough of each of its records — offset delta
and timestamp delta — to answer, and skips keys, values and headers by the record length.

Compressed batches hold the records section compressed as a whole; it is decompressed first,
with the quirks of Kafka's codecs (see :func:`decompress_records`).
"""

from __future__ import annotations

import gzip
import struct
import zlib
from collections.abc import Iterator

import cramjam

from .batch import BATCH_HEADER_SIZE, MAGIC_V2, read_header
from .errors import CorruptRecordError

NO_COMPRESSION = 0
GZIP = 1
SNAPPY = 2
LZ4 = 3
ZSTD = 4

#: The Java client (snappy-java) writes snappy in xerial's block framing, which begins with
#: this magic, then int32 version and int32 minimum compatible version.
XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER_SIZE = len(XERIAL_MAGIC) + 8
_INT32 = struct.Struct(">i")

#: A varint (int32) takes at most 5 bytes, a varlong (int64) at most 10.
_MAX_VARINT_BYTES = 5
_MAX_VARLONG_BYTES = 10


def decompress_records(compression: int, data: bytes | memoryview) -> bytes:
    """The records section of a batch with codec ``compression``, uncompressed.

    Codecs as Kafka clients write them: gzip is a gzip stream; snappy is either one raw
    snappy block (librdkafka, Go clients) or xerial framing (Java, kafka-python, aiokafka);
    lz4 is the LZ4 *frame* format (magic v2 batches have the correct frame header checksum,
    unlike the broken one of old v0/v1 messages); zstd is a zstd frame. Raises
    CorruptRecordError when the bytes do not decode, so callers can fall back.
    """
    try:
        if compression == NO_COMPRESSION:
            return bytes(data)
        if compression == GZIP:
            return gzip.decompress(data)
        if compression == SNAPPY:
            return _snappy_decompress(data)
        if compression == LZ4:
            return bytes(cramjam.lz4.decompress(data))
        if compression == ZSTD:
            return bytes(cramjam.zstd.decompress(data))
    except (cramjam.DecompressionError, OSError, EOFError, zlib.error, ValueError) as exc:
        raise CorruptRecordError(f"cannot decompress records (codec {compression}): {exc}") from exc
    raise CorruptRecordError(f"unknown compression type id {compression}")


def _snappy_decompress(data: bytes | memoryview) -> bytes:
    """Raw snappy, or xerial-framed snappy: blocks of int32 length + raw snappy block."""
    view = memoryview(data)
    if bytes(view[: len(XERIAL_MAGIC)]) != XERIAL_MAGIC:
        return bytes(cramjam.snappy.decompress_raw(view))
    out = bytearray()
    pos = _XERIAL_HEADER_SIZE
    while pos < len(view):
        if pos + _INT32.size > len(view):
            raise CorruptRecordError("truncated xerial snappy block length")
        (length,) = _INT32.unpack_from(view, pos)
        pos += _INT32.size
        if length < 0 or pos + length > len(view):
            raise CorruptRecordError(f"bad xerial snappy block length {length}")
        out += cramjam.snappy.decompress_raw(view[pos : pos + length])
        pos += length
    return bytes(out)


def _read_varint(buf: bytes, pos: int, max_bytes: int) -> tuple[int, int]:
    """Zigzag varint at ``pos``: (value, position after it). Bounded so garbage cannot spin."""
    raw = 0
    shift = 0
    end = min(len(buf), pos + max_bytes)
    while pos < end:
        byte = buf[pos]
        pos += 1
        raw |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
    raise CorruptRecordError("truncated or overlong varint in a record")


def iter_record_offsets_and_timestamps(batch: bytes | memoryview) -> Iterator[tuple[int, int]]:
    """Yield (offset, timestamp) of every record of one whole v2 batch, in order.

    The timestamp is what a consumer sees: baseTimestamp + timestampDelta for CreateTime, and
    the batch maxTimestamp for every record of a LogAppendTime batch (the broker overwrote
    that field and left the deltas as the producer sent them). Offsets are baseOffset +
    offsetDelta rather than counted, since compaction can leave gaps inside a batch. Raises
    CorruptRecordError (possibly after some records were yielded) when the records section
    does not decode or does not match the header's record count.
    """
    if len(batch) < BATCH_HEADER_SIZE:
        raise CorruptRecordError(f"a batch needs {BATCH_HEADER_SIZE} bytes, got {len(batch)}")
    header = read_header(batch, 0, 0)
    if header.magic != MAGIC_V2:
        raise CorruptRecordError(f"unexpected magic {header.magic}")
    if header.size != len(batch):
        raise CorruptRecordError(f"batch declares {header.size} bytes, got {len(batch)}")
    records = decompress_records(header.compression, memoryview(batch)[BATCH_HEADER_SIZE:])
    log_append_time = header.timestamp_type == 1
    pos = 0
    for _ in range(header.records_count):
        length, pos = _read_varint(records, pos, _MAX_VARINT_BYTES)
        end = pos + length
        if length <= 0 or end > len(records):
            raise CorruptRecordError(f"bad record length {length}")
        pos += 1  # record attributes: unused
        timestamp_delta, pos = _read_varint(records, pos, _MAX_VARLONG_BYTES)
        offset_delta, pos = _read_varint(records, pos, _MAX_VARINT_BYTES)
        if pos > end:
            raise CorruptRecordError("record fields overrun the record length")
        timestamp = header.max_timestamp if log_append_time else (
            header.base_timestamp + timestamp_delta
        )
        yield header.base_offset + offset_delta, timestamp
        pos = end
    if pos != len(records):
        raise CorruptRecordError(
            f"{len(records) - pos} bytes left after {header.records_count} records"
        )
