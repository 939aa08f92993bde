"""Kafka's ACL authorizer: may this principal, from this host, do this to that resource?

The rules are those of Kafka's AclAuthorizer and StandardAuthorizer:

1. a principal in ``super.users`` may do everything;
2. a DENY ACL that matches (principal or ``User:*``, host or ``*``, the operation or ALL)
   refuses, whatever allows it: deny wins;
3. a resource with no ACL at all is open only with ``allow.everyone.if.no.acl.found``;
4. otherwise an ALLOW ACL must match, where READ, WRITE, DELETE and ALTER also allow DESCRIBE
   and ALTER_CONFIGS allows DESCRIBE_CONFIGS.

The ACLs that apply to a resource are the literal ones on its name, the literal wildcard
``*`` of its type and the prefixed ones on any prefix of its name. Bindings are indexed by
(resource type, name) for literals and per type and prefix for prefixed ones, so a check is a
handful of dict lookups; answers are cached per (principal, host, operation, resource) and the
cache is dropped whenever the ACLs change.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from .acls import (
    IMPLIED_BY,
    SUPPORTED_OPERATIONS,
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AclBinding,
    AclFilter,
    AclOperation,
    PatternType,
    Permission,
    ResourceType,
)

#: The class names Kafka users write in ``authorizer.class.name``: both are this authorizer
#: (ZooKeeper mode's and KRaft's; moldau applies the same rules whatever the store).
AUTHORIZER_CLASSES = (
    "kafka.security.authorizer.AclAuthorizer",
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
)
#: Past this many cached answers the cache starts again (bounded memory, whatever the
#: number of principals and resources).
MAX_CACHED = 100_000

_ResourceKey = tuple[ResourceType, str]
_CacheKey = tuple[str, str, AclOperation, ResourceType, str]


def parse_super_users(value: str) -> frozenset[str]:
    """``super.users``: principals separated by semicolons (``User:admin;User:broker``)."""
    return frozenset(p.strip() for p in value.split(";") if p.strip())


class Authorizer:
    """The ACLs of a cluster and the checks against them."""

    def __init__(self, super_users: Iterable[str] = (), *,
                 allow_if_no_acl: bool = False) -> None:
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        self._literal: dict[_ResourceKey, set[AclBinding]] = defaultdict(set)
        self._prefixed: dict[ResourceType, dict[str, set[AclBinding]]] = defaultdict(
            lambda: defaultdict(set))
        self._cache: dict[_CacheKey, bool] = {}

    # -- the ACLs ----------------------------------------------------------------------------

    def bindings(self) -> list[AclBinding]:
        found = [acl for acls in self._literal.values() for acl in acls]
        found += [acl for by_prefix in self._prefixed.values()
                  for acls in by_prefix.values() for acl in acls]
        return found

    def replace_all(self, bindings: Iterable[AclBinding]) -> None:
        """Start over with exactly these ACLs (a store loaded or changed elsewhere)."""
        self._literal.clear()
        self._prefixed.clear()
        self.add(bindings)

    def replace_resource(self, resource_type: ResourceType, name: str, pattern: PatternType,
                         bindings: Iterable[AclBinding]) -> None:
        """The ACLs of one resource pattern changed (one znode's new content)."""
        if pattern is PatternType.LITERAL:
            self._literal.pop((resource_type, name), None)
        else:
            self._prefixed[resource_type].pop(name, None)
        self.add(bindings)

    def add(self, bindings: Iterable[AclBinding]) -> None:
        for acl in bindings:
            self._slot(acl).add(acl)
        self._cache.clear()

    def remove(self, bindings: Iterable[AclBinding]) -> None:
        for acl in bindings:
            self._slot(acl).discard(acl)
        self._cache.clear()

    def _slot(self, acl: AclBinding) -> set[AclBinding]:
        if acl.pattern_type is PatternType.PREFIXED:
            return self._prefixed[acl.resource_type][acl.resource_name]
        return self._literal[(acl.resource_type, acl.resource_name)]

    def matching(self, acl_filter: AclFilter) -> list[AclBinding]:
        return [acl for acl in self.bindings() if acl_filter.matches(acl)]

    # -- checks ------------------------------------------------------------------------------

    def authorize(self, principal: str, host: str, operation: AclOperation,
                  resource_type: ResourceType, name: str) -> bool:
        key = (principal, host, operation, resource_type, name)
        cached = self._cache.get(key)
        if cached is None:
            if len(self._cache) >= MAX_CACHED:
                self._cache.clear()
            cached = self._cache[key] = self._decide(principal, host, operation,
                                                     resource_type, name)
        return cached

    def authorize_any(self, principal: str, host: str, operation: AclOperation,
                      resource_type: ResourceType) -> bool:
        """Whether some resource of the type allows the operation (Kafka's
        authorizeByResourceType, which lets a producer with WRITE on any topic be
        idempotent, KIP-679): an ALLOW ACL of the principal on a resource that no DENY ACL
        of the principal covers whole (a literal wildcard or the same pattern)."""
        if principal in self.super_users:
            return True
        acls = [acl for acl in self.bindings() if acl.resource_type is resource_type]
        if not acls:
            return self.allow_if_no_acl
        allowing = IMPLIED_BY.get(operation, frozenset({operation}))
        mine = [acl for acl in acls if acl.principal in (principal, WILDCARD_PRINCIPAL)
                and acl.host in (host, WILDCARD_HOST)]
        denied = {(acl.resource_name, acl.pattern_type) for acl in mine
                  if acl.permission is Permission.DENY
                  and acl.operation in (operation, AclOperation.ALL)}
        if (WILDCARD_RESOURCE, PatternType.LITERAL) in denied:
            return False
        return any(acl.permission is Permission.ALLOW
                   and (acl.operation is AclOperation.ALL or acl.operation in allowing)
                   and (acl.resource_name, acl.pattern_type) not in denied
                   for acl in mine)

    def authorized_operations(self, principal: str, host: str, resource_type: ResourceType,
                              name: str) -> int:
        """Kafka's authorized-operations bit field (KIP-430) for one resource."""
        bits = 0
        for operation in SUPPORTED_OPERATIONS[resource_type]:
            if self.authorize(principal, host, operation, resource_type, name):
                bits |= 1 << operation
        return bits

    def _applicable(self, resource_type: ResourceType, name: str) -> list[AclBinding]:
        acls: list[AclBinding] = []
        literal = self._literal
        for key in ((resource_type, name), (resource_type, WILDCARD_RESOURCE)):
            found = literal.get(key)
            if found:
                acls.extend(found)
        by_prefix = self._prefixed.get(resource_type)
        if by_prefix:
            for end in range(1, len(name) + 1):
                found = by_prefix.get(name[:end])
                if found:
                    acls.extend(found)
        return acls

    def _decide(self, principal: str, host: str, operation: AclOperation,
                resource_type: ResourceType, name: str) -> bool:
        if principal in self.super_users:
            return True
        acls = self._applicable(resource_type, name)
        if not acls:
            return self.allow_if_no_acl
        mine = [acl for acl in acls
                if acl.principal in (principal, WILDCARD_PRINCIPAL)
                and acl.host in (host, WILDCARD_HOST)]
        for acl in mine:
            if acl.permission is Permission.DENY and acl.operation in (operation,
                                                                       AclOperation.ALL):
                return False
        allowing = IMPLIED_BY.get(operation, frozenset({operation}))
        return any(acl.permission is Permission.ALLOW
                   and (acl.operation is AclOperation.ALL or acl.operation in allowing)
                   for acl in mine)
