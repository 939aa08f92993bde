"""ListOffsets: earliest, latest, max timestamp, or the first offset at or after a timestamp.

Each partition answers through its
:meth:`~moldau.replica.partition.Partition.fetch_offset_for_timestamp`, which checks the
client's leader epoch and answers "latest" with the high watermark, or with the last stable
offset for isolation level 1 (read_committed, v2+).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from ...log.errors import StorageError
from ...protocol.codec import build
from ...replica import ReplicaError
from .. import authz
from ..broker import RequestContext
from .api_versions import NO_THROTTLE
from .pacing import Pacer


async def handle(request: Any, ctx: RequestContext) -> Any:
    m = ctx.resp
    broker = ctx.broker
    topics = []
    pacer = Pacer()
    committed = getattr(request, "isolation_level", 0) == 1
    for topic in request.topics:
        partitions = []
        if not authz.allowed(ctx, authz.Op.DESCRIBE, authz.TOPIC, topic.name):
            topics.append(build(m.ListOffsetsTopicResponse, name=topic.name, partitions=tuple(
                build(m.ListOffsetsPartitionResponse, partition_index=p.partition_index,
                      error_code=ErrorCode.topic_authorization_failed, timestamp=-1,
                      offset=-1, leader_epoch=-1) for p in topic.partitions)))
            continue
        for p in topic.partitions:
            await pacer.tick()
            partition = broker.partition(topic.name, p.partition_index)
            if partition is None or partition.offline:
                partitions.append(build(m.ListOffsetsPartitionResponse,
                                        partition_index=p.partition_index,
                                        error_code=ErrorCode.kafka_storage_error if partition
                                        else broker.not_hosted_error(
                                            topic.name, p.partition_index),
                                        timestamp=-1, offset=-1, leader_epoch=-1))
                continue
            code = ErrorCode.none
            ts, offset, epoch = (-1, -1, -1)
            try:
                ts, offset, epoch = partition.fetch_offset_for_timestamp(
                    p.timestamp, getattr(p, "current_leader_epoch", -1),
                    read_committed=committed)
            except ReplicaError as exc:
                code = exc.code
            except StorageError:  # the read failed: logged once, the dir went offline
                code = ErrorCode.kafka_storage_error
            partitions.append(build(m.ListOffsetsPartitionResponse,
                                    partition_index=p.partition_index, error_code=code,
                                    timestamp=ts, offset=offset, leader_epoch=epoch))
        topics.append(build(m.ListOffsetsTopicResponse, name=topic.name,
                            partitions=tuple(partitions)))
    return build(m.ListOffsetsResponse, throttle_time=NO_THROTTLE, topics=tuple(topics))
