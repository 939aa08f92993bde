"""The REST Proxy's ASGI app: routers, error bodies, and the Kafka clients' lifetime."""

from __future__ import annotations

import contextlib
import gc
import logging
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute

from .config import RestConfig
from .consumers import ConsumerInstances
from .errors import RestError, error_response
from .jsonbody import BodyTooLarge
from .kafka_admin import KafkaAdmin
from .producer import SharedProducer
from .routers import v2_consumers, v2_topics, v3_clusters, v3_groups, v3_records, v3_topics
from .schemas import SchemaCodecs
from .services import Services

log = logging.getLogger(__name__)


def all_routes() -> list[BaseRoute]:
    return [*v2_topics.routes, *v2_consumers.routes, *v3_clusters.routes, *v3_topics.routes,
            *v3_records.routes, *v3_groups.routes]


async def _rest_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RestError)
    return error_response(request, exc.status, exc.error_code, exc.message)


async def _too_large(request: Request, exc: Exception) -> Response:
    limit = exc.args[0] if exc.args else 0
    return error_response(request, 413, 413,
                          f"Request body is larger than the limit of {limit} bytes")


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return error_response(request, exc.status_code, exc.status_code,
                          f"HTTP {exc.status_code} {exc.detail}")


async def _unexpected(request: Request, exc: Exception) -> Response:
    log.exception("unexpected error answering %s %s", request.method, request.url.path)
    return error_response(request, 500, 500, "Internal Server Error")


def build_app(config: RestConfig) -> Starlette:
    """The app; the Kafka clients start with it and are closed when it stops."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        schemas = (SchemaCodecs(config.schema_registry_url)
                   if config.schema_registry_url else None)
        consumers = ConsumerInstances(config, schemas)
        services = Services(config, SharedProducer(config), KafkaAdmin(config), consumers,
                            schemas)
        app.state.services = services
        app.state.config = config
        consumers.start()
        # Everything loaded so far (Starlette, uvicorn, confluent-kafka, the routes) lives as
        # long as the proxy: full collections, which produce requests' short-lived records
        # trigger often, need not walk it again.
        gc.freeze()
        try:
            yield
        finally:
            await consumers.close_all()
            services.producer.close()

    return Starlette(
        routes=all_routes(),
        lifespan=lifespan,
        exception_handlers={
            RestError: _rest_error,
            BodyTooLarge: _too_large,
            HTTPException: _http_error,
            Exception: _unexpected,
        },
    )
