"""Broker-side schema-id validation, as Confluent Server does it.

A topic with ``confluent.value.schema.validation=true`` (or ``.key.``) accepts only records
whose value (key) starts with the Schema Registry's wire format: a zero magic byte and the
4-byte id of a schema the registry at ``confluent.schema.registry.url`` knows. A batch with
any other record is refused with INVALID_RECORD naming each bad record (KIP-467), so the
producer fails only those.

Topics without the config pay one attribute check per partition. For the others, the
records of the batch are walked (decompressed when compressed) and each new id is asked of
the registry once (``GET /schemas/ids/{id}``, in a worker thread so the event loop never
waits on HTTP); known ids are remembered for the broker's lifetime, since an id is never
reused for another schema. Unknown ids are asked again next time (the schema may have been
registered since).
"""

from __future__ import annotations

import asyncio
import json
import logging
import urllib.error
import urllib.request
import weakref
from typing import TYPE_CHECKING

from ..log.errors import CorruptRecordError
from ..log.records import key_value_heads

if TYPE_CHECKING:
    from .broker import Broker

log = logging.getLogger(__name__)

MAGIC_BYTE = 0
HEAD = 5  # magic byte + 4-byte big-endian schema id
LOOKUP_TIMEOUT_S = 5.0


class SchemaIdValidator:
    def __init__(self, registry_urls: list[str]) -> None:
        self.registry_urls = registry_urls
        self._known: set[int] = set()

    async def invalid_records(self, records: bytes | memoryview, *, keys: bool,
                              values: bool) -> list[tuple[int, str]]:
        """(index in the batch, reason) of each record that fails; empty when all pass."""
        try:
            heads = key_value_heads(records, HEAD)
        except CorruptRecordError:
            return []  # the append refuses it with CORRUPT_MESSAGE, as for any topic
        wanted: dict[int, set[int]] = {}  # schema id -> indexes of records using it
        errors: dict[int, str] = {}
        for index, (key, value) in enumerate(heads):
            for part, head, checked in (("key", key, keys), ("value", value, values)):
                if not checked or index in errors:
                    continue
                if head is None or len(head) < HEAD or head[0] != MAGIC_BYTE:
                    errors[index] = (f"Record {part} does not start with a schema id "
                                     "(Schema Registry wire format expected)")
                    continue
                schema_id = int.from_bytes(head[1:HEAD], "big")
                if schema_id not in self._known:
                    wanted.setdefault(schema_id, set()).add(index)
        for schema_id, indexes in wanted.items():
            reason = await self._lookup(schema_id)
            if reason is not None:
                for index in indexes:
                    errors.setdefault(index, reason)
        return sorted(errors.items())

    async def _lookup(self, schema_id: int) -> str | None:
        """None when the registry knows ``schema_id``, else why the record is refused."""
        if not self.registry_urls:
            return "Schema validation is on but confluent.schema.registry.url is not set"
        reason = await asyncio.to_thread(self._ask_registry, schema_id)
        if reason is None:
            self._known.add(schema_id)
        return reason

    def _ask_registry(self, schema_id: int) -> str | None:
        last = "no registry answered"
        for url in self.registry_urls:
            try:
                with urllib.request.urlopen(f"{url}/schemas/ids/{schema_id}",
                                            timeout=LOOKUP_TIMEOUT_S) as answer:
                    json.load(answer)
                    return None
            except urllib.error.HTTPError as exc:
                if exc.code == 404:
                    return f"Schema id {schema_id} is not known to the Schema Registry"
                last = f"{url}: HTTP {exc.code}"
            except (OSError, ValueError) as exc:
                last = f"{url}: {exc}"
        log.warning("schema validation: cannot check schema id %d: %s", schema_id, last)
        return f"Cannot check schema id {schema_id} with the Schema Registry ({last})"


_VALIDATORS: weakref.WeakKeyDictionary[object, SchemaIdValidator] = weakref.WeakKeyDictionary()


def validator_for(broker: Broker) -> SchemaIdValidator:
    """The broker's validator, made on first use (most brokers never need one)."""
    validator = _VALIDATORS.get(broker)
    if validator is None:
        validator = _VALIDATORS[broker] = SchemaIdValidator(broker.config.schema_registry_urls)
    return validator
