"""Reader for Java ``.properties`` files (``server.properties``) and ``--override k=v`` args.

Users bring their Kafka ``server.properties`` unchanged, so the full Java syntax matters:
``#``/``!`` comments, ``key=value``/``key: value``/``key value``, backslash line continuations
and escapes (``\\t``, ``\\uXXXX``, ``\\=`` ...). No well-kept library for this is installed,
and the grammar is small, so it is written out here following ``java.util.Properties.load``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from pathlib import Path

from .definitions import ConfigError

_WHITESPACE = " \t\f"
_SEPARATORS = "=:"
_SIMPLE_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_NATURAL_LINE = re.compile(r"\r\n|\r|\n")


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """Yield (first line number, logical line) pairs, joining backslash-continued lines.

    A line continues when it ends in an odd number of backslashes; the continuation's leading
    whitespace is dropped. Comment and blank lines are skipped here, and a comment never
    continues, exactly as Java does it.
    """
    lines = _NATURAL_LINE.split(text)
    i = 0
    while i < len(lines):
        start = i
        line = lines[i].lstrip(_WHITESPACE)
        i += 1
        if not line or line[0] in "#!":
            continue
        parts = []
        while True:
            trailing = len(line) - len(line.rstrip("\\"))
            if trailing % 2 == 0 or i >= len(lines):
                if trailing % 2 == 1:
                    line = line[:-1]  # a backslash at end of file continues into nothing
                parts.append(line)
                break
            parts.append(line[:-1])
            line = lines[i].lstrip(_WHITESPACE)
            i += 1
        yield start + 1, "".join(parts)


def _unescape(text: str, where: str) -> str:
    """Resolve Java properties escapes; an unknown escape ``\\c`` stands for ``c``."""
    if "\\" not in text:
        return text
    out = []
    i = 0
    while i < len(text):
        ch = text[i]
        i += 1
        if ch != "\\" or i >= len(text):
            out.append(ch)
            continue
        ch = text[i]
        i += 1
        if ch == "u":
            digits = text[i : i + 4]
            if len(digits) != 4 or not all(c in "0123456789abcdefABCDEF" for c in digits):
                raise ConfigError(
                    "", None, message=f"{where}: malformed \\uxxxx escape in properties"
                )
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append(_SIMPLE_ESCAPES.get(ch, ch))
    return "".join(out)


def _split_key_value(line: str) -> tuple[str, str]:
    """Split a logical line at the first unescaped separator (``=``, ``:`` or whitespace)."""
    i = 0
    while i < len(line):
        ch = line[i]
        if ch == "\\":
            i += 2
            continue
        if ch in _SEPARATORS or ch in _WHITESPACE:
            break
        i += 1
    key = line[:i]
    rest = line[i:].lstrip(_WHITESPACE)
    if rest and rest[0] in _SEPARATORS:
        rest = rest[1:].lstrip(_WHITESPACE)
    return key, rest


def parse_properties(text: str, source: str = "<properties>") -> dict[str, str]:
    """Parse properties text into an ordered dict; a repeated key keeps its last value.

    Values keep trailing whitespace, as in Java; typed parsing trims later, so only string
    keys ever see it.
    """
    props: dict[str, str] = {}
    for lineno, line in _logical_lines(text):
        where = f"{source}:{lineno}"
        raw_key, raw_value = _split_key_value(line)
        props[_unescape(raw_key, where)] = _unescape(raw_value, where)
    return props


def load_properties(path: str | Path) -> dict[str, str]:
    """Read a properties file.

    Java reads these files as ISO-8859-1; moldau reads UTF-8 (a superset for the ASCII every
    real ``server.properties`` uses) and falls back to ISO-8859-1 for files that are not UTF-8.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(
            "", None, message=f"Cannot read config file {path}: {exc.strerror or exc}"
        ) from exc
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("iso-8859-1")
    return parse_properties(text, str(path))


def parse_overrides(overrides: Iterable[str]) -> dict[str, str]:
    """Parse ``key=value`` strings from ``--override``; splitting at the first ``=``.

    No escapes are processed: the shell already did the quoting, as with Kafka's own
    ``--override``.
    """
    props: dict[str, str] = {}
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(
                "", None, message=f"Invalid override '{item}': expected the form key=value"
            )
        props[key.strip()] = value
    return props
