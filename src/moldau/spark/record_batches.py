"""Kafka record batches (magic v2) built from Arrow columns, without a Python loop per record.

Each record of a v2 batch is ``length, attributes, timestampDelta, offsetDelta, keyLength,
key, valueLength, value, headerCount``, the integers as zig-zag varints. Here the small
integer fields of all records are computed and varint-encoded at once with numpy into two
binary columns (the part before the key and the part between key and value), and Arrow's
``binary_join_element_wise`` concatenates prefix, key, middle and value of every record in
C; the joined column's data buffer is then the batch's records section as it is. Every
record of a batch gets the batch's timestamp (CreateTime; delta 0) and no headers.
"""

from __future__ import annotations

import struct

import crc32c
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

# baseOffset, batchLength, partitionLeaderEpoch, magic, crc (filled in after)
_HEAD = struct.Struct(">qiibI")
# attributes, lastOffsetDelta, baseTimestamp, maxTimestamp, producerId, producerEpoch,
# baseSequence, recordCount
_TAIL = struct.Struct(">hiqqqhii")
_EMPTY = pa.scalar(b"", pa.binary())
_HEADER_COUNT_ZERO = pa.scalar(b"\x00", pa.binary())


def _zigzag(values: np.ndarray) -> np.ndarray:
    return ((values << 1) ^ (values >> 63)).astype(np.uint64)


def _varint_sizes(values: np.ndarray) -> np.ndarray:
    """Bytes each unsigned value takes as a varint (1 to 10)."""
    sizes = np.ones(len(values), dtype=np.int64)
    rest = values >> np.uint64(7)
    while rest.any():
        sizes += rest > 0
        rest >>= np.uint64(7)
    return sizes


def _put_varints(out: np.ndarray, at: np.ndarray, values: np.ndarray, sizes: np.ndarray
                 ) -> None:
    """Write ``values`` as varints into ``out`` at positions ``at``."""
    for k in range(int(sizes.max(initial=1))):
        here = sizes > k
        byte = (values[here] >> np.uint64(7 * k)) & np.uint64(0x7F)
        more = (sizes[here] > k + 1).astype(np.uint64) << np.uint64(7)
        out[at[here] + k] = (byte | more).astype(np.uint8)


def _varint_column(fields: list[tuple[np.ndarray, np.ndarray]], count: int) -> pa.Array:
    """A binary column whose entry i is the varints ``fields[j][0][i]`` one after another
    (``fields[j][1]`` being their sizes)."""
    widths = sum((sizes for _, sizes in fields), start=np.zeros(count, dtype=np.int64))
    offsets = np.zeros(count + 1, dtype=np.int32)
    np.cumsum(widths, out=offsets[1:])
    out = np.zeros(int(offsets[-1]), dtype=np.uint8)
    at = offsets[:-1].astype(np.int64)
    for values, sizes in fields:
        _put_varints(out, at, values, sizes)
        at = at + sizes
    return pa.Array.from_buffers(pa.binary(), count, [None, pa.py_buffer(offsets),
                                                      pa.py_buffer(out)])


def _lengths(column: pa.Array) -> np.ndarray:
    """Byte lengths, -1 for null."""
    lengths = pc.binary_length(column).fill_null(-1)
    return np.asarray(lengths, dtype=np.int64)


def encode_records(keys: pa.Array, values: pa.Array) -> bytes:
    """The records section of a batch: ``keys`` and ``values`` are binary arrays (nulls
    allowed) of the same length; offset deltas count from 0."""
    count = len(values)
    keys, values = keys.cast(pa.binary()), values.cast(pa.binary())  # one offset width
    key_len, value_len = _lengths(keys), _lengths(values)
    key_zz, value_zz = _zigzag(key_len), _zigzag(value_len)
    delta_zz = _zigzag(np.arange(count, dtype=np.int64))
    key_sz, value_sz, delta_sz = (_varint_sizes(key_zz), _varint_sizes(value_zz),
                                  _varint_sizes(delta_zz))
    # attributes (1) + timestampDelta 0 (1) + offsetDelta + keyLength + key + valueLength
    # + value + headerCount 0 (1)
    body = (3 + delta_sz + key_sz + np.maximum(key_len, 0) + value_sz
            + np.maximum(value_len, 0))
    body_zz = _zigzag(body)
    zeros = np.zeros(count, dtype=np.uint64)
    ones = np.ones(count, dtype=np.int64)
    prefix = _varint_column([(body_zz, _varint_sizes(body_zz)), (zeros, ones), (zeros, ones),
                             (delta_zz, delta_sz), (key_zz, key_sz)], count)
    middle = _varint_column([(value_zz, value_sz)], count)
    joined = pc.binary_join_element_wise(prefix, keys.fill_null(b""), middle,
                                         values.fill_null(b""), _HEADER_COUNT_ZERO, _EMPTY)
    offsets = np.frombuffer(joined.buffers()[1], dtype=np.int32,
                            count=len(joined) + 1, offset=joined.offset * 4)
    data = joined.buffers()[2]
    return data.to_pybytes()[int(offsets[0]):int(offsets[-1])]


def record_batch(keys: pa.Array, values: pa.Array, timestamp_ms: int, producer_id: int,
                 producer_epoch: int, base_sequence: int) -> bytes:
    """A complete uncompressed v2 batch (base offset 0; the broker assigns offsets)."""
    count = len(values)
    records = encode_records(keys, values)
    tail = _TAIL.pack(0, count - 1, timestamp_ms, timestamp_ms, producer_id, producer_epoch,
                      base_sequence, count)
    crc = crc32c.crc32c(tail + records)
    length = 4 + 1 + 4 + len(tail) + len(records)  # from partitionLeaderEpoch to the end
    return _HEAD.pack(0, length, -1, 2, crc) + tail + records
