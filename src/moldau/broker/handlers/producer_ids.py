"""InitProducerId: producer ids for idempotent producers.

A producer with ``enable.idempotence`` asks for an id before its first batch and stamps every
batch with (producer id, epoch, sequence). Ids come from the metadata store, which persists them
in blocks ahead of use, so an id is never handed out twice, not even across restarts.

KIP-360 lets an idempotent producer that lost track of its sequences (a batch expired, an
``UNKNOWN_PRODUCER_ID``) ask again while presenting the id and epoch it holds. Kafka's own broker
answers such a non-transactional request with a fresh id; moldau keeps the id and bumps the
epoch, as KIP-360 describes, which librdkafka and the Java client accept alike: a producer
re-initialises all its sequence numbers either way. An epoch that cannot be bumped any further
yields a fresh id with epoch 0.

A request carrying a ``transactional_id`` goes to the transaction coordinator
(handlers/transactions.py), which keeps the id and epoch of each transactional id.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from ...protocol.codec import build
from .. import authz
from ..broker import RequestContext
from .api_versions import NO_THROTTLE

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
# Kafka treats an epoch of Short.MAX_VALUE - 1 as exhausted: MAX_VALUE itself is kept free so a
# coordinator can still fence the producer with one last bump.
LAST_USABLE_EPOCH = 32767 - 1


def _response(ctx: RequestContext, code: ErrorCode, producer_id: int = NO_PRODUCER_ID,
              epoch: int = NO_PRODUCER_EPOCH) -> Any:
    return build(
        ctx.resp.InitProducerIdResponse,
        throttle_time=NO_THROTTLE,
        error_code=code,
        producer_id=producer_id,
        producer_epoch=epoch,
    )


async def _next_producer_id(ctx: RequestContext) -> int:
    """A new id: from the local store, or from the cluster's /latest_producer_id_block (a new
    block costs ZooKeeper round trips, so off the event loop)."""
    cluster = ctx.broker.cluster
    if cluster is not None:
        return await cluster.next_producer_id()
    return ctx.broker.metadata.next_producer_id()


async def handle(request: Any, ctx: RequestContext) -> Any:
    if request.transactional_id is not None:
        from .transactions import init_producer_id

        if not authz.allowed(ctx, authz.Op.WRITE, authz.TXN_ID, request.transactional_id):
            return _response(ctx, ErrorCode.transactional_id_authorization_failed)
        code, producer_id, epoch = await init_producer_id(request, ctx)
        return _response(ctx, code, producer_id, epoch)
    if not authz.may_produce_idempotently(ctx):
        return _response(ctx, ErrorCode.cluster_authorization_failed)
    # v0-2 carry no id/epoch; absent fields mean "a new producer".
    producer_id = getattr(request, "producer_id", NO_PRODUCER_ID)
    epoch = getattr(request, "producer_epoch", NO_PRODUCER_EPOCH)
    if producer_id == NO_PRODUCER_ID and epoch == NO_PRODUCER_EPOCH:
        return _response(ctx, ErrorCode.none, await _next_producer_id(ctx), 0)
    if producer_id < 0 or epoch < 0:
        # Kafka rejects a request that names only one of the two, or negative values.
        return _response(ctx, ErrorCode.invalid_request)
    if epoch >= LAST_USABLE_EPOCH:
        return _response(ctx, ErrorCode.none, await _next_producer_id(ctx), 0)
    return _response(ctx, ErrorCode.none, producer_id, epoch + 1)
