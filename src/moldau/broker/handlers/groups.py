"""Group membership: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup.

Thin translations between kio's versioned messages and the broker's
:class:`~moldau.broker.group_service.GroupService`; the rules live in
:mod:`moldau.coordinator`. JoinGroup and SyncGroup may wait for other members: their
handlers await the service, which resolves them when the group decides (no polling).
A single node coordinates every group, so NOT_COORDINATOR is never answered.
"""

from __future__ import annotations

import datetime
import time
from typing import Any

from kio.schema.errors import ErrorCode

from ...coordinator.effects import JoinResponse
from ...coordinator.group import JoinRequest
from ...protocol.codec import build
from .. import authz
from ..broker import RequestContext, now_ms
from ..errors import ApiError
from ..group_service import OFFSETS_TOPIC
from .api_versions import NO_THROTTLE

#: FindCoordinator key types.
GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1

_MESSAGES = {
    ErrorCode.coordinator_not_available: "The coordinator is not available.",
    ErrorCode.coordinator_load_in_progress: "The coordinator is loading and hence can't "
                                            "process requests.",
    ErrorCode.invalid_request: "Unknown coordinator key type.",
}


def millis(value: datetime.timedelta | int) -> int:
    """kio decodes duration fields as timedeltas; the coordinator counts milliseconds."""
    if isinstance(value, datetime.timedelta):
        return value // datetime.timedelta(milliseconds=1)
    return int(value)


def loading_error(ctx: RequestContext, group_id: str | None = None) -> ErrorCode | None:
    """COORDINATOR_LOAD_IN_PROGRESS while loading; in a cluster, NOT_COORDINATOR for a group
    whose ``__consumer_offsets`` partition this broker does not lead."""
    if ctx.broker.groups.loading:
        return ErrorCode.coordinator_load_in_progress
    if group_id is not None and ctx.broker.cluster is not None \
            and coordinator_of(ctx, group_id) != ctx.broker.node_id:
        return ErrorCode.not_coordinator
    return None


def coordinator_of(ctx: RequestContext, group_id: str) -> int:
    """In a cluster: the leader of the group's ``__consumer_offsets`` partition (-1: none)."""
    cluster = ctx.broker.cluster
    partition = ctx.broker.groups.partition_of(group_id)
    if cluster is None or partition is None:
        return -1
    return cluster.partition_view(OFFSETS_TOPIC, partition).leader


# -- FindCoordinator ---------------------------------------------------------------------------


def _locate(ctx: RequestContext, key_type: int) -> ErrorCode:
    """Whether this node can coordinate keys of ``key_type`` right now (creating the offsets
    or transaction state topic on first use, as Kafka does)."""
    if key_type == TRANSACTION_KEY_TYPE:
        if ctx.broker.transactions.loading:
            return ErrorCode.coordinator_not_available
        try:
            ctx.broker.transactions.state_topic(create=True)
        except ApiError:
            return ErrorCode.coordinator_not_available
        return ErrorCode.none
    if key_type != GROUP_KEY_TYPE:
        return ErrorCode.invalid_request
    if ctx.broker.groups.loading:
        return ErrorCode.coordinator_not_available  # not ready yet: ask again shortly
    try:
        ctx.broker.groups.offsets_topic(create=True)
    except ApiError:
        return ErrorCode.coordinator_not_available
    return ErrorCode.none


async def handle_find_coordinator(request: Any, ctx: RequestContext) -> Any:
    m = ctx.resp
    key_type = getattr(request, "key_type", GROUP_KEY_TYPE)
    code = _locate(ctx, key_type)
    keys = request.coordinator_keys if ctx.version >= 4 else (request.key,)
    answers = [_coordinator(ctx, code, key, key_type) for key in keys]
    if ctx.version >= 4:
        coordinators = tuple(
            build(m.Coordinator, key=key, error_code=code, error_message=_MESSAGES.get(code),
                  **node)
            for key, (code, node) in zip(keys, answers, strict=True)
        )
        return build(m.FindCoordinatorResponse, throttle_time=NO_THROTTLE,
                     coordinators=coordinators)
    code, node = answers[0]
    return build(m.FindCoordinatorResponse, throttle_time=NO_THROTTLE, error_code=code,
                 error_message=_MESSAGES.get(code), **node)


def _coordinator(ctx: RequestContext, code: ErrorCode, key: str,
                 key_type: int = GROUP_KEY_TYPE) -> tuple[ErrorCode, dict]:
    """The coordinator of ``key``: this broker alone; in a cluster, the leader of the
    group's ``__consumer_offsets`` partition (of the transactional id's
    ``__transaction_state`` partition), wherever it is."""
    broker = ctx.broker
    none = dict(node_id=-1, host="", port=-1)
    if code is not ErrorCode.none:
        return code, none
    if broker.authorizer is not None:
        # Kafka: DESCRIBE on the group or the transactional id.
        if key_type == TRANSACTION_KEY_TYPE:
            if not authz.allowed(ctx, authz.Op.DESCRIBE, authz.TXN_ID, key):
                return ErrorCode.transactional_id_authorization_failed, none
        elif not authz.allowed(ctx, authz.Op.DESCRIBE, authz.GROUP, key):
            return ErrorCode.group_authorization_failed, none
    if broker.cluster is None:
        listener = broker.config.advertised_listener(ctx.listener_name)
        return code, dict(node_id=broker.node_id, host=listener.host, port=listener.port)
    if key_type == TRANSACTION_KEY_TYPE:
        leader = broker.transactions.coordinator_of(key)
        if leader is None:
            return ErrorCode.coordinator_not_available, none
    else:
        leader = coordinator_of(ctx, key)
    registration = broker.cluster.store.brokers().get(leader)
    endpoint = registration.endpoint(ctx.listener_name) \
        if registration is not None else None
    if endpoint is None:
        return ErrorCode.coordinator_not_available, none
    return code, dict(node_id=leader, host=endpoint.host, port=endpoint.port)


# -- JoinGroup -----------------------------------------------------------------------------


def _join_response(ctx: RequestContext, r: Any) -> Any:
    m = ctx.resp
    protocol_name = r.protocol_name
    if ctx.version < 7 and protocol_name is None:
        protocol_name = ""  # not nullable before v7
    members = tuple(
        build(m.JoinGroupResponseMember, member_id=j.member_id,
              group_instance_id=j.group_instance_id, metadata=j.metadata)
        for j in r.members
    )
    return build(
        m.JoinGroupResponse,
        throttle_time=NO_THROTTLE,
        error_code=r.error,
        generation_id=r.generation_id,
        protocol_type=r.protocol_type,
        protocol_name=protocol_name,
        leader=r.leader,
        skip_assignment=r.skip_assignment,
        member_id=r.member_id,
        members=members,
    )


async def handle_join_group(request: Any, ctx: RequestContext) -> Any:
    error = loading_error(ctx, request.group_id)
    if error is not None:
        return _join_response(ctx, JoinResponse(error, member_id=request.member_id))
    session_timeout = millis(request.session_timeout)
    join = JoinRequest(
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        client_id=ctx.client_id,
        client_host=ctx.client_host,
        session_timeout_ms=session_timeout,
        # v0 had one timeout for both.
        rebalance_timeout_ms=millis(getattr(request, "rebalance_timeout", session_timeout)),
        protocol_type=request.protocol_type,
        protocols=tuple((p.name, bytes(p.metadata)) for p in request.protocols),
        require_known_member_id=ctx.version >= 4,
        supports_skip_assignment=ctx.version >= 9,
    )
    started = time.perf_counter_ns() if ctx.timing is not None else 0
    response = await ctx.broker.groups.join_group(request.group_id, join, now_ms())
    if ctx.timing is not None:  # waiting for the group to decide: Kafka's remote time
        ctx.timing.remote_ns += time.perf_counter_ns() - started
    return _join_response(ctx, response)


# -- SyncGroup -----------------------------------------------------------------------------


async def handle_sync_group(request: Any, ctx: RequestContext) -> Any:
    m = ctx.resp
    error = loading_error(ctx, request.group_id)
    if error is None:
        assignments = {a.member_id: bytes(a.assignment) for a in request.assignments}
        started = time.perf_counter_ns() if ctx.timing is not None else 0
        result = await ctx.broker.groups.sync_group(
            request.group_id,
            request.member_id,
            getattr(request, "group_instance_id", None),
            request.generation_id,
            getattr(request, "protocol_type", None),
            getattr(request, "protocol_name", None),
            assignments,
            now_ms(),
        )
        if ctx.timing is not None:
            ctx.timing.remote_ns += time.perf_counter_ns() - started
        error = result.error
        protocol_type, protocol_name, assignment = (
            result.protocol_type, result.protocol_name, result.assignment)
    else:
        protocol_type = protocol_name = None
        assignment = b""
    return build(m.SyncGroupResponse, throttle_time=NO_THROTTLE, error_code=error,
                 protocol_type=protocol_type, protocol_name=protocol_name,
                 assignment=assignment)


# -- Heartbeat -----------------------------------------------------------------------------


async def handle_heartbeat(request: Any, ctx: RequestContext) -> Any:
    code = loading_error(ctx, request.group_id) or ctx.broker.groups.heartbeat(
        request.group_id, request.member_id, getattr(request, "group_instance_id", None),
        request.generation_id, now_ms())
    return build(ctx.resp.HeartbeatResponse, throttle_time=NO_THROTTLE, error_code=code)


# -- LeaveGroup ----------------------------------------------------------------------------


async def handle_leave_group(request: Any, ctx: RequestContext) -> Any:
    m = ctx.resp
    if ctx.version >= 3:
        leaving = [(x.member_id, x.group_instance_id) for x in request.members]
    else:
        leaving = [(request.member_id, None)]
    top = loading_error(ctx, request.group_id)
    codes: list[ErrorCode] = []
    if top is None:
        top, codes = ctx.broker.groups.leave_group(request.group_id, leaving, now_ms())
    if ctx.version < 3:
        # One member and one error field: the member's error unless the group had one.
        if top is ErrorCode.none and codes:
            top = codes[0]
        return build(m.LeaveGroupResponse, throttle_time=NO_THROTTLE, error_code=top)
    members = tuple(
        build(m.MemberResponse, member_id=member_id, group_instance_id=instance_id,
              error_code=code)
        for (member_id, instance_id), code in zip(leaving, codes, strict=False)
    )
    return build(m.LeaveGroupResponse, throttle_time=NO_THROTTLE, error_code=top,
                 members=members)
