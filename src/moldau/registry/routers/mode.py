"""``/mode``: READWRITE, READONLY (writes refused with 42205) and IMPORT (ids given by the
caller, for migrating from another registry)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..web import flag, json_body, read, registry_of, write


async def get_global(request: Request) -> Response:
    registry = registry_of(request)
    return await read(lambda: {"mode": registry.mode(None)})


async def put_global(request: Request) -> Response:
    registry, body, force = registry_of(request), await json_body(request), flag(request, "force")
    return await write(request, lambda: {"mode": registry.set_mode(None, body, force)})


async def get_subject(request: Request) -> Response:
    registry, subject = registry_of(request), request.path_params["subject"]
    default_to_global = flag(request, "defaultToGlobal")
    return await read(lambda: {"mode": registry.mode(subject, default_to_global)})


async def put_subject(request: Request) -> Response:
    registry, subject = registry_of(request), request.path_params["subject"]
    body, force = await json_body(request), flag(request, "force")
    return await write(request, lambda: {"mode": registry.set_mode(subject, body, force)})


async def delete_subject(request: Request) -> Response:
    registry, subject = registry_of(request), request.path_params["subject"]
    return await write(request, lambda: {"mode": registry.delete_mode(subject)})


async def contexts(request: Request) -> Response:
    """Subjects with a ``:.ctx:`` prefix are kept as given; only the default context is
    listed."""
    return await read(lambda: ["."])


routes = [
    Route("/mode", get_global, methods=["GET"]),
    Route("/mode", put_global, methods=["PUT"]),
    Route("/mode/{subject}", get_subject, methods=["GET"]),
    Route("/mode/{subject}", put_subject, methods=["PUT"]),
    Route("/mode/{subject}", delete_subject, methods=["DELETE"]),
    Route("/contexts", contexts, methods=["GET"]),
]
