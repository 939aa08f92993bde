"""ApiVersions: the versions of every API this broker implements."""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.api_versions.v0 import response as v0
from kio.schema.errors import ErrorCode

from ...protocol.apis import SUPPORTED
from ...protocol.codec import build
from ..broker import RequestContext

NO_THROTTLE = datetime.timedelta(0)


def _api_keys(module: Any) -> tuple[Any, ...]:
    return tuple(
        module.ApiVersion(api_key=r.key, min_version=r.min_version, max_version=r.max_version)
        for r in sorted(SUPPORTED.values(), key=lambda r: r.key)
    )


def unsupported_version_response() -> v0.ApiVersionsResponse:
    """The v0 answer to an ApiVersions version we do not know (KIP-511)."""
    return v0.ApiVersionsResponse(error_code=ErrorCode.unsupported_version, api_keys=_api_keys(v0))


async def handle(request: Any, ctx: RequestContext) -> Any:
    m = ctx.resp
    return build(
        m.ApiVersionsResponse,
        error_code=ErrorCode.none,
        api_keys=_api_keys(m),
        throttle_time=NO_THROTTLE,
    )
