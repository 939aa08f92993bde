"""ListOffsets: earliest, latest, max timestamp, or the first offset at or after a timestamp."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from ...log.errors import StorageError
from ...protocol.codec import build
from ..broker import RequestContext
from .api_versions import NO_THROTTLE
from .pacing import Pacer

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5


def _lookup(plog: Any, timestamp: int, leader_epoch: int) -> tuple[int, int, int]:
    """(timestamp, offset, leader_epoch) for one partition, as Kafka answers them."""
    if timestamp == LATEST:
        return -1, plog.high_watermark, leader_epoch
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return -1, plog.log_start_offset, leader_epoch
    if timestamp == LATEST_TIERED:
        # Nothing is tiered: Kafka answers "no offset" in that case.
        return -1, -1, -1
    if timestamp == MAX_TIMESTAMP:
        found = plog.max_timestamp_entry()
    else:
        found = plog.offset_for_timestamp(timestamp)
    if found is None:
        return -1, -1, -1
    offset, ts = found
    return ts, offset, leader_epoch


async def handle(request: Any, ctx: RequestContext) -> Any:
    m = ctx.resp
    broker = ctx.broker
    topics = []
    pacer = Pacer()
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            await pacer.tick()
            plog = broker.partition_log(topic.name, p.partition_index)
            if plog is None or plog.offline:
                partitions.append(build(m.ListOffsetsPartitionResponse,
                                        partition_index=p.partition_index,
                                        error_code=ErrorCode.kafka_storage_error if plog
                                        else ErrorCode.unknown_topic_or_partition,
                                        timestamp=-1, offset=-1, leader_epoch=-1))
                continue
            current = getattr(p, "current_leader_epoch", -1)
            if current > broker.leader_epoch:
                code = ErrorCode.unknown_leader_epoch
            elif 0 <= current < broker.leader_epoch:
                code = ErrorCode.fenced_leader_epoch
            else:
                code = ErrorCode.none
            ts, offset, epoch = (-1, -1, -1)
            if code is ErrorCode.none:
                try:
                    ts, offset, epoch = _lookup(plog, p.timestamp, broker.leader_epoch)
                except StorageError:  # the read failed: logged once, the dir went offline
                    code = ErrorCode.kafka_storage_error
            partitions.append(build(m.ListOffsetsPartitionResponse,
                                    partition_index=p.partition_index, error_code=code,
                                    timestamp=ts, offset=offset, leader_epoch=epoch))
        topics.append(build(m.ListOffsetsTopicResponse, name=topic.name,
                            partitions=tuple(partitions)))
    return build(m.ListOffsetsResponse, throttle_time=NO_THROTTLE, topics=tuple(topics))
