"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs for topics, brokers and loggers.

The config module knows every key, its default, its synonyms and how to validate it; this
module maps config resources onto it:

- TOPIC: the topic's stored overrides on top of the broker's defaults. Alterations go through
  :meth:`Broker.set_topic_configs`, which validates and re-applies the log config.
- BROKER: the name is this node's id (its own dynamic layer) or "" (the cluster-wide dynamic
  default layer, as in Kafka). A change builds a new, fully validated :class:`BrokerConfig`,
  checks that every topic's effective config is still valid under it, persists the dynamic
  layers in the metadata store, swaps it in and re-applies the log configs of all topics, since
  topics without overrides follow the broker's values.
- BROKER_LOGGER: log levels, see :mod:`.loggers`.

Every resource succeeds or fails on its own; within one resource, all changes apply or none.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any

from kio.schema.errors import ErrorCode

from ...config import (
    TOPIC_KEYS,
    BrokerConfig,
    ConfigEntry,
    ConfigError,
    ConfigSource,
    ConfigSynonym,
    ConfigType,
    broker_key_definition,
    describe_broker_configs,
    effective_topic_config,
    to_log_config,
)
from ...protocol.codec import build
from .. import authz
from ..broker import Broker, RequestContext, encode_dynamic_configs
from ..client_metrics import CLIENT_METRICS, ClientMetricsError
from ..errors import ApiError
from ..topic_names import validate_topic_name
from .api_versions import NO_THROTTLE
from .loggers import alter_loggers, describe_loggers

TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3
_OP_NAMES = {OP_APPEND: "APPEND", OP_SUBTRACT: "SUBTRACT"}


def topic_config_entries(broker: Broker, overrides: Mapping[str, str]) -> list[ConfigEntry]:
    """Every config of a topic with these overrides, as DescribeConfigs reports them."""
    return list(effective_topic_config(broker.config, overrides).entries)


def _duplicates(keys: Iterable[Hashable]) -> set[Hashable]:
    return {k for k, n in Counter(keys).items() if n > 1}


def _is_cluster_default(broker: Broker, name: str, *, allow_default: bool = True) -> bool:
    """Check a BROKER(_LOGGER) resource name: True for "" (the cluster-wide defaults)."""
    if name == "":
        if allow_default:
            return True
        raise ApiError(ErrorCode.invalid_request, "Broker id must not be empty")
    try:
        node = int(name)
    except ValueError:
        raise ApiError(ErrorCode.invalid_request,
                       f"Broker id must be an integer, but it is: {name}") from None
    if node != broker.node_id:
        expected = f"{broker.node_id} or empty string" if allow_default else str(broker.node_id)
        raise ApiError(ErrorCode.invalid_request,
                       f"Unexpected broker id, expected {expected}, but received {name}")
    return False


def _unsupported(resource_type: int) -> ApiError:
    return ApiError(ErrorCode.invalid_request, f"Unsupported resource type: {resource_type}")


# -- DescribeConfigs ----------------------------------------------------------------------------


def _default_layer_entries(cfg: BrokerConfig) -> list[ConfigEntry]:
    """The cluster-wide dynamic defaults only, which is what Kafka shows for broker ""."""
    entries = []
    for name, raw in sorted(cfg.dynamic_default_configs.items()):
        key = broker_key_definition(name)
        if key is None:  # stored by an older moldau that knew the key
            continue
        value = key.format(key.parse(raw))
        # The per-broker layer does not apply to the cluster default resource.
        synonyms = tuple(s for s in cfg.synonyms(name)
                         if s.source is not ConfigSource.DYNAMIC_BROKER_CONFIG)
        entries.append(ConfigEntry(
            name=name, value=value, source=ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
            read_only=False, is_sensitive=key.sensitive, config_type=key.type,
            documentation=key.doc,
            synonyms=synonyms or (ConfigSynonym(
                name, value, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),),
        ))
    return entries


def _entries_of(broker: Broker, resource_type: int, name: str) -> list[ConfigEntry]:
    if resource_type == TOPIC:
        validate_topic_name(name)
        topic = broker.metadata.topic(name)
        if topic is None:
            raise ApiError(ErrorCode.unknown_topic_or_partition,
                           f"Topic '{name}' does not exist.")
        return topic_config_entries(broker, topic.configs)
    if resource_type == BROKER:
        if _is_cluster_default(broker, name):
            return _default_layer_entries(broker.config)
        return describe_broker_configs(broker.config)
    if resource_type == BROKER_LOGGER:
        _is_cluster_default(broker, name, allow_default=False)
        return describe_loggers()
    if resource_type == CLIENT_METRICS:
        return broker.client_metrics.entries(name)
    raise _unsupported(resource_type)


def _config_result(m: Any, entry: ConfigEntry, synonyms: bool, documentation: bool) -> Any:
    # Kafka never sends the value of a sensitive config, nor of its synonyms.
    def shown(value: str | None) -> str | None:
        return None if entry.is_sensitive else value

    return build(
        m.DescribeConfigsResourceResult,
        name=entry.name,
        value=shown(entry.value),
        read_only=entry.read_only,
        config_source=int(entry.source),
        is_sensitive=entry.is_sensitive,
        synonyms=tuple(
            build(m.DescribeConfigsSynonym, name=s.name, value=shown(s.value),
                  source=int(s.source))
            for s in entry.synonyms
        ) if synonyms else (),
        config_type=int(entry.config_type),
        documentation=entry.documentation if documentation else None,
    )


def _authorize(ctx: RequestContext, resource: Any, operation: authz.Op) -> None:
    """A topic's configs need the operation on the topic; brokers', loggers' and client
    metrics' on the cluster (Kafka's ConfigAdminManager rules)."""
    if resource.resource_type == TOPIC:
        if not authz.allowed(ctx, operation, authz.TOPIC, resource.resource_name):
            raise ApiError(ErrorCode.topic_authorization_failed, None)
    elif not authz.allowed(ctx, operation, authz.CLUSTER):
        raise ApiError(ErrorCode.cluster_authorization_failed, None)


def _describe_one(ctx: RequestContext, resource: Any, synonyms: bool,
                  documentation: bool) -> Any:
    m = ctx.resp
    code, message = ErrorCode.none, None
    try:
        _authorize(ctx, resource, authz.Op.DESCRIBE_CONFIGS)
        entries = _entries_of(ctx.broker, resource.resource_type, resource.resource_name)
    except ApiError as exc:
        entries, code, message = [], exc.code, exc.message
    except ConfigError as exc:  # a stored override that a newer moldau no longer accepts
        entries, code, message = [], ErrorCode.invalid_config, str(exc)
    if resource.configuration_keys is not None:
        wanted = set(resource.configuration_keys)
        entries = [e for e in entries if e.name in wanted]
    return build(
        m.DescribeConfigsResult,
        error_code=code,
        error_message=message,
        resource_type=resource.resource_type,
        resource_name=resource.resource_name,
        configs=tuple(_config_result(m, e, synonyms, documentation) for e in entries),
    )


async def handle_describe_configs(request: Any, ctx: RequestContext) -> Any:
    synonyms = request.include_synonyms
    documentation = getattr(request, "include_documentation", False)
    results = tuple(_describe_one(ctx, r, synonyms, documentation) for r in request.resources)
    return build(ctx.resp.DescribeConfigsResponse, throttle_time=NO_THROTTLE, results=results)


# -- applying changes ---------------------------------------------------------------------------


def _apply_broker_config(broker: Broker, new: BrokerConfig, validate_only: bool) -> None:
    """Check that every topic still has a valid config under ``new``, then swap it in."""
    for topic in broker.metadata.topics().values():
        to_log_config(effective_topic_config(new, topic.configs))
    if validate_only:
        return
    broker.metadata.set_broker_configs(encode_dynamic_configs(new))
    broker.config = new
    broker.reload_log_configs()


def _dynamic_layer(cfg: BrokerConfig, cluster_default: bool) -> dict[str, str]:
    return cfg.dynamic_default_configs if cluster_default else cfg.dynamic_broker_configs


def _alter(ctx: RequestContext, resource: Any, validate_only: bool,
           changes_for: Callable[[Mapping[str, str], Callable[[str], Any]],
                                 dict[str, str | None]]) -> None:
    """Compute and apply the changes to one TOPIC or BROKER resource.

    ``changes_for(current, key_of)`` turns the request into {key: new value or None} given the
    resource's current overrides and a lookup of config keys with their effective values.
    """
    broker = ctx.broker
    name = resource.resource_name
    if resource.resource_type == TOPIC:
        topic = broker.metadata.topic(name)
        if topic is None:
            raise ApiError(ErrorCode.unknown_topic_or_partition,
                           f"Topic '{name}' does not exist.")
        effective = {e.name: e.value for e in topic_config_entries(broker, topic.configs)}

        def topic_key(key: str) -> tuple[ConfigType | None, str | None]:
            definition = TOPIC_KEYS.get(key)
            return (definition.type if definition else None), effective.get(key)

        overrides: dict[str, str | None] = dict(topic.configs)
        for key, value in changes_for(topic.configs, topic_key).items():
            # Removing an override that is not there (even of an unknown key) is a no-op.
            if value is None:
                overrides.pop(key, None)
            else:
                overrides[key] = value
        broker.set_topic_configs(name, overrides, validate_only=validate_only)
        return
    if resource.resource_type == BROKER:
        cluster_default = _is_cluster_default(broker, name)
        cfg = broker.config

        def broker_key(key: str) -> tuple[ConfigType | None, str | None]:
            definition = broker_key_definition(key)
            if definition is None:
                return None, None
            return definition.type, definition.format(cfg.get(key))

        changes = changes_for(_dynamic_layer(cfg, cluster_default), broker_key)
        try:
            new = cfg.with_dynamic(changes, cluster_default=cluster_default)
            _apply_broker_config(broker, new, validate_only)
        except ConfigError as exc:
            # Kafka answers a broker config it cannot apply with INVALID_REQUEST, not
            # INVALID_CONFIG (KAFKA-13609 keeps it so for compatibility); so do we.
            raise ApiError(ErrorCode.invalid_request, str(exc)) from exc
        return
    if resource.resource_type == CLIENT_METRICS:
        _alter_client_metrics(broker, name, validate_only, changes_for)
        return
    raise _unsupported(resource.resource_type)


def _alter_client_metrics(broker: Broker, name: str, validate_only: bool,
                          changes_for: Callable[[Mapping[str, str], Callable[[str], Any]],
                                                dict[str, str | None]]) -> None:
    """A client-metrics subscription (KIP-714); see :mod:`..client_metrics`."""
    store = broker.client_metrics
    current = store.configs(name)
    effective = {e.name: e.value for e in store.entries(name)}

    def metrics_key(key: str) -> tuple[ConfigType | None, str | None]:
        return ConfigType.LIST if key in ("metrics", "match") else None, effective.get(key)

    for key, value in changes_for(current, metrics_key).items():
        if value is None:
            current.pop(key, None)
        else:
            current[key] = value
    try:
        store.set_configs(name, current, validate_only=validate_only)
    except ClientMetricsError as exc:
        raise ApiError(ErrorCode.invalid_config, str(exc)) from exc


def _resource_response(m: Any, resource: Any, error: ApiError | None) -> Any:
    return build(
        m.AlterConfigsResourceResponse,
        error_code=error.code if error else ErrorCode.none,
        error_message=error.message if error else None,
        resource_type=resource.resource_type,
        resource_name=resource.resource_name,
    )


def _alter_all(ctx: RequestContext, resources: Sequence[Any],
               alter_one: Callable[[Any], None]) -> list[Any]:
    """Run ``alter_one`` per resource; a resource named twice fails once, as in Kafka."""
    m = ctx.resp
    duplicates = _duplicates((r.resource_type, r.resource_name) for r in resources)
    reported: set[Hashable] = set()
    responses = []
    for resource in resources:
        key = (resource.resource_type, resource.resource_name)
        if key in reported:
            continue
        error: ApiError | None = None
        if key in duplicates:
            reported.add(key)
            error = ApiError(ErrorCode.invalid_request, "Duplicate resource.")
        else:
            try:
                _authorize(ctx, resource, authz.Op.ALTER_CONFIGS)
                alter_one(resource)
            except ApiError as exc:
                error = exc
            except ConfigError as exc:
                error = ApiError(ErrorCode.invalid_config, str(exc))
        responses.append(_resource_response(m, resource, error))
    return responses


# -- AlterConfigs (legacy: replaces the whole set) -----------------------------------------------


async def handle_alter_configs(request: Any, ctx: RequestContext) -> Any:
    """Replace all overrides of each resource with the given set (null values are dropped)."""

    def alter_one(resource: Any) -> None:
        if resource.resource_type not in (TOPIC, BROKER):
            raise ApiError(ErrorCode.invalid_request,
                           "AlterConfigs is only supported for topics and brokers, but "
                           f"resource type is {resource.resource_type}")
        given = {c.name: c.value for c in resource.configs if c.value is not None}

        def replace(current: Mapping[str, str], _key: Callable[[str], Any]
                    ) -> dict[str, str | None]:
            changes: dict[str, str | None] = dict.fromkeys(current)
            changes.update(given)
            return changes

        _alter(ctx, resource, request.validate_only, replace)

    responses = _alter_all(ctx, request.resources, alter_one)
    return build(ctx.resp.AlterConfigsResponse, throttle_time=NO_THROTTLE,
                 responses=tuple(responses))


# -- IncrementalAlterConfigs --------------------------------------------------------------------


def _list_items(raw: str | None) -> list[str]:
    return [] if not raw else [item.strip() for item in raw.split(",") if item.strip()]


def _incremental_changes(ops: Sequence[Any], current: Mapping[str, str],
                         key_of: Callable[[str], tuple[ConfigType | None, str | None]]
                         ) -> dict[str, str | None]:
    """Turn SET/DELETE/APPEND/SUBTRACT operations into {key: new value, or None to unset}."""
    if _duplicates(op.name for op in ops):
        raise ApiError(ErrorCode.invalid_request, "Error due to duplicate config keys")
    changes: dict[str, str | None] = {}
    for op in ops:
        kind, name, value = op.config_operation, op.name, op.value
        if kind == OP_DELETE:
            changes[name] = None
            continue
        if kind not in (OP_SET, OP_APPEND, OP_SUBTRACT):
            raise ApiError(ErrorCode.invalid_request, f"Unknown operation type {kind}")
        if value is None:
            raise ApiError(ErrorCode.invalid_request, f"Null value not supported for : {name}")
        if kind == OP_SET:
            changes[name] = value
            continue
        key_type, effective = key_of(name)
        if key_type is not ConfigType.LIST:
            raise ApiError(ErrorCode.invalid_config,
                           f"Can't {_OP_NAMES[kind]} to key {name} because its type is not LIST.")
        # The list grows from what the resource has now: its override, else the value it
        # inherits, so APPEND compact to a default cleanup.policy gives "delete,compact".
        items = _list_items(current.get(name, effective))
        if kind == OP_APPEND:
            items += [v for v in _list_items(value) if v not in items]
        else:
            removed = set(_list_items(value))
            items = [v for v in items if v not in removed]
        changes[name] = ",".join(items)
    return changes


async def handle_incremental_alter_configs(request: Any, ctx: RequestContext) -> Any:
    def alter_one(resource: Any) -> None:
        if resource.resource_type == BROKER_LOGGER:
            _is_cluster_default(ctx.broker, resource.resource_name, allow_default=False)
            alter_loggers(resource.configs, validate_only=request.validate_only)
            return

        def incremental(current: Mapping[str, str],
                        key_of: Callable[[str], Any]) -> dict[str, str | None]:
            return _incremental_changes(resource.configs, current, key_of)

        _alter(ctx, resource, request.validate_only, incremental)

    responses = _alter_all(ctx, request.resources, alter_one)
    return build(ctx.resp.IncrementalAlterConfigsResponse, throttle_time=NO_THROTTLE,
                 responses=tuple(responses))
