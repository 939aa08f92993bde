"""Reading request bodies (bounded, parsed) and writing JSON answers.

orjson does the JSON both ways: at tens of thousands of records a second through the proxy,
the standard library's encoder and decoder are a large share of the CPU time.
"""

from __future__ import annotations

from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from .errors import V2_CONTENT_TYPE, V3_CONTENT_TYPE, RestError


def dumps(value: Any) -> bytes:
    return orjson.dumps(value)


def loads(data: bytes | str) -> Any:
    return orjson.loads(data)


class BodyTooLarge(Exception):
    """The request body is over the configured limit (answered 413)."""


async def read_body(request: Request) -> bytes:
    """The whole body, refused as soon as it passes ``max_request_bytes``.

    A declared Content-Length over the limit is refused before anything is read; a chunked
    body is counted as it arrives, so the proxy never holds more than the limit.
    """
    limit: int = request.app.state.config.max_request_bytes
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge(limit)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge(limit)
        chunks.append(chunk)
    return b"".join(chunks)


async def read_json(request: Request, required: bool = True) -> Any:
    """The parsed JSON body; a malformed one is 400 as Confluent's proxy answers it."""
    body = await read_body(request)
    if not body.strip():
        if required:
            raise RestError(422, 422, "Request body is empty")
        return None
    try:
        return loads(body)
    except orjson.JSONDecodeError as exc:
        raise RestError(400, 400, f"Malformed JSON: {exc}") from None


def v2_json(value: Any, status: int = 200) -> Response:
    return Response(dumps(value), status_code=status, media_type=V2_CONTENT_TYPE)


def v3_json(value: Any, status: int = 200) -> Response:
    return Response(dumps(value), status_code=status, media_type=V3_CONTENT_TYPE)
