"""Client quota entities and keys, as Kafka names, validates and stores them.

A quota entity is a user, a client id, or both; either part may be the *default* (a null
name in the protocol, ``<default>`` in ZooKeeper), which applies to every user or client id
that has no quota of its own. Four keys exist (Kafka's ``QuotaConfigs``):
``producer_byte_rate`` and ``consumer_byte_rate`` (bytes/s, whole numbers),
``request_percentage`` (percent of one request thread) and ``controller_mutation_rate``
(partitions created or deleted per second).

Names are stored *sanitized* as Kafka's ``Sanitizer`` does (URL-encoded), so a user called
``<default>`` cannot be mistaken for the default entity and any name is a valid znode name.
This module is shared by the metadata stores and the broker, so it imports neither.
"""

from __future__ import annotations

import math
from urllib.parse import quote, unquote

USER = "user"
CLIENT_ID = "client-id"
#: Kafka's ip entity (connection-rate quotas): known, refused (moldau has no such quota).
IP = "ip"
ENTITY_TYPES = (USER, CLIENT_ID)
#: The stored name of a default entity part.
DEFAULT = "<default>"

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
#: Key -> True when its value must be a whole number (Kafka's LONG keys).
QUOTA_KEYS: dict[str, bool] = {
    PRODUCER_BYTE_RATE: True,
    CONSUMER_BYTE_RATE: True,
    REQUEST_PERCENTAGE: False,
    CONTROLLER_MUTATION_RATE: False,
}

#: One entity: its parts as (entity type, name or None for the default), sorted by type.
QuotaEntity = tuple[tuple[str, str | None], ...]


class QuotaValueError(ValueError):
    """A quota key or value Kafka refuses with INVALID_REQUEST (the message is Kafka's)."""


class _Absent:
    """The part is not in the entity (distinct from None, the default)."""


ABSENT = _Absent()


def entity(user: str | _Absent | None = ABSENT, client_id: str | _Absent | None = ABSENT
           ) -> QuotaEntity:
    """An entity from its parts: a name, None (the default), or ABSENT (not part of it)."""
    parts: list[tuple[str, str | None]] = []
    if not isinstance(user, _Absent):
        parts.append((USER, user))
    if not isinstance(client_id, _Absent):
        parts.append((CLIENT_ID, client_id))
    return tuple(sorted(parts))


def describe_entity(quota_entity: QuotaEntity) -> str:
    """``user=alice, client-id=<default>``: for log lines and CLI errors."""
    return ", ".join(f"{kind}={DEFAULT if name is None else name}"
                     for kind, name in quota_entity)


def sanitize(name: str) -> str:
    """Kafka's Sanitizer.sanitize: URL-encoded (Java's URLEncoder, with ``*`` and ``~``
    escaped and spaces as %20), so the name is safe as a znode name."""
    return quote(name, safe="").replace("~", "%7E")


def desanitize(name: str) -> str:
    return unquote(name)


def stored_name(name: str | None) -> str:
    return DEFAULT if name is None else sanitize(name)


def loaded_name(stored: str) -> str | None:
    return None if stored == DEFAULT else desanitize(stored)


def parse_value(key: str, value: float) -> float:
    """A quota value as Kafka's ZkAdminManager accepts it (INVALID_REQUEST otherwise)."""
    whole = QUOTA_KEYS.get(key)
    if whole is None:
        raise QuotaValueError(f"Invalid configuration key {key}")
    if math.isnan(value) or math.isinf(value):
        raise QuotaValueError(f"Configuration {key} must be a finite value")
    if whole:
        # Kafka converts with Double.toLong, which saturates: out of range is not a Long.
        if not -(2**63) <= value < 2**63 or abs(round(value) - value) > 1e-6:
            raise QuotaValueError(f"Configuration {key} must be a Long value")
        return float(round(value))
    return float(value)


def encode_value(key: str, value: float) -> str:
    """The string Kafka stores: ``1048576`` for a LONG key, ``200.0`` for a DOUBLE one."""
    return str(int(value)) if QUOTA_KEYS.get(key) else repr(float(value))


def decode_values(configs: dict[str, str]) -> dict[str, float]:
    """The quota keys of a stored config (a /config/users znode also holds SCRAM keys)."""
    found = {}
    for key, text in configs.items():
        if key in QUOTA_KEYS:
            try:
                found[key] = float(text)
            except ValueError:
                continue
    return found


def entity_path(quota_entity: QuotaEntity) -> str:
    """Kafka's entity path under /config: ``users/<u>``, ``clients/<c>`` or
    ``users/<u>/clients/<c>`` (names sanitized, ``<default>`` for a default part)."""
    parts = dict(quota_entity)
    if USER in parts and CLIENT_ID in parts:
        return (f"users/{stored_name(parts[USER])}/clients/"
                f"{stored_name(parts[CLIENT_ID])}")
    if USER in parts:
        return f"users/{stored_name(parts[USER])}"
    if CLIENT_ID in parts:
        return f"clients/{stored_name(parts[CLIENT_ID])}"
    raise ValueError("a quota entity names a user, a client id, or both")


def parse_entity_path(path: str) -> QuotaEntity | None:
    """The entity of a /config entity path (None when it is not a client quota entity)."""
    pieces = path.strip("/").split("/")
    if len(pieces) == 2 and pieces[0] == "users":
        return entity(user=loaded_name(pieces[1]))
    if len(pieces) == 2 and pieces[0] == "clients":
        return entity(client_id=loaded_name(pieces[1]))
    if len(pieces) == 4 and pieces[0] == "users" and pieces[2] == "clients":
        return entity(user=loaded_name(pieces[1]), client_id=loaded_name(pieces[3]))
    return None
