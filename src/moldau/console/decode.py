"""How the message browser shows keys, values and headers: UTF-8, JSON or hex.

``auto`` picks JSON when the bytes parse as a JSON object or array, else UTF-8 when they
decode strictly, else hex, so a binary payload never turns into replacement characters
that look like data.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

FORMATS = ("auto", "utf8", "json", "hex")


@dataclass(frozen=True)
class Decoded:
    text: str
    kind: str  # "json", "utf8", "hex", "null" or "error: ..."


def _hex(data: bytes) -> Decoded:
    return Decoded(data.hex(" "), "hex")


def decode(data: bytes | str | None, how: str = "auto") -> Decoded:
    """Render ``data`` as asked; a value that is not what was asked for says so."""
    if data is None:
        return Decoded("null", "null")
    raw = data.encode() if isinstance(data, str) else data
    if how == "hex":
        return _hex(raw)
    if how in ("auto", "json"):
        try:
            parsed = json.loads(raw)
        except (UnicodeDecodeError, ValueError):
            if how == "json":
                return Decoded(raw.decode("utf-8", errors="replace"), "error: not JSON")
        else:
            if how == "json" or isinstance(parsed, dict | list):
                return Decoded(json.dumps(parsed, indent=2, ensure_ascii=False), "json")
    try:
        return Decoded(raw.decode("utf-8"), "utf8")
    except UnicodeDecodeError:
        if how == "utf8":
            return Decoded(raw.decode("utf-8", errors="replace"), "error: not UTF-8")
        return _hex(raw)
