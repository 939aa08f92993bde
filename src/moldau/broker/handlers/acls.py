"""DescribeAcls, CreateAcls and DeleteAcls: the authorizer's bindings, as Kafka serves them.

Without an authorizer Kafka answers SECURITY_DISABLED ("No Authorizer is configured"). Reading
ACLs needs DESCRIBE on the cluster, changing them ALTER (else CLUSTER_AUTHORIZATION_FAILED).
Changes go to the metadata store first (the node's file, or ZooKeeper with its change
notifications, which bring them to every other broker) and then to this broker's authorizer.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from ...protocol.codec import build
from ...security.acls import (
    AclBinding,
    AclFilter,
    AclOperation,
    InvalidAcl,
    PatternType,
    Permission,
    ResourceType,
)
from .. import authz
from .api_versions import NO_THROTTLE

if TYPE_CHECKING:
    from ..broker import Broker, RequestContext

NO_AUTHORIZER = "No Authorizer is configured on the broker"


async def _store(broker: Broker, added: list[AclBinding], removed: list[AclBinding]) -> None:
    """Persist, then apply here (ZooKeeper calls block: they run in a thread)."""
    if broker.cluster is not None:
        await asyncio.to_thread(broker.metadata.change_acls, added, removed)
    else:
        broker.metadata.change_acls(added, removed)
    assert broker.authorizer is not None
    broker.authorizer.remove(removed)
    broker.authorizer.add(added)


def _filter(f: Any) -> AclFilter:
    try:
        acl_filter = AclFilter(ResourceType(f.resource_type_filter), f.resource_name_filter,
                               PatternType(f.pattern_type_filter), f.principal_filter,
                               f.host_filter, AclOperation(f.operation),
                               Permission(f.permission_type))
    except ValueError as exc:
        raise InvalidAcl(str(exc)) from None
    acl_filter.validate()
    return acl_filter


async def handle_describe(request: Any, ctx: RequestContext) -> Any:
    m = ctx.resp

    def answer(code: ErrorCode, message: str | None, resources: tuple[Any, ...] = ()) -> Any:
        return build(m.DescribeAclsResponse, throttle_time=NO_THROTTLE, error_code=code,
                     error_message=message, resources=resources)

    authorizer = ctx.broker.authorizer
    if authorizer is None:
        return answer(ErrorCode.security_disabled, NO_AUTHORIZER)
    if not authz.allowed(ctx, AclOperation.DESCRIBE, authz.CLUSTER):
        return answer(ErrorCode.cluster_authorization_failed, "Cluster authorization failed.")
    try:
        acl_filter = _filter(request)
    except InvalidAcl as exc:
        return answer(ErrorCode.invalid_request, str(exc))
    by_resource: dict[tuple[ResourceType, str, PatternType], list[AclBinding]] = \
        defaultdict(list)
    for acl in authorizer.matching(acl_filter):
        by_resource[(acl.resource_type, acl.resource_name, acl.pattern_type)].append(acl)
    resources = tuple(
        build(m.DescribeAclsResource, resource_type=rtype, resource_name=name,
              pattern_type=pattern,
              acls=tuple(build(m.AclDescription, principal=a.principal, host=a.host,
                               operation=a.operation, permission_type=a.permission)
                         for a in acls))
        for (rtype, name, pattern), acls in sorted(by_resource.items()))
    return answer(ErrorCode.none, None, resources)


async def handle_create(request: Any, ctx: RequestContext) -> Any:
    m = ctx.resp
    broker = ctx.broker

    def results(codes: list[tuple[ErrorCode, str | None]]) -> Any:
        return build(m.CreateAclsResponse, throttle_time=NO_THROTTLE, results=tuple(
            build(m.AclCreationResult, error_code=code, error_message=message)
            for code, message in codes))

    count = len(request.creations)
    if broker.authorizer is None:
        return results([(ErrorCode.security_disabled, NO_AUTHORIZER)] * count)
    if not authz.allowed(ctx, AclOperation.ALTER, authz.CLUSTER):
        return results([(ErrorCode.cluster_authorization_failed, None)] * count)
    outcome: list[tuple[ErrorCode, str | None]] = []
    valid: list[AclBinding] = []
    for c in request.creations:
        try:
            try:
                acl = AclBinding(ResourceType(c.resource_type), c.resource_name,
                                 PatternType(c.resource_pattern_type), c.principal, c.host,
                                 AclOperation(c.operation), Permission(c.permission_type))
            except ValueError as exc:
                raise InvalidAcl(str(exc)) from None
            acl.validate()
        except InvalidAcl as exc:
            outcome.append((ErrorCode.invalid_request, str(exc)))
            continue
        valid.append(acl)
        outcome.append((ErrorCode.none, None))
    if valid:
        await _store(broker, valid, [])
    return results(outcome)


async def handle_delete(request: Any, ctx: RequestContext) -> Any:
    m = ctx.resp
    broker = ctx.broker

    def response(filter_results: list[Any]) -> Any:
        return build(m.DeleteAclsResponse, throttle_time=NO_THROTTLE,
                     filter_results=tuple(filter_results))

    def failed(code: ErrorCode, message: str | None) -> Any:
        return build(m.DeleteAclsFilterResult, error_code=code, error_message=message,
                     matching_acls=())

    authorizer = broker.authorizer
    if authorizer is None:
        return response([failed(ErrorCode.security_disabled, NO_AUTHORIZER)
                         for _ in request.filters])
    if not authz.allowed(ctx, AclOperation.ALTER, authz.CLUSTER):
        return response([failed(ErrorCode.cluster_authorization_failed, None)
                         for _ in request.filters])
    answers: list[Any] = []
    removed: dict[AclBinding, None] = {}
    for f in request.filters:
        try:
            acl_filter = _filter(f)
        except InvalidAcl as exc:
            answers.append(failed(ErrorCode.invalid_request, str(exc)))
            continue
        matched = authorizer.matching(acl_filter)
        removed.update(dict.fromkeys(matched))
        answers.append(build(m.DeleteAclsFilterResult, error_code=ErrorCode.none,
                             error_message=None, matching_acls=tuple(
                                 build(m.DeleteAclsMatchingAcl, error_code=ErrorCode.none,
                                       error_message=None, resource_type=a.resource_type,
                                       resource_name=a.resource_name,
                                       pattern_type=a.pattern_type, principal=a.principal,
                                       host=a.host, operation=a.operation,
                                       permission_type=a.permission)
                                 for a in matched)))
    if removed:
        await _store(broker, [], list(removed))
    return response(answers)
