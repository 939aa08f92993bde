"""The broker's side of authorization: build the authorizer from the config, keep it in step
with the metadata store, and the checks handlers call.

With no ``authorizer.class.name`` the broker's ``authorizer`` is None and every check below
is one ``is None`` test. Requests made in-process (no session) are the broker's own and
always allowed. A check names what Kafka's KafkaApis checks for the same request; handlers
call it once per resource per request (a Produce once per topic, never per record).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from ..protocol import apis
from ..security.acls import CLUSTER_NAME, AclBinding, AclOperation, PatternType, ResourceType
from ..security.authorizer import Authorizer, parse_super_users
from .errors import ApiError

if TYPE_CHECKING:
    from .broker import Broker, RequestContext

log = logging.getLogger(__name__)

Handler = Callable[[Any, "RequestContext"], Awaitable[Any]]
#: One whole-request check: the operation, the resource type and how to find the resource's
#: name in the request (None: the cluster).
Check = tuple[AclOperation, ResourceType, Callable[[Any], str] | None]

Op = AclOperation
TOPIC, GROUP, CLUSTER, TXN_ID = (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER,
                                 ResourceType.TRANSACTIONAL_ID)

#: The error a denied operation on each resource type gets (Kafka's).
DENIED_CODE = {
    TOPIC: ErrorCode.topic_authorization_failed,
    GROUP: ErrorCode.group_authorization_failed,
    CLUSTER: ErrorCode.cluster_authorization_failed,
    TXN_ID: ErrorCode.transactional_id_authorization_failed,
}


class AuthorizationError(ApiError):
    """A whole request refused: answered with Kafka's generic error response and the code."""


def build(broker: Broker) -> Authorizer | None:
    """The authorizer ``authorizer.class.name`` asks for, loaded with the stored ACLs."""
    config = broker.config
    if not config.get("authorizer.class.name"):
        return None
    super_users = parse_super_users(str(config.get("super.users") or ""))
    authorizer = Authorizer(super_users,
                            allow_if_no_acl=bool(config.get("allow.everyone.if.no.acl.found")))
    authorizer.replace_all(broker.metadata.acls())
    log.info("Authorizer %s on: %d ACLs, super users %s", config.get("authorizer.class.name"),
             len(authorizer.bindings()), ", ".join(sorted(super_users)) or "none")
    return authorizer


def attach(broker: Broker, loop: asyncio.AbstractEventLoop) -> None:
    """In a cluster: apply the ACL changes other brokers make (ZooKeeper notifications)."""
    authorizer = broker.authorizer
    acl_store = getattr(broker.metadata, "acl_store", None)
    if authorizer is None or acl_store is None:
        return

    def apply(resource_type: ResourceType, name: str, pattern: PatternType,
              acls: list[AclBinding]) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: the broker is stopping
            loop.call_soon_threadsafe(authorizer.replace_resource, resource_type, name,
                                      pattern, acls)

    def start() -> None:
        acl_store.watch(apply)
        # Whatever changed between the start-up load and the watch.
        acls = acl_store.load_all()
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(authorizer.replace_all, acls)

    def started(future: asyncio.Future[None]) -> None:
        if not future.cancelled() and future.exception() is not None:
            log.error("ACL change notifications are not watched: %s; ACLs made on other "
                      "brokers apply here after a restart", future.exception())

    loop.run_in_executor(None, start).add_done_callback(started)


def _who(ctx: RequestContext) -> tuple[str, str]:
    session = ctx.session
    assert session is not None
    return session.principal, session.client_address


def allowed(ctx: RequestContext, operation: AclOperation, resource_type: ResourceType,
            name: str = CLUSTER_NAME) -> bool:
    """May the client do ``operation`` on the resource? (Always, without an authorizer.)"""
    authorizer = ctx.broker.authorizer
    if authorizer is None or ctx.session is None:
        return True
    principal, host = _who(ctx)
    return authorizer.authorize(principal, host, operation, resource_type, name)


def require(ctx: RequestContext, operation: AclOperation, resource_type: ResourceType,
            name: str = CLUSTER_NAME) -> None:
    """Refuse the whole request unless allowed, with the resource type's error code."""
    if not allowed(ctx, operation, resource_type, name):
        raise AuthorizationError(DENIED_CODE[resource_type])


def operations(ctx: RequestContext, resource_type: ResourceType, name: str,
               every: int) -> int:
    """The authorized-operations bits of a resource (``every``: all it supports, when there
    is no authorizer)."""
    authorizer = ctx.broker.authorizer
    if authorizer is None or ctx.session is None:
        return every
    principal, host = _who(ctx)
    return authorizer.authorized_operations(principal, host, resource_type, name)


def may_create_topic(ctx: RequestContext, name: str) -> bool:
    """CREATE on the cluster or on the topic (Kafka accepts either)."""
    return allowed(ctx, Op.CREATE, CLUSTER) or allowed(ctx, Op.CREATE, TOPIC, name)


def produce_refusal(ctx: RequestContext, topic: str) -> tuple[ErrorCode | None, str | None]:
    """Why a Produce to ``topic`` is refused (None: it is not): WRITE is needed; a topic
    that does not exist yet is created on first use only with CREATE too (Kafka never
    creates on Produce and answers UNKNOWN_TOPIC_OR_PARTITION, as here without CREATE)."""
    if not allowed(ctx, Op.WRITE, TOPIC, topic):
        return ErrorCode.topic_authorization_failed, None
    if ctx.broker.metadata.topic(topic) is None and not may_create_topic(ctx, topic):
        return ErrorCode.unknown_topic_or_partition, f"Topic '{topic}' does not exist."
    return None, None


def gated(handler: Handler, *checks: Check) -> Handler:
    """``handler`` behind whole-request checks, as Kafka's KafkaApis does for the APIs that
    name one resource (the cluster, a group, a transactional id): a refused request gets
    Kafka's generic error response with the code of the first check that failed."""

    async def checked(request: Any, ctx: RequestContext) -> Any:
        if ctx.broker.authorizer is not None:
            for operation, resource_type, name_of in checks:
                require(ctx, operation, resource_type,
                        CLUSTER_NAME if name_of is None else name_of(request))
        return await handler(request, ctx)

    checked.__doc__ = handler.__doc__
    return checked


def _group_id(request: Any) -> str:
    return str(request.group_id)


def _transactional_id(request: Any) -> str:
    return str(request.transactional_id)


#: The APIs Kafka refuses as a whole: the operation, on the cluster or on the one group or
#: transactional id the request names. Other APIs check per topic, group or id in their
#: handlers.
WHOLE_REQUEST: dict[int, tuple[Check, ...]] = {
    apis.CONTROLLED_SHUTDOWN: ((Op.CLUSTER_ACTION, CLUSTER, None),),
    apis.WRITE_TXN_MARKERS: ((Op.CLUSTER_ACTION, CLUSTER, None),),
    apis.ALTER_PARTITION_REASSIGNMENTS: ((Op.ALTER, CLUSTER, None),),
    apis.LIST_PARTITION_REASSIGNMENTS: ((Op.DESCRIBE, CLUSTER, None),),
    apis.DESCRIBE_LOG_DIRS: ((Op.DESCRIBE, CLUSTER, None),),
    apis.ALTER_REPLICA_LOG_DIRS: ((Op.ALTER, CLUSTER, None),),
    apis.DESCRIBE_CLUSTER: ((Op.DESCRIBE, CLUSTER, None),),
    apis.ELECT_LEADERS: ((Op.ALTER, CLUSTER, None),),
    apis.DESCRIBE_USER_SCRAM_CREDENTIALS: ((Op.DESCRIBE, CLUSTER, None),),
    apis.ALTER_USER_SCRAM_CREDENTIALS: ((Op.ALTER, CLUSTER, None),),
    apis.LIST_CONFIG_RESOURCES: ((Op.DESCRIBE_CONFIGS, CLUSTER, None),),
    apis.DESCRIBE_CLIENT_QUOTAS: ((Op.DESCRIBE_CONFIGS, CLUSTER, None),),
    apis.ALTER_CLIENT_QUOTAS: ((Op.ALTER_CONFIGS, CLUSTER, None),),
    apis.JOIN_GROUP: ((Op.READ, GROUP, _group_id),),
    apis.SYNC_GROUP: ((Op.READ, GROUP, _group_id),),
    apis.HEARTBEAT: ((Op.READ, GROUP, _group_id),),
    apis.LEAVE_GROUP: ((Op.READ, GROUP, _group_id),),
    apis.CONSUMER_GROUP_HEARTBEAT: ((Op.READ, GROUP, _group_id),),
    apis.OFFSET_DELETE: ((Op.DELETE, GROUP, _group_id),),
    apis.ADD_OFFSETS_TO_TXN: ((Op.WRITE, TXN_ID, _transactional_id),
                              (Op.READ, GROUP, _group_id)),
    apis.END_TXN: ((Op.WRITE, TXN_ID, _transactional_id),),
    apis.TXN_OFFSET_COMMIT: ((Op.WRITE, TXN_ID, _transactional_id),
                             (Op.READ, GROUP, _group_id)),
}


def with_request_check(api_key: int, handler: Handler) -> Handler:
    """``handler``, behind its whole-request check if :data:`WHOLE_REQUEST` has one."""
    check = WHOLE_REQUEST.get(api_key)
    return handler if check is None else gated(handler, *check)


def may_produce_idempotently(ctx: RequestContext) -> bool:
    """InitProducerId without a transactional id: IDEMPOTENT_WRITE on the cluster, or WRITE
    on some topic (KIP-679)."""
    authorizer = ctx.broker.authorizer
    if authorizer is None or ctx.session is None:
        return True
    if allowed(ctx, Op.IDEMPOTENT_WRITE, CLUSTER):
        return True
    principal, host = _who(ctx)
    return authorizer.authorize_any(principal, host, Op.WRITE, TOPIC)
