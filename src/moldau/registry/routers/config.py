"""``/config``: compatibility levels, global and per subject (``defaultToGlobal``)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..web import flag, json_body, read, registry_of, write


async def get_global(request: Request) -> Response:
    registry = registry_of(request)
    return await read(lambda: {"compatibilityLevel": registry.compatibility_level(None)})


async def put_global(request: Request) -> Response:
    registry, body = registry_of(request), await json_body(request)
    return await write(request, lambda: {"compatibility": registry.set_config(None, body)})


async def delete_global(request: Request) -> Response:
    registry = registry_of(request)
    return await write(request,
                       lambda: {"compatibilityLevel": registry.delete_config(None)})


async def get_subject(request: Request) -> Response:
    registry, subject = registry_of(request), request.path_params["subject"]
    default_to_global = flag(request, "defaultToGlobal")
    return await read(lambda: {
        "compatibilityLevel": registry.subject_config(subject, default_to_global)})


async def put_subject(request: Request) -> Response:
    registry, subject = registry_of(request), request.path_params["subject"]
    body = await json_body(request)
    return await write(request, lambda: {"compatibility": registry.set_config(subject, body)})


async def delete_subject(request: Request) -> Response:
    registry, subject = registry_of(request), request.path_params["subject"]
    return await write(request,
                       lambda: {"compatibilityLevel": registry.delete_config(subject)})


routes = [
    Route("/config", get_global, methods=["GET"]),
    Route("/config", put_global, methods=["PUT"]),
    Route("/config", delete_global, methods=["DELETE"]),
    Route("/config/{subject}", get_subject, methods=["GET"]),
    Route("/config/{subject}", put_subject, methods=["PUT"]),
    Route("/config/{subject}", delete_subject, methods=["DELETE"]),
]
