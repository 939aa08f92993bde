"""``__consumer_offsets`` plumbing: Java hashCode partitioning, record schemas, batch writer."""

from __future__ import annotations

import dataclasses
import struct
from pathlib import Path

import pytest

from moldau.coordinator.hashing import (
    INT_MIN,
    java_string_hash,
    kafka_abs,
    partition_for,
    to_positive,
)
from moldau.coordinator.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    RecordFormatError,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_value,
    encode_key,
    encode_offset_value,
)
from moldau.log import LogConfig, PartitionLog
from moldau.log.batch import parse_batches
from moldau.log.partition_log import AppendOrigin
from moldau.log.records_reader import iter_batch_records, iter_log_records
from moldau.log.records_writer import encode_batch

from .batchgen import Record, build_batch, crc_ok, decode_batches

# -- Java's String.hashCode and Kafka's partitioning ---------------------------------------------


def _reference_hash(text: str) -> int:
    """s[0]*31^(n-1) + ... + s[n-1] in unbounded integers, then wrapped to int32."""
    units = struct.unpack(f">{len(text.encode('utf-16-be')) // 2}H", text.encode("utf-16-be"))
    total = sum(u * 31 ** (len(units) - 1 - i) for i, u in enumerate(units)) % 2**32
    return total - 2**32 if total >= 2**31 else total


@pytest.mark.parametrize(("text", "expected"), [
    ("", 0),
    ("a", 97),
    ("hello", 99162322),                 # the classic example of String.hashCode
    ("Aa", 2112), ("BB", 2112),          # the classic collision
    ("polygenelubricants", INT_MIN),     # the famous string hashing to Integer.MIN_VALUE
    ("\U0001F600", 31 * 0xD83D + 0xDE00),  # outside the BMP: two UTF-16 surrogates
    ("é", 0xE9),
])
def test_java_string_hash_known_values(text: str, expected: int) -> None:
    assert java_string_hash(text) == expected


@pytest.mark.parametrize("text", ["my-group", "console-consumer-12345", "ünïcødé-grüppe",
                                  "x" * 1000, "grp-\U0001F680-rocket"])
def test_java_string_hash_matches_the_definition(text: str) -> None:
    assert java_string_hash(text) == _reference_hash(text)


def test_kafka_abs_and_to_positive_differ_as_in_kafka() -> None:
    assert kafka_abs(-5) == 5 and kafka_abs(7) == 7
    assert kafka_abs(INT_MIN) == 0  # Math.abs would stay negative; Kafka's Utils.abs gives 0
    assert to_positive(-1) == 0x7FFFFFFF and to_positive(-5) == 0x7FFFFFFB
    assert to_positive(INT_MIN) == 0


def test_partition_for_group() -> None:
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("hello", 50) == 99162322 % 50
    assert partition_for("Aa", 50) == partition_for("BB", 50) == 2112 % 50
    # A negative hash takes its absolute value; clearing the sign bit would give 36.
    assert java_string_hash("my-group") == -1906497762
    assert partition_for("my-group", 50) == 1906497762 % 50 == 12
    assert to_positive(java_string_hash("my-group")) % 50 == 36
    assert all(0 <= partition_for(f"g{i}", 7) < 7 for i in range(100))


# -- record keys and values ----------------------------------------------------------------------


def _member(i: int, instance: str | None = None) -> MemberMetadataValue:
    return MemberMetadataValue(f"c-{i}", instance, f"client-{i}", "/127.0.0.1", 60000, 10000,
                               b"\x00\x01sub" * i, b"assign" * i)


GROUP_VALUE = GroupMetadataValue("consumer", 7, "range", "c-1", 1_700_000_000_123,
                                 (_member(1, "static-1"), _member(2)))


def test_keys_round_trip_with_kafka_versions() -> None:
    offset_key = OffsetCommitKey("grp", "orders", 3)
    raw = encode_key(offset_key)
    assert raw[:2] == b"\x00\x01"  # key version 1: a committed offset
    assert raw == b"\x00\x01" + b"\x00\x03grp" + b"\x00\x06orders" + b"\x00\x00\x00\x03"
    assert decode_key(raw) == offset_key
    group_key = GroupMetadataKey("grp")
    assert encode_key(group_key) == b"\x00\x02\x00\x03grp"
    assert decode_key(encode_key(group_key)) == group_key
    # Version 0 keys (old brokers) are offsets too; versions above 2 are other record types.
    assert decode_key(b"\x00\x00" + raw[2:]) == offset_key
    assert decode_key(b"\x00\x03\x00\x03grp") is None


def test_offset_values_round_trip() -> None:
    value = OffsetCommitValue(42, "meta", 1_700_000_000_000, leader_epoch=5)
    raw = encode_offset_value(value)
    assert raw[:2] == b"\x00\x03"
    assert decode_offset_value(raw) == value
    expiring = OffsetCommitValue(42, "", 1000, expire_timestamp=5000)
    raw = encode_offset_value(expiring)
    assert raw[:2] == b"\x00\x01"  # the only version with expireTimestamp
    assert decode_offset_value(raw) == dataclasses.replace(expiring, leader_epoch=-1)


def test_offset_value_old_and_flexible_versions() -> None:
    v0 = b"\x00\x00" + struct.pack(">q", 9) + b"\x00\x02md" + struct.pack(">q", 77)
    assert decode_offset_value(v0) == OffsetCommitValue(9, "md", 77)
    # v4 is flexible: compact string (length + 1 as unsigned varint) and a tagged-field section.
    v4 = (b"\x00\x04" + struct.pack(">q", 9) + struct.pack(">i", 3) + b"\x03md"
          + struct.pack(">q", 77) + b"\x01\x05\x02hi")
    assert decode_offset_value(v4) == OffsetCommitValue(9, "md", 77, leader_epoch=3)


def test_group_values_round_trip() -> None:
    raw = encode_group_value(GROUP_VALUE)
    assert raw[:2] == b"\x00\x03"
    assert decode_group_value(raw) == GROUP_VALUE
    empty = GroupMetadataValue("consumer", 8, None, None, 5, ())
    assert decode_group_value(encode_group_value(empty)) == empty


def test_group_value_version_0_has_one_timeout() -> None:
    def s(text: str) -> bytes:
        return struct.pack(">h", len(text)) + text.encode()

    raw = (b"\x00\x00" + s("consumer") + struct.pack(">i", 2) + s("range") + s("m")
           + struct.pack(">i", 1) + s("m") + s("cid") + s("/h") + struct.pack(">i", 30000)
           + struct.pack(">i", 3) + b"sub" + struct.pack(">i", 1) + b"a")
    value = decode_group_value(raw)
    assert value.current_state_timestamp == -1
    assert value.members == (MemberMetadataValue("m", None, "cid", "/h", 30000, 30000, b"sub",
                                                 b"a"),)


def test_bad_record_bytes_raise() -> None:
    with pytest.raises(RecordFormatError):
        decode_group_value(encode_group_value(GROUP_VALUE)[:-3])
    with pytest.raises(RecordFormatError):
        decode_offset_value(b"\x00\x09" + b"\x00" * 30)


# -- the broker's own record batches -------------------------------------------------------------


def test_encode_batch_is_a_valid_kafka_batch() -> None:
    data = encode_batch([(b"k1", b"v1"), (b"k2", None)], 1234)
    (header,) = parse_batches(data)
    assert (header.records_count, header.compression, header.producer_id) == (2, 0, -1)
    assert crc_ok(data)
    (decoded,) = decode_batches(data)
    assert decoded.records == [Record(b"k1", b"v1", 1234), Record(b"k2", None, 1234)]
    with pytest.raises(ValueError):
        encode_batch([], 0)


def test_reader_takes_offsets_from_deltas() -> None:
    batch = build_batch([Record(b"a", b"1", 10), Record(b"b", None, 12)], base_offset=100,
                        offset_deltas=[0, 5])
    assert [(r.offset, r.timestamp, r.key, r.value) for r in iter_batch_records(batch)] == [
        (100, 10, b"a", b"1"), (105, 12, b"b", None)]
    control = build_batch([Record(b"\x00\x00\x00\x00", b"x", 1)], control=True)
    assert list(iter_batch_records(control)) == []


def test_coordinator_append_and_replay_through_a_partition_log(tmp_path: Path) -> None:
    plog = PartitionLog.open(tmp_path / "__consumer_offsets-7", LogConfig(), 0, True, 0)
    for i in range(5):
        plog.append(encode_batch([(b"k%d" % i, b"v%d" % i), (b"k%d" % i, None)], 1000 + i),
                    leader_epoch=3, now_ms=2000, origin=AppendOrigin.COORDINATOR)
    records = list(iter_log_records(plog))
    assert [r.offset for r in records] == list(range(10))
    assert [(r.key, r.value) for r in records[:2]] == [(b"k0", b"v0"), (b"k0", None)]
    assert [r.offset for r in iter_log_records(plog, start=7)] == [7, 8, 9]
    plog.close()
