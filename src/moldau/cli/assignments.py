"""Parsing ``KEY=VALUE`` arguments (``--config``, ``--set``, ``--header``, ``--override``).

Kept in one place so every option rejects the same mistakes with the same one-line
message, instead of a half-parsed value reaching the broker.
"""

from __future__ import annotations

from collections.abc import Iterable

from .errors import CliError


def parse_assignment(text: str, option: str) -> tuple[str, str]:
    """Split ``KEY=VALUE`` at the first ``=``; the value may be empty, the key may not."""
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise CliError(f"invalid {option} value {text!r}: expected KEY=VALUE")
    return key, value


def parse_assignments(texts: Iterable[str], option: str) -> dict[str, str]:
    """Parse repeated ``KEY=VALUE`` options into a dict; a repeated key is a mistake."""
    result: dict[str, str] = {}
    for text in texts:
        key, value = parse_assignment(text, option)
        if key in result:
            raise CliError(f"{option} sets {key!r} more than once")
        result[key] = value
    return result


def parse_header_pairs(texts: Iterable[str], option: str) -> list[tuple[str, bytes]]:
    """Record headers keep order and may repeat a key, as Kafka allows."""
    return [
        (key, value.encode()) for key, value in (parse_assignment(t, option) for t in texts)
    ]
