"""The registry's ASGI app: routers per resource, Confluent's error bodies, and the
Kafka side (store, election) started and stopped with the app."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from . import errors
from .election import PrimaryElection
from .routers import compatibility, config, mode, schemas, subjects
from .service import Registry
from .store import KafkaStore
from .web import RegistryJSON

log = logging.getLogger(__name__)


async def _registry_error(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, errors.RegistryError)
    return RegistryJSON(exc.body(), status_code=exc.status)


async def _http_error(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return RegistryJSON({"error_code": exc.status_code, "message": f"HTTP {exc.status_code} "
                         f"{exc.detail}"}, status_code=exc.status_code)


async def _unexpected(request: Request, exc: Exception) -> Response:
    """A bug or an unreachable broker: logged with its traceback, answered as Confluent
    answers internal errors, and the process keeps serving."""
    log.error("%s %s failed", request.method, request.url.path, exc_info=exc)
    return RegistryJSON({"error_code": 500, "message": f"Internal server error: {exc}"},
                        status_code=500)


async def _root(_request: Request) -> Response:
    return RegistryJSON({})


def build_app(client_config: dict[str, Any], my_url: str, group_id: str = "schema-registry",
              topic: str = "_schemas") -> Starlette:
    """The app for one registry process; ``my_url`` is where other registry processes
    reach this one (forwarded writes)."""
    store = KafkaStore(client_config, topic)
    election = PrimaryElection(client_config, group_id, my_url, topic=f"{topic}_election")

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        from starlette.concurrency import run_in_threadpool

        await run_in_threadpool(store.start)
        await run_in_threadpool(election.start)
        await run_in_threadpool(election.wait_for_primary, 15.0)
        app.state.registry = Registry(store)
        app.state.election = election
        async with httpx.AsyncClient(timeout=30.0) as client:
            app.state.http = client
            log.info("registry %s ready (primary: %s)", my_url, election.primary_url)
            yield
        await run_in_threadpool(election.close)
        await run_in_threadpool(store.close)

    routes = [Route("/", _root, methods=["GET"])]
    for module in (schemas, subjects, compatibility, config, mode):
        routes += module.routes
    return Starlette(
        routes=routes,
        lifespan=lifespan,
        exception_handlers={errors.RegistryError: _registry_error, HTTPException: _http_error,
                            Exception: _unexpected},
    )
