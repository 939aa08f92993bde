"""Authorized operations, as Metadata, DescribeCluster, DescribeGroups and
ConsumerGroupDescribe report them when a client asks (KIP-430).

The value is a bit field of Kafka's AclOperation codes. Without an authorizer, as a Kafka
broker without one, moldau reports every operation the resource type supports; with one the
handlers pass what the client's principal may do (``authz.operations``). When the client did
not ask, Kafka sends Integer.MIN_VALUE, which clients read as "not provided".
"""

from __future__ import annotations

from enum import IntEnum


class AclOperation(IntEnum):
    """Kafka's AclOperation codes (the bit numbers of the field)."""

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


def _bits(*operations: AclOperation) -> int:
    return sum(1 << op for op in operations)


#: Sent when the client did not ask for authorized operations (Java's Integer.MIN_VALUE).
NOT_REQUESTED = -(2**31)

_Op = AclOperation
#: What the CLUSTER resource supports (Kafka's AclEntry.supportedOperations).
CLUSTER_OPERATIONS = _bits(_Op.CREATE, _Op.ALTER, _Op.DESCRIBE, _Op.CLUSTER_ACTION,
                           _Op.DESCRIBE_CONFIGS, _Op.ALTER_CONFIGS, _Op.IDEMPOTENT_WRITE)
#: What a TOPIC supports.
TOPIC_OPERATIONS = _bits(_Op.READ, _Op.WRITE, _Op.CREATE, _Op.DELETE, _Op.ALTER, _Op.DESCRIBE,
                         _Op.DESCRIBE_CONFIGS, _Op.ALTER_CONFIGS)
#: What a GROUP supports.
GROUP_OPERATIONS = _bits(_Op.READ, _Op.DELETE, _Op.DESCRIBE)


def authorized_operations(requested: bool, supported: int) -> int:
    """The field's value: every supported operation if asked for, else NOT_REQUESTED."""
    return supported if requested else NOT_REQUESTED
