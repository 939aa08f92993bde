"""Every advertised version's kio classes have the layout of Kafka's own message specs.

kio is generated from one snapshot of Kafka's message specs; moldau advertises what Kafka 4.2
advertises. kafka-python 3.x ships Kafka's JSON specs of a 4.2-or-newer release, so each
advertised (api, version) is compared with them here: the same fields in the same order,
the same tagged fields, the same nesting. A difference would mean moldau decodes real clients'
requests wrongly.
"""

from __future__ import annotations

import dataclasses
import json
import re
from importlib import resources
from typing import Any

import pytest
from kio.serial._introspect import EntityField, EntityTupleField, classify_field

from moldau.protocol.apis import SUPPORTED
from moldau.protocol.schemas import request_schema, response_schema

#: APIs whose specs Kafka 4 dropped (ControlledShutdown) or kafka-python does not ship.
NOT_IN_SPECS = {7, 68, 69, 71, 72}
Layout = list[tuple[int | None, Any]]


def _spec(name: str) -> dict[str, Any]:
    text = resources.files("kafka.protocol.schemas.resources").joinpath(
        f"{name}.json").read_text()
    return json.loads(re.sub(r"^\s*//.*$", "", text, flags=re.M))


def _in(versions: str | None, v: int) -> bool:
    if not versions or versions == "none":
        return False
    if versions.endswith("+"):
        return v >= int(versions[:-1])
    low, _, high = versions.partition("-")
    return int(low) <= v <= int(high or low)


def _spec_layout(fields: list[dict[str, Any]], v: int,
                 common: dict[str, list[dict[str, Any]]] | None = None) -> Layout:
    """(tag or None, nested layout or None) per field present in version ``v``; a field whose
    type names one of the spec's ``commonStructs`` nests that struct's fields."""
    common = common or {}

    def nested(f: dict[str, Any]) -> Layout | None:
        if "fields" in f:
            return _spec_layout(f["fields"], v, common)
        struct = f["type"].removeprefix("[]")
        return _spec_layout(common[struct], v, common) if struct in common else None

    return [(f.get("tag") if _in(f.get("taggedVersions"), v) else None, nested(f))
            for f in fields if _in(f["versions"], v)]


def _kio_layout(cls: type) -> Layout:
    layout: Layout = []
    for f in dataclasses.fields(cls):
        kind = classify_field(f)
        nested = _kio_layout(kind.type_) if isinstance(
            kind, EntityField | EntityTupleField) else None
        layout.append((f.metadata.get("tag"), nested))
    return layout


CASES = [(api.key, v, kind) for api in SUPPORTED.values() if api.key not in NOT_IN_SPECS
         for v in range(api.min_version, api.max_version + 1)
         for kind in ("request", "response")]


@pytest.mark.parametrize(("api_key", "version", "kind"), CASES)
def test_kio_matches_kafka_spec(api_key: int, version: int, kind: str) -> None:
    cls = (request_schema if kind == "request" else response_schema)(api_key, version)
    spec = _spec(cls.__name__)
    assert _in(spec["validVersions"], version), f"{cls.__name__} v{version} is not in Kafka"
    common = {c["name"]: c["fields"] for c in spec.get("commonStructs", ())}
    assert _kio_layout(cls) == _spec_layout(spec["fields"], version, common)
