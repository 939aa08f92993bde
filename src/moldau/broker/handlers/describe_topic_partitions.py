"""DescribeTopicPartitions (KIP-966): topic metadata in pages of at most N partitions.

Admin clients use it instead of Metadata to describe topics with very many partitions: topics
are listed by name, at most ``response_partition_limit`` partitions per response (capped by
Kafka's default ``max.request.partition.size.limit``, 2000), and ``next_cursor`` names the
topic and partition the next page starts at. Leaders, epochs, replicas and ISR are those
Metadata reports (:func:`.metadata.topic_entry`, so a cluster answers from its state znodes);
eligible leader replicas are a KRaft notion (KIP-966's ELR) and always empty here.

Bad input, as Kafka answers it: a cursor whose topic is not among the requested ones, or
whose partition index is negative, fails the whole request with INVALID_REQUEST on every
requested topic; a requested topic that does not exist is UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

import logging
from typing import Any

from kio.schema.errors import ErrorCode

from ...protocol import apis
from ...protocol.codec import build, response_module
from .. import authz
from ..broker import RequestContext
from ..topic_names import INTERNAL_TOPICS
from .api_versions import NO_THROTTLE
from .authorized_operations import NOT_REQUESTED, TOPIC_OPERATIONS, authorized_operations
from .metadata import topic_entry
from .pacing import Pacer

log = logging.getLogger(__name__)

#: Kafka's ``max.request.partition.size.limit`` default: no page is larger.
MAX_PARTITIONS_PER_RESPONSE = 2000
#: The Metadata version whose topic entries are converted (it has topic ids).
_METADATA_VERSION = 12


def _metadata_context(ctx: RequestContext) -> RequestContext:
    return RequestContext(ctx.broker, ctx.header, _METADATA_VERSION,
                          response_module(apis.METADATA, _METADATA_VERSION), ctx.client_host,
                          session=ctx.session)


def _partition(m: Any, p: Any) -> Any:
    return build(m.DescribeTopicPartitionsResponsePartition, error_code=p.error_code,
                 partition_index=p.partition_index, leader_id=p.leader_id,
                 leader_epoch=p.leader_epoch, replica_nodes=p.replica_nodes,
                 isr_nodes=p.isr_nodes, eligible_leader_replicas=(), last_known_elr=(),
                 offline_replicas=p.offline_replicas)


def _topic(m: Any, name: str | None, code: ErrorCode, operations: int, topic_id: Any = None,
           partitions: tuple[Any, ...] = ()) -> Any:
    return build(m.DescribeTopicPartitionsResponseTopic, error_code=code, name=name,
                 topic_id=topic_id, is_internal=name in INTERNAL_TOPICS,
                 partitions=partitions, topic_authorized_operations=operations)


def _cursor_error(request: Any, requested: list[str]) -> str | None:
    """Why the request's cursor is refused, or None."""
    cursor = request.cursor
    if cursor is None:
        return None
    if cursor.partition_index < 0:
        return f"Invalid cursor partition index {cursor.partition_index}"
    if requested and cursor.topic_name not in requested:
        return f"The cursor topic {cursor.topic_name} is not among the requested ones"
    return None


async def handle(request: Any, ctx: RequestContext) -> Any:
    m = ctx.resp
    broker = ctx.broker
    requested = [t.name for t in request.topics]
    refused = _cursor_error(request, requested)
    if refused is not None:
        # Kafka's error response: every requested topic, INVALID_REQUEST, no partitions.
        log.info("refused DescribeTopicPartitions from %r: %s", ctx.client_id, refused)
        return build(m.DescribeTopicPartitionsResponse, throttle_time=NO_THROTTLE,
                     topics=tuple(_topic(m, name, ErrorCode.invalid_request, NOT_REQUESTED)
                                  for name in requested), next_cursor=None)
    cursor = request.cursor
    start_topic = cursor.topic_name if cursor is not None else ""
    names = sorted({n for n in (requested or broker.metadata.topics()) if n >= start_topic})
    operations = authorized_operations(True, TOPIC_OPERATIONS)
    budget = max(0, min(request.response_partition_limit, MAX_PARTITIONS_PER_RESPONSE))
    md_ctx = _metadata_context(ctx)
    topics: list[Any] = []
    next_cursor = None
    pacer = Pacer()
    guarded = broker.authorizer is not None
    for name in names:
        await pacer.tick()
        if guarded:
            # As Metadata: DESCRIBE needed; unnamed topics one may not see are left out.
            if not authz.allowed(ctx, authz.Op.DESCRIBE, authz.TOPIC, name):
                if requested:
                    topics.append(_topic(m, name, ErrorCode.topic_authorization_failed,
                                         NOT_REQUESTED))
                continue
            operations = authz.operations(ctx, authz.TOPIC, name, TOPIC_OPERATIONS)
        if broker.metadata.topic(name) is None:
            topics.append(_topic(m, name, ErrorCode.unknown_topic_or_partition, operations))
            continue
        if budget == 0:
            next_cursor = build(m.Cursor, topic_name=name, partition_index=0)
            break
        entry = topic_entry(md_ctx, name, operations)
        first = cursor.partition_index if cursor is not None and name == start_topic else 0
        partitions = entry.partitions[first:first + budget]
        budget -= len(partitions)
        topics.append(_topic(m, name, ErrorCode.none, operations, entry.topic_id,
                             tuple(_partition(m, p) for p in partitions)))
        if first + len(partitions) < len(entry.partitions):
            next_cursor = build(m.Cursor, topic_name=name,
                                partition_index=first + len(partitions))
            break
    return build(m.DescribeTopicPartitionsResponse, throttle_time=NO_THROTTLE,
                 topics=tuple(topics), next_cursor=next_cursor)
