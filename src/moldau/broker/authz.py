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
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from ..security.acls import CLUSTER_NAME, AclBinding, AclOperation, PatternType, ResourceType
from ..security.authorizer import Authorizer, parse_super_users
from .errors import ApiError

if TYPE_CHECKING:
    from .broker import Broker, RequestContext

log = logging.getLogger(__name__)

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

    loop.run_in_executor(None, start)


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


def may_write(ctx: RequestContext, name: str) -> bool:
    """WRITE on the topic; a topic that does not exist yet (moldau creates it on first use
    with ``auto.create.topics.enable``) also needs CREATE."""
    if not allowed(ctx, Op.WRITE, TOPIC, name):
        return False
    return ctx.broker.metadata.topic(name) is not None or may_create_topic(ctx, name)
