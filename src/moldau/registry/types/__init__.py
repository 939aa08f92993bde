"""Schema formats: each module parses one format, prints its canonical text and checks
compatibility between two parsed schemas by that format's own rules."""

from __future__ import annotations

from .base import ParsedSchema, Reference, SchemaFormat, format_for, known_types

__all__ = ["ParsedSchema", "Reference", "SchemaFormat", "format_for", "known_types"]
