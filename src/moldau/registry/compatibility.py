"""Compatibility levels: which earlier versions a new schema is checked against, and in
which direction (Confluent's semantics).

- BACKWARD: the new schema can read data written with the latest version.
- FORWARD: the latest version can read data written with the new schema.
- FULL: both. ``*_TRANSITIVE``: the same against every live version, not only the latest.
- NONE: no check.
"""

from __future__ import annotations

from . import errors
from .types import ParsedSchema, format_for

LEVELS = (
    "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE",
    "FULL", "FULL_TRANSITIVE", "NONE",
)
DEFAULT_LEVEL = "BACKWARD"


def validate_level(level: object) -> str:
    if not isinstance(level, str) or level.upper() not in LEVELS:
        raise errors.RegistryError(
            422, errors.INVALID_COMPATIBILITY_LEVEL,
            "Invalid compatibility level. Valid values are none, backward, forward, full, "
            "backward_transitive, forward_transitive, and full_transitive",
        )
    return level.upper()


def check(
    level: str, new: ParsedSchema, existing: list[tuple[int, ParsedSchema]]
) -> list[str]:
    """Messages for each way ``new`` breaks ``level`` against ``existing`` (oldest first,
    as (version, schema)); empty when compatible."""
    if level == "NONE" or not existing:
        return []
    against = existing if level.endswith("_TRANSITIVE") else existing[-1:]
    base = level.removesuffix("_TRANSITIVE")
    messages: list[str] = []
    for version, old in reversed(against):
        if old.schema_type != new.schema_type:
            messages.append(
                f"Incompatible because of different schema type {{oldSchemaVersion: {version}}}"
            )
            continue
        schema_format = format_for(new.schema_type)
        assert schema_format is not None
        problems: list[str] = []
        if base in ("BACKWARD", "FULL"):
            problems += schema_format.incompatibilities(reader=new, writer=old)
        if base in ("FORWARD", "FULL"):
            problems += schema_format.incompatibilities(reader=old, writer=new)
        if problems:
            messages += problems
            messages.append(f"{{oldSchemaVersion: {version}}}")
            messages.append(f"{{oldSchema: '{old.canonical}'}}")
    if messages:
        messages.append(f"{{compatibility: '{level}'}}")
    return messages
