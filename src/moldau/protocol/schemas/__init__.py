"""Where the schema classes of an API version come from: kio, plus the few it lacks.

kio 0.6 is generated from Kafka 4's message specs, which dropped the APIs of ZooKeeper-mode
brokers. moldau's cluster runs on ZooKeeper and speaks one of them, ControlledShutdown (key
7), so its classes live here, written in kio's form (frozen dataclasses whose fields carry
their ``kafka_type``) so that kio's own readers and writers encode them like any other.
Everything that looks up a schema by (api key, version) goes through this module.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from kio.index import load_payload_module, load_request_schema, load_response_schema
from kio.static.constants import EntityType

#: api key -> (package holding one module per version, request class, response class)
_EXTRA: dict[int, tuple[str, str, str, range]] = {
    7: (f"{__name__}.controlled_shutdown", "ControlledShutdownRequest",
        "ControlledShutdownResponse", range(1, 4)),
}


def _extra_module(api_key: int, version: int) -> ModuleType | None:
    extra = _EXTRA.get(api_key)
    if extra is None:
        return None
    package, _, _, versions = extra
    if version not in versions:
        raise LookupError(f"no schema for api key {api_key} version {version}")
    return importlib.import_module(f"{package}.v{version}")


def payload_module(api_key: int, version: int, entity_type: EntityType) -> ModuleType:
    """The module holding the request (or response) class and its nested classes."""
    module = _extra_module(api_key, version)
    if module is not None:
        return module
    return load_payload_module(api_key, version, entity_type)  # type: ignore[arg-type]


def request_schema(api_key: int, version: int) -> Any:
    module = _extra_module(api_key, version)
    if module is not None:
        return getattr(module, _EXTRA[api_key][1])
    return load_request_schema(api_key, version)


def response_schema(api_key: int, version: int) -> Any:
    module = _extra_module(api_key, version)
    if module is not None:
        return getattr(module, _EXTRA[api_key][2])
    return load_response_schema(api_key, version)
