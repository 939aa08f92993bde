"""Decompression bombs: a valid compressed v2 batch whose one record expands to gigabytes.

Built by streaming, so the test process never holds the uncompressed value: a record with a
``value_size``-byte value of zeros, compressed a MiB at a time by gzip (zlib), lz4 (frame) or
zstd, inside a correct batch header and CRC, which any broker must accept as well-framed.
"""

from __future__ import annotations

import struct
import sys
import zlib
from collections.abc import Callable

import crc32c
import lz4.frame

from moldau.log.records_writer import zigzag_varint

if sys.version_info >= (3, 14):
    from compression import zstd
else:
    from backports import zstd

GZIP, LZ4, ZSTD = 1, 3, 4
_HEADER = struct.Struct(">qiibIhiqqqhii")
_MIB = 1 << 20


def _compressor(codec: int) -> tuple[Callable[[bytes], bytes], Callable[[], bytes]]:
    if codec == GZIP:
        gz = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        return gz.compress, gz.flush
    if codec == LZ4:
        lz = lz4.frame.LZ4FrameCompressor()
        first = [lz.begin()]

        def compress(data: bytes) -> bytes:
            return (first.pop() if first else b"") + lz.compress(data)

        return compress, lz.flush
    if codec == ZSTD:
        zs = zstd.ZstdCompressor()
        return zs.compress, zs.flush
    raise ValueError(codec)


def bomb_batch(codec: int, value_size: int, *, key: bytes = b"k", timestamp: int = 1_000) -> bytes:
    """One batch of one record (``key``, ``value_size`` zeros), compressed with ``codec``."""
    head = (b"\x00" + zigzag_varint(0) + zigzag_varint(0) + zigzag_varint(len(key)) + key
            + zigzag_varint(value_size))
    tail = zigzag_varint(0)  # no headers
    body_length = len(head) + value_size + len(tail)
    compress, flush = _compressor(codec)
    parts = [compress(zigzag_varint(body_length) + head)]
    zeros = bytes(_MIB)
    left = value_size
    while left:
        step = min(left, _MIB)
        parts.append(compress(zeros[:step]))
        left -= step
    parts.append(compress(tail))
    parts.append(flush())
    records = b"".join(parts)
    header = bytearray(_HEADER.pack(0, 49 + len(records), -1, 2, 0, codec, 0, timestamp,
                                    timestamp, -1, -1, -1, 1))
    data = header + records
    struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))
    return bytes(data)
