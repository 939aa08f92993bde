"""The CLI's parsing and formatting, without a broker."""

from __future__ import annotations

import io
import json
from typing import cast

import pytest
from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Message

from moldau.cli.assignments import parse_assignment, parse_assignments, parse_header_pairs
from moldau.cli.connection import Connection
from moldau.cli.consume import start_offset
from moldau.cli.errors import CliError
from moldau.cli.produce import split_lines


def test_assignment_splits_at_first_equals() -> None:
    assert parse_assignment("a.b=c=d", "--config") == ("a.b", "c=d")
    assert parse_assignment("empty=", "--config") == ("empty", "")


@pytest.mark.parametrize("text", ["novalue", "=value", " =x", ""])
def test_bad_assignment(text: str) -> None:
    with pytest.raises(CliError, match="expected KEY=VALUE"):
        parse_assignment(text, "--config")


def test_repeated_key_is_a_mistake() -> None:
    with pytest.raises(CliError, match="more than once"):
        parse_assignments(["a=1", "a=2"], "--set")


def test_headers_keep_order_and_repeats() -> None:
    assert parse_header_pairs(["a=1", "b=2", "a=3"], "--header") == [
        ("a", b"1"), ("b", b"2"), ("a", b"3")
    ]


def test_split_lines_plain_and_crlf() -> None:
    stream = io.BytesIO(b"one\r\ntwo\n\nlast-without-newline")
    values = [(key, value) for _, key, value, _ in split_lines(stream, None)]
    assert values == [(None, b"one"), (None, b"two"), (None, b""), (None, b"last-without-newline")]


def test_split_lines_with_key_separator() -> None:
    stream = io.BytesIO(b"k:v:w\n:empty-key\n")
    rows = list(split_lines(stream, b":"))
    assert [(n, k, v) for n, k, v, _ in rows] == [(1, b"k", b"v:w"), (2, b"", b"empty-key")]
    assert sum(size for *_, size in rows) == len(stream.getvalue())


def test_split_lines_reports_missing_separator() -> None:
    with pytest.raises(CliError, match="line 2"):
        list(split_lines(io.BytesIO(b"a:1\nb\n"), b":"))


def test_start_offsets() -> None:
    assert start_offset(None, False, None) == OFFSET_END
    assert start_offset(None, True, None) == OFFSET_BEGINNING
    assert start_offset("earliest", False, None) == OFFSET_BEGINNING
    assert start_offset("latest", False, 0) == OFFSET_END
    assert start_offset("17", False, 0) == 17
    with pytest.raises(CliError, match="--partition"):
        start_offset("17", False, None)
    with pytest.raises(CliError, match="not both"):
        start_offset("earliest", True, None)
    with pytest.raises(CliError, match="-3"):
        start_offset("-3", False, 0)


def test_bootstrap_addresses() -> None:
    conn = Connection("127.0.0.1:9092, PLAINTEXT://host:1,[::1]:9093", 1.0)
    assert conn.addresses() == [("127.0.0.1", 9092), ("host", 1), ("::1", 9093)]
    for bad in ("nohost", "host:", ":9092", "host:port"):
        with pytest.raises(CliError, match="HOST:PORT"):
            Connection(bad, 1.0).addresses()


class FakeMessage:
    """Just the accessors the formatters call, shaped like confluent_kafka.Message."""

    def __init__(self, key: bytes | None, value: bytes | None, headers: object = None) -> None:
        self._key, self._value, self._headers = key, value, headers

    def topic(self) -> str:
        return "t"

    def partition(self) -> int:
        return 2

    def offset(self) -> int:
        return 7

    def timestamp(self) -> tuple[int, int]:
        return (1, 1_700_000_000_000)

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes | None:
        return self._value

    def headers(self) -> object:
        return self._headers


def fake(key: bytes | None, value: bytes | None, headers: object = None) -> Message:
    """A FakeMessage typed as the real thing for the formatters."""
    return cast(Message, FakeMessage(key, value, headers))


def test_text_format_order_matches_kafka_console_consumer() -> None:
    from moldau.cli.records import TextFormat

    fmt = TextFormat(b"\t", key=True, timestamp=True, headers=True, partition=True, offset=True)
    line = fmt.render(fake(b"k", b"\xff\x00v", [("h", b"1"), ("h", None)]))
    assert line == b"CreateTime:1700000000000\tPartition:2\tOffset:7\th:1,h:null\tk\t\xff\x00v\n"
    assert TextFormat().render(fake(None, None)) == b"null\n"
    assert TextFormat(headers=True).render(fake(None, b"v")) == b"NO_HEADERS\tv\n"


def test_json_format_decodes_utf8_with_replacement() -> None:
    from moldau.cli.records import render_json

    message = fake(None, "grüße".encode() + b"\xff", [("h", b"x")])
    record = json.loads(render_json(message))
    assert record == {
        "topic": "t", "partition": 2, "offset": 7, "timestamp": 1_700_000_000_000,
        "timestampType": "CreateTime", "key": None, "value": "grüße\ufffd",
        "headers": [{"key": "h", "value": "x"}],
    }


def test_console_consumer_properties() -> None:
    from moldau.cli.kafka_compat import parse_properties

    props = parse_properties(["print.key=true", "print.offset=TRUE", "print.value=false",
                              "key.separator= | "], consumer=True)
    assert (props.print_key, props.print_offset, props.print_value) == (True, True, False)
    assert props.print_partition is None
    assert props.key_separator == " | "


@pytest.mark.parametrize(("texts", "consumer", "message"), [
    (["print.key=maybe"], True, "expected true or false"),
    (["parse.key=true"], True, "unsupported --property 'parse.key'"),
    (["print.key=true"], False, "unsupported --property 'print.key' for moldau produce"),
    (["key.separator="], False, "must not be empty"),
    (["print.key"], True, "expected KEY=VALUE"),
])
def test_bad_console_properties(texts: list[str], consumer: bool, message: str) -> None:
    from moldau.cli.kafka_compat import parse_properties

    with pytest.raises(CliError, match=message):
        parse_properties(texts, consumer=consumer)


def test_topic_argument_or_option() -> None:
    from moldau.cli.kafka_compat import hint_for, resolve_topic

    assert resolve_topic("a", None) == "a"
    assert resolve_topic(None, "a") == "a"
    assert resolve_topic("a", "a") == "a"
    assert resolve_topic(None, None, required=False) is None
    with pytest.raises(CliError, match="two topics"):
        resolve_topic("a", "b")
    with pytest.raises(CliError, match="give a topic"):
        resolve_topic(None, None)
    assert hint_for("--zookeeper=x:2181") is not None
    assert hint_for("--no-such-flag") is None


@pytest.mark.parametrize("width", [20, 40, 80, 250])
def test_tables_never_cut_a_value(width: int) -> None:
    from rich.console import Console

    from moldau.cli.output import print_table, table

    rows = table("Topic", "Partition", "End", title="Offsets")
    rows.add_row("a-rather-long-topic-name-that-fills-half-a-line", "0", "55")
    rows.add_row("demo", "12", "[red]7")
    out = io.StringIO()
    print_table(Console(file=out, width=width, no_color=True, highlight=False), rows)
    words = out.getvalue().split()
    for value in ("a-rather-long-topic-name-that-fills-half-a-line", "55", "demo", "12",
                  "[red]7", "Offsets"):
        assert value in words, out.getvalue()
    vertical = "End:" in words
    assert vertical == (width < 70), out.getvalue()
