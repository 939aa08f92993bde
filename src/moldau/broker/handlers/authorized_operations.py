"""Authorized operations, as Metadata, DescribeCluster, DescribeGroups and
ConsumerGroupDescribe report them when a client asks (KIP-430).

The value is a bit field of Kafka's AclOperation codes. Without an authorizer, as a Kafka
broker without one, moldau reports every operation the resource type supports; with one the
handlers pass what the client's principal may do (``authz.operations``). When the client did
not ask, Kafka sends Integer.MIN_VALUE, which clients read as "not provided".
"""

from __future__ import annotations

from collections.abc import Iterable

from ...security.acls import SUPPORTED_OPERATIONS, AclOperation, ResourceType


def _bits(operations: Iterable[AclOperation]) -> int:
    return sum(1 << op for op in operations)


#: Sent when the client did not ask for authorized operations (Java's Integer.MIN_VALUE).
NOT_REQUESTED = -(2**31)

#: What the CLUSTER, a TOPIC and a GROUP support (Kafka's AclEntry.supportedOperations).
CLUSTER_OPERATIONS = _bits(SUPPORTED_OPERATIONS[ResourceType.CLUSTER])
TOPIC_OPERATIONS = _bits(SUPPORTED_OPERATIONS[ResourceType.TOPIC])
GROUP_OPERATIONS = _bits(SUPPORTED_OPERATIONS[ResourceType.GROUP])


def authorized_operations(requested: bool, supported: int) -> int:
    """The field's value: every supported operation if asked for, else NOT_REQUESTED."""
    return supported if requested else NOT_REQUESTED
