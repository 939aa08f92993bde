"""ControlledShutdown (api key 7): a broker about to stop asks the controller to move its
leadership away first (see ``cluster.controlled_shutdown`` for what the controller does).

Only the controller acts; any other broker answers NOT_CONTROLLER, and the asking broker
looks for the controller again. A lone broker (no ``zookeeper.connect``) has nothing
replicated to move: it answers its own id with no remaining partitions and any other id
BROKER_NOT_AVAILABLE.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from ...protocol.codec import build
from ..broker import RequestContext


async def handle(request: Any, ctx: RequestContext) -> Any:
    broker = ctx.broker
    broker_epoch = getattr(request, "broker_epoch", -1)  # v1 has none: not checked
    remaining: tuple[tuple[str, int], ...] = ()
    if broker.cluster is not None:
        answer = await broker.cluster.controlled_shutdown_request(request.broker_id,
                                                                  broker_epoch)
        code, remaining = answer.code, answer.remaining
    elif request.broker_id == broker.node_id:
        code = ErrorCode.none
    else:
        code = ErrorCode.broker_not_available
    m = ctx.resp
    return build(m.ControlledShutdownResponse, error_code=code,
                 remaining_partitions=tuple(
                     build(m.RemainingPartition, topic_name=topic, partition_index=partition)
                     for topic, partition in remaining))
