"""Committed offsets: OffsetCommit, OffsetFetch, OffsetDelete.

A commit is answered after its records are appended to ``__consumer_offsets`` (the service
does the append before returning). Partitions of topics that do not exist get
UNKNOWN_TOPIC_OR_PARTITION, the others are judged by the group's rules; one request can mix
both, as with Kafka.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from kio.schema.errors import ErrorCode

from ...coordinator.manager import CommittedOffset
from ...coordinator.offsets import OffsetAndMetadata, TopicPartition
from ...protocol.codec import build
from .. import authz
from ..broker import RequestContext, now_ms
from .api_versions import NO_THROTTLE
from .groups import loading_error, millis

#: OffsetCommit and OffsetFetch v10 name topics by id (KIP-848's topic-id versions).
_TOPIC_IDS_FROM = 10
#: OffsetCommit v9 answers a member commit to an unknown group with GROUP_ID_NOT_FOUND.
_GROUP_ID_NOT_FOUND_FROM = 9


def _topic_names(ctx: RequestContext, topics: Any) -> list[str | None]:
    """Each request topic's name; v10 names topics by id, and an id that names no topic
    (the zero id included) is None, answered UNKNOWN_TOPIC_ID as Kafka does."""
    names: list[str | None] = []
    for topic in topics:
        if not hasattr(topic, "topic_id"):
            names.append(topic.name)
            continue
        found = None if topic.topic_id is None else \
            ctx.broker.metadata.topic_by_id(topic.topic_id)
        names.append(None if found is None else found.name)
    return names


def _request_offsets(request: Any, names: list[str | None]) -> list[CommittedOffset]:
    return [
        CommittedOffset(
            topic=name,
            partition=p.partition_index,
            offset=p.committed_offset,
            leader_epoch=getattr(p, "committed_leader_epoch", -1),
            metadata=p.committed_metadata,
        )
        for topic, name in zip(request.topics, names, strict=True) if name is not None
        for p in topic.partitions
    ]


async def handle_offset_commit(request: Any, ctx: RequestContext) -> Any:
    m = ctx.resp
    names = _topic_names(ctx, request.topics)
    offsets = _request_offsets(request, names)
    code = loading_error(ctx, request.group_id)
    denied: set[str] = set()
    if code is None and ctx.broker.authorizer is not None:
        # Kafka: READ on the group, then READ on each topic (those fail alone).
        if not authz.allowed(ctx, authz.Op.READ, authz.GROUP, request.group_id):
            code = ErrorCode.group_authorization_failed
        else:
            denied = {n for n in names if n is not None
                      and not authz.allowed(ctx, authz.Op.READ, authz.TOPIC, n)}
    if denied:
        refused = {(o.topic, o.partition): ErrorCode.topic_authorization_failed
                   for o in offsets if o.topic in denied}
        offsets = [o for o in offsets if o.topic not in denied]
    if code is not None:
        errors = {(o.topic, o.partition): code for o in offsets}
    else:
        retention = getattr(request, "retention_time", None)
        errors = await ctx.broker.groups.commit_offsets(
            request.group_id,
            request.member_id,
            getattr(request, "group_instance_id", None),
            request.generation_id_or_member_epoch,
            offsets,
            now_ms(),
            retention_ms=-1 if retention is None else millis(retention),
            unknown_group_error=(ErrorCode.group_id_not_found
                                 if ctx.version >= _GROUP_ID_NOT_FOUND_FROM
                                 else ErrorCode.illegal_generation),
        )
    if denied:
        errors = {**errors, **refused}
    topics = tuple(
        build(m.OffsetCommitResponseTopic, name=name,
              topic_id=getattr(topic, "topic_id", None), partitions=tuple(
                  build(m.OffsetCommitResponsePartition, partition_index=p.partition_index,
                        error_code=ErrorCode.unknown_topic_id if name is None
                        else errors[(name, p.partition_index)])
                  for p in topic.partitions))
        for topic, name in zip(request.topics, names, strict=True)
    )
    return build(m.OffsetCommitResponse, throttle_time=NO_THROTTLE, topics=topics)


# -- OffsetFetch -------------------------------------------------------------------------------


def _fetched_topics(
    ctx: RequestContext,
    offsets: Iterable[tuple[TopicPartition, OffsetAndMetadata | None]],
    partition_error: ErrorCode,
    unstable: frozenset[TopicPartition] | set[TopicPartition] = frozenset(),
) -> tuple[Any, ...]:
    """Response topics, in first-seen order; -1 and "" where nothing is committed, and
    UNSTABLE_OFFSET_COMMIT with -1 for the ``unstable`` partitions."""
    m = ctx.resp
    by_id = ctx.version >= _TOPIC_IDS_FROM
    ids: dict[str, uuid.UUID] = {}
    if by_id:
        offsets = list(offsets)
        for topic in dict.fromkeys(tp[0] for tp, _ in offsets):
            found = ctx.broker.metadata.topic(topic)
            if found is not None:
                ids[topic] = found.topic_id
    flexible_names = ctx.version >= 8
    topic_cls = m.OffsetFetchResponseTopics if flexible_names else m.OffsetFetchResponseTopic
    partition_cls = (m.OffsetFetchResponsePartitions if flexible_names
                     else m.OffsetFetchResponsePartition)
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), committed in offsets:
        if by_id and topic not in ids:
            continue  # v10 names topics by id: one deleted meanwhile cannot be named
        if (topic, partition) in unstable:
            by_topic.setdefault(topic, []).append(build(
                partition_cls, partition_index=partition, committed_offset=-1,
                committed_leader_epoch=-1, metadata="",
                error_code=ErrorCode.unstable_offset_commit))
            continue
        by_topic.setdefault(topic, []).append(build(
            partition_cls,
            partition_index=partition,
            committed_offset=-1 if committed is None else committed.offset,
            committed_leader_epoch=-1 if committed is None else committed.leader_epoch,
            metadata="" if committed is None else committed.metadata,
            error_code=partition_error,
        ))
    return tuple(build(topic_cls, name=name, topic_id=ids.get(name), partitions=tuple(parts))
                 for name, parts in by_topic.items())


def _fetch_group(ctx: RequestContext, group_id: str, topics: Any,
                 member: tuple[str | None, int] = (None, -1),
                 require_stable: bool = False) -> tuple[ErrorCode, tuple[Any, ...]]:
    """(group error, response topics) for one group; ``topics`` None means all.

    ``member`` is the KIP-848 member id and epoch OffsetFetch v9 may carry. With
    ``require_stable`` (v7+, KIP-447) a partition with pending transactional offsets is
    UNSTABLE_OFFSET_COMMIT (the client retries); without it, the last committed offset.
    """
    requested: list[TopicPartition] | None = None
    unknown_ids: list[Any] = []
    if topics is not None:
        names = _topic_names(ctx, topics)
        requested = [(name, p) for t, name in zip(topics, names, strict=True)
                     if name is not None for p in t.partition_indexes]
        unknown_ids = [t for t, name in zip(topics, names, strict=True) if name is None]
    code = loading_error(ctx, group_id)
    if code is None and not authz.allowed(ctx, authz.Op.DESCRIBE, authz.GROUP, group_id):
        code = ErrorCode.group_authorization_failed
    if code is not None:
        if ctx.version < 2 and requested is not None:  # v1 has no group-level error
            return ErrorCode.none, _fetched_topics(ctx, ((tp, None) for tp in requested), code)
        return code, ()
    code = ctx.broker.groups.validate_consumer_fetch(group_id, *member)
    if code is not ErrorCode.none:
        return code, ()
    offsets = ctx.broker.groups.fetch_offsets(group_id, requested)
    refused: tuple[Any, ...] = ()
    if ctx.broker.authorizer is not None:
        # Topics without DESCRIBE: refused when named, left out of "all topics" (Kafka).
        offsets = list(offsets)
        denied = {tp for tp, _ in offsets
                  if not authz.allowed(ctx, authz.Op.DESCRIBE, authz.TOPIC, tp[0])}
        offsets = [(tp, c) for tp, c in offsets if tp not in denied]
        if requested is not None:
            refused = _fetched_topics(ctx, ((tp, None) for tp in requested if tp in denied),
                                      ErrorCode.topic_authorization_failed)
    unstable = ctx.broker.groups.unstable_partitions(group_id) if require_stable else set()
    return ErrorCode.none, (_fetched_topics(ctx, offsets, ErrorCode.none, unstable) + refused
                            + _unknown_id_topics(ctx, unknown_ids))


def _unknown_id_topics(ctx: RequestContext, topics: list[Any]) -> tuple[Any, ...]:
    """v10 topics whose id names no topic: each partition UNKNOWN_TOPIC_ID, as Kafka."""
    m = ctx.resp
    return tuple(build(m.OffsetFetchResponseTopics, topic_id=t.topic_id, partitions=tuple(
        build(m.OffsetFetchResponsePartitions, partition_index=p, committed_offset=-1,
              committed_leader_epoch=-1, metadata="", error_code=ErrorCode.unknown_topic_id)
        for p in t.partition_indexes)) for t in topics)


async def handle_offset_fetch(request: Any, ctx: RequestContext) -> Any:
    m = ctx.resp
    require_stable = bool(getattr(request, "require_stable", False))
    if ctx.version >= 8:
        groups = []
        for group in request.groups:
            member = (getattr(group, "member_id", None), getattr(group, "member_epoch", -1))
            code, topics = _fetch_group(ctx, group.group_id, group.topics, member,
                                        require_stable)
            groups.append(build(m.OffsetFetchResponseGroup, group_id=group.group_id,
                                topics=topics, error_code=code))
        return build(m.OffsetFetchResponse, throttle_time=NO_THROTTLE, groups=tuple(groups))
    code, topics = _fetch_group(ctx, request.group_id, request.topics,
                                require_stable=require_stable)
    return build(m.OffsetFetchResponse, throttle_time=NO_THROTTLE, topics=topics,
                 error_code=code)


# -- OffsetDelete ------------------------------------------------------------------------------


async def handle_offset_delete(request: Any, ctx: RequestContext) -> Any:
    m = ctx.resp
    requested = [(t.name, p.partition_index) for t in request.topics for p in t.partitions]
    top = loading_error(ctx, request.group_id)
    errors: dict[TopicPartition, ErrorCode] = {}
    if top is None:
        top, errors = await ctx.broker.groups.delete_offsets(request.group_id, requested,
                                                             now_ms())
    topics: tuple[Any, ...] = ()
    if top is ErrorCode.none:
        topics = tuple(
            build(m.OffsetDeleteResponseTopic, name=t.name, partitions=tuple(
                build(m.OffsetDeleteResponsePartition, partition_index=p.partition_index,
                      error_code=errors[(t.name, p.partition_index)])
                for p in t.partitions))
            for t in request.topics
        )
    return build(m.OffsetDeleteResponse, error_code=top, throttle_time=NO_THROTTLE,
                 topics=topics)
