"""Hand-made Kafka v2 record batches, for tests that must send bytes no client would send.

Only uncompressed batches are built and parsed here; compressed ones come from real clients.
The layout is Kafka's ``DefaultRecordBatch``: a 61-byte header whose CRC32C covers everything
from the attributes field to the end, followed by records whose fields are zigzag varints.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

import crc32c

# baseOffset, batchLength, partitionLeaderEpoch, magic, crc
_PREFIX = struct.Struct(">qiibI")
# attributes, lastOffsetDelta, baseTimestamp, maxTimestamp, producerId, producerEpoch,
# baseSequence, recordCount
_BODY_HEAD = struct.Struct(">hiqqqhii")
HEADER_SIZE = _PREFIX.size + _BODY_HEAD.size  # 61
CRC_OFFSET = 17  # where the CRC field sits in the batch
TIMESTAMP_TYPE_LOG_APPEND = 0x08


def zigzag_varint(value: int) -> bytes:
    """A signed varint (zigzag), as every length and delta inside a v2 record."""
    zz = (value << 1) ^ (value >> 63)
    out = bytearray()
    while zz >= 0x80:
        out.append((zz & 0x7F) | 0x80)
        zz >>= 7
    out.append(zz)
    return bytes(out)


def read_zigzag_varint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = 0
    raw = 0
    while True:
        byte = buf[pos]
        pos += 1
        raw |= (byte & 0x7F) << shift
        if not byte & 0x80:
            break
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")
    return (raw >> 1) ^ -(raw & 1), pos


def _bytes_field(value: bytes | None) -> bytes:
    if value is None:
        return zigzag_varint(-1)
    return zigzag_varint(len(value)) + value


@dataclass(frozen=True)
class Record:
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    timestamp_delta: int = 0


@dataclass
class ParsedRecord:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)


@dataclass
class ParsedBatch:
    base_offset: int
    attributes: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records: list[ParsedRecord]


def encode_record(record: Record, offset_delta: int) -> bytes:
    body = bytearray()
    body.append(0)  # record attributes: unused
    body += zigzag_varint(record.timestamp_delta)
    body += zigzag_varint(offset_delta)
    body += _bytes_field(record.key)
    body += _bytes_field(record.value)
    body += zigzag_varint(len(record.headers))
    for name, value in record.headers:
        body += _bytes_field(name.encode())
        body += _bytes_field(value)
    return zigzag_varint(len(body)) + bytes(body)


def build_batch(
    records: list[Record],
    *,
    base_timestamp: int,
    base_offset: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    attributes: int = 0,
) -> bytes:
    """An uncompressed magic-2 batch with a correct CRC32C."""
    if not records:
        raise ValueError("a batch needs at least one record")
    encoded = b"".join(encode_record(r, i) for i, r in enumerate(records))
    max_ts = base_timestamp + max(r.timestamp_delta for r in records)
    body = _BODY_HEAD.pack(
        attributes, len(records) - 1, base_timestamp, max_ts, producer_id, producer_epoch,
        base_sequence, len(records),
    ) + encoded
    crc = crc32c.crc32c(body)
    # batchLength counts everything after the batchLength field itself.
    batch_length = len(body) + 4 + 1 + 4
    return _PREFIX.pack(base_offset, batch_length, -1, 2, crc) + body


def corrupt_crc(batch: bytes) -> bytes:
    """The same batch with one payload byte flipped, so the stored CRC no longer matches."""
    raw = bytearray(batch)
    raw[-1] ^= 0xFF
    return bytes(raw)


def parse_batches(data: bytes, *, decode_records: bool = True) -> list[ParsedBatch]:
    """Parse the v2 batches of a fetch response's records field (records: uncompressed only).

    A partial batch at the end (Kafka may cut a response mid-batch) is ignored, as clients do.
    """
    batches: list[ParsedBatch] = []
    pos = 0
    while pos + HEADER_SIZE <= len(data):
        base_offset, length, _epoch, magic, crc = _PREFIX.unpack_from(data, pos)
        end = pos + 12 + length
        if end > len(data):
            break
        if magic != 2:
            raise ValueError(f"magic {magic} at {pos}")
        body = data[pos + _PREFIX.size : end]
        if crc32c.crc32c(body) != crc:
            raise ValueError(f"bad CRC in batch at offset {base_offset}")
        (attributes, _last_delta, base_ts, max_ts, pid, pepoch, base_seq,
         count) = _BODY_HEAD.unpack_from(body, 0)
        if decode_records and attributes & 0x07:
            raise ValueError("compressed batches are not parsed here")
        records: list[ParsedRecord] = []
        rpos = _BODY_HEAD.size
        for _ in range(count if decode_records else 0):
            _length, rpos = read_zigzag_varint(body, rpos)
            rpos += 1  # record attributes
            ts_delta, rpos = read_zigzag_varint(body, rpos)
            off_delta, rpos = read_zigzag_varint(body, rpos)
            key, rpos = _read_bytes(body, rpos)
            value, rpos = _read_bytes(body, rpos)
            n_headers, rpos = read_zigzag_varint(body, rpos)
            headers: list[tuple[str, bytes | None]] = []
            for _h in range(n_headers):
                hkey, rpos = _read_bytes(body, rpos)
                hval, rpos = _read_bytes(body, rpos)
                headers.append(((hkey or b"").decode(), hval))
            ts = max_ts if attributes & TIMESTAMP_TYPE_LOG_APPEND else base_ts + ts_delta
            records.append(ParsedRecord(base_offset + off_delta, ts, key, value, headers))
        batches.append(ParsedBatch(base_offset, attributes, base_ts, max_ts, pid, pepoch,
                                   base_seq, records))
        pos = end
    return batches


def _read_bytes(buf: bytes, pos: int) -> tuple[bytes | None, int]:
    size, pos = read_zigzag_varint(buf, pos)
    if size < 0:
        return None, pos
    return bytes(buf[pos : pos + size]), pos + size
