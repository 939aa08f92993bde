"""Build and decode real Kafka v2 record batches for tests (uncompressed only).

Independent of ``moldau.log.batch`` on purpose: the tests check the log against an encoder
written from the format description, so a shared misunderstanding cannot hide.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field

import crc32c

HEADER = struct.Struct(">qiibIhiqqqhii")


@dataclass(frozen=True)
class Record:
    key: bytes | None
    value: bytes | None
    timestamp: int
    headers: tuple[tuple[str, bytes | None], ...] = field(default=())


def _zigzag(n: int) -> int:
    return (n << 1) ^ (n >> 63)


def varint(n: int) -> bytes:
    """Signed (zigzag) varint, as Kafka uses inside records."""
    z = _zigzag(n)
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = z = 0
    while True:
        b = buf[pos]
        pos += 1
        z |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            break
    return (z >> 1) ^ -(z & 1), pos


def _bytes_field(value: bytes | None) -> bytes:
    return varint(-1) if value is None else varint(len(value)) + value


def encode_record(record: Record, offset_delta: int, base_timestamp: int) -> bytes:
    body = bytearray()
    body.append(0)  # attributes
    body += varint(record.timestamp - base_timestamp)
    body += varint(offset_delta)
    body += _bytes_field(record.key)
    body += _bytes_field(record.value)
    body += varint(len(record.headers))
    for hkey, hvalue in record.headers:
        body += _bytes_field(hkey.encode())
        body += _bytes_field(hvalue)
    return varint(len(body)) + bytes(body)


def build_batch(
    records: Sequence[Record],
    *,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    control: bool = False,
    log_append_time: bool = False,
    base_timestamp: int | None = None,
    offset_deltas: Sequence[int] | None = None,
) -> bytes:
    """One uncompressed v2 batch holding ``records`` (with a valid CRC).

    ``base_timestamp`` defaults to the smallest record timestamp (a larger one gives negative
    timestamp deltas); ``offset_deltas`` default to 0, 1, 2, ... (gaps mimic compaction).
    """
    assert records
    base_ts = min(r.timestamp for r in records) if base_timestamp is None else base_timestamp
    max_ts = max(r.timestamp for r in records)
    deltas = range(len(records)) if offset_deltas is None else offset_deltas
    body = b"".join(encode_record(r, d, base_ts) for d, r in zip(deltas, records, strict=True))
    attributes = (
        (0x08 if log_append_time else 0)
        | (0x10 if transactional else 0)
        | (0x20 if control else 0)
    )
    header = bytearray(
        HEADER.pack(
            base_offset, 49 + len(body), partition_leader_epoch, 2, 0, attributes,
            deltas[-1], base_ts, max_ts, producer_id, producer_epoch, base_sequence,
            len(records),
        )
    )
    data = header + body
    struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))
    return bytes(data)


def simple_batch(count: int = 1, *, timestamp: int = 1_000, value_size: int = 10,
                 tag: int = 0) -> bytes:
    """``count`` records with keys, values and a header; all at ``timestamp``."""
    records = [
        Record(
            key=f"k{tag}-{i}".encode(),
            value=bytes([(tag + i) % 256]) * value_size,
            timestamp=timestamp,
            headers=(("h", b"v"),),
        )
        for i in range(count)
    ]
    return build_batch(records)


@dataclass
class DecodedBatch:
    base_offset: int
    partition_leader_epoch: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    records: list[Record]
    size: int
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1
    #: Offset delta of each record (gaps appear once compaction removed records).
    offset_deltas: list[int] = field(default_factory=list)

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def offsets(self) -> list[int]:
        return [self.base_offset + delta for delta in self.offset_deltas]


def crc_ok(batch: bytes) -> bool:
    (stored,) = struct.unpack_from(">I", batch, 17)
    length = struct.unpack_from(">i", batch, 8)[0]
    return crc32c.crc32c(batch[21 : 12 + length]) == stored


def decode_batches(data: bytes) -> list[DecodedBatch]:
    """Decode every batch in ``data`` down to its records (checks CRCs)."""
    out: list[DecodedBatch] = []
    pos = 0
    while pos < len(data):
        fields = HEADER.unpack_from(data, pos)
        (base, length, epoch, magic, crc, attrs, delta, base_ts, max_ts, pid, pe, seq,
         count) = fields
        assert magic == 2
        end = pos + 12 + length
        assert crc_ok(data[pos:end]), "bad CRC"
        records = []
        deltas = []
        rpos = pos + 61
        for _ in range(count):
            _rlen, rpos = _read_varint(data, rpos)
            rpos += 1  # attributes
            ts_delta, rpos = _read_varint(data, rpos)
            odelta, rpos = _read_varint(data, rpos)
            deltas.append(odelta)
            key, rpos = _read_bytes(data, rpos)
            value, rpos = _read_bytes(data, rpos)
            nheaders, rpos = _read_varint(data, rpos)
            headers = []
            for _ in range(nheaders):
                hkey, rpos = _read_bytes(data, rpos)
                hvalue, rpos = _read_bytes(data, rpos)
                assert hkey is not None
                headers.append((hkey.decode(), hvalue))
            records.append(Record(key, value, base_ts + ts_delta, tuple(headers)))
        assert rpos == end
        out.append(DecodedBatch(base, epoch, crc, attrs, delta, base_ts, max_ts, records,
                                end - pos, pid, pe, seq, deltas))
        pos = end
    return out


def _read_bytes(buf: bytes, pos: int) -> tuple[bytes | None, int]:
    n, pos = _read_varint(buf, pos)
    if n < 0:
        return None, pos
    return bytes(buf[pos : pos + n]), pos + n
