"""Metadata: brokers, topics and partition leaders; auto-creates topics when allowed."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from ...protocol.codec import build
from ...security.acls import CLUSTER_NAME
from .. import authz
from ..broker import RequestContext
from ..errors import ApiError
from ..topic_names import INTERNAL_TOPICS, validate_topic_name
from .api_versions import NO_THROTTLE
from .authorized_operations import (
    CLUSTER_OPERATIONS,
    NOT_REQUESTED,
    TOPIC_OPERATIONS,
    authorized_operations,
)
from .pacing import Pacer


def _requested_names(request: Any, ctx: RequestContext) -> list[str | None] | None:
    """The topics asked for, or None for "all topics" (an empty list means all in v0)."""
    topics = request.topics
    if topics is None or (ctx.version == 0 and not topics):
        return None
    names: list[str | None] = []
    for t in topics:
        name = getattr(t, "name", None)
        if name is None and getattr(t, "topic_id", None) is not None:
            found = ctx.broker.metadata.topic_by_id(t.topic_id)
            name = found.name if found else None
        names.append(name)
    return names


def topic_entry(ctx: RequestContext, name: str, operations: int) -> Any:
    """The metadata of one existing topic: leader, epoch, replicas and ISR of each partition,
    as its :class:`~moldau.replica.partition.Partition` holds them."""
    m = ctx.resp
    broker = ctx.broker
    topic = broker.metadata.topic(name)
    assert topic is not None
    node = broker.node_id
    partitions = []
    if broker.cluster is not None:
        return _topic(ctx, name, topic.topic_id, operations,
                      _cluster_partitions(ctx, name, topic.partitions))
    for p in range(topic.partitions):
        hosted = broker.partition(name, p)
        if hosted is None:
            # Named by the metadata but not hosted (being created or deleted): no leader yet.
            partitions.append(build(
                m.MetadataResponsePartition, error_code=ErrorCode.leader_not_available,
                partition_index=p, leader_id=-1, leader_epoch=-1, replica_nodes=(node,),
                isr_nodes=(), offline_replicas=()))
            continue
        if hosted.offline:
            # Its only replica is in an offline log dir: no leader, as Kafka reports it.
            partitions.append(build(
                m.MetadataResponsePartition, error_code=ErrorCode.leader_not_available,
                partition_index=p, leader_id=-1, leader_epoch=hosted.leader_epoch,
                replica_nodes=hosted.replicas, isr_nodes=(), offline_replicas=(node,)))
            continue
        partitions.append(build(
            m.MetadataResponsePartition,
            error_code=ErrorCode.none,
            partition_index=p,
            leader_id=hosted.leader_id,
            leader_epoch=hosted.leader_epoch,
            replica_nodes=hosted.replicas,
            isr_nodes=tuple(sorted(hosted.isr)),
            offline_replicas=(),
        ))
    return _topic(ctx, name, topic.topic_id, operations, partitions)


def _topic(ctx: RequestContext, name: str, topic_id: Any, operations: int,
           partitions: list[Any]) -> Any:
    return build(
        ctx.resp.MetadataResponseTopic,
        error_code=ErrorCode.none,
        name=name,
        topic_id=topic_id,
        is_internal=name in INTERNAL_TOPICS,
        partitions=tuple(partitions),
        topic_authorized_operations=operations,
    )


def _cluster_partitions(ctx: RequestContext, name: str, count: int) -> list[Any]:
    """Each partition as the controller's state znode (watched by every broker) has it."""
    cluster = ctx.broker.cluster
    assert cluster is not None
    partitions = []
    for p in range(count):
        view = cluster.partition_view(name, p)
        partitions.append(build(
            ctx.resp.MetadataResponsePartition,
            error_code=ErrorCode.none if view.leader >= 0 else ErrorCode.leader_not_available,
            partition_index=p, leader_id=view.leader, leader_epoch=view.leader_epoch,
            replica_nodes=view.replicas, isr_nodes=view.isr,
            offline_replicas=view.offline))
    return partitions


def _brokers(ctx: RequestContext) -> tuple[Any, ...]:
    """Every live broker (the cluster's registrations), or this one alone."""
    m = ctx.resp
    broker = ctx.broker
    if broker.cluster is None:
        listener = broker.config.advertised_listener(ctx.listener_name)
        return (build(m.MetadataResponseBroker, node_id=broker.node_id, host=listener.host,
                      port=listener.port, rack=None),)
    return tuple(build(m.MetadataResponseBroker, node_id=node_id, host=host, port=port,
                       rack=rack)
                 for node_id, host, port, rack in broker.cluster.nodes(ctx.listener_name))


def _error_entry(ctx: RequestContext, name: str | None, code: ErrorCode,
                 operations: int = NOT_REQUESTED) -> Any:
    return build(
        ctx.resp.MetadataResponseTopic,
        error_code=code,
        name=name,
        topic_id=None,
        is_internal=False,
        partitions=(),
        topic_authorized_operations=operations,
    )


async def handle(request: Any, ctx: RequestContext) -> Any:
    m = ctx.resp
    broker = ctx.broker
    names = _requested_names(request, ctx)
    # v4+ lets the client forbid auto-creation (e.g. consumers); older versions always allow it.
    allow_create = getattr(request, "allow_auto_topic_creation", True)
    # v8+; Kafka answers for every named topic, known or not (not for unknown topic ids).
    ops = authorized_operations(getattr(request, "include_topic_authorized_operations", False),
                                TOPIC_OPERATIONS)
    # With an authorizer: topics without DESCRIBE are left out of "all topics" and refused
    # by name; creating one needs CREATE; the operations bits are the client's own.
    guarded = broker.authorizer is not None

    def ops_of(name: str) -> int:
        if not guarded or ops == NOT_REQUESTED:
            return ops
        return authz.operations(ctx, authz.TOPIC, name, TOPIC_OPERATIONS)

    entries = []
    pacer = Pacer()
    if ctx.version < 12 and names is not None and None in names:
        # Names are nullable (topic ids) only from v12 on, as in the response: Kafka refuses
        # the request with INVALID_REQUEST on every topic, a null name sent back as "".
        entries = [_error_entry(ctx, n or "", ErrorCode.invalid_request) for n in names]
        names = []
    elif names is None:
        for known in sorted(broker.metadata.topics()):
            await pacer.tick()
            if guarded and not authz.allowed(ctx, authz.Op.DESCRIBE, authz.TOPIC, known):
                continue
            if broker.metadata.topic(known) is not None:  # not deleted while we yielded
                entries.append(topic_entry(ctx, known, ops_of(known)))
    else:
        for name in names:
            await pacer.tick()
            if name is None:
                entries.append(_error_entry(ctx, None, ErrorCode.unknown_topic_id))
                continue
            if guarded and not authz.allowed(ctx, authz.Op.DESCRIBE, authz.TOPIC, name):
                entries.append(_error_entry(ctx, name, ErrorCode.topic_authorization_failed))
                continue
            try:
                exists = broker.metadata.topic(name) is not None
                if not exists:
                    # Kafka names an illegal topic INVALID_TOPIC_EXCEPTION whether or not it
                    # may auto-create it, rather than UNKNOWN_TOPIC_OR_PARTITION.
                    validate_topic_name(name)
                if not exists and allow_create:
                    if guarded and not authz.may_create_topic(ctx, name):
                        raise ApiError(ErrorCode.topic_authorization_failed)
                    exists = broker.ensure_topic(name) is not None
            except ApiError as exc:
                entries.append(_error_entry(ctx, name, exc.code, ops))
                continue
            if exists:
                entries.append(topic_entry(ctx, name, ops_of(name)))
            else:
                entries.append(
                    _error_entry(ctx, name, ErrorCode.unknown_topic_or_partition, ops_of(name)))
    return build(
        m.MetadataResponse,
        throttle_time=NO_THROTTLE,
        brokers=_brokers(ctx),
        cluster_id=broker.metadata.cluster_id,
        controller_id=broker.node_id if broker.cluster is None else
        broker.cluster.controller_id(),
        topics=tuple(entries),
        # v8-v10 only (later versions moved it to DescribeCluster).
        cluster_authorized_operations=authorized_operations(
            getattr(request, "include_cluster_authorized_operations", False),
            authz.operations(ctx, authz.CLUSTER, CLUSTER_NAME, CLUSTER_OPERATIONS)),
        # v13+ (KIP-1102): REBOOTSTRAP_REQUIRED is a KRaft controller's answer, never ours.
        error_code=ErrorCode.none,
    )
