"""A generic error response for any request, as Kafka's ``AbstractRequest.getErrorResponse``.

When a handler fails unexpectedly, Kafka answers that one request with UNKNOWN_SERVER_ERROR
instead of dropping the connection. Each Kafka request class builds its own error response;
they all follow one pattern, which this module applies to kio's response classes:

- a response with a top-level ``error_code`` carries the error there, and its arrays stay
  empty (JoinGroup, ListGroups, ApiVersions, Fetch v7+, OffsetFetch v2-v7, ...);
- otherwise the response mirrors the request: one entry per requested topic, partition, group
  or config resource, each carrying the error (Produce, Metadata, CreateTopics,
  DescribeGroups, ...). :data:`MIRRORS` says which response array answers which request array;
  keys (topic names and ids, partition indexes, group ids, resource names) are copied over.

Every other field gets its "unknown" value: the schema default, -1 for offsets, timestamps,
epochs and ids, otherwise zero, empty or null. As in Kafka, the error message stays null:
an unexpected exception's text is for the broker's log, not for clients.
"""

from __future__ import annotations

import dataclasses
from dataclasses import MISSING
from typing import Any, NamedTuple

from kio.schema.errors import ErrorCode
from kio.serial._implicit_defaults import get_implicit_default
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_schema_field_type,
    is_optional,
)

from ..protocol import apis
from ..protocol.schemas import response_schema


class Mirror(NamedTuple):
    """A response array answering the request array ``source`` (one entry per element).

    ``key`` names the response field that takes the element itself when the request array
    holds plain values (group ids, topic names); ``nested`` mirrors arrays one level down;
    ``through`` flattens: the elements are those of each source element's ``through`` array
    (AlterReplicaLogDirs answers per topic what it asked per dir and topic).
    """

    source: str
    key: str | None = None
    nested: dict[str, tuple[Mirror, ...]] | None = None
    through: str | None = None


def _m(source: str, key: str | None = None, *, through: str | None = None,
       **nested: tuple[Mirror, ...]) -> tuple[Mirror, ...]:
    return (Mirror(source, key, nested or None, through),)


_PARTITIONS = _m("partitions")

#: Per API: response array field -> the request array(s) it answers (first one present wins).
MIRRORS: dict[int, dict[str, tuple[Mirror, ...]]] = {
    apis.PRODUCE: {"responses": _m("topic_data", partition_responses=_m("partition_data"))},
    apis.FETCH: {"responses": _m("topics", partitions=_PARTITIONS)},
    apis.LIST_OFFSETS: {"topics": _m("topics", partitions=_PARTITIONS)},
    apis.METADATA: {"topics": _m("topics")},
    apis.OFFSET_COMMIT: {"topics": _m("topics", partitions=_PARTITIONS)},
    apis.TXN_OFFSET_COMMIT: {"topics": _m("topics", partitions=_PARTITIONS)},
    apis.OFFSET_FETCH: {
        "topics": _m("topics", partitions=_m("partition_indexes", "partition_index")),
        "groups": _m("groups"),
    },
    apis.FIND_COORDINATOR: {"coordinators": _m("coordinator_keys", "key")},
    apis.DESCRIBE_GROUPS: {"groups": _m("groups", "group_id")},
    apis.CREATE_TOPICS: {"topics": _m("topics")},
    apis.DELETE_TOPICS: {"responses": _m("topics") + _m("topic_names", "name")},
    apis.DELETE_RECORDS: {"topics": _m("topics", partitions=_PARTITIONS)},
    apis.OFFSET_FOR_LEADER_EPOCH: {"topics": _m("topics", partitions=_PARTITIONS)},
    apis.DESCRIBE_CONFIGS: {"results": _m("resources")},
    apis.ALTER_CONFIGS: {"responses": _m("resources")},
    apis.INCREMENTAL_ALTER_CONFIGS: {"responses": _m("resources")},
    apis.CREATE_PARTITIONS: {"results": _m("topics")},
    apis.CREATE_ACLS: {"results": _m("creations")},
    apis.DELETE_ACLS: {"filter_results": _m("filters")},
    apis.ALTER_CLIENT_QUOTAS: {"entries": _m("entries")},
    apis.DELETE_GROUPS: {"results": _m("groups_names", "group_id")},
    apis.CONSUMER_GROUP_DESCRIBE: {"groups": _m("group_ids", "group_id")},
    apis.DESCRIBE_TOPIC_PARTITIONS: {"topics": _m("topics")},
    apis.DESCRIBE_PRODUCERS: {"topics": _m(
        "topics", partitions=_m("partition_indexes", "partition_index"))},
    apis.ADD_PARTITIONS_TO_TXN: {"results_by_topic_v3_and_below": _m(
        "v3_and_below_topics", results_by_partition=_m("partitions", "partition_index"))},
    apis.DESCRIBE_TRANSACTIONS: {"transaction_states": _m("transactional_ids",
                                                          "transactional_id")},
    apis.ALTER_REPLICA_LOG_DIRS: {"results": _m(
        "dirs", through="topics", partitions=_m("partitions", "partition_index"))},
    apis.ELECT_LEADERS: {"replica_election_results": _m(
        "topic_partitions", partition_result=_m("partitions", "partition_id"))},
    apis.WRITE_TXN_MARKERS: {"markers": _m("markers", topics=_m(
        "topics", partitions=_m("partition_indexes", "partition_index")))},
    apis.ALTER_USER_SCRAM_CREDENTIALS: {"results": _m("deletions")
                                        + _m("upsertions")},
}

#: Response fields copied from the matching request element, with the request's other names.
KEYS: dict[str, tuple[str, ...]] = {
    "name": ("name",),
    "topic_name": ("name",),
    "topic": ("topic",),
    "topic_id": ("topic_id",),
    "index": ("index",),
    "partition": ("partition",),
    "partition_index": ("partition_index", "partition"),
    "partition_id": ("partition_id",),
    "group_id": ("group_id",),
    "transactional_id": ("transactional_id",),
    "key": ("key",),
    "producer_id": ("producer_id",),
    "resource_type": ("resource_type",),
    "resource_name": ("resource_name",),
    "user": ("name",),
}

#: Where an entity carries its error (AddPartitionsToTxn v0-3 names it per partition).
_ERROR_FIELDS = frozenset({"error_code", "partition_error_code"})

_UNKNOWN_SUFFIXES = ("offset", "timestamp", "watermark", "epoch", "leader_id", "node_id",
                     "generation_id", "producer_id", "controller_id")


def error_response(api_key: int, version: int, request: Any,
                   code: ErrorCode = ErrorCode.unknown_server_error) -> Any:
    """The response of (``api_key``, ``version``) that answers ``request`` with ``code``."""
    cls = response_schema(api_key, version)
    return _entity(cls, request, MIRRORS.get(api_key, {}), code)


def _entity(cls: type, request: Any, mirrors: dict[str, tuple[Mirror, ...]],
            code: ErrorCode) -> Any:
    fields = dataclasses.fields(cls)
    # An entity with its own error code answers for everything below it.
    answers_here = any(f.name in _ERROR_FIELDS for f in fields)
    values: dict[str, Any] = {}
    for field in fields:
        if field.name in _ERROR_FIELDS:
            values[field.name] = code
        elif field.name in KEYS and request is not None:
            values[field.name] = _copy_key(field, request)
        elif field.name in mirrors and not answers_here and request is not None:
            values[field.name] = _mirror(field, request, mirrors[field.name], code)
        else:
            values[field.name] = _unknown(field)
    return cls(**values)


def _copy_key(field: dataclasses.Field[Any], request: Any) -> Any:
    for name in KEYS[field.name]:
        value = getattr(request, name, None)
        if value is not None:
            return value
    return _unknown(field)


def _mirror(field: dataclasses.Field[Any], request: Any, mirrors: tuple[Mirror, ...],
            code: ErrorCode) -> Any:
    kind = classify_field(field)
    assert isinstance(kind, EntityTupleField), field.name
    for mirror in mirrors:
        if not hasattr(request, mirror.source):
            continue
        elements = getattr(request, mirror.source) or ()
        if mirror.through is not None:
            elements = tuple(inner for element in elements
                             for inner in getattr(element, mirror.through) or ())
        if mirror.key is not None:
            return tuple(_entity(kind.type_, _Keyed(mirror.key, element), {}, code)
                         for element in elements)
        return tuple(_entity(kind.type_, element, mirror.nested or {}, code)
                     for element in elements)
    return ()


class _Keyed:
    """A plain request value (a group id, a topic name) seen as an element with one key."""

    def __init__(self, name: str, value: Any) -> None:
        setattr(self, name, value)


def _unknown(field: dataclasses.Field[Any]) -> Any:
    """The value a field has when nothing is known: Kafka's conventions for error answers."""
    if field.default is not MISSING:
        return field.default
    if field.default_factory is not MISSING:
        return field.default_factory()
    if is_optional(field) and not isinstance(classify_field(field), PrimitiveTupleField):
        return None
    kind = classify_field(field)
    if isinstance(kind, PrimitiveTupleField | EntityTupleField):
        return ()
    if isinstance(kind, EntityField):
        return _entity(kind.type_, None, {}, ErrorCode.none)
    assert isinstance(kind, PrimitiveField)
    kafka_type = get_schema_field_type(field)
    if kafka_type == "error_code":
        return ErrorCode.none
    if kafka_type in ("int16", "int32", "int64") and field.name.endswith(_UNKNOWN_SUFFIXES):
        return -1
    if kafka_type == "bool":
        return False
    if kafka_type in ("bytes", "records"):
        return b""
    return get_implicit_default(kind.type_)
