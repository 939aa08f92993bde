"""``/schemas``: schemas by global id, and the schema types this registry knows."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from .. import errors
from ..web import RegistryJSON, flag, path_int, read, registry_of
from .views import page, schema_fields


def _schema_id(request: Request) -> int:
    return path_int(request, "schema_id",
                    lambda raw: errors.schema_not_found(f"Schema {raw} not found"))


async def get_schema(request: Request) -> Response:
    # A dictionary look-up under the store's lock: answered on the event loop, the hot
    # read of every deserializer.
    version = registry_of(request).schema_by_id(_schema_id(request))
    return RegistryJSON(schema_fields(version, request.query_params.get("format")))


async def get_schema_text(request: Request) -> Response:
    version = registry_of(request).schema_by_id(_schema_id(request))
    return PlainTextResponse(version.schema)


async def get_schema_subjects(request: Request) -> Response:
    registry, schema_id = registry_of(request), _schema_id(request)
    deleted = flag(request, "deleted")

    def subjects() -> list[str]:
        usages = registry.id_usages(schema_id, deleted)
        return page(request, sorted({u.subject for u in usages}))

    return await read(subjects)


async def get_schema_versions(request: Request) -> Response:
    registry, schema_id = registry_of(request), _schema_id(request)
    deleted = flag(request, "deleted")
    return await read(lambda: page(request, [
        {"subject": u.subject, "version": u.version}
        for u in registry.id_usages(schema_id, deleted)
    ]))


async def get_types(request: Request) -> Response:
    return await read(registry_of(request).schema_types)


routes = [
    Route("/schemas/types", get_types, methods=["GET"]),
    Route("/schemas/ids/{schema_id}", get_schema, methods=["GET"]),
    Route("/schemas/ids/{schema_id}/schema", get_schema_text, methods=["GET"]),
    Route("/schemas/ids/{schema_id}/subjects", get_schema_subjects, methods=["GET"]),
    Route("/schemas/ids/{schema_id}/versions", get_schema_versions, methods=["GET"]),
]
