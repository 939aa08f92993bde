"""ApiVersions: the versions of every API this broker implements, and its features (v3+).

The one feature moldau advertises is ``transaction.version`` (KIP-890 part 2), supported 0-2
and finalized at 2 as on a Kafka 4.x cluster: a client that sees the finalized level 2 speaks
transactions version 2 (Produce v12 adds its partitions to the transaction, EndTxn v5 bumps
the producer epoch at every commit and abort). Kafka's finalized-features epoch is the metadata
offset of the last feature change; moldau's features never change, so it is a constant above
-1 (clients ignore finalized features whose epoch is not newer than what they hold, and -1
means unknown).
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.api_versions.v0 import response as v0
from kio.schema.errors import ErrorCode

from ...protocol.apis import SUPPORTED
from ...protocol.codec import build
from ..broker import RequestContext

NO_THROTTLE = datetime.timedelta(0)

TRANSACTION_VERSION = "transaction.version"
#: (name, supported min, supported max, finalized level)
FEATURES = ((TRANSACTION_VERSION, 0, 2, 2),)
FINALIZED_FEATURES_EPOCH = 1


def _api_keys(module: Any) -> tuple[Any, ...]:
    return tuple(
        module.ApiVersion(api_key=r.key, min_version=r.min_version, max_version=r.max_version)
        for r in sorted(SUPPORTED.values(), key=lambda r: r.key)
    )


def unsupported_version_response() -> v0.ApiVersionsResponse:
    """The v0 answer to an ApiVersions version we do not know (KIP-511)."""
    return v0.ApiVersionsResponse(error_code=ErrorCode.unsupported_version, api_keys=_api_keys(v0))


def _features(m: Any) -> dict[str, Any]:
    """The feature fields of a v3+ response (older versions have none)."""
    if not hasattr(m, "SupportedFeatureKey"):
        return {}
    return {
        "supported_features": tuple(
            m.SupportedFeatureKey(name=name, min_version=low, max_version=high)
            for name, low, high, _ in FEATURES),
        "finalized_features_epoch": FINALIZED_FEATURES_EPOCH,
        "finalized_features": tuple(
            m.FinalizedFeatureKey(name=name, max_version_level=level, min_version_level=level)
            for name, _, _, level in FEATURES),
    }


async def handle(request: Any, ctx: RequestContext) -> Any:
    m = ctx.resp
    return build(
        m.ApiVersionsResponse,
        error_code=ErrorCode.none,
        api_keys=_api_keys(m),
        throttle_time=NO_THROTTLE,
        **_features(m),
    )
