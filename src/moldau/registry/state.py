"""The registry's in-memory state, rebuilt by replaying ``_schemas`` (records.py).

A pure state machine: ``apply(key, value)`` for each record in offset order; queries
read it. The store calls both under its lock; nothing here does I/O.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from .records import SchemaVersion

log = logging.getLogger(__name__)


class RegistryState:
    def __init__(self) -> None:
        self.subjects: dict[str, dict[int, SchemaVersion]] = {}
        self.configs: dict[str | None, str] = {}
        self.modes: dict[str | None, str] = {}
        self.max_id = 0
        # id -> (schema type, schema text, references) of the first registration.
        self.by_id: dict[int, SchemaVersion] = {}

    # --- replay -------------------------------------------------------------------
    def apply(self, key: Any, value: Any) -> None:
        if not isinstance(key, dict):
            log.warning("ignoring _schemas record with key %r", key)
            return
        keytype = key.get("keytype")
        if keytype == "SCHEMA":
            self._apply_schema(key, value)
        elif keytype == "CONFIG":
            self._set(self.configs, key.get("subject"), value, "compatibilityLevel")
        elif keytype == "MODE":
            self._set(self.modes, key.get("subject"), value, "mode")
        elif keytype == "DELETE_SUBJECT" and isinstance(value, dict):
            versions = self.subjects.get(value["subject"], {})
            for number, version in list(versions.items()):
                if number <= int(value["version"]):
                    versions[number] = replace(version, deleted=True)
        elif keytype not in ("NOOP", "DELETE_SUBJECT", "CLEAR_SUBJECT"):
            log.warning("ignoring _schemas record of unknown keytype %r", keytype)

    def _apply_schema(self, key: dict[str, Any], value: Any) -> None:
        subject, number = key["subject"], int(key["version"])
        if value is None:
            versions = self.subjects.get(subject, {})
            versions.pop(number, None)
            if not versions:
                self.subjects.pop(subject, None)
            return
        version = SchemaVersion.from_value(value)
        self.subjects.setdefault(subject, {})[number] = version
        self.max_id = max(self.max_id, version.schema_id)
        self.by_id.setdefault(version.schema_id, version)

    @staticmethod
    def _set(table: dict[str | None, str], subject: str | None, value: Any, field: str) -> None:
        if value is None:
            table.pop(subject, None)
        elif isinstance(value, dict) and field in value:
            table[subject] = str(value[field])

    # --- queries ------------------------------------------------------------------
    def versions(self, subject: str, *, deleted: bool = False) -> list[SchemaVersion]:
        found = self.subjects.get(subject, {})
        return [found[n] for n in sorted(found) if deleted or not found[n].deleted]

    def subject_names(self, *, deleted: bool = False, prefix: str = "") -> list[str]:
        return sorted(
            name for name in self.subjects
            if name.startswith(prefix) and self.versions(name, deleted=deleted)
        )

    def usages(self, schema_id: int, *, deleted: bool = False) -> list[SchemaVersion]:
        return [
            version
            for subject in sorted(self.subjects)
            for version in self.versions(subject, deleted=deleted)
            if version.schema_id == schema_id
        ]

    def referenced_by(self, subject: str, number: int) -> list[int]:
        ids = {
            version.schema_id
            for versions in self.subjects.values()
            for version in versions.values()
            if not version.deleted
            and any(r.subject == subject and r.version == number for r in version.references)
        }
        return sorted(ids)
