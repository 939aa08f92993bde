"""TxnOffsetCommit (KIP-98, KIP-447): a transactional producer commits a group's offsets.

The offsets are appended to the group's ``__consumer_offsets`` partition as a batch of the
producer's transaction and answered once the ISR has them; they stay pending until the
transaction's marker reaches that partition (see ``GroupService.complete_transaction``).
v3+ carries the consumer's generation, member id and instance id (KIP-447), checked like
Kafka does each one only when set. A partition of a topic that does not exist is
UNKNOWN_TOPIC_OR_PARTITION; an empty group id is INVALID_GROUP_ID for every partition.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from ...coordinator.manager import CommittedOffset
from ...coordinator.offsets import TopicPartition
from ...protocol.codec import build
from .. import authz
from ..broker import RequestContext, now_ms
from .api_versions import NO_THROTTLE
from .groups import loading_error


async def handle_txn_offset_commit(request: Any, ctx: RequestContext) -> Any:
    m = ctx.resp
    offsets = [
        CommittedOffset(topic=t.name, partition=p.partition_index, offset=p.committed_offset,
                        leader_epoch=getattr(p, "committed_leader_epoch", -1),
                        metadata=p.committed_metadata)
        for t in request.topics for p in t.partitions
    ]
    code = ErrorCode.invalid_group_id if not request.group_id \
        else loading_error(ctx, request.group_id)
    errors: dict[TopicPartition, ErrorCode]
    # The transactional id and the group are checked before (authz.WHOLE_REQUEST); each
    # topic needs READ, and a refused one fails alone (Kafka).
    denied = {t.name for t in request.topics
              if not authz.allowed(ctx, authz.Op.READ, authz.TOPIC, t.name)}
    refused = {(o.topic, o.partition): ErrorCode.topic_authorization_failed
               for o in offsets if o.topic in denied}
    offsets = [o for o in offsets if o.topic not in denied]
    if code is not None:
        errors = {(o.topic, o.partition): code for o in offsets}
    else:
        errors = await ctx.broker.groups.commit_txn_offsets(
            request.group_id,
            getattr(request, "member_id", ""),
            getattr(request, "group_instance_id", None),
            getattr(request, "generation_id", -1),
            request.producer_id,
            request.producer_epoch,
            offsets,
            now_ms(),
        )
    errors = {**errors, **refused}
    topics = tuple(
        build(m.TxnOffsetCommitResponseTopic, name=t.name, partitions=tuple(
            build(m.TxnOffsetCommitResponsePartition, partition_index=p.partition_index,
                  error_code=errors[(t.name, p.partition_index)])
            for p in t.partitions))
        for t in request.topics
    )
    return build(m.TxnOffsetCommitResponse, throttle_time=NO_THROTTLE, topics=topics)
