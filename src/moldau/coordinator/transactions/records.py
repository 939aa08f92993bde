"""Keys and values of ``__transaction_state`` records, in Kafka's own schemas.

Key (TransactionLogKey v0): ``version int16 = 0, transactional_id string``.
Value (TransactionLogValue): ``version int16``, then producer id int64, producer epoch int16,
timeout int32, status int8, partitions (nullable array of topic string + int32 array), last
update int64, start int64. Version 1 is flexible (compact lengths, tagged fields): tags 0
PreviousProducerId, 1 NextProducerId (int64, default -1) and 2 ClientTransactionVersion
(int16, default 0). A null value is a tombstone: the transactional id expired.

Written as Kafka does: v0 for transactions version 1, v1 (with the tagged fields) for
transactions version 2. Reading accepts both. kio does not ship these internal schemas.
"""

from __future__ import annotations

import struct

from ..records import RecordFormatError
from .state import NO_PRODUCER_ID, TxnSnapshot, TxnState

KEY_VERSION = 0
_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")

_TAG_PREVIOUS_ID = 0
_TAG_NEXT_ID = 1
_TAG_CLIENT_VERSION = 2

__all__ = ["RecordFormatError", "decode_key", "decode_value", "encode_key", "encode_value"]


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def encode_key(transactional_id: str) -> bytes:
    data = transactional_id.encode("utf-8")
    if len(data) > 0x7FFF:
        raise RecordFormatError(f"transactional id of {len(data)} bytes is too long")
    return _I16.pack(KEY_VERSION) + _I16.pack(len(data)) + data


def decode_key(data: bytes) -> str | None:
    """The transactional id of a key; None for a key version this broker does not know."""
    reader = _Reader(bytes(data), flexible_from=1 << 15)
    if reader.version != KEY_VERSION:
        return None
    return reader.string()


def encode_value(snapshot: TxnSnapshot) -> bytes:
    version = 1 if snapshot.client_version >= 2 else 0
    flexible = version >= 1
    out = bytearray(_I16.pack(version))
    out += _I64.pack(snapshot.producer_id)
    out += _I16.pack(snapshot.producer_epoch)
    out += _I32.pack(snapshot.timeout_ms)
    out += _I8.pack(int(snapshot.state))
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(snapshot.partitions):
        by_topic.setdefault(topic, []).append(partition)
    out += _uvarint(len(by_topic) + 1) if flexible else _I32.pack(len(by_topic))
    for topic, partitions in by_topic.items():
        name = topic.encode("utf-8")
        out += _uvarint(len(name) + 1) + name if flexible else _I16.pack(len(name)) + name
        out += _uvarint(len(partitions) + 1) if flexible else _I32.pack(len(partitions))
        for partition in partitions:
            out += _I32.pack(partition)
        if flexible:
            out += b"\x00"  # the partition entry's tagged fields
    out += _I64.pack(snapshot.last_update_ms)
    out += _I64.pack(snapshot.start_ms)
    if flexible:
        tags: list[tuple[int, bytes]] = []
        if snapshot.previous_producer_id != NO_PRODUCER_ID:
            tags.append((_TAG_PREVIOUS_ID, _I64.pack(snapshot.previous_producer_id)))
        if snapshot.next_producer_id != NO_PRODUCER_ID:
            tags.append((_TAG_NEXT_ID, _I64.pack(snapshot.next_producer_id)))
        if snapshot.client_version:
            tags.append((_TAG_CLIENT_VERSION, _I16.pack(snapshot.client_version)))
        out += _uvarint(len(tags))
        for tag, payload in tags:
            out += _uvarint(tag) + _uvarint(len(payload)) + payload
    return bytes(out)


def decode_value(data: bytes) -> TxnSnapshot:
    reader = _Reader(bytes(data), flexible_from=1)
    if reader.version > 1:
        raise RecordFormatError(f"unknown TransactionLogValue version {reader.version}")
    producer_id = reader.fixed(_I64)
    epoch = reader.fixed(_I16)
    timeout = reader.fixed(_I32)
    status = reader.fixed(_I8)
    try:
        state = TxnState(status)
    except ValueError:
        raise RecordFormatError(f"unknown transaction status {status}") from None
    partitions: set[tuple[str, int]] = set()
    for _ in range(reader.array_length()):
        topic = reader.string()
        for _ in range(reader.array_length()):
            partitions.add((topic, reader.fixed(_I32)))
        reader.skip_tags()
    last_update = reader.fixed(_I64)
    start = reader.fixed(_I64)
    tags = reader.tags()
    try:
        previous = _I64.unpack(tags[_TAG_PREVIOUS_ID])[0] if _TAG_PREVIOUS_ID in tags \
            else NO_PRODUCER_ID
        following = _I64.unpack(tags[_TAG_NEXT_ID])[0] if _TAG_NEXT_ID in tags \
            else NO_PRODUCER_ID
        client_version = _I16.unpack(tags[_TAG_CLIENT_VERSION])[0] \
            if _TAG_CLIENT_VERSION in tags else 0
    except struct.error as exc:
        raise RecordFormatError(f"bad tagged field: {exc}") from None
    return TxnSnapshot(producer_id=producer_id, producer_epoch=epoch, timeout_ms=timeout,
                       state=state, partitions=frozenset(partitions), last_update_ms=last_update,
                       start_ms=start, previous_producer_id=previous,
                       next_producer_id=following, client_version=client_version)


class _Reader:
    def __init__(self, data: bytes, *, flexible_from: int) -> None:
        self.data = data
        self.pos = 0
        self.version = self.fixed(_I16)
        self.flexible = self.version >= flexible_from

    def fixed(self, fmt: struct.Struct) -> int:
        if self.pos + fmt.size > len(self.data):
            raise RecordFormatError("record ends inside a field")
        (value,) = fmt.unpack_from(self.data, self.pos)
        self.pos += fmt.size
        return int(value)

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            if self.pos >= len(self.data) or shift > 28:
                raise RecordFormatError("bad unsigned varint")
            byte = self.data[self.pos]
            self.pos += 1
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7

    def take(self, size: int) -> bytes:
        if size < 0 or self.pos + size > len(self.data):
            raise RecordFormatError(f"field of {size} bytes overruns the record")
        chunk = self.data[self.pos:self.pos + size]
        self.pos += size
        return chunk

    def string(self) -> str:
        size = self.uvarint() - 1 if self.flexible else self.fixed(_I16)
        if size < 0:
            raise RecordFormatError("null where the schema wants a string")
        try:
            return self.take(size).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RecordFormatError(f"string is not UTF-8: {exc}") from None

    def array_length(self) -> int:
        size = self.uvarint() - 1 if self.flexible else self.fixed(_I32)
        return max(size, 0)

    def tags(self) -> dict[int, bytes]:
        found: dict[int, bytes] = {}
        if self.flexible:
            for _ in range(self.uvarint()):
                tag = self.uvarint()
                found[tag] = self.take(self.uvarint())
        return found

    def skip_tags(self) -> None:
        self.tags()
