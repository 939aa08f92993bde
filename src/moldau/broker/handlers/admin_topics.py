"""CreateTopics, DeleteTopics, CreatePartitions: the topic lifecycle as admin clients drive it.

The Broker methods do the work and raise :class:`ApiError` with Kafka's codes; this module
checks what only the request can tell (duplicates within one request, replication factors and
manual replica assignments, which must name live brokers: only this node when alone) and
shapes the per-topic results.
Each topic succeeds or fails on its own, as in Kafka: one bad topic never fails a whole request,
except a request that would create more than 10,000 partitions, which Kafka refuses whole
with POLICY_VIOLATION. The partition files are made (or renamed for deletion) on a worker
thread by the Broker's ``*_async`` methods, so the event loop keeps serving other clients.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Hashable, Iterable, Sequence
from typing import Any, TypeVar

from kio.schema.errors import ErrorCode

from ...cluster.assignment import AssignmentError, check_explicit_assignment
from ...protocol.codec import build
from .. import authz
from ..broker import Broker, RequestContext
from ..errors import ApiError
from ..topic_names import validate_topic_name
from . import mutation_quota
from .api_versions import NO_THROTTLE
from .configs import topic_config_entries

UNSET = -1
#: Kafka's controller refuses a request that would create more partitions than this
#: (ReplicationControlManager.MAX_PARTITIONS_PER_BATCH, and MAX_RECORDS_PER_USER_OP).
MAX_PARTITIONS_PER_REQUEST = 10_000
H = TypeVar("H", bound=Hashable)


def _duplicates(keys: Iterable[H]) -> set[H]:
    return {key for key, n in Counter(keys).items() if n > 1}


def _first_of_each(topics: Iterable[Any]) -> list[Any]:
    """One entry per topic name, in request order (a response names each topic once)."""
    seen: set[str] = set()
    firsts = []
    for topic in topics:
        if topic.name not in seen:
            seen.add(topic.name)
            firsts.append(topic)
    return firsts


def _check_assignment(broker: Broker, assignment: dict[int, Sequence[int]],
                      first_partition: int = 0) -> None:
    """A manual assignment as Kafka checks it, naming only live brokers (alone: this node)."""
    try:
        check_explicit_assignment(assignment, _live_brokers(broker),
                                  first_partition=first_partition)
    except AssignmentError as exc:
        raise ApiError(exc.code, exc.message) from None


def _live_brokers(broker: Broker) -> list[int]:
    """The brokers replicas may be placed on: the live ones of the cluster, or this one."""
    return broker.cluster.live_broker_ids() if broker.cluster is not None else [broker.node_id]


def _check_replication_factor(broker: Broker, factor: int) -> None:
    if factor == 0 or factor < UNSET:
        raise ApiError(ErrorCode.invalid_replication_factor,
                       "Replication factor must be larger than 0, or -1 to use the default value.")
    available = len(_live_brokers(broker))
    if factor > available:
        raise ApiError(ErrorCode.invalid_replication_factor,
                       f"Replication factor: {factor} larger than available brokers: "
                       f"{available}.")


def _partition_count(broker: Broker, topic: Any) -> int:
    """How many partitions ``topic`` asks for, after checking its replicas (Kafka's rules)."""
    if topic.assignments:
        if topic.replication_factor != UNSET:
            raise ApiError(ErrorCode.invalid_request,
                           "A manual partition assignment was specified, but replication factor "
                           "was not set to -1.")
        if topic.num_partitions != UNSET:
            raise ApiError(ErrorCode.invalid_request,
                           "A manual partition assignment was specified, but numPartitions was "
                           "not set to -1.")
        assignment = {a.partition_index: a.broker_ids for a in topic.assignments}
        if len(assignment) != len(topic.assignments):  # an index given twice
            raise ApiError(ErrorCode.invalid_replica_assignment,
                           "partitions should be a consecutive 0-based integer sequence")
        _check_assignment(broker, assignment)
        return len(assignment)
    factor = topic.replication_factor
    _check_replication_factor(broker, broker.config.default_replication_factor
                              if factor == UNSET else factor)
    if topic.num_partitions == 0 or topic.num_partitions < UNSET:
        raise ApiError(ErrorCode.invalid_partitions,
                       "Number of partitions was set to an invalid non-positive value.")
    if topic.num_partitions == UNSET:
        return int(broker.config.num_partitions)
    return int(topic.num_partitions)


def _topic_configs(topic: Any) -> dict[str, str | None]:
    configs: dict[str, str | None] = {}
    for c in topic.configs:
        if c.value is None:
            raise ApiError(ErrorCode.invalid_config,
                           f"Null value not supported for topic configs: {c.name}")
        configs[c.name] = c.value
    return configs


async def _create_one(ctx: RequestContext, topic: Any, validate_only: bool) -> Any:
    m = ctx.resp
    broker = ctx.broker
    name = topic.name
    if not authz.may_create_topic(ctx, name):
        raise ApiError(ErrorCode.topic_authorization_failed, "Authorization failed.")
    validate_topic_name(name)
    if broker.metadata.topic(name) is not None:
        raise ApiError(ErrorCode.topic_already_exists, f"Topic '{name}' already exists.")
    partitions = _partition_count(broker, topic)
    assignment = ({a.partition_index: list(a.broker_ids) for a in topic.assignments}
                  if topic.assignments else None)
    factor = (len(next(iter(assignment.values()))) if assignment else
              broker.config.default_replication_factor
              if topic.replication_factor == UNSET else topic.replication_factor)
    if not validate_only:
        mutation_quota.take(ctx, len(assignment) if assignment else partitions)
    created = await broker.create_topic_async(name, partitions, _topic_configs(topic),
                                              validate_only=validate_only,
                                              replication_factor=factor, assignment=assignment)
    configs: tuple[Any, ...] = ()
    if hasattr(m, "CreatableTopicConfigs"):  # v5+ return the resulting configs
        configs = tuple(
            build(m.CreatableTopicConfigs, name=e.name,
                  value=None if e.is_sensitive else e.value, read_only=e.read_only,
                  config_source=int(e.source), is_sensitive=e.is_sensitive)
            for e in topic_config_entries(broker, created.configs)
        )
    return build(
        m.CreatableTopicResult,
        name=name,
        # validate_only creates nothing, so there is no id to report.
        topic_id=None if validate_only else created.topic_id,
        error_code=ErrorCode.none,
        error_message=None,
        num_partitions=partitions,
        replication_factor=factor,
        configs=configs,
    )


def _requested_partitions(broker: Broker, topics: Iterable[Any]) -> int:
    """Partitions a CreateTopics request asks for in all, counted as Kafka's controller does."""
    total = 0
    for topic in topics:
        if topic.assignments:
            total += len(topic.assignments)
        elif topic.num_partitions == UNSET:
            total += int(broker.config.num_partitions)
        elif topic.num_partitions > 0:
            total += topic.num_partitions
    return total


async def handle_create_topics(request: Any, ctx: RequestContext) -> Any:
    m = ctx.resp
    if _requested_partitions(ctx.broker, request.topics) > MAX_PARTITIONS_PER_REQUEST:
        # Kafka refuses the whole request before looking at any topic (its controller's
        # validateTotalNumberOfPartitions), so a bit flip in num_partitions creates nothing.
        return build(m.CreateTopicsResponse, throttle_time=NO_THROTTLE, topics=tuple(
            build(m.CreatableTopicResult, name=t.name, topic_id=None,
                  error_code=ErrorCode.policy_violation,
                  error_message="Excessively large number of partitions per request.",
                  num_partitions=UNSET, replication_factor=UNSET, configs=())
            for t in _first_of_each(request.topics)))
    duplicates = _duplicates(t.name for t in request.topics)
    results = []
    reported: set[str] = set()
    for topic in request.topics:
        if topic.name in reported:
            continue
        if topic.name in duplicates:
            # Kafka answers once per duplicated name and creates none of them.
            reported.add(topic.name)
            error: ApiError | None = ApiError(ErrorCode.invalid_request, "Duplicate topic name.")
        else:
            try:
                results.append(await _create_one(ctx, topic, request.validate_only))
                continue
            except ApiError as exc:
                error = exc
        assert error is not None
        results.append(build(
            m.CreatableTopicResult, name=topic.name, topic_id=None, error_code=error.code,
            error_message=error.message, num_partitions=UNSET, replication_factor=UNSET,
            configs=()))
    mutation_quota.finish(ctx)
    return build(m.CreateTopicsResponse, throttle_time=NO_THROTTLE, topics=tuple(results))


# -- DeleteTopics -------------------------------------------------------------------------------


def _delete_result(m: Any, name: str | None, topic_id: uuid.UUID | None, code: ErrorCode,
                   message: str | None = None) -> Any:
    return build(m.DeletableTopicResult, name=name, topic_id=topic_id, error_code=code,
                 error_message=message)


async def _delete_one(ctx: RequestContext, name: str | None, topic_id: uuid.UUID | None) -> Any:
    m = ctx.resp
    broker = ctx.broker
    if name is None and topic_id is None:
        return _delete_result(m, None, None, ErrorCode.invalid_request,
                              "Neither topic name nor id were specified.")
    if name is not None and topic_id is not None:
        return _delete_result(m, name, topic_id, ErrorCode.invalid_request,
                              "You may not specify both topic name and topic id.")
    if topic_id is not None:
        found = broker.metadata.topic_by_id(topic_id)
        if found is None:
            return _delete_result(m, None, topic_id, ErrorCode.unknown_topic_id,
                                  f"Topic id {topic_id} does not exist.")
        name = found.name
    assert name is not None
    if not authz.allowed(ctx, authz.Op.DELETE, authz.TOPIC, name):
        return _delete_result(m, name, topic_id, ErrorCode.topic_authorization_failed,
                              "Authorization failed.")
    existing = broker.metadata.topic(name)
    if existing is None:
        return _delete_result(m, name, None, ErrorCode.unknown_topic_or_partition,
                              f"Topic '{name}' does not exist.")
    try:
        mutation_quota.take(ctx, existing.partitions)
        await broker.delete_topic_async(name)
    except ApiError as exc:
        return _delete_result(m, name, existing.topic_id, exc.code, exc.message)
    return _delete_result(m, name, existing.topic_id, ErrorCode.none)


async def handle_delete_topics(request: Any, ctx: RequestContext) -> Any:
    """Delete topics by name (v1-5) or by name or id (v6).

    As in Kafka, internal topics may be deleted through the API; only ``kafka-topics.sh``
    refuses, on the client side.
    """
    m = ctx.resp
    # v6 lists (name, id) pairs; earlier versions only names.
    if hasattr(request, "topics"):
        wanted = [(t.name, t.topic_id) for t in request.topics]
    else:
        wanted = [(name, None) for name in request.topic_names]
    results: list[Any] = []
    if not ctx.broker.config.delete_topic_enable:
        # Kafka signals a disabled deletion with INVALID_REQUEST to clients older than v3.
        code = (ErrorCode.topic_deletion_disabled if ctx.version >= 3
                else ErrorCode.invalid_request)
        results = [_delete_result(m, name, topic_id, code, "Topic deletion is disabled.")
                   for name, topic_id in wanted]
        return build(m.DeleteTopicsResponse, throttle_time=NO_THROTTLE, responses=tuple(results))
    # A topic named twice (by name, or by id) fails once and is not deleted, as in Kafka.
    duplicates = _duplicates(wanted)
    reported: set[tuple[str | None, uuid.UUID | None]] = set()
    for name, topic_id in wanted:
        if (name, topic_id) in duplicates:
            if (name, topic_id) not in reported:
                reported.add((name, topic_id))
                what = "name" if topic_id is None else "id"
                results.append(_delete_result(m, name, topic_id, ErrorCode.invalid_request,
                                              f"Duplicate topic {what}."))
            continue
        results.append(await _delete_one(ctx, name, topic_id))
    mutation_quota.finish(ctx)
    return build(m.DeleteTopicsResponse, throttle_time=NO_THROTTLE, responses=tuple(results))


# -- CreatePartitions ---------------------------------------------------------------------------


async def _grow(ctx: RequestContext, topic: Any, validate_only: bool) -> None:
    broker = ctx.broker
    if not authz.allowed(ctx, authz.Op.ALTER, authz.TOPIC, topic.name):
        raise ApiError(ErrorCode.topic_authorization_failed, "Authorization failed.")
    existing = broker.metadata.topic(topic.name)
    if existing is None:
        raise ApiError(ErrorCode.unknown_topic_or_partition,
                       f"Topic '{topic.name}' does not exist.")
    if topic.assignments is not None and topic.count > existing.partitions:
        new = topic.count - existing.partitions
        if len(topic.assignments) != new:
            raise ApiError(ErrorCode.invalid_replica_assignment,
                           f"Increasing the number of partitions by {new} but "
                           f"{len(topic.assignments)} assignments provided.")
        _check_assignment(broker, {index: a.broker_ids for index, a in
                                   enumerate(topic.assignments, start=existing.partitions)},
                          first_partition=existing.partitions)
    assignment = None
    if topic.assignments is not None and topic.count > existing.partitions:
        assignment = {index: list(a.broker_ids) for index, a in
                      enumerate(topic.assignments, start=existing.partitions)}
    if not validate_only and topic.count > existing.partitions:
        mutation_quota.take(ctx, topic.count - existing.partitions)
    await broker.add_partitions_async(topic.name, topic.count, validate_only=validate_only,
                                      assignment=assignment)


def _new_partitions(broker: Broker, topics: Iterable[Any]) -> int:
    """Partitions a CreatePartitions request would add in all (unknown topics add none)."""
    total = 0
    for topic in topics:
        existing = broker.metadata.topic(topic.name)
        if existing is not None and topic.count > existing.partitions:
            total += topic.count - existing.partitions
    return total


async def handle_create_partitions(request: Any, ctx: RequestContext) -> Any:
    m = ctx.resp
    if _new_partitions(ctx.broker, request.topics) > MAX_PARTITIONS_PER_REQUEST:
        # Kafka's controller bounds the records of one operation (MAX_RECORDS_PER_USER_OP)
        # and refuses the whole request with this message.
        return build(m.CreatePartitionsResponse, throttle_time=NO_THROTTLE, results=tuple(
            build(m.CreatePartitionsTopicResult, name=t.name,
                  error_code=ErrorCode.policy_violation,
                  error_message="Unable to perform excessively large batch operation.")
            for t in _first_of_each(request.topics)))
    duplicates = _duplicates(t.name for t in request.topics)
    results = []
    reported: set[str] = set()
    for topic in request.topics:
        if topic.name in reported:
            continue
        code, message = ErrorCode.none, None
        if topic.name in duplicates:
            reported.add(topic.name)
            code, message = ErrorCode.invalid_request, "Duplicate topic name."
        else:
            try:
                await _grow(ctx, topic, request.validate_only)
            except ApiError as exc:
                code, message = exc.code, exc.message
        results.append(build(m.CreatePartitionsTopicResult, name=topic.name, error_code=code,
                             error_message=message))
    mutation_quota.finish(ctx)
    return build(m.CreatePartitionsResponse, throttle_time=NO_THROTTLE, results=tuple(results))
