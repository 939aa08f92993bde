"""AlterReplicaLogDirs: move partitions between this broker's log dirs (Kafka's
KafkaApis.handleAlterReplicaLogDirsRequest and ReplicaManager.alterReplicaLogDirs).

Each broker moves its own replicas (admin clients send the request to the broker named in
each TopicPartitionReplica). The checks and their order are the replica manager's
(:meth:`~moldau.replica.manager.ReplicaManager.alter_log_dir`): a topic whose future
directory name would be too long INVALID_TOPIC_EXCEPTION, a path not in ``log.dirs``
LOG_DIR_NOT_FOUND, an offline target (or, for a new move, any offline dir) or partition
KAFKA_STORAGE_ERROR. A partition this broker does not host is UNKNOWN_TOPIC_OR_PARTITION
when the topic or partition does not exist, else REPLICA_NOT_AVAILABLE (Kafka maps its
NOT_LEADER_OR_FOLLOWER to that for this API), and the dir is remembered for when a
reassignment creates the replica here. The answer comes at once; the copy runs after it
(DescribeLogDirs shows its progress as the future replica's offset lag).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from kio.schema.errors import ErrorCode

from ...protocol.codec import build
from ..broker import RequestContext
from .api_versions import NO_THROTTLE


def _not_hosted(ctx: RequestContext, topic: str, partition: int) -> ErrorCode:
    known = ctx.broker.metadata.topic(topic)
    if known is not None and 0 <= partition < known.partitions:
        return ErrorCode.replica_not_available
    return ErrorCode.unknown_topic_or_partition


async def handle(request: Any, ctx: RequestContext) -> Any:
    m = ctx.resp
    replicas = ctx.broker.replicas
    results: dict[str, list[Any]] = defaultdict(list)
    for target in request.dirs:
        for topic in target.topics:
            for partition in topic.partitions:
                code = replicas.alter_log_dir(topic.name, partition, target.path)
                if code is None:
                    code = _not_hosted(ctx, topic.name, partition)
                results[topic.name].append(build(
                    m.AlterReplicaLogDirPartitionResult, partition_index=partition,
                    error_code=code))
    return build(m.AlterReplicaLogDirsResponse, throttle_time=NO_THROTTLE, results=tuple(
        build(m.AlterReplicaLogDirTopicResult, topic_name=name, partitions=tuple(parts))
        for name, parts in results.items()))
