"""DeleteRecords and OffsetForLeaderEpoch: moving the log start, and epoch end offsets.

DeleteRecords only advances a partition's log start offset (through its leader's
:meth:`~moldau.replica.partition.Partition.delete_records_on_leader`); whole segments below it
go when the log layer decides (as in Kafka, where the retention thread removes them later).
As in Kafka, the answer waits (at most the request's timeout, then REQUEST_TIMED_OUT) until
the low watermark, the lowest log start offset of the ISR, reached the offset: followers take
the leader's log start from their Fetch responses and report theirs in their next Fetch, so
the follower fetches parked on the partition are woken to carry the news at once. A single
node is its own ISR, so the new low watermark is known at once and nothing waits.

OffsetForLeaderEpoch lets a consumer that resumes from a position with a known leader epoch
detect log truncation (KIP-320): the broker answers with the end offset of that epoch from the
log's leader-epoch cache, after the partition checked the client's view of the epoch.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kio.schema.errors import ErrorCode

from ...log.errors import OffsetOutOfRangeError, StorageError
from ...protocol.codec import build
from ...replica import ReplicaError
from .. import authz
from ..broker import RequestContext
from ..errors import ApiError
from .api_versions import NO_THROTTLE
from .pacing import Pacer

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


def _delete_before(ctx: RequestContext, topic: str, partition: int, offset: int
                   ) -> tuple[int, asyncio.Future[ErrorCode] | None]:
    """Advance the log start of one partition to ``offset``; the low watermark now, and a
    future to wait for when the followers' log starts have not reached the offset yet."""
    hosted = ctx.broker.partition(topic, partition)
    if hosted is None:
        raise ApiError(ErrorCode.unknown_topic_or_partition)
    # The log takes -1 as the high watermark, refuses offsets above it, and treats offsets
    # below the current start as already deleted, all as Kafka does.
    try:
        requested, low = hosted.delete_records_on_leader(offset)
        if low >= requested:
            return low, None
        # Followers parked in a fetch would hear of the new log start only when it ends.
        ctx.broker.replicas.replica_fetch_purgatory.wake_all(hosted.key)
        return low, hosted.wait_for_low_watermark(requested)
    except ReplicaError as exc:
        raise ApiError(exc.code, exc.message) from exc
    except OffsetOutOfRangeError as exc:
        raise ApiError(ErrorCode.offset_out_of_range, str(exc)) from exc
    except StorageError as exc:  # logged once by the failure channel
        raise ApiError(ErrorCode.kafka_storage_error, str(exc)) from exc


async def handle_delete_records(request: Any, ctx: RequestContext) -> Any:
    m = ctx.resp
    # Per topic, per partition: [partition, error, low watermark, future to wait for or None].
    answers: list[tuple[str, list[list[Any]]]] = []
    pacer = Pacer()
    for topic in request.topics:
        results: list[list[Any]] = []
        if not authz.allowed(ctx, authz.Op.DELETE, authz.TOPIC, topic.name):
            answers.append((topic.name, [[p.partition_index,
                                          ErrorCode.topic_authorization_failed, -1, None]
                                         for p in topic.partitions]))
            continue
        for p in topic.partitions:
            await pacer.tick()
            try:
                low, waiting = _delete_before(ctx, topic.name, p.partition_index, p.offset)
                code = ErrorCode.none
            except ApiError as exc:
                low, code, waiting = -1, exc.code, None
            results.append([p.partition_index, code, low, waiting])
        answers.append((topic.name, results))
    pending = [r[3] for _, results in answers for r in results
               if r[3] is not None and not r[3].done()]
    if pending:
        await asyncio.wait(pending, timeout=max(request.timeout.total_seconds(), 0))
    topics = []
    for name, results in answers:
        partitions = []
        for index, code, low, waiting in results:
            if waiting is not None:
                if not waiting.done():
                    waiting.cancel()
                    code = ErrorCode.request_timed_out  # low: the one known before waiting
                elif waiting.result() is ErrorCode.none:
                    hosted = ctx.broker.partition(name, index)
                    low = hosted.low_watermark() if hosted is not None else low
                else:
                    code, low = waiting.result(), -1
            partitions.append(build(m.DeleteRecordsPartitionResult, partition_index=index,
                                    low_watermark=low, error_code=code))
        topics.append(build(m.DeleteRecordsTopicResult, name=name,
                            partitions=tuple(partitions)))
    return build(m.DeleteRecordsResponse, throttle_time=NO_THROTTLE, topics=tuple(topics))


def _epoch_end(ctx: RequestContext, topic: str, p: Any) -> tuple[ErrorCode, int, int]:
    """(error, leader epoch, end offset) of the epoch asked for in one partition request."""
    partition = ctx.broker.partition(topic, p.partition)
    if partition is None:
        return ErrorCode.unknown_topic_or_partition, UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
    if partition.offline:
        return ErrorCode.kafka_storage_error, UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
    try:
        epoch, end_offset = partition.last_offset_for_leader_epoch(p.current_leader_epoch,
                                                                   p.leader_epoch)
    except ReplicaError as exc:
        return exc.code, UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
    return ErrorCode.none, epoch, end_offset


async def handle_offset_for_leader_epoch(request: Any, ctx: RequestContext) -> Any:
    m = ctx.resp
    topics = []
    pacer = Pacer()
    # Kafka: a follower (replica_id >= 0) needs CLUSTER_ACTION, a client DESCRIBE per topic.
    follower = getattr(request, "replica_id", -1) >= 0
    for topic in request.topics:
        results = []
        denied = not (authz.allowed(ctx, authz.Op.CLUSTER_ACTION, authz.CLUSTER) if follower
                      else authz.allowed(ctx, authz.Op.DESCRIBE, authz.TOPIC, topic.topic))
        for p in topic.partitions:
            await pacer.tick()
            if denied:
                results.append(build(m.EpochEndOffset, partition=p.partition, leader_epoch=-1,
                                     error_code=ErrorCode.topic_authorization_failed,
                                     end_offset=-1))
                continue
            code, epoch, end_offset = _epoch_end(ctx, topic.topic, p)
            results.append(build(m.EpochEndOffset, error_code=code, partition=p.partition,
                                 leader_epoch=epoch, end_offset=end_offset))
        topics.append(build(m.OffsetForLeaderTopicResult, topic=topic.topic,
                            partitions=tuple(results)))
    return build(m.OffsetForLeaderEpochResponse, throttle_time=NO_THROTTLE, topics=tuple(topics))
