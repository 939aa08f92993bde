"""``/subjects``: register, list, look up and delete subject versions."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from ..web import flag, json_body, read, registry_of, write
from .views import page, version_view


async def list_subjects(request: Request) -> Response:
    registry = registry_of(request)
    deleted = flag(request, "deleted")
    prefix = request.query_params.get("subjectPrefix", "")
    return await read(lambda: page(request, registry.subjects(deleted, prefix)))


async def list_versions(request: Request) -> Response:
    registry, subject = registry_of(request), request.path_params["subject"]
    deleted = flag(request, "deleted") or flag(request, "deletedOnly")
    deleted_only = flag(request, "deletedOnly")

    def versions() -> list[int]:
        found = registry.subject_versions(subject, deleted)
        return page(request, [v.version for v in found if v.deleted or not deleted_only])

    return await read(versions)


async def register(request: Request) -> Response:
    registry, subject = registry_of(request), request.path_params["subject"]
    body, normalize = await json_body(request), flag(request, "normalize")

    def registered() -> dict[str, object]:
        version = registry.register(subject, body, normalize)
        return {"id": version.schema_id}

    return await write(request, registered)


async def lookup(request: Request) -> Response:
    registry, subject = registry_of(request), request.path_params["subject"]
    body = await json_body(request)
    normalize, deleted = flag(request, "normalize"), flag(request, "deleted")
    fmt = request.query_params.get("format")
    return await read(lambda: version_view(registry.lookup(subject, body, normalize, deleted),
                                           fmt))


async def get_version(request: Request) -> Response:
    registry, subject = registry_of(request), request.path_params["subject"]
    version, deleted = request.path_params["version"], flag(request, "deleted")
    fmt = request.query_params.get("format")
    return await read(lambda: version_view(registry.get_version(subject, version, deleted), fmt))


async def get_version_text(request: Request) -> Response:
    registry, subject = registry_of(request), request.path_params["subject"]
    found = registry.get_version(subject, request.path_params["version"],
                                 flag(request, "deleted"))
    return PlainTextResponse(found.schema)


async def referenced_by(request: Request) -> Response:
    registry, subject = registry_of(request), request.path_params["subject"]
    version = request.path_params["version"]
    return await read(lambda: page(request, registry.referenced_by(subject, version)))


async def delete_subject(request: Request) -> Response:
    registry, subject = registry_of(request), request.path_params["subject"]
    permanent = flag(request, "permanent")
    return await write(request, lambda: registry.delete_subject(subject, permanent))


async def delete_version(request: Request) -> Response:
    registry, subject = registry_of(request), request.path_params["subject"]
    version, permanent = request.path_params["version"], flag(request, "permanent")
    return await write(request, lambda: registry.delete_version(subject, version, permanent))


routes = [
    Route("/subjects", list_subjects, methods=["GET"]),
    Route("/subjects/{subject}", lookup, methods=["POST"]),
    Route("/subjects/{subject}", delete_subject, methods=["DELETE"]),
    Route("/subjects/{subject}/versions", list_versions, methods=["GET"]),
    Route("/subjects/{subject}/versions", register, methods=["POST"]),
    Route("/subjects/{subject}/versions/{version}", get_version, methods=["GET"]),
    Route("/subjects/{subject}/versions/{version}", delete_version, methods=["DELETE"]),
    Route("/subjects/{subject}/versions/{version}/schema", get_version_text, methods=["GET"]),
    Route("/subjects/{subject}/versions/{version}/referencedby", referenced_by,
          methods=["GET"]),
]
