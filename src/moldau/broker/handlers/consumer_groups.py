"""KIP-848 consumer groups on the wire: ConsumerGroupHeartbeat and ConsumerGroupDescribe.

Thin translations: the wire names topics by id, the state machine
(:mod:`moldau.coordinator.consumer_group`) by name, so ids are resolved here against the
current metadata. Owned partitions of a topic that no longer exists are simply dropped: the
member cannot own them any more. Regular-expression subscriptions (v1) are refused with
INVALID_REQUEST because the coordinator does not evaluate them.
"""

from __future__ import annotations

import datetime
from collections import defaultdict
from typing import Any

from kio.schema.errors import ErrorCode

from ...coordinator.consumer_group import (
    ConsumerGroup,
    ConsumerMember,
    HeartbeatRequest,
    Partitions,
    validate_request,
)
from ...protocol.codec import build
from .. import authz
from ..broker import RequestContext, now_ms
from .api_versions import NO_THROTTLE
from .authorized_operations import GROUP_OPERATIONS, NOT_REQUESTED, authorized_operations
from .groups import loading_error, millis


def _owned(ctx: RequestContext, entries: Any) -> Partitions | None:
    if entries is None:
        return None
    owned: set[tuple[str, int]] = set()
    for entry in entries:
        topic = ctx.broker.metadata.topic_by_id(entry.topic_id)
        if topic is not None:
            owned.update((topic.name, int(p)) for p in entry.partitions)
    return frozenset(owned)


def _by_topic(partitions: Partitions) -> dict[str, list[int]]:
    grouped: dict[str, list[int]] = defaultdict(list)
    for topic, partition in sorted(partitions):
        grouped[topic].append(partition)
    return grouped


async def handle_consumer_group_heartbeat(request: Any, ctx: RequestContext) -> Any:
    m = ctx.resp

    def answer(code: ErrorCode, message: str | None = None, **fields: Any) -> Any:
        return build(m.ConsumerGroupHeartbeatResponse, throttle_time=NO_THROTTLE,
                     error_code=code, error_message=message,
                     **{"member_epoch": 0, "heartbeat_interval": NO_THROTTLE, **fields})

    loading = loading_error(ctx)
    if loading is not None:
        return answer(loading)
    if not request.group_id:
        return answer(ErrorCode.invalid_request, "GroupId can't be empty.")
    # librdkafka sends an empty regex alongside topic names: only a real one is refused.
    if getattr(request, "subscribed_topic_regex", None):
        return answer(ErrorCode.invalid_request,
                      "SubscribedTopicRegex is not supported by this broker.")
    topics = request.subscribed_topic_names
    req = HeartbeatRequest(
        member_id=request.member_id,
        member_epoch=request.member_epoch,
        instance_id=request.instance_id,
        rack_id=request.rack_id,
        rebalance_timeout_ms=millis(request.rebalance_timeout),
        subscribed_topics=None if topics is None else tuple(str(t) for t in topics),
        server_assignor=request.server_assignor,
        owned_partitions=_owned(ctx, request.topic_partitions),
        client_id=ctx.client_id,
        client_host=ctx.client_host,
    )
    problem = validate_request(req, ctx.version)
    if problem is not None:
        return answer(ErrorCode.invalid_request, problem)
    resp = ctx.broker.groups.consumer_heartbeat(request.group_id, req, now_ms())
    if resp.error is not ErrorCode.none:
        return answer(resp.error, resp.message)
    assignment = None
    if resp.assignment is not None:
        entries = []
        for name, parts in _by_topic(resp.assignment).items():
            topic = ctx.broker.metadata.topic(name)
            if topic is not None:
                entries.append(build(m.TopicPartitions, topic_id=topic.topic_id,
                                     partitions=tuple(parts)))
        assignment = build(m.Assignment, topic_partitions=tuple(entries))
    return answer(
        ErrorCode.none, None, member_id=resp.member_id, member_epoch=resp.member_epoch,
        heartbeat_interval=datetime.timedelta(milliseconds=resp.heartbeat_interval_ms),
        assignment=assignment,
    )


def _describe_assignment(ctx: RequestContext, partitions: Partitions) -> Any:
    m = ctx.resp
    entries = []
    for name, parts in _by_topic(partitions).items():
        topic = ctx.broker.metadata.topic(name)
        entries.append(build(m.TopicPartitions, topic_id=None if topic is None else topic.topic_id,
                             topic_name=name, partitions=tuple(parts)))
    return build(m.Assignment, topic_partitions=tuple(entries))


def _describe_member(ctx: RequestContext, group: ConsumerGroup, member: ConsumerMember) -> Any:
    return build(
        ctx.resp.Member,
        member_id=member.member_id,
        instance_id=member.instance_id,
        rack_id=member.rack_id,
        member_epoch=member.member_epoch,
        client_id=member.client_id,
        client_host=member.client_host,
        subscribed_topic_names=tuple(sorted(member.subscribed_topics)),
        subscribed_topic_regex=None,
        assignment=_describe_assignment(ctx, member.assigned),
        target_assignment=_describe_assignment(
            ctx, group.target.get(member.member_id, frozenset())),
        member_type=1,
    )


async def handle_consumer_group_describe(request: Any, ctx: RequestContext) -> Any:
    m = ctx.resp
    loading = loading_error(ctx)
    described = []
    for group_id in request.group_ids:
        if not authz.allowed(ctx, authz.Op.DESCRIBE, authz.GROUP, group_id):
            described.append(build(
                m.DescribedGroup, error_code=ErrorCode.group_authorization_failed,
                error_message=None, group_id=group_id, group_state="", group_epoch=-1,
                assignment_epoch=-1, assignor_name="", members=(),
                authorized_operations=NOT_REQUESTED))
            continue
        group = ctx.broker.groups.consumer_groups.get(group_id)
        if loading is not None or group is None:
            code = loading or ErrorCode.group_id_not_found
            described.append(build(
                m.DescribedGroup, error_code=code,
                error_message=None if loading else f"Group {group_id} not found.",
                group_id=group_id, group_state="Dead", group_epoch=-1, assignment_epoch=-1,
                assignor_name="", members=(), authorized_operations=NOT_REQUESTED))
            continue
        described.append(build(
            m.DescribedGroup, error_code=ErrorCode.none, group_id=group_id,
            group_state=group.state.value, group_epoch=group.group_epoch,
            assignment_epoch=group.assignment_epoch, assignor_name=group.assignor,
            members=tuple(_describe_member(ctx, group, mem) for mem in group.members.values()),
            authorized_operations=authorized_operations(
                request.include_authorized_operations,
                authz.operations(ctx, authz.GROUP, group_id, GROUP_OPERATIONS)),
        ))
    return build(m.ConsumerGroupDescribeResponse, throttle_time=NO_THROTTLE,
                 groups=tuple(described))
