"""Keys and values of ``__consumer_offsets`` records, in Kafka's own schemas.

Each record key and value starts with an int16 schema version followed by the fields of that
version (Kafka's ``OffsetCommitKey``/``OffsetCommitValue``, ``GroupMetadataKey``/
``GroupMetadataValue`` message specs). The key version says what the record is:

========  ===================  ======================================================
key ver.  record               key fields
========  ===================  ======================================================
0, 1      committed offset     group, topic, partition
2         group metadata       group
========  ===================  ======================================================

Newer Kafka versions add other record types (KIP-848 consumer groups, share groups) with
higher key versions; :func:`decode_key` returns None for those, so replay skips them.

Writing follows Kafka: offsets as value v3 (v1 when the commit carries an explicit expiry, the
only version with that field), group metadata as value v3. Reading accepts every version,
including the flexible v4 (compact strings and tagged fields) newer brokers may have written.
kio does not ship these internal schemas, so they are encoded here by hand.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
GROUP_METADATA_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION = 3
#: The only OffsetCommitValue version with expireTimestamp (commits with a retention time).
OFFSET_COMMIT_VALUE_EXPIRING_VERSION = 1
_FIRST_FLEXIBLE_VERSION = 4

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class RecordFormatError(ValueError):
    """The bytes are not a record of the schema they claim to be."""


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class OffsetCommitValue:
    offset: int
    metadata: str
    commit_timestamp: int
    leader_epoch: int = -1
    #: -1 unless the commit asked for its own retention (OffsetCommit v2-v4 retention_time).
    expire_timestamp: int = -1


@dataclass(frozen=True, slots=True)
class MemberMetadataValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    #: The member's metadata for the group's selected protocol (its subscription).
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[MemberMetadataValue, ...]


# -- writing ---------------------------------------------------------------------------------


class _Writer:
    """Non-flexible (classic) encoding: int16-length strings, int32-length bytes and arrays."""

    def __init__(self, version: int) -> None:
        self.buf = bytearray(_I16.pack(version))

    def i32(self, value: int) -> None:
        self.buf += _I32.pack(value)

    def i64(self, value: int) -> None:
        self.buf += _I64.pack(value)

    def string(self, value: str | None) -> None:
        if value is None:
            self.buf += _I16.pack(-1)
            return
        data = value.encode("utf-8")
        if len(data) > 0x7FFF:
            raise RecordFormatError(f"string of {len(data)} bytes does not fit an int16 length")
        self.buf += _I16.pack(len(data)) + data

    def bytes_(self, value: bytes) -> None:
        self.buf += _I32.pack(len(value)) + value


def encode_key(key: OffsetCommitKey | GroupMetadataKey) -> bytes:
    if isinstance(key, OffsetCommitKey):
        w = _Writer(OFFSET_COMMIT_KEY_VERSION)
        w.string(key.group)
        w.string(key.topic)
        w.i32(key.partition)
    else:
        w = _Writer(GROUP_METADATA_KEY_VERSION)
        w.string(key.group)
    return bytes(w.buf)


def encode_offset_value(value: OffsetCommitValue) -> bytes:
    if value.expire_timestamp >= 0:
        w = _Writer(OFFSET_COMMIT_VALUE_EXPIRING_VERSION)
        w.i64(value.offset)
        w.string(value.metadata)
        w.i64(value.commit_timestamp)
        w.i64(value.expire_timestamp)
    else:
        w = _Writer(OFFSET_COMMIT_VALUE_VERSION)
        w.i64(value.offset)
        w.i32(value.leader_epoch)
        w.string(value.metadata)
        w.i64(value.commit_timestamp)
    return bytes(w.buf)


def encode_group_value(value: GroupMetadataValue) -> bytes:
    w = _Writer(GROUP_METADATA_VALUE_VERSION)
    w.string(value.protocol_type)
    w.i32(value.generation)
    w.string(value.protocol)
    w.string(value.leader)
    w.i64(value.current_state_timestamp)
    w.i32(len(value.members))
    for m in value.members:
        w.string(m.member_id)
        w.string(m.group_instance_id)
        w.string(m.client_id)
        w.string(m.client_host)
        w.i32(m.rebalance_timeout)
        w.i32(m.session_timeout)
        w.bytes_(m.subscription)
        w.bytes_(m.assignment)
    return bytes(w.buf)


# -- reading ---------------------------------------------------------------------------------


class _Reader:
    """Reads one schema version; ``flexible`` switches to compact lengths and tagged fields."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0
        self.version = self._fixed(_I16)
        self.flexible = self.version >= _FIRST_FLEXIBLE_VERSION

    def _fixed(self, fmt: struct.Struct) -> int:
        if self.pos + fmt.size > len(self.data):
            raise RecordFormatError("record ends inside a field")
        (value,) = fmt.unpack_from(self.data, self.pos)
        self.pos += fmt.size
        return int(value)

    def i32(self) -> int:
        return self._fixed(_I32)

    def i64(self) -> int:
        return self._fixed(_I64)

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

    def _length(self, classic: struct.Struct) -> int:
        """A length prefix; -1 means null (compact lengths store length + 1)."""
        return self.uvarint() - 1 if self.flexible else self._fixed(classic)

    def _take(self, size: int) -> bytes:
        if size < 0 or self.pos + size > len(self.data):
            raise RecordFormatError(f"field of {size} bytes overruns the record")
        chunk = self.data[self.pos : self.pos + size]
        self.pos += size
        return chunk

    def nullable_string(self) -> str | None:
        size = self._length(_I16)
        return None if size == -1 else self._take(size).decode("utf-8")

    def string(self) -> str:
        value = self.nullable_string()
        if value is None:
            raise RecordFormatError("null where the schema wants a string")
        return value

    def bytes_(self) -> bytes:
        size = self._length(_I32)
        return b"" if size == -1 else self._take(size)

    def array_length(self) -> int:
        size = self._length(_I32)
        return max(size, 0)

    def tagged_fields(self) -> None:
        """Skip a tagged-field section (flexible versions only; we know no tags)."""
        if self.flexible:
            for _ in range(self.uvarint()):
                self.uvarint()
                self._take(self.uvarint())


def decode_key(data: bytes) -> OffsetCommitKey | GroupMetadataKey | None:
    """The record's key, or None for record types this broker does not keep."""
    r = _Reader(data)
    if r.version in (0, 1):
        r.flexible = False
        return OffsetCommitKey(r.string(), r.string(), r.i32())
    if r.version == GROUP_METADATA_KEY_VERSION:
        r.flexible = False
        return GroupMetadataKey(r.string())
    return None


def decode_offset_value(data: bytes) -> OffsetCommitValue:
    r = _Reader(data)
    if not 0 <= r.version <= _FIRST_FLEXIBLE_VERSION:
        raise RecordFormatError(f"unknown OffsetCommitValue version {r.version}")
    offset = r.i64()
    leader_epoch = r.i32() if r.version >= 3 else -1
    metadata = r.string()
    commit_timestamp = r.i64()
    expire_timestamp = r.i64() if r.version == 1 else -1
    r.tagged_fields()
    return OffsetCommitValue(offset, metadata, commit_timestamp, leader_epoch, expire_timestamp)


def decode_group_value(data: bytes) -> GroupMetadataValue:
    r = _Reader(data)
    version = r.version
    if not 0 <= version <= _FIRST_FLEXIBLE_VERSION:
        raise RecordFormatError(f"unknown GroupMetadataValue version {version}")
    protocol_type = r.string()
    generation = r.i32()
    protocol = r.nullable_string()
    leader = r.nullable_string()
    state_timestamp = r.i64() if version >= 2 else -1
    members = []
    for _ in range(r.array_length()):
        member_id = r.string()
        instance_id = r.nullable_string() if version >= 3 else None
        client_id = r.string()
        client_host = r.string()
        rebalance_timeout = r.i32() if version >= 1 else -1
        session_timeout = r.i32()
        subscription = r.bytes_()
        assignment = r.bytes_()
        r.tagged_fields()
        if rebalance_timeout < 0:  # v0 had one timeout for both
            rebalance_timeout = session_timeout
        members.append(MemberMetadataValue(member_id, instance_id, client_id, client_host,
                                           rebalance_timeout, session_timeout, subscription,
                                           assignment))
    r.tagged_fields()
    return GroupMetadataValue(protocol_type, generation, protocol, leader, state_timestamp,
                              tuple(members))
