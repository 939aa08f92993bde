"""Group administration: ListGroups, DescribeGroups, DeleteGroups.

What ``kafka-consumer-groups.sh`` and AdminClient use to look at groups. A group this broker
does not know is described the way Kafka describes it: state Dead, no error.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from ...coordinator.group import Group, GroupState
from ...coordinator.manager import CLASSIC_GROUP_TYPE
from ...protocol.codec import build
from ..broker import RequestContext, now_ms
from .api_versions import NO_THROTTLE
from .groups import loading_error

#: authorized_operations when the client did not ask for them (Kafka's Integer.MIN_VALUE).
OPERATIONS_NOT_REQUESTED = -(2**31)
#: Without an authorizer every group operation is allowed: READ (3), DELETE (6), DESCRIBE (8).
ALL_GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)


async def handle_list_groups(request: Any, ctx: RequestContext) -> Any:
    m = ctx.resp
    code = loading_error(ctx)
    groups: list[Group] = []
    if code is None:
        code = ErrorCode.none
        groups = ctx.broker.groups.list_groups(getattr(request, "states_filter", ()),
                                               getattr(request, "types_filter", ()))
    listed = tuple(
        build(m.ListedGroup, group_id=g.group_id, protocol_type=g.protocol_type or "",
              group_state=g.state.value, group_type=CLASSIC_GROUP_TYPE)
        for g in groups
    )
    return build(m.ListGroupsResponse, throttle_time=NO_THROTTLE, error_code=code,
                 groups=listed)


def _described(ctx: RequestContext, group_id: str, operations: int) -> Any:
    m = ctx.resp
    code = loading_error(ctx)
    group = None if code is not None else ctx.broker.groups.describe_group(group_id)
    if group is None:
        return build(m.DescribedGroup, error_code=code or ErrorCode.none, group_id=group_id,
                     group_state=GroupState.DEAD.value, protocol_type="", protocol_data="",
                     members=(), authorized_operations=operations)
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
    operations = (ALL_GROUP_OPERATIONS if getattr(request, "include_authorized_operations", False)
                  else OPERATIONS_NOT_REQUESTED)
    groups = tuple(_described(ctx, group_id, operations) for group_id in request.groups)
    return build(ctx.resp.DescribeGroupsResponse, throttle_time=NO_THROTTLE, groups=groups)


async def handle_delete_groups(request: Any, ctx: RequestContext) -> Any:
    m = ctx.resp
    names = list(request.groups_names)
    code = loading_error(ctx)
    if code is not None:
        results = dict.fromkeys(names, code)
    else:
        results = ctx.broker.groups.delete_groups(names, now_ms())
    return build(
        m.DeleteGroupsResponse,
        throttle_time=NO_THROTTLE,
        results=tuple(build(m.DeletableGroupResult, group_id=name, error_code=results[name])
                      for name in dict.fromkeys(names)),
    )
