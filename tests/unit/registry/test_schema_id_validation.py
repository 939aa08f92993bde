"""The broker's schema-id check (broker/schema_validation.py) on real v2 batches; the
registry lookups themselves are covered end to end in
tests/integration/test_registry_broker_validation.py."""

from __future__ import annotations

import asyncio
import struct

from moldau.broker.schema_validation import SchemaIdValidator
from moldau.log.records import key_value_heads
from tests.unit.batchgen import Record, build_batch


def framed(schema_id: int, payload: bytes = b"x") -> bytes:
    return b"\x00" + struct.pack(">I", schema_id) + payload


def test_key_value_heads_cut_to_width() -> None:
    batch = build_batch([Record(b"key-1", framed(7, b"long payload"), 1),
                         Record(None, None, 2), Record(b"", b"ab", 3)])
    assert key_value_heads(batch, 5) == [(b"key-1", framed(7)[:5]), (None, None), (b"", b"ab")]


def test_known_ids_pass_and_others_are_named_by_index() -> None:
    validator = SchemaIdValidator([])
    validator._known.add(7)
    batch = build_batch([Record(None, framed(7), 1), Record(None, b"plain", 2),
                         Record(None, framed(8), 3), Record(None, None, 4),
                         Record(None, b"\x00\x00", 5)])
    errors = dict(asyncio.run(validator.invalid_records(batch, keys=False, values=True)))
    assert sorted(errors) == [1, 2, 3, 4]
    assert "does not start with a schema id" in errors[1]
    # Without a registry URL an unknown id cannot be checked, and says so.
    assert "confluent.schema.registry.url is not set" in errors[2]


def test_keys_are_checked_only_when_asked() -> None:
    validator = SchemaIdValidator([])
    validator._known.add(7)
    batch = build_batch([Record(b"plain key", framed(7), 1)])
    assert asyncio.run(validator.invalid_records(batch, keys=False, values=True)) == []
    errors = asyncio.run(validator.invalid_records(batch, keys=True, values=True))
    assert [index for index, _ in errors] == [0] and "key" in errors[0][1]
