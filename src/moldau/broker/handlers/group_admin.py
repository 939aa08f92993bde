"""Group administration: ListGroups, DescribeGroups, DeleteGroups.

What ``kafka-consumer-groups.sh`` and AdminClient use to look at groups. A group this broker
does not know is described the way Kafka describes it: state Dead, no error.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from ...coordinator.consumer_protocol import PROTOCOL_TYPE
from ...coordinator.group import Group, GroupState
from ...coordinator.manager import CLASSIC_GROUP_TYPE
from ...protocol.codec import build
from .. import authz
from ..broker import RequestContext, now_ms
from .api_versions import NO_THROTTLE
from .authorized_operations import GROUP_OPERATIONS, NOT_REQUESTED, authorized_operations
from .groups import loading_error

#: ListGroups' group type of KIP-848 groups.
CONSUMER_GROUP_TYPE = "consumer"


async def handle_list_groups(request: Any, ctx: RequestContext) -> Any:
    m = ctx.resp
    code = loading_error(ctx)
    groups: list[Group] = []
    states = getattr(request, "states_filter", ())
    types = getattr(request, "types_filter", ())
    consumer_groups = ctx.broker.groups.consumer_groups
    if code is None:
        code = ErrorCode.none
        groups = ctx.broker.groups.list_groups(states, types)
    # A KIP-848 group is listed once, as type "consumer"; its classic side only holds offsets.
    listed = [
        build(m.ListedGroup, group_id=g.group_id, protocol_type=g.protocol_type or "",
              group_state=g.state.value, group_type=CLASSIC_GROUP_TYPE)
        for g in groups if g.group_id not in consumer_groups
    ]
    wanted_states = {s.lower() for s in states}
    wanted_types = {t.lower() for t in types}
    if code is ErrorCode.none and (not wanted_types or CONSUMER_GROUP_TYPE in wanted_types):
        listed += [
            build(m.ListedGroup, group_id=group_id, protocol_type=PROTOCOL_TYPE,
                  group_state=g.state.value, group_type=CONSUMER_GROUP_TYPE)
            for group_id, g in sorted(consumer_groups.items())
            if not wanted_states or g.state.value.lower() in wanted_states
        ]
    if ctx.broker.authorizer is not None and not authz.allowed(ctx, authz.Op.DESCRIBE,
                                                               authz.CLUSTER):
        # Without DESCRIBE on the cluster, only the groups one may describe (Kafka).
        listed = [g for g in listed
                  if authz.allowed(ctx, authz.Op.DESCRIBE, authz.GROUP, g.group_id)]
    return build(m.ListGroupsResponse, throttle_time=NO_THROTTLE, error_code=code,
                 groups=tuple(listed))


#: DescribeGroups v6 (KIP-1043) answers an unknown group with GROUP_ID_NOT_FOUND; older
#: versions describe it as a Dead group without error.
_GROUP_ID_NOT_FOUND_FROM = 6


def _described(ctx: RequestContext, group_id: str, operations: int) -> Any:
    m = ctx.resp
    if ctx.broker.authorizer is not None:
        if not authz.allowed(ctx, authz.Op.DESCRIBE, authz.GROUP, group_id):
            return build(m.DescribedGroup, error_code=ErrorCode.group_authorization_failed,
                         group_id=group_id, error_message=None, group_state="",
                         protocol_type="", protocol_data="", members=(),
                         authorized_operations=operations)
        if operations != NOT_REQUESTED:
            operations = authz.operations(ctx, authz.GROUP, group_id, GROUP_OPERATIONS)
    code = loading_error(ctx)
    if code is None and ctx.broker.groups.active_consumer_group(group_id) is not None:
        # As Kafka: DescribeGroups is for classic groups; ConsumerGroupDescribe shows these.
        return build(m.DescribedGroup, error_code=ErrorCode.group_id_not_found,
                     error_message=f"Group {group_id} is not a classic group.",
                     group_id=group_id, group_state=GroupState.DEAD.value, protocol_type="",
                     protocol_data="", members=(), authorized_operations=operations)
    group = None if code is not None else ctx.broker.groups.describe_group(group_id)
    if group is None:
        message = None
        if code is None and ctx.version >= _GROUP_ID_NOT_FOUND_FROM:
            code, message = ErrorCode.group_id_not_found, f"Group {group_id} not found."
        return build(m.DescribedGroup, error_code=code or ErrorCode.none, group_id=group_id,
                     error_message=message, group_state=GroupState.DEAD.value,
                     protocol_type="", protocol_data="", members=(),
                     authorized_operations=operations)
    # As in Kafka, member metadata and assignments are only shown once the group is Stable:
    # before that they belong to a generation that is being replaced.
    stable = group.state is GroupState.STABLE
    protocol = group.protocol_name if stable else None
    members = tuple(
        build(
            m.DescribedGroupMember,
            member_id=member.member_id,
            group_instance_id=member.group_instance_id,
            client_id=member.client_id,
            client_host=member.client_host,
            member_metadata=member.metadata(protocol) if stable else b"",
            member_assignment=member.assignment if stable else b"",
        )
        for member in group.members.values()
    )
    return build(m.DescribedGroup, error_code=ErrorCode.none, group_id=group_id,
                 group_state=group.state.value, protocol_type=group.protocol_type or "",
                 protocol_data=protocol or "", members=members,
                 authorized_operations=operations)


async def handle_describe_groups(request: Any, ctx: RequestContext) -> Any:
    operations = authorized_operations(
        getattr(request, "include_authorized_operations", False), GROUP_OPERATIONS)
    groups = tuple(_described(ctx, group_id, operations) for group_id in request.groups)
    return build(ctx.resp.DescribeGroupsResponse, throttle_time=NO_THROTTLE, groups=groups)


async def handle_delete_groups(request: Any, ctx: RequestContext) -> Any:
    m = ctx.resp
    names = list(request.groups_names)
    code = loading_error(ctx)
    denied = {name for name in names
              if not authz.allowed(ctx, authz.Op.DELETE, authz.GROUP, name)}
    if code is not None:
        results = dict.fromkeys(names, code)
    else:
        results = await ctx.broker.groups.delete_groups(
            [name for name in names if name not in denied], now_ms())
    results.update(dict.fromkeys(denied, ErrorCode.group_authorization_failed))
    return build(
        m.DeleteGroupsResponse,
        throttle_time=NO_THROTTLE,
        results=tuple(build(m.DeletableGroupResult, group_id=name, error_code=results[name])
                      for name in dict.fromkeys(names)),
    )
