"""DescribeClientQuotas and AlterClientQuotas (KIP-546), with Kafka's validation and errors.

Quotas are kept in the metadata store (the node's metadata file, or /config/users and
/config/clients in ZooKeeper with a change notification for the other brokers) and applied
to this broker's :class:`~..client_quotas.ClientQuotas` at once. Entities are a user, a
client id, or both, each named or the default (a null name); IP entities (connection-rate
quotas) are refused with INVALID_REQUEST, as moldau has no such quota.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from kio.schema.errors import ErrorCode

from ...config.client_quotas import (
    CLIENT_ID,
    ENTITY_TYPES,
    IP,
    QuotaEntity,
    QuotaValueError,
    parse_value,
)
from ...protocol.codec import build
from .api_versions import NO_THROTTLE

if TYPE_CHECKING:
    from ..broker import Broker, RequestContext

T = TypeVar("T")

MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2


class _Invalid(Exception):
    """INVALID_REQUEST with Kafka's message."""


async def _io(broker: Broker, call: Callable[..., T], *args: Any) -> T:
    """A metadata store call: ZooKeeper calls block, so they run in a thread."""
    if broker.cluster is not None:
        return await asyncio.to_thread(call, *args)
    return call(*args)


def _entity(components: Any) -> QuotaEntity:
    parts: dict[str, str | None] = {}
    for component in components:
        kind, name = component.entity_type, component.entity_name
        if kind == IP:
            raise _Invalid("IP quotas (connection_creation_rate) are not supported by moldau")
        if kind not in ENTITY_TYPES:
            raise _Invalid(f"Unhandled client quota entity type: {kind}")
        if kind in parts:
            raise _Invalid(f"Duplicate {kind} component in entity")
        if name is not None and not name and kind != CLIENT_ID:
            raise _Invalid(f"Empty {kind} name is not allowed; use null for the default")
        parts[kind] = name
    if not parts:
        raise _Invalid("Invalid empty client quota entity")
    return tuple(sorted(parts.items()))


def _updated(current: dict[str, float], ops: Any) -> dict[str, float]:
    values = dict(current)
    seen = set()
    for op in ops:
        if op.key in seen:
            raise _Invalid(f"Duplicate quota configuration key {op.key}")
        seen.add(op.key)
        if op.remove:
            parse_value(op.key, 0.0)  # an unknown key is refused even when removed
            values.pop(op.key, None)
        else:
            values[op.key] = parse_value(op.key, float(op.value))
    return values


async def handle_alter(request: Any, ctx: RequestContext) -> Any:
    m = ctx.resp
    broker = ctx.broker
    results = []
    for entry in request.entries:
        code, message = ErrorCode.none, None
        try:
            quota_entity = _entity(entry.entity)
            current = broker.client_quotas.configured().get(quota_entity, {})
            values = _updated(current, entry.ops)
            if not request.validate_only and values != current:
                await _io(broker, broker.metadata.set_client_quotas, quota_entity, values)
                broker.client_quotas.set(quota_entity, values)
        except (_Invalid, QuotaValueError) as exc:
            code, message = ErrorCode.invalid_request, str(exc)
        results.append(build(m.EntryData, error_code=code, error_message=message,
                             entity=tuple(build(m.EntityData, entity_type=c.entity_type,
                                                entity_name=c.entity_name)
                                          for c in entry.entity)))
    return build(m.AlterClientQuotasResponse, throttle_time=NO_THROTTLE, entries=tuple(results))


def _filter(components: Any) -> dict[str, tuple[int, str | None]]:
    wanted: dict[str, tuple[int, str | None]] = {}
    for component in components:
        kind, match_type, match = component.entity_type, component.match_type, component.match
        if kind == IP:
            raise _Invalid("IP quotas (connection_creation_rate) are not supported by moldau")
        if kind not in ENTITY_TYPES:
            raise _Invalid(f"Custom entity type '{kind}' not supported")
        if kind in wanted:
            raise _Invalid(f"Duplicate {kind} filter component entity type")
        if match_type == MATCH_EXACT and match is None:
            raise _Invalid(f"Unexpected null match for exact match type on {kind}")
        if match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY):
            raise _Invalid(f"Unexpected match type {match_type}")
        wanted[kind] = (match_type, match)
    return wanted


def _matches(quota_entity: QuotaEntity, wanted: dict[str, tuple[int, str | None]],
             strict: bool) -> bool:
    parts = dict(quota_entity)
    if strict and set(parts) != set(wanted):
        return False
    for kind, (match_type, match) in wanted.items():
        if kind not in parts:
            return False
        name = parts[kind]
        if match_type == MATCH_EXACT and name != match:
            return False
        if match_type == MATCH_DEFAULT and name is not None:
            return False
    return True


async def handle_describe(request: Any, ctx: RequestContext) -> Any:
    m = ctx.resp
    try:
        wanted = _filter(request.components)
    except _Invalid as exc:
        return build(m.DescribeClientQuotasResponse, throttle_time=NO_THROTTLE,
                     error_code=ErrorCode.invalid_request, error_message=str(exc), entries=None)
    found = ctx.broker.client_quotas.configured()
    entries = []
    for quota_entity in sorted(found, key=lambda e: [(k, n is not None, n or "")
                                                     for k, n in e]):
        if not _matches(quota_entity, wanted, request.strict):
            continue
        entries.append(build(
            m.EntryData,
            entity=tuple(build(m.EntityData, entity_type=kind, entity_name=name)
                         for kind, name in sorted(quota_entity, key=_user_first)),
            values=tuple(build(m.ValueData, key=key, value=value)
                         for key, value in sorted(found[quota_entity].items()))))
    return build(m.DescribeClientQuotasResponse, throttle_time=NO_THROTTLE,
                 error_code=ErrorCode.none, error_message=None, entries=tuple(entries))


def _user_first(part: tuple[str, str | None]) -> int:
    return ENTITY_TYPES.index(part[0])
