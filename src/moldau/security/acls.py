"""Kafka's ACL model: resource types, pattern types, operations, permissions and bindings.

The integer codes are Kafka's wire codes (CreateAcls, DescribeAcls and DeleteAcls carry them);
the names are those of Kafka's ZooKeeper JSON (``{"principal": "User:alice",
"permissionType": "Allow", "operation": "Read", "host": "*"}``) and its znode paths
(``/kafka-acl/Topic/orders``), so that the same words appear on the wire, on disk and in docs.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

#: The principal and host that match every principal and every host.
WILDCARD_PRINCIPAL = "User:*"
WILDCARD_HOST = "*"
#: A literal resource name that matches every resource of its type.
WILDCARD_RESOURCE = "*"
#: The name of the one cluster resource.
CLUSTER_NAME = "kafka-cluster"


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class Permission(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


_Op = AclOperation
#: What each resource type supports (Kafka's AclEntry.supportedOperations); ALL stands for
#: these in authorized-operations bit fields.
SUPPORTED_OPERATIONS: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset({_Op.READ, _Op.WRITE, _Op.CREATE, _Op.DESCRIBE, _Op.DELETE,
                                   _Op.ALTER, _Op.DESCRIBE_CONFIGS, _Op.ALTER_CONFIGS}),
    ResourceType.GROUP: frozenset({_Op.READ, _Op.DESCRIBE, _Op.DELETE}),
    ResourceType.CLUSTER: frozenset({_Op.CREATE, _Op.CLUSTER_ACTION, _Op.DESCRIBE_CONFIGS,
                                     _Op.ALTER_CONFIGS, _Op.IDEMPOTENT_WRITE, _Op.ALTER,
                                     _Op.DESCRIBE}),
    ResourceType.TRANSACTIONAL_ID: frozenset({_Op.DESCRIBE, _Op.WRITE}),
    ResourceType.DELEGATION_TOKEN: frozenset({_Op.DESCRIBE}),
    ResourceType.USER: frozenset({_Op.CREATE_TOKENS, _Op.DESCRIBE_TOKENS}),
}

#: An allow ACL for any of these operations also allows the key (Kafka: READ, WRITE, DELETE
#: and ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS). Deny ACLs imply nothing.
IMPLIED_BY: dict[AclOperation, frozenset[AclOperation]] = {
    _Op.DESCRIBE: frozenset({_Op.DESCRIBE, _Op.READ, _Op.WRITE, _Op.DELETE, _Op.ALTER}),
    _Op.DESCRIBE_CONFIGS: frozenset({_Op.DESCRIBE_CONFIGS, _Op.ALTER_CONFIGS}),
}


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


#: Kafka's JSON / znode names ("TransactionalId", "ClusterAction", "Allow").
RESOURCE_TYPE_NAMES = {t: _camel(t.name) for t in ResourceType}
OPERATION_NAMES = {o: _camel(o.name) for o in AclOperation}
PERMISSION_NAMES = {p: _camel(p.name) for p in Permission}
RESOURCE_TYPE_BY_NAME = {v: k for k, v in RESOURCE_TYPE_NAMES.items()}
OPERATION_BY_NAME = {v: k for k, v in OPERATION_NAMES.items()}
PERMISSION_BY_NAME = {v: k for k, v in PERMISSION_NAMES.items()}


class InvalidAcl(ValueError):
    """An ACL a client asked to create that Kafka would refuse (INVALID_REQUEST)."""


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One ACL: a resource pattern and an access control entry."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission: Permission

    def validate(self) -> None:
        """Refuse what Kafka's authorizer refuses to create, with its messages."""
        if self.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
            raise InvalidAcl(f"Invalid resource type: {self.resource_type.name}")
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise InvalidAcl(f"Invalid pattern type: {self.pattern_type.name}")
        if self.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
            raise InvalidAcl(f"Invalid operation: {self.operation.name}")
        if self.permission not in (Permission.ALLOW, Permission.DENY):
            raise InvalidAcl(f"Invalid permission type: {self.permission.name}")
        if not self.resource_name:
            raise InvalidAcl("Resource name should not be empty")
        if self.resource_type is ResourceType.CLUSTER and self.resource_name != CLUSTER_NAME:
            raise InvalidAcl("The only valid name for the CLUSTER resource is " + CLUSTER_NAME)
        kind, sep, name = self.principal.partition(":")
        if not sep or not kind or not name:
            raise InvalidAcl(f"Could not parse principal from `{self.principal}` (no colon is "
                             f"found between principal type and principal name)")
        if not self.host:
            raise InvalidAcl("Invalid host: empty")

    def entry_json(self) -> dict[str, str | int]:
        """The access control entry in Kafka's ZooKeeper JSON."""
        return {"principal": self.principal, "permissionType": PERMISSION_NAMES[self.permission],
                "operation": OPERATION_NAMES[self.operation], "host": self.host}

    def to_json(self) -> dict[str, str | int]:
        """The whole binding, for the single node's metadata file."""
        return {"resourceType": RESOURCE_TYPE_NAMES[self.resource_type],
                "name": self.resource_name,
                "patternType": _camel(self.pattern_type.name), **self.entry_json()}

    @staticmethod
    def from_entry_json(resource_type: ResourceType, name: str, pattern: PatternType,
                        entry: dict[str, str]) -> AclBinding:
        return AclBinding(resource_type, name, pattern, entry["principal"], entry["host"],
                          OPERATION_BY_NAME[entry["operation"]],
                          PERMISSION_BY_NAME[entry["permissionType"]])

    @staticmethod
    def from_json(doc: dict[str, str]) -> AclBinding:
        return AclBinding.from_entry_json(RESOURCE_TYPE_BY_NAME[doc["resourceType"]],
                                          doc["name"], PatternType[doc["patternType"].upper()],
                                          doc)


@dataclass(frozen=True, slots=True)
class AclFilter:
    """What DescribeAcls and DeleteAcls select: None fields match anything, ANY codes too."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: Permission = Permission.ANY

    def validate(self) -> None:
        for value in (self.resource_type, self.pattern_type, self.operation, self.permission):
            if value == 0:
                raise InvalidAcl(f"Invalid filter: {type(value).__name__} UNKNOWN")

    def matches(self, acl: AclBinding) -> bool:
        if self.resource_type is not ResourceType.ANY \
                and acl.resource_type is not self.resource_type:
            return False
        if not self._matches_pattern(acl):
            return False
        return ((self.principal is None or self.principal == acl.principal)
                and (self.host is None or self.host == acl.host)
                and (self.operation is AclOperation.ANY or self.operation is acl.operation)
                and (self.permission is Permission.ANY or self.permission is acl.permission))

    def _matches_pattern(self, acl: AclBinding) -> bool:
        pattern, name = self.pattern_type, self.resource_name
        if pattern is PatternType.MATCH:
            # Every ACL that would apply to the named resource: the literal one, the
            # wildcard and the prefixes of the name (Kafka's MATCH filter).
            if name is None:
                return True
            if acl.pattern_type is PatternType.LITERAL:
                return acl.resource_name in (name, WILDCARD_RESOURCE)
            return name.startswith(acl.resource_name)
        if pattern is not PatternType.ANY and acl.pattern_type is not pattern:
            return False
        return name is None or acl.resource_name == name
