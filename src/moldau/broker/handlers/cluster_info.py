"""DescribeLogDirs and DescribeCluster: where the data lives, and who is in the cluster.

A partition moving between this broker's log dirs (AlterReplicaLogDirs) is listed twice:
its current replica in its dir, and its future replica (``is_future_key``) in the target
dir, with the future's offset lag behind the current log's end.

Admin tools use DescribeLogDirs to see how much disk each partition takes (``kafka-log-dirs``,
cruise control, UIs); every broker answers for its own dirs and the replicas it hosts (in a
cluster, leaders and followers alike, a reassignment's new replicas from the moment their logs
exist), so tools ask each broker. DescribeCluster to find the brokers and the controller without
fetching topic metadata. A single node is its own controller; in a cluster every live
registration is listed, with the elected controller.
"""

from __future__ import annotations

import shutil
from collections import defaultdict
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode

from ...protocol.codec import build
from ...security.acls import CLUSTER_NAME
from .. import authz
from ..broker import RequestContext
from .api_versions import NO_THROTTLE
from .authorized_operations import CLUSTER_OPERATIONS, authorized_operations

# DescribeCluster v1 endpoint types (KIP-919): a broker describes brokers, not controllers.
ENDPOINT_BROKERS = 1


def _requested(request: Any) -> dict[str, set[int]] | None:
    """Partitions asked for per topic, or None for everything (a null topic list)."""
    if request.topics is None:
        return None
    wanted: dict[str, set[int]] = defaultdict(set)
    for t in request.topics:
        wanted[t.topic].update(t.partitions)
    return wanted


def _offset_lag(ctx: RequestContext, topic: str, partition: int, is_future: bool) -> int:
    """Kafka's offset lag: for a current replica how far its log end is below its high
    watermark (never below 0: 0 once appended), for a future replica (a move between log
    dirs) how far its copy is behind the current log's end; -1 when not hosted any more."""
    hosted = ctx.broker.partition(topic, partition)
    if hosted is None:
        return -1
    if is_future:
        future = ctx.broker.replicas.future_log(topic, partition)
        return -1 if future is None else hosted.log_end_offset - future.log_end_offset
    return max(hosted.high_watermark - hosted.log_end_offset, 0)


def _dir_result(ctx: RequestContext, log_dir: Path,
                sizes: list[tuple[tuple[str, int], int, bool]],
                wanted: dict[str, set[int]] | None) -> Any:
    m = ctx.resp
    by_topic: dict[str, list[Any]] = defaultdict(list)
    for (topic, partition), size, is_future in sizes:
        if wanted is not None and partition not in wanted.get(topic, ()):
            continue
        by_topic[topic].append(build(
            m.DescribeLogDirsPartition, partition_index=partition, partition_size=size,
            offset_lag=_offset_lag(ctx, topic, partition, is_future), is_future_key=is_future))
    topics = tuple(
        build(m.DescribeLogDirsTopic, name=name,
              partitions=tuple(sorted(parts, key=lambda p: (p.partition_index,
                                                            p.is_future_key))))
        for name, parts in sorted(by_topic.items())
    )
    try:
        usage = shutil.disk_usage(log_dir)
        total, usable = usage.total, usage.free
    except OSError:
        total = usable = -1
    return build(m.DescribeLogDirsResult, error_code=ErrorCode.none,
                 log_dir=str(log_dir.resolve()), topics=topics,
                 total_bytes=total, usable_bytes=usable)


def _offline_dir_result(ctx: RequestContext, log_dir: Path) -> Any:
    """An offline dir, as Kafka reports it: KAFKA_STORAGE_ERROR and nothing else known."""
    return build(ctx.resp.DescribeLogDirsResult, error_code=ErrorCode.kafka_storage_error,
                 log_dir=str(log_dir.resolve()), topics=(), total_bytes=-1, usable_bytes=-1)


async def handle_describe_log_dirs(request: Any, ctx: RequestContext) -> Any:
    wanted = _requested(request)
    replicas = ctx.broker.replicas
    results = tuple(_offline_dir_result(ctx, d) if replicas.is_offline(d)
                    else _dir_result(ctx, d, sizes, wanted)
                    for d, sizes in replicas.log_dir_sizes().items())
    return build(ctx.resp.DescribeLogDirsResponse, throttle_time=NO_THROTTLE,
                 error_code=ErrorCode.none, results=results)


async def handle_describe_cluster(request: Any, ctx: RequestContext) -> Any:
    m = ctx.resp
    broker = ctx.broker
    endpoint_type = getattr(request, "endpoint_type", ENDPOINT_BROKERS)
    code, message = ErrorCode.none, None
    brokers: tuple[Any, ...] = ()
    if endpoint_type != ENDPOINT_BROKERS:
        code = ErrorCode.unsupported_endpoint_type
        message = "The target broker only supports DescribeCluster with endpoint type BROKERS"
    elif broker.cluster is not None:
        # Fenced brokers (v2) are a KRaft notion: every registered broker is live here.
        brokers = tuple(build(m.DescribeClusterBroker, broker_id=node_id, host=host, port=port,
                              rack=rack, is_fenced=False)
                        for node_id, host, port, rack in broker.cluster.nodes(ctx.listener_name))
    else:
        listener = broker.config.advertised_listener(ctx.listener_name)
        brokers = (build(m.DescribeClusterBroker, broker_id=broker.node_id, host=listener.host,
                         port=listener.port, rack=None, is_fenced=False),)
    return build(
        m.DescribeClusterResponse,
        throttle_time=NO_THROTTLE,
        error_code=code,
        error_message=message,
        endpoint_type=endpoint_type,
        cluster_id=broker.metadata.cluster_id,
        controller_id=broker.node_id if broker.cluster is None else
        broker.cluster.controller_id(),
        brokers=brokers,
        cluster_authorized_operations=authorized_operations(
            request.include_cluster_authorized_operations,
            authz.operations(ctx, authz.CLUSTER, CLUSTER_NAME, CLUSTER_OPERATIONS)),
    )
