"""The server.properties reader follows java.util.Properties, and overrides parse key=value."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from moldau.config import ConfigError, load_properties, parse_overrides, parse_properties


def test_comments_blank_lines_and_separators() -> None:
    text = (
        "# a comment\n"
        "! another comment\n"
        "\n"
        "   \t\n"
        "a=1\n"
        "b: 2\n"
        "c 3\n"
        "d   =   4\n"
        "  e:5\n"
        "f\t\t6\n"
        "g\n"
        "h=\n"
        "i = x = y\n"
    )
    assert parse_properties(text) == {
        "a": "1", "b": "2", "c": "3", "d": "4", "e": "5", "f": "6",
        "g": "", "h": "", "i": "x = y",
    }


def test_value_keeps_trailing_whitespace_and_last_duplicate_wins() -> None:
    assert parse_properties("k=v  \nk=w \n") == {"k": "w "}


def test_line_continuation() -> None:
    text = "listeners=PLAINTEXT://a:1,\\\n    PLAINTEXT2://b:2\nnext=1\n"
    assert parse_properties(text) == {"listeners": "PLAINTEXT://a:1,PLAINTEXT2://b:2", "next": "1"}


def test_even_backslashes_do_not_continue() -> None:
    assert parse_properties("a=x\\\\\nb=y\n") == {"a": "x\\", "b": "y"}


def test_comment_line_never_continues() -> None:
    assert parse_properties("# comment \\\nk=v\n") == {"k": "v"}


def test_backslash_at_end_of_file() -> None:
    assert parse_properties("k=v\\") == {"k": "v"}


def test_escapes_in_keys_and_values() -> None:
    text = "key\\=with\\:seps\\ x=tab\\there\\nnl \\u00e9 \\q\n"
    assert parse_properties(text) == {"key=with:seps x": "tab\there\nnl é q"}


def test_malformed_unicode_escape_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="malformed"):
        parse_properties("k=\\u12\n", "server.properties")


def test_crlf_and_cr_line_endings() -> None:
    assert parse_properties("a=1\r\nb=2\rc=3") == {"a": "1", "b": "2", "c": "3"}


def test_load_properties_file(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("node.id=3\nlog.dirs=/x,/y\n", encoding="utf-8")
    assert load_properties(path) == {"node.id": "3", "log.dirs": "/x,/y"}


def test_load_properties_latin1_fallback(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_bytes(b"k=caf\xe9\n")
    assert load_properties(path) == {"k": "café"}


def test_missing_file_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="Cannot read config file"):
        load_properties(tmp_path / "nope.properties")


def test_overrides_split_at_first_equals() -> None:
    assert parse_overrides(["a=1", "b=x=y", "c="]) == {"a": "1", "b": "x=y", "c": ""}


@pytest.mark.parametrize("bad", ["novalue", "=1"])
def test_bad_override(bad: str) -> None:
    with pytest.raises(ConfigError, match="expected the form key=value"):
        parse_overrides([bad])


def _escape(text: str, *, is_key: bool) -> str:
    """Write a string so Java's Properties.load reads it back unchanged."""
    out = []
    for i, ch in enumerate(text):
        if ch in "\\=:#!":
            out.append("\\" + ch)
        elif ch == " " and (is_key or i == 0):
            out.append("\\ ")
        elif ch in "\t\n\r\f":
            out.append({"\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f"}[ch])
        elif ord(ch) > 0x7E or ord(ch) < 0x20:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return "".join(out)


_bmp_text = st.text(st.characters(max_codepoint=0xFFFF, exclude_categories=["Cs"]))


@given(st.dictionaries(_bmp_text.filter(bool), _bmp_text, max_size=8))
def test_escaped_properties_round_trip(props: dict[str, str]) -> None:
    text = "\n".join(
        f"{_escape(k, is_key=True)}={_escape(v, is_key=False)}" for k, v in props.items()
    )
    assert parse_properties(text) == props
