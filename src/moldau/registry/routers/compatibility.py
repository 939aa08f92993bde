"""``/compatibility``: would a schema be accepted, and if not, why (``verbose=true``)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..web import flag, json_body, read, registry_of


async def check(request: Request) -> Response:
    registry, subject = registry_of(request), request.path_params["subject"]
    version = request.path_params.get("version")
    body = await json_body(request)
    normalize, verbose = flag(request, "normalize"), flag(request, "verbose")

    def answer() -> dict[str, Any]:
        messages = registry.compatibility_messages(subject, version, body, normalize)
        result: dict[str, Any] = {"is_compatible": not messages}
        if verbose:
            result["messages"] = messages
        return result

    return await read(answer)


routes = [
    Route("/compatibility/subjects/{subject}/versions/{version}", check, methods=["POST"]),
    Route("/compatibility/subjects/{subject}/versions", check, methods=["POST"]),
]
