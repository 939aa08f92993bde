"""Walk the records inside one batch, for the few queries that need more than the header.

The broker treats batches as opaque (see :mod:`batch`); produce and fetch never come here.
ListOffsets does: Kafka answers a timestamp lookup with the first *record* whose timestamp is
at or after the target, and MAX_TIMESTAMP with the offset of the record that carries the
largest timestamp. Both can lie inside a batch, so once the index and header scan have found
the one candidate batch, this module decodes just enough of each of its records — offset delta
and timestamp delta — to answer, and skips keys, values and headers by the record length.

Compressed batches hold the records section compressed as a whole; it is decompressed first,
with the quirks of Kafka's codecs (see :func:`decompress_records`).

The log cleaner needs a little more of each record: its key, whether its value is null (a
tombstone), and where its bytes are, so it can keep the survivors byte for byte
(:func:`decode_records`) and compress them again (:func:`compress_records`). Both walks share
one framing loop, so there is a single record decoder.
"""

from __future__ import annotations

import contextlib
import gzip
import struct
import sys
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

import cramjam
import lz4.frame

if sys.version_info >= (3, 14):
    from compression import zstd
else:
    from backports import zstd

from .batch import BATCH_HEADER_SIZE, MAGIC_V2, BatchHeader, read_header
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


#: A records section may expand to at most this many times its compressed size...
DECOMPRESSION_RATIO_CAP = 64
#: ...and always to this much (the cap for every batch of up to 1 MiB compressed, which
#: covers Kafka's default ``max.message.bytes``)...
MIN_DECOMPRESSED_CAP = 64 << 20
#: ...but never to more than this, whatever ``max.message.bytes`` allows.
MAX_DECOMPRESSED_CAP = 256 << 20
#: zstd frames may ask for a window of up to this (2^25 = 32 MiB; zstd's own default limit
#: is 2^27). Producers compress batches of at most a few MiB, whose window is never larger.
ZSTD_WINDOW_LOG_MAX = 25
#: Input handed to a streaming decompressor per call.
_FEED_BYTES = 1 << 16


def decompressed_cap(compressed_size: int) -> int:
    """How many bytes the records section of a batch of ``compressed_size`` may expand to.

    Kafka decodes records one at a time from a stream, so it needs no cap; moldau decodes a
    records section whole, so a decompression bomb (1 MB of compressed zeros claiming 10 GB)
    must be stopped before it is in memory. The cap scales with the batch, hence with
    ``max.message.bytes``: 64 x the compressed size, at least 64 MiB (every batch under the
    default ``max.message.bytes``), at most 256 MiB. Memory per decompression is bounded by
    about twice the cap (the output and its final copy).
    """
    return min(MAX_DECOMPRESSED_CAP,
               max(MIN_DECOMPRESSED_CAP, DECOMPRESSION_RATIO_CAP * compressed_size))


class DecompressionLimitError(CorruptRecordError):
    """The records expand past :func:`decompressed_cap`: refused as a decompression bomb."""


def decompress_records(compression: int, data: bytes | memoryview, cap: int | None = None) -> bytes:
    """The records section of a batch with codec ``compression``, uncompressed.

    Codecs as Kafka clients write them: gzip is a gzip stream; snappy is either one raw
    snappy block (librdkafka, Go clients) or xerial framing (Java, kafka-python, aiokafka);
    lz4 is the LZ4 *frame* format (magic v2 batches have the correct frame header checksum,
    unlike the broken one of old v0/v1 messages); zstd is a zstd frame. Raises
    CorruptRecordError when the bytes do not decode, so callers can fall back, and its
    subclass DecompressionLimitError when they would expand past ``cap`` (default:
    :func:`decompressed_cap`); decompression streams and stops there, so memory stays bounded.
    """
    limit = decompressed_cap(len(data)) if cap is None else cap
    try:
        if compression == NO_COMPRESSION:
            return bytes(data)
        if compression == GZIP:
            return _gunzip(data, limit)
        if compression == SNAPPY:
            return _snappy_decompress(data, limit)
        if compression == LZ4:
            return _stream(lz4.frame.LZ4FrameDecompressor, data, limit)
        if compression == ZSTD:
            return _unzstd(data, limit)
    except DecompressionLimitError:
        raise
    except (cramjam.DecompressionError, OSError, EOFError, zlib.error, ValueError, RuntimeError,
            zstd.ZstdError) as exc:
        raise CorruptRecordError(f"cannot decompress records (codec {compression}): {exc}") from exc
    raise CorruptRecordError(f"unknown compression type id {compression}")


def _too_big(limit: int) -> DecompressionLimitError:
    return DecompressionLimitError(
        f"records expand to more than {limit} bytes; refused as a decompression bomb"
    )


def _gunzip(data: bytes | memoryview, limit: int) -> bytes:
    """gzip members one after the other (as :func:`gzip.decompress`), stopping past ``limit``.

    ``max_length`` bounds each call's output; input zlib did not get to waits in
    ``unconsumed_tail``. Zero padding after the last member is ignored, as gzip does.
    """
    out = _Output(limit)
    pending: bytes | memoryview = data
    while True:
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        while not inflater.eof:
            out.add(inflater.decompress(pending, out.room))
            pending = inflater.unconsumed_tail
            if not pending and not inflater.eof:
                out.add(inflater.flush())
                if not inflater.eof:
                    raise CorruptRecordError("truncated gzip stream")
        pending = inflater.unused_data
        if not pending.strip(b"\0"):
            return out.join()


class _Output:
    """Decompressed pieces, refused past ``limit``; kept as a list so no buffer is regrown."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.size = 0
        self.pieces: list[bytes] = []

    @property
    def room(self) -> int:
        """What the next call may return: one byte past the limit shows it was crossed."""
        return self.limit + 1 - self.size

    def add(self, piece: bytes) -> None:
        self.size += len(piece)
        if self.size > self.limit:
            raise _too_big(self.limit)
        self.pieces.append(piece)

    def join(self) -> bytes:
        return self.pieces[0] if len(self.pieces) == 1 else b"".join(self.pieces)


class _Streaming(Protocol):
    """The bz2/lzma-style decompressor API that lz4.frame and zstd share."""

    @property
    def eof(self) -> bool: ...
    @property
    def needs_input(self) -> bool: ...
    @property
    def unused_data(self) -> bytes | None: ...
    def decompress(self, data: bytes, max_length: int = -1) -> bytes: ...


def _stream(make: Callable[[], _Streaming], data: bytes | memoryview, limit: int) -> bytes:
    """Concatenated frames through fresh decompressors, at most ``limit + 1`` bytes out.

    Input is fed in small pieces and output asked for with ``max_length``, so neither the
    decompressor's buffers nor ``out`` grow past the limit by more than a block.
    """
    out = _Output(limit)
    view = memoryview(data)
    pos = 0
    while pos < len(view):
        decompressor = make()
        while not decompressor.eof:
            if decompressor.needs_input:
                if pos >= len(view):
                    raise CorruptRecordError("truncated compressed frame")
                piece = bytes(view[pos : pos + _FEED_BYTES])
                pos += len(piece)
            else:
                piece = b""
            produced = decompressor.decompress(piece, out.room)
            if not piece and not produced and not decompressor.eof:
                raise CorruptRecordError("the decompressor makes no progress")
            out.add(produced)
        pos -= len(decompressor.unused_data or b"")
    return out.join()


def _unzstd(data: bytes | memoryview, limit: int) -> bytes:
    """zstd frames; a frame whose header declares more than ``limit`` is refused unread."""
    head = bytes(memoryview(data)[:18])  # the longest frame header
    with contextlib.suppress(zstd.ZstdError):
        declared = zstd.get_frame_info(head).decompressed_size
        if declared is not None and declared > limit:
            raise _too_big(limit)
    options = {int(zstd.DecompressionParameter.window_log_max): ZSTD_WINDOW_LOG_MAX}
    return _stream(lambda: zstd.ZstdDecompressor(options=options), data, limit)


def _snappy_decompress(data: bytes | memoryview, limit: int) -> bytes:
    """Raw snappy, or xerial-framed snappy: blocks of int32 length + raw snappy block.

    A raw snappy block starts with its uncompressed length, so the limit is checked before
    anything is decompressed.
    """
    view = memoryview(data)
    if bytes(view[: len(XERIAL_MAGIC)]) != XERIAL_MAGIC:
        if cramjam.snappy.decompress_raw_len(view) > limit:
            raise _too_big(limit)
        return bytes(cramjam.snappy.decompress_raw(view))
    out = _Output(limit)
    pos = _XERIAL_HEADER_SIZE
    while pos < len(view):
        if pos + _INT32.size > len(view):
            raise CorruptRecordError("truncated xerial snappy block length")
        (length,) = _INT32.unpack_from(view, pos)
        pos += _INT32.size
        if length < 0 or pos + length > len(view):
            raise CorruptRecordError(f"bad xerial snappy block length {length}")
        block = view[pos : pos + length]
        if cramjam.snappy.decompress_raw_len(block) >= out.room:
            raise _too_big(limit)
        out.add(bytes(cramjam.snappy.decompress_raw(block)))
        pos += length
    return out.join()


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


def compress_records(compression: int, data: bytes) -> bytes:
    """Compress a records section with codec ``compression``, readable by every client.

    The formats :func:`decompress_records` reads, in the flavour Kafka's own writers use:
    gzip at zlib's default level; snappy as one raw block (what librdkafka writes; the Java
    client reads it too); lz4 as a frame of independent blocks without content checksum
    (Java's KafkaLZ4BlockInputStream decodes blocks independently); a plain zstd frame.
    """
    if compression == NO_COMPRESSION:
        return data
    if compression == GZIP:
        return gzip.compress(data, compresslevel=6, mtime=0)
    if compression == SNAPPY:
        return bytes(cramjam.snappy.compress_raw(data))
    if compression == LZ4:
        compressor = cramjam.lz4.Compressor(content_checksum=False, block_linked=False)
        compressor.compress(data)
        return bytes(compressor.finish())
    if compression == ZSTD:
        return bytes(cramjam.zstd.compress(data))
    raise CorruptRecordError(f"unknown compression type id {compression}")


def _open_batch(batch: bytes | memoryview) -> tuple[BatchHeader, bytes]:
    """Check that ``batch`` is one whole v2 batch; return its header and records section."""
    if len(batch) < BATCH_HEADER_SIZE:
        raise CorruptRecordError(f"a batch needs {BATCH_HEADER_SIZE} bytes, got {len(batch)}")
    header = read_header(batch, 0, 0)
    if header.magic != MAGIC_V2:
        raise CorruptRecordError(f"unexpected magic {header.magic}")
    if header.size != len(batch):
        raise CorruptRecordError(f"batch declares {header.size} bytes, got {len(batch)}")
    return header, decompress_records(header.compression, memoryview(batch)[BATCH_HEADER_SIZE:])


def _walk(header: BatchHeader, records: bytes) -> Iterator[tuple[int, int, int, int, int]]:
    """Frame the records: (start, end, position after offsetDelta, offset, timestamp) each.

    ``start``/``end`` delimit the whole record, length varint included. The timestamp is what
    a consumer sees: baseTimestamp + timestampDelta for CreateTime, and the batch maxTimestamp
    for every record of a LogAppendTime batch (the broker overwrote that field and left the
    deltas as the producer sent them). Offsets are baseOffset + offsetDelta rather than
    counted, since compaction can leave gaps inside a batch.
    """
    log_append_time = header.timestamp_type == 1
    pos = 0
    for _ in range(header.records_count):
        start = pos
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
        yield start, end, pos, header.base_offset + offset_delta, timestamp
        pos = end
    if pos != len(records):
        raise CorruptRecordError(
            f"{len(records) - pos} bytes left after {header.records_count} records"
        )


def iter_record_offsets_and_timestamps(batch: bytes | memoryview) -> Iterator[tuple[int, int]]:
    """Yield (offset, timestamp) of every record of one whole v2 batch, in order.

    See :func:`_walk` for what the values mean. Raises CorruptRecordError (possibly after some
    records were yielded) when the records section does not decode or does not match the
    header's record count.
    """
    header, records = _open_batch(batch)
    for _, _, _, offset, timestamp in _walk(header, records):
        yield offset, timestamp


@dataclass(frozen=True, slots=True)
class RecordView:
    """One record of a decoded batch, as the log cleaner sees it."""

    offset: int
    timestamp: int
    key: bytes | None
    #: The value is null: a delete marker for the key.
    is_tombstone: bool
    #: The record's bytes (length varint included) are ``records[start:end]`` of the
    #: uncompressed records section returned alongside.
    start: int
    end: int


def decode_records(batch: bytes | memoryview) -> tuple[BatchHeader, bytes, list[RecordView]]:
    """Header, uncompressed records section and a :class:`RecordView` per record of a batch.

    Raises CorruptRecordError when the batch does not decode.
    """
    header, records = _open_batch(batch)
    views = []
    for start, end, pos, offset, timestamp in _walk(header, records):
        key_length, pos = _read_varint(records, pos, _MAX_VARINT_BYTES)
        key = None
        if key_length >= 0:
            key = records[pos : pos + key_length]
            pos += key_length
        value_length, pos = _read_varint(records, pos, _MAX_VARINT_BYTES)
        if pos > end or (value_length > 0 and pos + value_length > end):
            raise CorruptRecordError("record key or value overruns the record length")
        views.append(RecordView(offset, timestamp, key, value_length < 0, start, end))
    return header, records, views


def out_of_range_timestamps(batch: bytes | memoryview, low: int,
                            high: int) -> list[tuple[int, int, int]]:
    """(index in the batch, offset, timestamp) of each record whose timestamp lies outside
    ``[low, high]``; records without a timestamp (-1) are never out of range, as in Kafka.
    Raises CorruptRecordError when the records do not frame.

    For topics that bound producer timestamps (``message.timestamp.before/after.max.ms``
    below Long.MAX_VALUE) only: Kafka checks every record, not the batch header.
    """
    header, records = _open_batch(batch)
    return [
        (index, offset, timestamp)
        for index, (_, _, _, offset, timestamp) in enumerate(_walk(header, records))
        if timestamp != -1 and not low <= timestamp <= high
    ]


def null_key_indexes(batch: bytes | memoryview) -> list[int]:
    """Indexes (within the batch, from 0) of the records that have a null key: Kafka refuses
    those on a compacted topic and names each one in the produce response (KIP-467).
    Raises CorruptRecordError when the records do not frame.

    On the produce path of compacted topics, so it skips the two varints before the key
    without decoding them, and reads only the sign of the key length: zigzag encodes a
    negative number as an odd one, and the low bit of a varint is in its first byte.
    """
    header, records = _open_batch(batch)
    size = len(records)
    pos = 0
    found: list[int] = []
    try:
        for index in range(header.records_count):
            first = records[pos]
            if first < 0x80:
                length, pos = (first >> 1) ^ -(first & 1), pos + 1
            else:
                length, pos = _read_varint(records, pos, _MAX_VARINT_BYTES)
            end = pos + length
            if length <= 0 or end > size:
                raise CorruptRecordError(f"bad record length {length}")
            field = pos + 1  # after the attributes byte: timestampDelta, offsetDelta
            for _ in range(2):
                while records[field] & 0x80:
                    field += 1
                field += 1
            if field >= end:
                raise CorruptRecordError("record fields overrun the record length")
            if records[field] & 1:
                found.append(index)
            pos = end
    except IndexError:
        raise CorruptRecordError("truncated record") from None
    if pos != size:
        raise CorruptRecordError(f"{size - pos} bytes left after {header.records_count} records")
    return found


def key_value_heads(batch: bytes | memoryview, width: int) -> list[tuple[bytes | None,
                                                                        bytes | None]]:
    """The first ``width`` bytes of each record's key and value (None when null), in batch
    order. Raises CorruptRecordError when the records do not frame.

    For topics that check schema ids (``confluent.*.schema.validation``) only: the Schema
    Registry's wire format puts a magic byte and a 4-byte schema id first.
    """
    header, records = _open_batch(batch)
    heads: list[tuple[bytes | None, bytes | None]] = []
    for _start, end, pos, _offset, _timestamp in _walk(header, records):
        key_length, pos = _read_varint(records, pos, _MAX_VARINT_BYTES)
        key = None
        if key_length >= 0:
            key = bytes(records[pos : pos + min(key_length, width)])
            pos += key_length
        value_length, pos = _read_varint(records, pos, _MAX_VARINT_BYTES)
        if pos > end or (value_length > 0 and pos + value_length > end):
            raise CorruptRecordError("record key or value overruns the record length")
        value = None if value_length < 0 else bytes(records[pos : pos + min(value_length, width)])
        heads.append((key, value))
    return heads
