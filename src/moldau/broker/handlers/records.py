"""DeleteRecords and OffsetForLeaderEpoch: moving the log start, and epoch end offsets.

DeleteRecords only advances a partition's log start offset; whole segments below it go when the
log layer decides (as in Kafka, where the retention thread removes them later). A single node is
its own ISR, so the new low watermark is known at once and nothing waits in a purgatory.

OffsetForLeaderEpoch lets a consumer that resumes from a position with a known leader epoch
detect log truncation (KIP-320): the broker answers with the end offset of that epoch from the
log's leader-epoch cache.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from ...log.errors import OffsetOutOfRangeError, StorageError
from ...protocol.codec import build
from ..broker import RequestContext
from ..errors import ApiError
from .api_versions import NO_THROTTLE
from .pacing import Pacer

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1
NO_CURRENT_EPOCH = -1


def _delete_before(ctx: RequestContext, topic: str, partition: int, offset: int) -> int:
    """Advance the log start of one partition to ``offset``; return the new low watermark."""
    plog = ctx.broker.partition_log(topic, partition)
    if plog is None:
        raise ApiError(ErrorCode.unknown_topic_or_partition)
    if not plog.config.deletes:
        # Kafka refuses on compact-only topics: moving the start would break the guarantee that
        # a compacted log keeps the latest value of every key.
        raise ApiError(ErrorCode.policy_violation)
    # The log takes -1 as the high watermark, refuses offsets above it, and treats offsets
    # below the current start as already deleted, all as Kafka does.
    try:
        return plog.delete_records_before(offset)
    except OffsetOutOfRangeError as exc:
        raise ApiError(ErrorCode.offset_out_of_range, str(exc)) from exc
    except StorageError as exc:  # logged once by the failure channel
        raise ApiError(ErrorCode.kafka_storage_error, str(exc)) from exc


async def handle_delete_records(request: Any, ctx: RequestContext) -> Any:
    m = ctx.resp
    topics = []
    pacer = Pacer()
    for topic in request.topics:
        results = []
        for p in topic.partitions:
            await pacer.tick()
            try:
                low = _delete_before(ctx, topic.name, p.partition_index, p.offset)
                code = ErrorCode.none
            except ApiError as exc:
                low, code = -1, exc.code
            results.append(build(m.DeleteRecordsPartitionResult,
                                 partition_index=p.partition_index, low_watermark=low,
                                 error_code=code))
        topics.append(build(m.DeleteRecordsTopicResult, name=topic.name,
                            partitions=tuple(results)))
    return build(m.DeleteRecordsResponse, throttle_time=NO_THROTTLE, topics=tuple(topics))


def _epoch_end(ctx: RequestContext, topic: str, p: Any) -> tuple[ErrorCode, int, int]:
    """(error, leader epoch, end offset) of the epoch asked for in one partition request."""
    broker = ctx.broker
    plog = broker.partition_log(topic, p.partition)
    if plog is None:
        return ErrorCode.unknown_topic_or_partition, UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
    if plog.offline:
        return ErrorCode.kafka_storage_error, UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
    current = p.current_leader_epoch
    # The client's view of the leader epoch must match ours, as in a fetch (KIP-320):
    # newer means we have not caught up with the controller, older means the client is stale.
    if current != NO_CURRENT_EPOCH and current > broker.leader_epoch:
        return ErrorCode.unknown_leader_epoch, UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
    if current != NO_CURRENT_EPOCH and current < broker.leader_epoch:
        return ErrorCode.fenced_leader_epoch, UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
    if p.leader_epoch == UNDEFINED_EPOCH:
        return ErrorCode.none, UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
    epoch, end_offset = plog.end_offset_for_epoch(p.leader_epoch)
    if end_offset == UNDEFINED_EPOCH_OFFSET:
        return ErrorCode.none, UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
    return ErrorCode.none, epoch, end_offset


async def handle_offset_for_leader_epoch(request: Any, ctx: RequestContext) -> Any:
    m = ctx.resp
    topics = []
    pacer = Pacer()
    for topic in request.topics:
        results = []
        for p in topic.partitions:
            await pacer.tick()
            code, epoch, end_offset = _epoch_end(ctx, topic.topic, p)
            results.append(build(m.EpochEndOffset, error_code=code, partition=p.partition,
                                 leader_epoch=epoch, end_offset=end_offset))
        topics.append(build(m.OffsetForLeaderTopicResult, topic=topic.topic,
                            partitions=tuple(results)))
    return build(m.OffsetForLeaderEpochResponse, throttle_time=NO_THROTTLE, topics=tuple(topics))
