"""The Spark source's columnar decoder against a model of what a consumer must return.

Random partitions of v2 batches (null keys and values, headers, every codec, CreateTime and
LogAppendTime, transactions that commit or abort, control batches) are decoded by
``moldau.spark.columnar`` and compared with the rows computed here from the generated
records themselves — which records a read_committed or read_uncommitted consumer sees in
an offset range — so the C decoder is checked against the data, not against itself.
"""

from __future__ import annotations

import gzip
import struct
from dataclasses import dataclass
from datetime import UTC, datetime

import cramjam
import crc32c
import lz4.frame
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from moldau.log.errors import LogError
from moldau.spark import columnar, fetch
from moldau.spark.columnar import AbortedTransaction, decode_fetched
from moldau.spark.fetch import arrow_schema
from moldau.spark.options import OptionError, SourceOptions, parse_source_options
from moldau.spark.raw_fetch import parse_bootstrap
from moldau.spark.schema import source_schema
from tests.helpers.logs import lines_of

from ..helpers.bombs import zstd
from .batchgen import Record, build_batch

pytestmark = pytest.mark.skipif(not columnar.AVAILABLE, reason="C decoder not built")

TOPIC, PARTITION = "t", 3
SCHEMAS = {h: arrow_schema(source_schema(h)) for h in (False, True)}
_BATCH_LENGTH = struct.Struct(">i")


def compress(codec: int, data: bytes) -> bytes:
    """The records section as producers write it, with libraries other than the decoder's."""
    if codec == 1:
        return gzip.compress(data)
    if codec == 2:
        return bytes(cramjam.snappy.compress_raw(data))
    if codec == 3:
        return lz4.frame.compress(data)
    if codec == 4:
        return zstd.compress(data)
    return data


def with_codec(batch: bytes, codec: int) -> bytes:
    """``batch`` (uncompressed, from batchgen) with its records section compressed."""
    if codec == 0:
        return batch
    body = compress(codec, batch[61:])
    out = bytearray(batch[:61]) + body
    _BATCH_LENGTH.pack_into(out, 8, 49 + len(body))
    out[22] |= codec  # attributes low byte: compression bits
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[21:])))
    return bytes(out)


def control_batch(offset: int, producer_id: int, commit: bool) -> bytes:
    key = struct.pack(">hh", 0, 1 if commit else 0)
    value = struct.pack(">hi", 0, 0)
    return build_batch([Record(key, value, 5)], base_offset=offset, producer_id=producer_id,
                       producer_epoch=0, transactional=True, control=True)


@dataclass
class Log:
    """A partition's batches plus what a consumer should make of them."""

    data: bytes
    #: (offset, record, timestamp type, timestamp, aborted?)
    rows: list[tuple[int, Record, int, int, bool]]
    #: Aborted transactions with the offset of their abort marker.
    aborted: list[tuple[AbortedTransaction, int]]
    end: int


records_st = st.builds(
    Record,
    key=st.none() | st.binary(max_size=12),
    value=st.none() | st.binary(max_size=40),
    timestamp=st.integers(0, 2**41),
    headers=st.lists(st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=6)),
                     max_size=3).map(tuple),
)

# One step of the partition's history: a plain batch, a batch in producer p's transaction,
# or the end (commit/abort marker) of p's transaction.
step_st = st.one_of(
    st.tuples(st.just("plain"), st.lists(records_st, min_size=1, max_size=6),
              st.integers(0, 4), st.booleans()),
    st.tuples(st.just("txn"), st.lists(records_st, min_size=1, max_size=6),
              st.integers(0, 4), st.integers(1, 3)),
    st.tuples(st.just("end"), st.integers(1, 3), st.booleans()),
)


def build_log(steps: list) -> Log:
    parts: list[bytes] = []
    rows: list[tuple[int, Record, int, int, bool]] = []
    aborted: list[tuple[AbortedTransaction, int]] = []
    open_txns: dict[int, tuple[int, list[int]]] = {}  # pid -> (first offset, row indexes)
    offset = 0
    for step in steps:
        if step[0] == "end":
            _, pid, commit = step
            if pid not in open_txns:
                continue
            first, indexes = open_txns.pop(pid)
            if not commit:
                aborted.append((AbortedTransaction(pid, first), offset))
                for i in indexes:
                    rows[i] = (*rows[i][:4], True)
            parts.append(control_batch(offset, pid, commit))
            offset += 1
            continue
        kind, records, codec, extra = step
        pid = extra if kind == "txn" else -1
        log_append = kind == "plain" and bool(extra)
        batch = build_batch(records, base_offset=offset, producer_id=pid,
                            producer_epoch=0 if pid >= 0 else -1,
                            transactional=kind == "txn", log_append_time=log_append)
        parts.append(with_codec(batch, codec))
        max_ts = max(r.timestamp for r in records)
        for r in records:
            if kind == "txn":
                open_txns.setdefault(pid, (offset, []))[1].append(len(rows))
            rows.append((offset, r, 1 if log_append else 0,
                         max_ts if log_append else r.timestamp, False))
            offset += 1
    return Log(b"".join(parts), rows, aborted, offset)


def expected(log: Log, start: int, until: int, committed: bool, headers: bool) -> list[dict]:
    out = []
    for offset, record, ts_type, ts, is_aborted in log.rows:
        if not start <= offset < until or (committed and is_aborted):
            continue
        row = {
            "key": record.key, "value": record.value, "topic": TOPIC, "partition": PARTITION,
            "offset": offset, "timestamp": datetime.fromtimestamp(ts / 1000, UTC),
            "timestampType": ts_type,
        }
        if headers:
            row["headers"] = ([{"key": k, "value": v} for k, v in record.headers]
                              if record.headers else None)
        out.append(row)
    return out


def overlapping(log: Log, position: int) -> list[AbortedTransaction]:
    """What a broker lists in a read_committed response: the aborted transactions not
    ended before the fetch position (Kafka's transaction index lookup)."""
    return [txn for txn, marker in log.aborted if marker >= position]


def decode_all(log: Log, start: int, until: int, committed: bool, headers: bool,
               cut: int | None = None) -> list[dict]:
    """Decode as the fetcher does: fetch after fetch from where the last one ended."""
    rows: list[dict] = []
    position = start
    for _ in range(1000):
        if position >= until:
            break
        data = log.data
        # Fetch responses start at the batch holding ``position``; ``cut`` truncates each.
        begin = 0
        while begin < len(data):
            (base,) = struct.unpack_from(">q", data, begin)
            length = _BATCH_LENGTH.unpack_from(data, begin + 8)[0]
            if base + struct.unpack_from(">i", data, begin + 23)[0] >= position:
                break
            begin += 12 + length
        chunk = data[begin:] if cut is None else data[begin:begin + cut]
        if not chunk:
            break
        decoded = decode_fetched(chunk, position, until, topic=TOPIC, partition=PARTITION,
                                 schema=SCHEMAS[headers], include_headers=headers,
                                 aborted=overlapping(log, position) if committed else None)
        if decoded.batch is not None:
            assert decoded.batch.schema == SCHEMAS[headers]
            rows.extend(decoded.batch.to_pylist())
        if decoded.next_offset == position:
            cut = None if cut is None else cut * 2  # a batch larger than the cut: grow
            continue
        position = decoded.next_offset
    return rows


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(step_st, min_size=1, max_size=12), data=st.data(),
       committed=st.booleans(), headers=st.booleans())
def test_columnar_rows_match_the_records(steps: list, data: st.DataObject, committed: bool,
                                         headers: bool) -> None:
    log = build_log(steps)
    start = data.draw(st.integers(0, log.end))
    until = data.draw(st.integers(start, log.end + 1))
    cut = data.draw(st.none() | st.integers(61, 400))
    got = decode_all(log, start, until, committed, headers, cut)
    assert got == expected(log, start, until, committed, headers)


def test_a_truncated_last_batch_is_left_for_the_next_fetch() -> None:
    log = build_log([("plain", [Record(b"k", b"v" * 30, 1)] * 3, 0, False)] * 2)
    first = len(log.data) // 2 + 10
    decoded = decode_fetched(log.data[:first], 0, 6, topic=TOPIC, partition=PARTITION,
                             schema=SCHEMAS[False], include_headers=False, aborted=None)
    assert decoded.next_offset == 3
    assert decoded.batch is not None and decoded.batch.num_rows == 3


def test_nothing_decodable_keeps_the_position() -> None:
    log = build_log([("plain", [Record(b"k", b"v", 1)], 0, False)])
    decoded = decode_fetched(log.data[:40], 0, 1, topic=TOPIC, partition=PARTITION,
                             schema=SCHEMAS[False], include_headers=False, aborted=None)
    assert decoded == columnar.Decoded(None, 0)


def test_old_message_formats_are_refused_with_the_option_to_use() -> None:
    log = bytearray(build_log([("plain", [Record(b"k", b"v", 1)], 0, False)]).data)
    log[16] = 1
    with pytest.raises(columnar.UnsupportedRecordsError, match=r"moldau\.decoder"):
        decode_fetched(bytes(log), 0, 1, topic=TOPIC, partition=PARTITION,
                       schema=SCHEMAS[False], include_headers=False, aborted=None)


@pytest.mark.parametrize("damage", ["length", "varint", "field"])
def test_malformed_records_raise_value_error(damage: str) -> None:
    batch = bytearray(build_batch([Record(b"key", b"value", 1)]))
    if damage == "length":
        batch[61] = 0x7E  # record length far past the batch
    elif damage == "varint":
        batch[63:74] = b"\xff" * 11  # a timestamp delta varint longer than 10 bytes
    else:
        batch[65] = 0x7E  # key length past the record
    with pytest.raises(ValueError):
        decode_fetched(bytes(batch), 0, 1, topic=TOPIC, partition=PARTITION,
                       schema=SCHEMAS[False], include_headers=False, aborted=None)


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_a_producer_commits_after_an_abort(codec: int) -> None:
    """The abort marker ends the producer's aborted transaction; its next one is read."""
    a, b, c = (Record(x, x, 7, (("h", x),)) for x in (b"a", b"b", b"c"))
    log = build_log([("txn", [a], codec, 1), ("plain", [b], codec, False), ("end", 1, False),
                     ("txn", [c], codec, 1), ("end", 1, True)])
    rows = decode_all(log, 0, log.end, committed=True, headers=True)
    assert [r["value"] for r in rows] == [b"b", b"c"]
    assert rows == expected(log, 0, log.end, committed=True, headers=True)
    uncommitted = decode_all(log, 0, log.end, committed=False, headers=False)
    assert [r["value"] for r in uncommitted] == [b"a", b"b", b"c"]


def _options(**extra: str) -> SourceOptions:
    return parse_source_options({"kafka.bootstrap.servers": "127.0.0.1:1", "subscribe": "t",
                                 **extra}, streaming=False)


def test_the_decoder_option_picks_the_path() -> None:
    assert _options().decoder == "columnar" and fetch.columnar_usable(_options())
    assert not fetch.columnar_usable(_options(**{"moldau.decoder": "rows"}))
    with pytest.raises(OptionError, match=r"'moldau\.decoder' must be 'columnar' or 'rows'"):
        _options(**{"moldau.decoder": "fast"})


def test_non_plaintext_connections_read_rows_and_say_why(
        caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fetch, "_fallback_logged", False)
    sasl = _options(**{"kafka.security.protocol": "SASL_SSL"})
    with caplog.at_level("WARNING", logger="moldau.spark.fetch"):
        assert not fetch.columnar_usable(sasl)
        assert not fetch.columnar_usable(sasl)
    assert lines_of(caplog, "moldau.spark.fetch") == [
        "moldau source: reading through the row path: it speaks plaintext only, not "
        "security.protocol sasl_ssl"]


def test_bootstrap_addresses() -> None:
    assert parse_bootstrap("a:1, [::1]:2,,b.example:3") == [("a", 1), ("::1", 2),
                                                             ("b.example", 3)]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(step_st, min_size=1, max_size=5), data=st.data(),
       headers=st.booleans())
def test_damaged_data_fails_cleanly(steps: list, data: st.DataObject, headers: bool) -> None:
    """Bytes off the network go through C: damage must give an error, never a crash."""
    log = build_log(steps)
    assume(log.data)
    damaged = bytearray(log.data)
    for _ in range(data.draw(st.integers(1, 8))):
        damaged[data.draw(st.integers(0, len(damaged) - 1))] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(damaged)))
    try:
        decoded = decode_fetched(bytes(damaged[:cut]), 0, log.end + 5, topic=TOPIC,
                                 partition=PARTITION, schema=SCHEMAS[headers],
                                 include_headers=headers,
                                 aborted=[txn for txn, _ in log.aborted])
    except (ValueError, LogError, OverflowError, MemoryError):
        return
    if decoded.batch is not None:
        decoded.batch.validate(full=True)


def test_header_keys_that_are_not_utf8_read_as_replacement_characters() -> None:
    batch = build_batch([Record(b"k", b"v", 1, (("ok", b"1"),))])
    damaged = batch.replace(b"ok", b"o\xff")
    decoded = decode_fetched(damaged, 0, 1, topic=TOPIC, partition=PARTITION,
                             schema=SCHEMAS[True], include_headers=True, aborted=None)
    assert decoded.batch is not None
    assert decoded.batch.column("headers").to_pylist() == [[{"key": "o\ufffd", "value": b"1"}]]
