"""Kafka v2 record batches (as a Fetch response carries them) to one Arrow record batch.

The columnar read path of the source. Python walks only the 61-byte batch headers: it skips
control batches and, under read_committed, aborted transactions' batches (the consumer
algorithm over the response's aborted-transaction list), and decompresses each remaining
batch's records section in one call. The records themselves are decoded by the C extension
``_kafka_batches`` straight into Arrow buffers, which pyarrow wraps without copying, so no
Python object is created per record. The columns and types are exactly those the row path
(:mod:`moldau.spark.fetch`) produces.

When the extension was not built (no C compiler at install time), :data:`AVAILABLE` is
false and the source uses the row path.
"""

from __future__ import annotations

import heapq
import logging
import struct
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from moldau.log.batch import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_POS,
    MAGIC_V2,
    BatchHeader,
    read_header,
)
from moldau.log.errors import CorruptRecordError
from moldau.log.records import decode_records, decompress_records

try:
    from . import _kafka_batches  # type: ignore[attr-defined]
except ImportError:  # built optionally: see setup.py
    _kafka_batches = None

log = logging.getLogger(__name__)

#: Whether the C decoder is importable; without it the source reads rows.
AVAILABLE = _kafka_batches is not None

#: Control record type of an abort marker (key: int16 version, int16 type).
_ABORT_MARKER = 0
_CONTROL_KEY = struct.Struct(">hh")


class UnsupportedRecordsError(ValueError):
    """The fetched data is not v2 record batches (an old message format)."""


@dataclass(frozen=True)
class AbortedTransaction:
    """One entry of a read_committed Fetch response's aborted-transaction list."""

    producer_id: int
    first_offset: int


@dataclass(frozen=True)
class Decoded:
    """What one Fetch response's records gave: rows, and where the next fetch starts."""

    batch: pa.RecordBatch | None
    #: Just past the last complete batch walked (control and aborted ones included); the
    #: ``fetch_offset`` given when the data held no complete batch.
    next_offset: int


class _AbortedFilter:
    """Which transactional batches belong to aborted transactions (read_committed).

    As Kafka's consumers do: an aborted transaction's producer becomes "aborting" once a
    batch at or past its first offset is reached, and stops being so at its abort marker.
    """

    def __init__(self, aborted: Iterable[AbortedTransaction]) -> None:
        self.pending = [(a.first_offset, a.producer_id) for a in aborted]
        heapq.heapify(self.pending)
        self.aborting: set[int] = set()

    def skip(self, header: BatchHeader, batch: memoryview) -> bool:
        while self.pending and self.pending[0][0] <= header.last_offset:
            self.aborting.add(heapq.heappop(self.pending)[1])
        if header.is_control:
            if header.producer_id in self.aborting and _is_abort_marker(batch):
                self.aborting.discard(header.producer_id)
            return True
        return header.producer_id in self.aborting


def _is_abort_marker(batch: memoryview) -> bool:
    _, _, records = decode_records(batch)
    key = records[0].key if records else None
    return key is not None and len(key) >= 4 and _CONTROL_KEY.unpack_from(key)[1] == _ABORT_MARKER


def decode_fetched(data: bytes | memoryview, fetch_offset: int, until: int, *,
                   topic: str, partition: int, schema: pa.Schema, include_headers: bool,
                   aborted: Iterable[AbortedTransaction] | None) -> Decoded:
    """Rows of offsets [``fetch_offset``, ``until``) in ``data`` (a Fetch response's records).

    ``aborted`` is the response's aborted-transaction list under read_committed, None under
    read_uncommitted. A truncated last batch (the response hit its byte limit) is left for
    the next fetch. Control batches are never rows.
    """
    if _kafka_batches is None:
        raise RuntimeError("the columnar decoder (moldau.spark._kafka_batches) is not built")
    view = memoryview(data)
    skip = _AbortedFilter(aborted) if aborted is not None else None
    chunks: list[tuple[bytes | memoryview, int, int, int, int]] = []
    pos = 0
    next_offset = fetch_offset
    while pos + BATCH_HEADER_SIZE <= len(view):
        if view[pos + MAGIC_POS] != MAGIC_V2:
            raise UnsupportedRecordsError(
                f"{topic}-{partition} holds message format v{view[pos + MAGIC_POS]} at offset "
                f"{next_offset}; the columnar decoder reads v2 batches only "
                "(set option 'moldau.decoder' to 'rows')")
        header = read_header(view, pos, pos)
        if header.batch_length < BATCH_HEADER_SIZE - LOG_OVERHEAD:
            raise CorruptRecordError(f"{topic}-{partition}: record batch at offset "
                                     f"{header.base_offset} has impossible length "
                                     f"{header.batch_length}")
        end = pos + LOG_OVERHEAD + header.batch_length
        if end > len(view):
            break
        batch = view[pos:end]
        pos = end
        if header.last_offset < fetch_offset:
            continue
        next_offset = header.next_offset
        if skip is not None and header.is_transactional and skip.skip(header, batch):
            continue
        if header.is_control:
            continue
        if header.base_offset >= until:
            break
        records = batch[BATCH_HEADER_SIZE:]
        if header.compression:
            records = memoryview(decompress_records(header.compression, records))
        log_append = header.max_timestamp if header.timestamp_type else -1
        chunks.append((records, header.records_count, header.base_offset,
                       header.base_timestamp, log_append))
    if not chunks:
        return Decoded(None, next_offset)
    columns = _kafka_batches.decode(chunks, fetch_offset, until, include_headers)
    rows = columns[0]
    if not rows:
        return Decoded(None, next_offset)
    return Decoded(_record_batch(columns, rows, topic, partition, schema, include_headers),
                   next_offset)


def _binary(kind: pa.DataType, rows: int, offsets: bytes, data: bytes,
            valid: bytes | None) -> pa.Array:
    return pa.Array.from_buffers(
        kind, rows, [None if valid is None else pa.py_buffer(valid), pa.py_buffer(offsets),
                     pa.py_buffer(data)], null_count=-1)


def _record_batch(columns: tuple, rows: int, topic: str, partition: int, schema: pa.Schema,
                  include_headers: bool) -> pa.RecordBatch:
    (_, offset, timestamp, timestamp_valid, timestamp_type, key_offsets, key_data, key_valid,
     value_offsets, value_data, value_valid, list_offsets, list_valid, hkey_offsets, hkey_data,
     hvalue_offsets, hvalue_data, hvalue_valid) = columns
    name = topic.encode()
    topic_offsets = np.arange(rows + 1, dtype=np.int32) * len(name)
    arrays = [
        _binary(schema.field("key").type, rows, key_offsets, key_data, key_valid),
        _binary(schema.field("value").type, rows, value_offsets, value_data, value_valid),
        _binary(schema.field("topic").type, rows, topic_offsets.tobytes(), name * rows, None),
        pa.array(np.full(rows, partition, dtype=np.int32), type=schema.field("partition").type),
        pa.Array.from_buffers(schema.field("offset").type, rows, [None, pa.py_buffer(offset)]),
        pa.Array.from_buffers(schema.field("timestamp").type, rows,
                              [pa.py_buffer(timestamp_valid), pa.py_buffer(timestamp)],
                              null_count=-1),
        pa.Array.from_buffers(schema.field("timestampType").type, rows,
                              [None, pa.py_buffer(timestamp_type)]),
    ]
    if include_headers:
        list_type = schema.field("headers").type
        struct_type = list_type.value_type
        count = len(hkey_offsets) // 4 - 1
        entries = pa.StructArray.from_arrays(
            [_header_keys(struct_type.field(0).type, count, hkey_offsets, hkey_data),
             _binary(struct_type.field(1).type, count, hvalue_offsets, hvalue_data,
                     hvalue_valid)],
            fields=list(struct_type))
        arrays.append(pa.Array.from_buffers(
            list_type, rows, [pa.py_buffer(list_valid), pa.py_buffer(list_offsets)],
            null_count=-1, children=[entries]))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _header_keys(kind: pa.DataType, count: int, offsets: bytes, data: bytes) -> pa.Array:
    """Header keys as strings. Producers write UTF-8; other bytes become U+FFFD, as a JVM's
    ``new String(bytes, UTF_8)`` makes them, instead of an Arrow array Spark cannot read."""
    raw = _binary(pa.binary(), count, offsets, data, None)
    try:
        return raw.cast(kind)
    except pa.ArrowInvalid:
        return pa.array([key.decode("utf-8", "replace") for key in raw.to_pylist()], kind)
