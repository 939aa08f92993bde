"""What the registry does, independent of HTTP: registration, lookups, deletes, configs
and modes over the replayed state, with Confluent's errors.

Reads run on any registry process. Writes run on the primary only (the HTTP layer
forwards them there): under one lock the primary catches up with ``_schemas``, decides
(next id, next version, compatibility) and writes, so two writes never pick one id.
"""

from __future__ import annotations

import functools
import threading
from typing import Any

from . import compatibility, errors, records
from .records import SchemaVersion
from .store import KafkaStore
from .types import ParsedSchema, Reference, format_for, known_types
from .types.base import InvalidSchemaError

MODES = ("READWRITE", "READONLY", "IMPORT")
MAX_VERSION = 2**31 - 1


def parse_bool(value: str | None, default: bool = False) -> bool:
    """Query flags as clients send them: ``true``, ``True`` (Python clients), ``1``."""
    if value is None:
        return default
    return value.strip().lower() in ("true", "1", "yes")


class Registry:
    def __init__(self, store: KafkaStore) -> None:
        self.store = store
        self._write_lock = threading.Lock()
        self._ids_by_key: dict[tuple[str, str | bytes, tuple[Reference, ...]], int] = {}
        self._indexed_ids: set[int] = set()

    # --- parsing ------------------------------------------------------------------
    @functools.lru_cache(maxsize=4096)  # noqa: B019 - one Registry per process
    def _parse_cached(
        self, schema_type: str, text: str, references: tuple[Reference, ...], normalize: bool
    ) -> ParsedSchema:
        schema_format = format_for(schema_type)
        if schema_format is None:
            raise errors.RegistryError(422, errors.INVALID_SCHEMA,
                                       f"Invalid schema type {schema_type}")
        referenced = self._referenced_texts(references, set())
        try:
            return schema_format.parse(text, referenced, normalize=normalize)
        except InvalidSchemaError as exc:
            raise errors.invalid_schema(str(exc)) from exc

    def _referenced_texts(
        self, references: tuple[Reference, ...], seen: set[tuple[str, int]]
    ) -> list[tuple[str, str]]:
        """(name, text) of every referenced schema, dependencies before dependents."""
        out: list[tuple[str, str]] = []
        for ref in references:
            if (ref.subject, ref.version) in seen:
                continue
            seen.add((ref.subject, ref.version))
            with self.store.reading() as state:
                version = state.subjects.get(ref.subject, {}).get(ref.version)
            if version is None:
                raise errors.invalid_schema(
                    f"reference {ref.name!r} to subject {ref.subject!r} version "
                    f"{ref.version} not found"
                )
            out += self._referenced_texts(version.references, seen)
            out.append((ref.name, version.schema))
        return out

    def parse_version(self, version: SchemaVersion) -> ParsedSchema:
        return self._parse_cached(version.schema_type, version.schema, version.references,
                                  False)

    def parse_request(self, body: Any, normalize: bool) -> ParsedSchema:
        schema_type, text, references = self._request_parts(body)
        return self._parse_cached(schema_type, text, references, normalize)

    def _request_parts(self, body: Any) -> tuple[str, str, tuple[Reference, ...]]:
        if not isinstance(body, dict) or not isinstance(body.get("schema"), str):
            raise errors.invalid_schema("the request must be a JSON object with a 'schema' string")
        if not body["schema"].strip():
            raise errors.RegistryError(422, errors.INVALID_SCHEMA, "Empty schema")
        schema_type = str(body.get("schemaType") or "AVRO").upper()
        try:
            references = tuple(
                Reference(str(r["name"]), str(r["subject"]), int(r["version"]))
                for r in body.get("references") or []
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise errors.invalid_schema(f"malformed references: {exc}") from exc
        resolved = tuple(self._resolve_reference(r) for r in references)
        return schema_type, body["schema"], resolved

    def _resolve_reference(self, ref: Reference) -> Reference:
        """``version: -1`` means the latest version, as Confluent allows."""
        if ref.version != -1:
            return ref
        with self.store.reading() as state:
            live = state.versions(ref.subject)
        if not live:
            raise errors.invalid_schema(f"reference to subject {ref.subject!r} not found")
        return Reference(ref.name, ref.subject, live[-1].version)

    # --- reads --------------------------------------------------------------------
    def schema_types(self) -> list[str]:
        return known_types()

    def schema_by_id(self, schema_id: int) -> SchemaVersion:
        with self.store.reading() as state:
            found = state.by_id.get(schema_id)
            # by_id keeps a schema's first registration; after a permanent delete of that
            # version the id may live on in another subject, or be gone.
            if found is not None and found != state.subjects.get(found.subject, {}).get(
                    found.version):
                usages = state.usages(schema_id, deleted=True)
                found = usages[0] if usages else None
        if found is None:
            raise errors.schema_not_found(f"Schema {schema_id} not found")
        return found

    def id_usages(self, schema_id: int, deleted: bool) -> list[SchemaVersion]:
        with self.store.reading() as state:
            usages = state.usages(schema_id, deleted=deleted)
            known = bool(state.usages(schema_id, deleted=True))
        if not known:
            raise errors.schema_not_found(f"Schema {schema_id} not found")
        return usages

    def subjects(self, deleted: bool, prefix: str) -> list[str]:
        with self.store.reading() as state:
            return state.subject_names(deleted=deleted, prefix=prefix)

    def subject_versions(self, subject: str, deleted: bool) -> list[SchemaVersion]:
        with self.store.reading() as state:
            versions = state.versions(subject, deleted=deleted)
        if not versions:
            raise errors.subject_not_found(subject)
        return versions

    def get_version(self, subject: str, version: str, deleted: bool = False) -> SchemaVersion:
        number = self.version_number(version)
        with self.store.reading() as state:
            everything = state.versions(subject, deleted=True)
        pool = everything if deleted else [v for v in everything if not v.deleted]
        if not pool:
            raise errors.subject_not_found(subject)
        if number == -1:
            return pool[-1]
        for candidate in pool:
            if candidate.version == number:
                return candidate
        raise errors.version_not_found(version)

    @staticmethod
    def version_number(version: str) -> int:
        """A version path segment: 1..2^31-1, ``latest`` or -1 (both: the latest)."""
        if version == "latest":
            return -1
        try:
            number = int(version)
        except ValueError:
            raise errors.invalid_version(version) from None
        if number == -1 or 1 <= number <= MAX_VERSION:
            return number
        raise errors.invalid_version(version)

    def lookup(self, subject: str, body: Any, normalize: bool, deleted: bool) -> SchemaVersion:
        with self.store.reading() as state:
            versions = state.versions(subject, deleted=deleted)
        if not versions:
            raise errors.subject_not_found(subject)
        wanted = self.parse_request(body, normalize)
        wanted_refs = self._request_parts(body)[2]
        for version in reversed(versions):
            if version.schema_type != wanted.schema_type or version.references != wanted_refs:
                continue
            stored = self._parse_cached(version.schema_type, version.schema,
                                        version.references, normalize)
            if stored.key == wanted.key:
                return version
        raise errors.schema_not_found()

    def referenced_by(self, subject: str, version: str) -> list[int]:
        found = self.get_version(subject, version)
        with self.store.reading() as state:
            return state.referenced_by(subject, found.version)

    def compatibility_messages(
        self, subject: str, version: str | None, body: Any, normalize: bool
    ) -> list[str]:
        new = self.parse_request(body, normalize)
        if version is None:
            with self.store.reading() as state:
                against = state.versions(subject)
        else:
            against = [self.get_version(subject, version)]
        level = self.compatibility_level(subject)
        if version is not None and level.endswith("_TRANSITIVE"):
            level = level.removesuffix("_TRANSITIVE")
        return compatibility.check(
            level, new, [(v.version, self.parse_version(v)) for v in against]
        )

    def compatibility_level(self, subject: str | None) -> str:
        with self.store.reading() as state:
            return (
                (state.configs.get(subject) if subject is not None else None)
                or state.configs.get(None)
                or compatibility.DEFAULT_LEVEL
            )

    def subject_config(self, subject: str, default_to_global: bool) -> str:
        with self.store.reading() as state:
            level = state.configs.get(subject)
        if level is not None:
            return level
        if default_to_global:
            return self.compatibility_level(None)
        raise errors.RegistryError(
            404, errors.SUBJECT_COMPATIBILITY_NOT_CONFIGURED,
            f"Subject '{subject}' does not have subject-level compatibility configured",
        )

    def mode(self, subject: str | None, default_to_global: bool = True) -> str:
        with self.store.reading() as state:
            if subject is not None and subject in state.modes:
                return state.modes[subject]
            if subject is not None and not default_to_global:
                raise errors.RegistryError(
                    404, errors.SUBJECT_MODE_NOT_CONFIGURED,
                    f"Subject '{subject}' does not have subject-level mode configured",
                )
            return state.modes.get(None, "READWRITE")

    # --- writes (primary only) ----------------------------------------------------
    def register(self, subject: str, body: Any, normalize: bool) -> SchemaVersion:
        with self._write_lock:
            self.store.catch_up()
            mode = self.mode(subject)
            if mode == "READONLY":
                raise errors.operation_not_permitted(f"Subject {subject} is in read-only mode")
            new = self.parse_request(body, normalize)
            schema_type, _text, references = self._request_parts(body)
            wanted_id = body.get("id") if isinstance(body, dict) else None
            if wanted_id is not None and mode != "IMPORT":
                raise errors.operation_not_permitted(
                    f"Subject {subject} is not in import mode")
            with self.store.reading() as state:
                everything = state.versions(subject, deleted=True)
            live = [v for v in everything if not v.deleted]
            for version in live:
                if (version.schema_type == schema_type and version.references == references
                        and self._parse_cached(version.schema_type, version.schema,
                                               version.references, normalize).key
                        == new.key):
                    return version
            if mode != "IMPORT":
                messages = compatibility.check(
                    self.compatibility_level(subject), new,
                    [(v.version, self.parse_version(v)) for v in live],
                )
                if messages:
                    raise errors.RegistryError(
                        409, errors.INCOMPATIBLE_SCHEMA,
                        "Schema being registered is incompatible with an earlier schema for "
                        f"subject \"{subject}\", details: [{', '.join(messages)}]",
                    )
            schema_id = self._id_for(schema_type, new.key, references, wanted_id)
            number = max((v.version for v in everything), default=0) + 1
            if mode == "IMPORT" and isinstance(body, dict) and body.get("version") is not None:
                number = int(body["version"])
            version = SchemaVersion(subject, number, schema_id, new.canonical, schema_type,
                                    references)
            self.store.write([(records.schema_key(subject, number),
                               records.encode_value(version.value_json()))])
            return version

    def _id_for(self, schema_type: str, canonical: str | bytes, references: tuple[Reference, ...],
                wanted_id: Any) -> int:
        with self.store.reading() as state:
            fresh = [(i, v) for i, v in state.by_id.items() if i not in self._indexed_ids]
            max_id = state.max_id
        for schema_id, version in fresh:
            try:
                parsed = self.parse_version(version)
            except errors.RegistryError:
                continue
            self._ids_by_key.setdefault((version.schema_type, parsed.key,
                                         version.references), schema_id)
            self._indexed_ids.add(schema_id)
        key = (schema_type, canonical, references)
        existing = self._ids_by_key.get(key)
        if wanted_id is not None:
            try:
                wanted = int(wanted_id)
            except (TypeError, ValueError):
                raise errors.invalid_schema(f"invalid id {wanted_id!r}") from None
            if existing is not None and existing != wanted:
                raise errors.operation_not_permitted(
                    f"Schema already registered with id {existing} instead of input id "
                    f"{wanted}")
            with self.store.reading() as state:
                other = state.by_id.get(wanted)
            if other is not None and existing != wanted:
                raise errors.operation_not_permitted(
                    f"Overwrite new schema with id {wanted} is not permitted.")
            return wanted
        return existing if existing is not None else max_id + 1

    def _check_not_referenced(self, subject: str, versions: list[SchemaVersion]) -> None:
        with self.store.reading() as state:
            for version in versions:
                if state.referenced_by(subject, version.version):
                    raise errors.RegistryError(
                        422, errors.REFERENCE_EXISTS,
                        f"One or more references exist to the schema {{subject={subject},"
                        f" version={version.version}}}",
                    )

    def _check_writable(self, subject: str | None) -> None:
        if self.mode(subject) == "READONLY":
            raise errors.operation_not_permitted(f"Subject {subject} is in read-only mode")

    def delete_subject(self, subject: str, permanent: bool) -> list[int]:
        with self._write_lock:
            self.store.catch_up()
            self._check_writable(subject)
            with self.store.reading() as state:
                everything = state.versions(subject, deleted=True)
            live = [v for v in everything if not v.deleted]
            if not everything:
                raise errors.subject_not_found(subject)
            if permanent:
                if live:
                    raise errors.RegistryError(
                        404, errors.SUBJECT_NOT_SOFT_DELETED,
                        f"Subject '{subject}' was not deleted first before being permanently "
                        "deleted",
                    )
                self._check_not_referenced(subject, everything)
                batch: list[tuple[bytes, bytes | None]] = [
                    (records.schema_key(subject, v.version), None) for v in everything]
                # As Confluent: a subject deleted for good loses its own config and mode.
                with self.store.reading() as state:
                    if subject in state.configs:
                        batch.append((records.config_key(subject), None))
                    if subject in state.modes:
                        batch.append((records.mode_key(subject), None))
                self.store.write(batch)
                return [v.version for v in everything]
            if not live:
                raise errors.RegistryError(
                    404, errors.SUBJECT_SOFT_DELETED,
                    f"Subject '{subject}' was soft deleted.Set permanent=true to delete "
                    "permanently",
                )
            self._check_not_referenced(subject, live)
            self.store.write([
                (records.schema_key(subject, v.version),
                 records.encode_value(SchemaVersion(**{**v.__dict__, "deleted": True})
                                      .value_json()))
                for v in live
            ])
            return [v.version for v in live]

    def delete_version(self, subject: str, version: str, permanent: bool) -> int:
        number = self.version_number(version)
        with self._write_lock:
            self.store.catch_up()
            self._check_writable(subject)
            with self.store.reading() as state:
                everything = state.versions(subject, deleted=True)
            if not everything:
                raise errors.subject_not_found(subject)
            live = [v for v in everything if not v.deleted]
            if number == -1:
                pool = everything if permanent else live
                if not pool:
                    raise errors.subject_not_found(subject)
                number = pool[-1].version
            target = next((v for v in everything if v.version == number), None)
            if target is None:
                raise errors.version_not_found(version)
            self._check_not_referenced(subject, [target])
            if permanent:
                if not target.deleted:
                    raise errors.RegistryError(
                        404, errors.VERSION_NOT_SOFT_DELETED,
                        f"Subject '{subject}' Version {number} was not deleted first before "
                        "being permanently deleted",
                    )
                self.store.write([(records.schema_key(subject, number), None)])
                return number
            if target.deleted:
                raise errors.RegistryError(
                    404, errors.VERSION_SOFT_DELETED,
                    f"Subject '{subject}' Version {number} was soft deleted.Set "
                    "permanent=true to delete permanently",
                )
            deleted = SchemaVersion(**{**target.__dict__, "deleted": True})
            self.store.write([(records.schema_key(subject, number),
                               records.encode_value(deleted.value_json()))])
            return number

    def set_config(self, subject: str | None, body: Any) -> str:
        level = compatibility.validate_level(
            body.get("compatibility") if isinstance(body, dict) else None)
        with self._write_lock:
            self._check_writable(subject)
            self.store.write([(records.config_key(subject),
                               records.encode_value({"compatibilityLevel": level}))])
        return level

    def delete_config(self, subject: str | None) -> str:
        with self._write_lock:
            self.store.catch_up()
            if subject is not None:
                previous = self.subject_config(subject, default_to_global=False)
            else:
                previous = self.compatibility_level(None)
            self.store.write([(records.config_key(subject), None)])
        return previous

    def set_mode(self, subject: str | None, body: Any, force: bool) -> str:
        mode = body.get("mode") if isinstance(body, dict) else None
        if not isinstance(mode, str) or mode.upper() not in MODES:
            raise errors.RegistryError(
                422, errors.INVALID_MODE,
                "Invalid mode. Valid values are READWRITE, READONLY, IMPORT")
        mode = mode.upper()
        with self._write_lock:
            self.store.catch_up()
            if mode == "IMPORT" and not force:
                with self.store.reading() as state:
                    busy = (state.versions(subject) if subject is not None
                            else state.subject_names())
                if busy:
                    raise errors.operation_not_permitted(
                        "Cannot import since found existing subjects")
            self.store.write([(records.mode_key(subject),
                               records.encode_value({"mode": mode}))])
        return mode

    def delete_mode(self, subject: str) -> str:
        with self._write_lock:
            self.store.catch_up()
            previous = self.mode(subject, default_to_global=False)
            self.store.write([(records.mode_key(subject), None)])
        return previous
