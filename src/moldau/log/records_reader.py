"""Decode keys and values of a partition's records, for replaying an internal topic.

The group coordinator rebuilds its state at start-up by reading ``__consumer_offsets`` from
the log start to the end. This is the only place the broker needs whole records (key and
value) rather than batch headers. It is lenient where the producer path is strict: after
compaction a batch may have offset gaps or no records at all, and offsets are taken from
each record's delta, never counted. Control batches (transaction markers) carry no data and
are skipped; compressed batches are decompressed (the broker writes none itself, but a data
directory may come from elsewhere).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass

import crc32c

from .batch import (
    ATTRIBUTES_POS,
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_V2,
    BatchHeader,
    read_header,
)
from .errors import CorruptRecordError
from .partition_log import PartitionLog
from .records import decompress_records

log = logging.getLogger(__name__)

#: How much of the log one read brings into memory.
READ_CHUNK_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class LogRecord:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None


class _Cursor:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def varint(self) -> int:
        raw = shift = 0
        while True:
            if self.pos >= len(self.data) or shift > 63:
                raise CorruptRecordError("truncated or overlong varint in a record")
            byte = self.data[self.pos]
            self.pos += 1
            raw |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return (raw >> 1) ^ -(raw & 1)
            shift += 7

    def nullable_bytes(self) -> bytes | None:
        size = self.varint()
        if size < 0:
            return None
        end = self.pos + size
        if end > len(self.data):
            raise CorruptRecordError("record field overruns the batch")
        chunk = self.data[self.pos : end]
        self.pos = end
        return chunk


def iter_batch_records(batch: bytes | memoryview) -> Iterator[LogRecord]:
    """The records of one whole v2 batch (none for control batches)."""
    header = read_header(batch, 0, 0)
    if header.magic != MAGIC_V2:
        raise CorruptRecordError(f"unexpected magic {header.magic}")
    if header.is_control:
        return
    cursor = _Cursor(decompress_records(header.compression,
                                        memoryview(batch)[BATCH_HEADER_SIZE : header.size]))
    for _ in range(header.records_count):
        length = cursor.varint()
        end = cursor.pos + length
        cursor.pos += 1  # attributes
        timestamp_delta = cursor.varint()
        offset_delta = cursor.varint()
        key = cursor.nullable_bytes()
        value = cursor.nullable_bytes()
        if end > len(cursor.data):
            raise CorruptRecordError(f"bad record length {length}")
        cursor.pos = end  # headers: not needed
        timestamp = (header.max_timestamp if header.timestamp_type == 1
                     else header.base_timestamp + timestamp_delta)
        yield LogRecord(header.base_offset + offset_delta, timestamp, key, value)


def iter_log_records(plog: PartitionLog, start: int | None = None) -> Iterator[LogRecord]:
    """Every data record of ``plog`` from ``start`` (default: the log start) to its end.

    A batch that fails its CRC ends the walk with an error log: recovery already truncated
    torn tails at start-up, so this means damage in the middle, and what follows cannot be
    trusted to apply on top of a gap either.
    """
    first = plog.log_start_offset if start is None else start
    for _header, batch in iter_log_batches(plog, start):
        for record in iter_batch_records(batch):
            if record.offset >= first:
                yield record


def iter_log_batches(plog: PartitionLog, start: int | None = None
                     ) -> Iterator[tuple[BatchHeader, memoryview]]:
    """Every whole batch of ``plog`` (control batches too) with its header, from the one
    holding ``start`` (default: the log start); a CRC failure ends the walk as in
    :func:`iter_log_records`. Replays that must know a batch's producer (transactional
    offset commits and their markers) read these."""
    offset = plog.log_start_offset if start is None else start
    while True:
        chunk = plog.read(offset, READ_CHUNK_BYTES)
        if chunk is None:
            return
        data = chunk.read()
        pos = 0
        while pos + BATCH_HEADER_SIZE <= len(data):
            header = read_header(data, pos, pos)
            end = pos + LOG_OVERHEAD + header.batch_length
            if end > len(data):
                break
            batch = memoryview(data)[pos:end]
            if crc32c.crc32c(batch[ATTRIBUTES_POS:]) != header.crc:
                log.error("%s-%d: batch at offset %d fails its CRC; stopping the replay there",
                          plog.topic, plog.partition, header.base_offset)
                return
            yield header, batch
            offset = max(offset, header.next_offset)
            pos = end
        if pos == 0:
            return  # nothing whole came back: do not spin
