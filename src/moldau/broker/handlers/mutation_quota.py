"""``controller_mutation_rate`` (KIP-599): partitions created or deleted per second.

CreateTopics, CreatePartitions and DeleteTopics take one token per partition from the
client's bucket before each topic is changed. Clients new enough to understand it
(CreateTopics v6+, CreatePartitions v3+, DeleteTopics v5+) get THROTTLING_QUOTA_EXCEEDED for
a topic once the bucket is empty (strict mode); older ones are let through and only
throttled (permissive mode). Either way the response carries the time until the bucket is
no longer negative. validate_only changes nothing and takes nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from ...config.client_quotas import CONTROLLER_MUTATION_RATE
from ...protocol import apis
from ..errors import ApiError
from ..quota_throttle import client_of

if TYPE_CHECKING:
    from ..broker import RequestContext

#: The first version of each API that understands THROTTLING_QUOTA_EXCEEDED.
_STRICT_FROM = {apis.CREATE_TOPICS: 6, apis.CREATE_PARTITIONS: 3, apis.DELETE_TOPICS: 5}


def take(ctx: RequestContext, partitions: int) -> None:
    """Take ``partitions`` tokens, or raise THROTTLING_QUOTA_EXCEEDED (strict mode)."""
    quotas = ctx.broker.client_quotas
    if not quotas.enabled[CONTROLLER_MUTATION_RATE] or partitions <= 0:
        return
    user, client = client_of(ctx)
    strict = ctx.version >= _STRICT_FROM.get(ctx.header.api_key, 1 << 15)
    if strict and quotas.mutation_exceeded(user, client):
        raise ApiError(ErrorCode.throttling_quota_exceeded,
                       "The throttling quota has been exceeded.")
    quotas.record_mutation(user, client, partitions)


def finish(ctx: RequestContext) -> None:
    """Leave the throttle time of the client's bucket in the context (0 when not empty)."""
    quotas = ctx.broker.client_quotas
    if quotas.enabled[CONTROLLER_MUTATION_RATE]:
        ctx.throttle_ms = max(ctx.throttle_ms, quotas.mutation_throttle_ms(*client_of(ctx)))
