"""AlterPartitionReassignments and ListPartitionReassignments: moving replicas between brokers.

As in Kafka's ZooKeeper mode only the controller acts (admin clients send these requests to
it; any other broker answers NOT_CONTROLLER). The controller records each reassignment in
the topic znode and its pass carries it out (``cluster/reassignment.py``); the answer comes
once it is recorded, not when it completes. A lone broker (no ``zookeeper.connect``) is its
own controller and the only broker: moving a partition onto itself is a no-op, any other
broker is not alive, and nothing is ever in progress.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from kio.schema.errors import ErrorCode

from ...cluster import reassignment
from ...cluster.reassignment import NOT_FOUND, Outcome, ReplicaAssignment
from ...protocol.codec import build
from ..broker import RequestContext
from ..errors import ApiError
from .api_versions import NO_THROTTLE

NOT_CONTROLLER = (ErrorCode.not_controller, "This is not the correct controller for this cluster.")


def _changes(request: Any) -> dict[tuple[str, int], tuple[int, ...] | None]:
    changes: dict[tuple[str, int], tuple[int, ...] | None] = {}
    for topic in request.topics:
        for p in topic.partitions:
            changes[(topic.name, p.partition_index)] = \
                None if p.replicas is None else tuple(int(r) for r in p.replicas)
    return changes


def _alone(ctx: RequestContext, changes: dict[tuple[str, int], tuple[int, ...] | None],
           allow_rf_change: bool) -> dict[tuple[str, int], Outcome]:
    """A lone broker: every partition has the single replica {self}, never moving."""
    broker = ctx.broker
    results: dict[tuple[str, int], Outcome] = {}
    for (name, partition), replicas in changes.items():
        now = ReplicaAssignment((broker.node_id,))
        error = None if replicas is None else reassignment.validate(
            replicas, now, [broker.node_id], allow_rf_change)
        topic = broker.metadata.topic(name)
        if error is not None:
            results[(name, partition)] = error
        elif replicas is None:
            results[(name, partition)] = reassignment.NO_REASSIGNMENT
        elif topic is None or not 0 <= partition < topic.partitions:
            results[(name, partition)] = NOT_FOUND
        else:
            results[(name, partition)] = reassignment.OK
    return results


async def handle_alter(request: Any, ctx: RequestContext) -> Any:
    m = ctx.resp
    broker = ctx.broker
    changes = _changes(request)
    allow_rf_change = bool(getattr(request, "allow_replication_factor_change", True))
    code, message = ErrorCode.none, None
    results: dict[tuple[str, int], Outcome] = {}
    try:
        if broker.cluster is None:
            results = _alone(ctx, changes, allow_rf_change)
        else:
            results = await broker.cluster.alter_reassignments(changes, allow_rf_change)
    except ApiError as exc:
        code, message = exc.code, exc.message
    by_topic: dict[str, list[Any]] = defaultdict(list)
    for (name, partition), (error, text) in results.items():
        by_topic[name].append(build(m.ReassignablePartitionResponse, partition_index=partition,
                                    error_code=error, error_message=text))
    return build(
        m.AlterPartitionReassignmentsResponse, throttle_time=NO_THROTTLE,
        allow_replication_factor_change=allow_rf_change, error_code=code,
        error_message=message,
        responses=tuple(build(m.ReassignableTopicResponse, name=name, partitions=tuple(parts))
                        for name, parts in by_topic.items()))


async def handle_list(request: Any, ctx: RequestContext) -> Any:
    m = ctx.resp
    broker = ctx.broker
    wanted = None if request.topics is None else {
        t.name: tuple(t.partition_indexes) for t in request.topics}
    code, message = ErrorCode.none, None
    found: dict[str, dict[int, ReplicaAssignment]] = {}
    if broker.cluster is not None:
        if not broker.cluster.is_controller():
            code, message = NOT_CONTROLLER
        else:
            found = reassignment.listing(broker.cluster.store, wanted)
    return build(
        m.ListPartitionReassignmentsResponse, throttle_time=NO_THROTTLE, error_code=code,
        error_message=message,
        topics=tuple(build(m.OngoingTopicReassignment, name=name, partitions=tuple(
            build(m.OngoingPartitionReassignment, partition_index=p, replicas=a.replicas,
                  adding_replicas=a.adding, removing_replicas=a.removing)
            for p, a in sorted(parts.items()))) for name, parts in sorted(found.items())))
