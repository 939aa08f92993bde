"""Record batch (magic v2) headers: parse, validate, patch, and scan them in segment files.

The broker never decodes records. A batch is an opaque run of bytes whose first 61 bytes are a
fixed header; everything the log needs (offsets, timestamps, counts, producer fields) is there.
One ``struct.unpack_from`` per batch and one CRC32C call over a memoryview keep produce and
recovery free of per-record Python work.

Header layout (big-endian), with the byte position of each field::

    @0  baseOffset int64          @23 lastOffsetDelta int32
    @8  batchLength int32         @27 baseTimestamp int64
    @12 partitionLeaderEpoch i32  @35 maxTimestamp int64
    @16 magic int8                @43 producerId int64
    @17 crc uint32                @51 producerEpoch int16
    @21 attributes int16          @53 baseSequence int32
                                  @57 recordsCount int32

``batchLength`` counts the bytes after itself, so a batch occupies ``12 + batchLength`` bytes.
The CRC covers attributes to the end of the batch, which is why baseOffset and
partitionLeaderEpoch can be patched without recomputing it.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import crc32c

from .errors import CorruptRecordError, InvalidRecordError
from .fileio import Chunk

BATCH_HEADER_SIZE = 61
#: baseOffset + batchLength: the bytes not counted by batchLength.
LOG_OVERHEAD = 12
MIN_BATCH_LENGTH = BATCH_HEADER_SIZE - LOG_OVERHEAD
MAGIC_V2 = 2
#: Timestamp of a batch that carries none (Kafka's RecordBatch.NO_TIMESTAMP).
NO_TIMESTAMP = -1

BASE_OFFSET_POS = 0
BATCH_LENGTH_POS = 8
PARTITION_LEADER_EPOCH_POS = 12
MAGIC_POS = 16
CRC_POS = 17
ATTRIBUTES_POS = 21
LAST_OFFSET_DELTA_POS = 23
BASE_TIMESTAMP_POS = 27
MAX_TIMESTAMP_POS = 35

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20

#: Smallest legal length of a legacy (v0) message; below it a length cannot be a message at all.
_LEGACY_MIN_LENGTH = 14
_INT32_MAX = 0x7FFFFFFF

_HEADER = struct.Struct(">qiibIhiqqqhii")
_PREFIX = struct.Struct(">qiib")  # baseOffset, batchLength, partitionLeaderEpoch, magic
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_INT16 = struct.Struct(">h")
assert _HEADER.size == BATCH_HEADER_SIZE


@dataclass(slots=True)
class BatchHeader:
    """The decoded 61-byte header of one batch, plus where the batch sits in its buffer/file.

    Mutable on purpose: :func:`assign_offsets` updates the fields it patches so callers keep
    using the same objects for indexing after the append.
    """

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int
    #: Byte position of the batch inside the buffer or file it was read from.
    position: int = 0

    @property
    def size(self) -> int:
        """Total bytes the batch occupies, header included."""
        return LOG_OVERHEAD + self.batch_length

    @property
    def end(self) -> int:
        """Position just past the batch: where the next one starts."""
        return self.position + LOG_OVERHEAD + self.batch_length

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        """Codec id: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd."""
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        """0 = CreateTime, 1 = LogAppendTime."""
        return 1 if self.attributes & TIMESTAMP_TYPE_BIT else 0

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)


def read_header(buf: bytes | bytearray | memoryview, pos: int, position: int) -> BatchHeader:
    """Unpack the header at ``buf[pos:]``; ``position`` is what to record as its location."""
    (base_offset, length, epoch, magic, crc, attributes, delta, base_ts, max_ts, producer_id,
     producer_epoch, base_sequence, count) = _HEADER.unpack_from(buf, pos)
    return BatchHeader(base_offset, length, epoch, magic, crc, attributes, delta, base_ts, max_ts,
                       producer_id, producer_epoch, base_sequence, count, position)


def _byte_view(buf: bytes | bytearray | memoryview) -> memoryview:
    view = memoryview(buf)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    return view


def parse_batches(buf: bytes | bytearray | memoryview) -> list[BatchHeader]:
    """Validate the framing of a produce request's records and return one header per batch.

    Strict on purpose: anything that is not a sequence of complete, CRC-valid v2 batches is
    rejected before a byte reaches the log, because a bad batch written to a segment would be
    served to every consumer and truncated away by the next recovery. An empty buffer yields
    an empty list; whether that is acceptable is the caller's decision.

    Raises CorruptRecordError (truncation, impossible length, bad CRC, trailing bytes) or
    InvalidRecordError (magic other than 2, record count inconsistent with lastOffsetDelta).
    """
    view = _byte_view(buf)
    total = len(view)
    headers: list[BatchHeader] = []
    pos = 0
    while pos < total:
        remaining = total - pos
        if remaining < MAGIC_POS + 1:
            raise CorruptRecordError(
                f"{remaining} trailing bytes at position {pos} are too short for a record batch"
            )
        _, length, _, magic = _PREFIX.unpack_from(view, pos)
        if length < _LEGACY_MIN_LENGTH:
            raise CorruptRecordError(
                f"record batch at position {pos} has impossible length {length}"
            )
        if LOG_OVERHEAD + length > remaining:
            raise CorruptRecordError(
                f"record batch at position {pos} is truncated: needs {LOG_OVERHEAD + length} "
                f"bytes, {remaining} remain"
            )
        if magic not in (0, 1, MAGIC_V2):
            raise CorruptRecordError(f"invalid magic {magic} in record batch at position {pos}")
        if magic != MAGIC_V2:
            raise InvalidRecordError(
                f"record batch at position {pos} has magic {magic}; only magic 2 is accepted"
            )
        if length < MIN_BATCH_LENGTH:
            raise CorruptRecordError(
                f"record batch at position {pos} is {LOG_OVERHEAD + length} bytes, smaller "
                f"than the {BATCH_HEADER_SIZE}-byte header"
            )
        header = read_header(view, pos, pos)
        end = pos + header.size
        computed = crc32c.crc32c(view[pos + ATTRIBUTES_POS : end])
        if computed != header.crc:
            raise CorruptRecordError(
                f"record batch at position {pos} fails its CRC check "
                f"(stored {header.crc:#010x}, computed {computed:#010x})"
            )
        if header.records_count <= 0:
            raise InvalidRecordError(
                f"record batch at position {pos} declares {header.records_count} records"
            )
        if header.last_offset_delta != header.records_count - 1:
            raise InvalidRecordError(
                f"record batch at position {pos} has lastOffsetDelta {header.last_offset_delta}"
                f" but {header.records_count} records"
            )
        headers.append(header)
        pos = end
    return headers


def assign_offsets(
    buf: bytearray,
    headers: Sequence[BatchHeader],
    base_offset: int,
    leader_epoch: int,
    log_append_time_ms: int | None,
) -> int:
    """Give the batches in ``buf`` consecutive offsets from ``base_offset``; return the last one.

    baseOffset and partitionLeaderEpoch are outside the CRC, so patching them is two
    ``pack_into`` calls per batch. With ``log_append_time_ms`` (topic uses LogAppendTime) the
    timestamp-type bit and maxTimestamp change, which are covered by the CRC, so the CRC is
    recomputed for those batches only; baseTimestamp is left alone, as Kafka does, because
    readers of LogAppendTime batches take every record's timestamp from maxTimestamp.

    ``headers`` must come from :func:`parse_batches` on the same bytes; they are updated in
    place to describe the patched batches.
    """
    offset = base_offset
    with memoryview(buf) as view:
        for header in headers:
            pos = header.position
            body = view[pos + BATCH_HEADER_SIZE : pos + header.size]
            _patch_header(view, pos, header, offset, leader_epoch, log_append_time_ms, body)
            offset += header.last_offset_delta + 1
    return offset - 1


def offset_patched_chunks(
    records: Chunk,
    headers: Sequence[BatchHeader],
    base_offset: int,
    leader_epoch: int,
    log_append_time_ms: int | None,
) -> tuple[int, list[Chunk]]:
    """Like :func:`assign_offsets`, without copying ``records``; return the last offset and chunks.

    Each batch becomes its patched 61-byte header (a small new bytearray) followed by a view of
    its unchanged body in ``records``, ready for one ``os.writev``. A produce request's record
    bytes thus reach the page cache without another copy in Python, which is most of the
    broker's CPU per byte when batches are large.
    """
    chunks: list[Chunk] = []
    offset = base_offset
    view = memoryview(records)
    for header in headers:
        pos = header.position
        head = bytearray(view[pos : pos + BATCH_HEADER_SIZE])
        body = view[pos + BATCH_HEADER_SIZE : pos + header.size]
        _patch_header(head, 0, header, offset, leader_epoch, log_append_time_ms, body)
        chunks.append(head)
        if len(body):
            chunks.append(body)
        offset += header.last_offset_delta + 1
    return offset - 1, chunks


def _patch_header(
    head: bytearray | memoryview,
    pos: int,
    header: BatchHeader,
    offset: int,
    leader_epoch: int,
    log_append_time_ms: int | None,
    body: bytes | memoryview,
) -> None:
    """Patch one batch header at ``head[pos:]``; ``body`` is the rest of the batch (for the CRC)."""
    _INT64.pack_into(head, pos + BASE_OFFSET_POS, offset)
    _INT32.pack_into(head, pos + PARTITION_LEADER_EPOCH_POS, leader_epoch)
    header.base_offset = offset
    header.partition_leader_epoch = leader_epoch
    if log_append_time_ms is not None:
        attributes = header.attributes | TIMESTAMP_TYPE_BIT
        _INT16.pack_into(head, pos + ATTRIBUTES_POS, attributes)
        _INT64.pack_into(head, pos + MAX_TIMESTAMP_POS, log_append_time_ms)
        head_crc = crc32c.crc32c(head[pos + ATTRIBUTES_POS : pos + BATCH_HEADER_SIZE])
        crc = crc32c.crc32c(body, value=head_crc)
        _UINT32.pack_into(head, pos + CRC_POS, crc)
        header.attributes = attributes
        header.max_timestamp = log_append_time_ms
        header.crc = crc


def iter_batch_headers(
    fd: int, start_position: int, end_position: int, *, chunk_size: int = 16384
) -> Iterator[BatchHeader]:
    """Yield the headers of the batches stored in ``[start_position, end_position)`` of a file.

    For data already validated on append (lookups, slicing, loading a cleanly closed segment).
    It reads ``chunk_size`` bytes at a time with ``os.pread`` so a run of small batches costs
    one syscall, and jumps over bodies larger than a chunk without reading them. It stops
    quietly at anything that does not frame as a batch; recovery uses :class:`RecoveryScan`
    to find and report such damage.
    """
    chunk = b""
    chunk_start = start_position
    pos = start_position
    while pos + BATCH_HEADER_SIZE <= end_position:
        offset_in_chunk = pos - chunk_start
        if offset_in_chunk + BATCH_HEADER_SIZE > len(chunk):
            chunk = os.pread(fd, min(chunk_size, end_position - pos), pos)
            chunk_start = pos
            offset_in_chunk = 0
            if len(chunk) < BATCH_HEADER_SIZE:
                return
        header = read_header(chunk, offset_in_chunk, pos)
        if header.batch_length < MIN_BATCH_LENGTH or header.end > end_position:
            return
        yield header
        pos = header.end


class RecoveryScan:
    """Iterate the valid batches of a segment file, stopping at the first damaged one.

    A batch is valid when it frames correctly, has magic 2, passes its CRC, and its offsets
    move forward from ``min_offset`` and stay within ``max_relative_span`` of the segment's
    base (relative offsets are int32 in the index). After iteration, ``valid_end`` is the
    position just past the last valid batch and ``problem`` says why the scan stopped early
    (None when it reached ``end_position`` cleanly): the caller truncates there.

    Bodies are read in chunks because the CRC needs every byte; a batch larger than a chunk
    is read on its own.
    """

    def __init__(
        self,
        fd: int,
        start_position: int,
        end_position: int,
        min_offset: int,
        *,
        max_relative_span: int = _INT32_MAX,
        chunk_size: int = 1 << 20,
    ) -> None:
        self.fd = fd
        self.start_position = start_position
        self.end_position = end_position
        self.min_offset = min_offset
        self.max_offset = min_offset + max_relative_span
        self.chunk_size = chunk_size
        self.valid_end = start_position
        self.problem: str | None = None

    def __iter__(self) -> Iterator[BatchHeader]:
        end_position = self.end_position
        next_offset = self.min_offset
        chunk = b""
        chunk_start = pos = self.start_position
        while pos < end_position:
            remaining = end_position - pos
            if remaining < BATCH_HEADER_SIZE:
                self.problem = f"{remaining} bytes at the end are too short for a batch header"
                return
            offset_in_chunk = pos - chunk_start
            if offset_in_chunk + BATCH_HEADER_SIZE > len(chunk):
                chunk = os.pread(self.fd, min(self.chunk_size, remaining), pos)
                chunk_start, offset_in_chunk = pos, 0
                if len(chunk) < BATCH_HEADER_SIZE:
                    self.problem = "the file is shorter than expected"
                    return
            header = read_header(chunk, offset_in_chunk, pos)
            self.problem = self._check_framing(header, remaining)
            if self.problem is not None:
                return
            if offset_in_chunk + header.size <= len(chunk):
                first = offset_in_chunk + ATTRIBUTES_POS
                body = memoryview(chunk)[first : offset_in_chunk + header.size]
            else:
                if header.size > self.chunk_size:
                    body = memoryview(os.pread(self.fd, header.size, pos))[ATTRIBUTES_POS:]
                else:
                    chunk = os.pread(self.fd, min(self.chunk_size, remaining), pos)
                    chunk_start = pos
                    body = memoryview(chunk)[ATTRIBUTES_POS : header.size]
                if len(body) != header.size - ATTRIBUTES_POS:
                    self.problem = "the file is shorter than expected"
                    return
            if crc32c.crc32c(body) != header.crc:
                self.problem = f"CRC mismatch in the batch at offset {header.base_offset}"
                return
            if header.base_offset < next_offset:
                self.problem = (
                    f"batch offset {header.base_offset} is below the expected {next_offset}"
                )
                return
            if header.last_offset > self.max_offset:
                self.problem = f"batch offset {header.last_offset} is too far from the segment base"
                return
            yield header
            next_offset = header.next_offset
            pos = self.valid_end = header.end

    @staticmethod
    def _check_framing(header: BatchHeader, remaining: int) -> str | None:
        if header.batch_length < MIN_BATCH_LENGTH:
            return f"impossible batch length {header.batch_length}"
        if header.size > remaining:
            return f"torn batch: {header.size} bytes declared, {remaining} present"
        if header.magic != MAGIC_V2:
            return f"unexpected magic {header.magic}"
        if header.last_offset_delta < 0:
            return f"negative lastOffsetDelta {header.last_offset_delta}"
        return None


#: Codec ids a v2 batch may carry: none, gzip, snappy, lz4, zstd.
KNOWN_COMPRESSION_IDS = frozenset(range(5))


def check_client_batches(headers: list[BatchHeader]) -> None:
    """Apply the rules Kafka enforces on batches that come from a producer (not a replica).

    A producer sends exactly one batch per partition; it never writes control batches (only
    the transaction coordinator does); an idempotent batch must carry a sequence number; and a
    batch with an unknown codec would be stored but unreadable by every consumer. Raises
    InvalidRecordError, which the broker answers with INVALID_RECORD.
    """
    if len(headers) != 1:
        raise InvalidRecordError(
            f"a produce request must carry exactly one record batch per partition, "
            f"got {len(headers)}"
        )
    header = headers[0]
    if header.is_control:
        raise InvalidRecordError("clients are not allowed to write control records")
    if header.producer_id >= 0 and header.base_sequence < 0:
        raise InvalidRecordError(
            f"invalid sequence number {header.base_sequence} for producer id "
            f"{header.producer_id}"
        )
    if header.compression not in KNOWN_COMPRESSION_IDS:
        raise InvalidRecordError(f"unknown compression type id {header.compression}")
