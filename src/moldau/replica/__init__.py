"""The replica layer (Kafka's ReplicaManager and Partition): between the broker and the log.

Every hosted partition is one :class:`~moldau.replica.partition.Partition`, which owns its
role (leader or follower), leader epoch, ISR, the followers' fetch positions, the high
watermark and the produce requests waiting for ``acks=all``. The
:class:`~moldau.replica.manager.ReplicaManager` holds them by (topic, partition). Request
handlers go through it; only the replica layer appends to and reads from partition logs.
A single broker is the case ISR = {self}.
"""

from .errors import ReplicaError
from .manager import ReplicaManager
from .partition import Partition, Role

__all__ = ["Partition", "ReplicaError", "ReplicaManager", "Role"]
