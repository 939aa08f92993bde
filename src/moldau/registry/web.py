"""HTTP plumbing shared by the routers: JSON in and out with Confluent's media type,
errors as Confluent's bodies, and forwarding of writes to the primary."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from . import errors
from .election import PrimaryElection
from .service import Registry

MEDIA_TYPE = "application/vnd.schemaregistry.v1+json"
FORWARDED_HEADER = "x-moldau-registry-forwarded"


class RegistryJSON(JSONResponse):
    media_type = MEDIA_TYPE


def registry_of(request: Request) -> Registry:
    registry: Registry = request.app.state.registry
    return registry


def flag(request: Request, name: str, default: bool = False) -> bool:
    from .service import parse_bool

    return parse_bool(request.query_params.get(name), default)


def path_int(request: Request, name: str, error: Callable[[str], errors.RegistryError]) -> int:
    raw = request.path_params[name]
    try:
        return int(raw)
    except ValueError:
        raise error(raw) from None


async def json_body(request: Request) -> Any:
    raw = await request.body()
    if not raw.strip():
        return {}
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise errors.RegistryError(400, 400, f"Unrecognized JSON body: {exc}") from exc


async def read(fn: Callable[[], Any]) -> Response:
    """Reads are answered from memory; they may touch the parse cache, so they run off
    the event loop like writes."""
    return RegistryJSON(await run_in_threadpool(fn))


async def write(request: Request, fn: Callable[[], Any]) -> Response:
    """Run a write here when this process is the primary, else forward it there."""
    election: PrimaryElection = request.app.state.election
    if election.is_primary:
        return RegistryJSON(await run_in_threadpool(fn))
    if request.headers.get(FORWARDED_HEADER):
        raise errors.RegistryError(500, errors.FORWARDING_ERROR,
                                   "Error while forwarding the request to the primary: the "
                                   "primary registry is changing, retry")
    primary = election.primary_url
    if primary is None:
        primary = await run_in_threadpool(election.wait_for_primary, 10.0)
    if primary is None or primary == election.my_url:
        raise errors.RegistryError(500, errors.FORWARDING_ERROR,
                                   "Error while forwarding the request: no primary registry")
    client: httpx.AsyncClient = request.app.state.http
    try:
        answer = await client.request(
            request.method, primary.rstrip("/") + request.url.path,
            params=list(request.query_params.multi_items()),
            content=await request.body(),
            headers={"content-type": request.headers.get("content-type", MEDIA_TYPE),
                     FORWARDED_HEADER: "1"},
        )
    except httpx.HTTPError as exc:
        raise errors.RegistryError(
            500, errors.FORWARDING_ERROR,
            f"Error while forwarding the request to the primary {primary}: {exc}",
        ) from exc
    if answer.is_success:
        # Read-your-write here too: the primary has applied the write; wait until this
        # process's reader has as well, so the caller's next read here sees it.
        await run_in_threadpool(registry_of(request).store.catch_up)
    return Response(answer.content, status_code=answer.status_code,
                    media_type=answer.headers.get("content-type", MEDIA_TYPE))
