"""Error bodies as Confluent's proxy sends them.

v2 answers ``{"error_code": 40401, "message": "Topic not found."}``: a five-digit code whose
first three digits are the HTTP status. v3 answers the HTTP status itself as ``error_code``
(with a few five-digit exceptions such as 40002, topic already exists).
"""

from __future__ import annotations

from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

V2_CONTENT_TYPE = "application/vnd.kafka.v2+json"
V3_CONTENT_TYPE = "application/json"


class RestError(Exception):
    """An answer with an error body; raised anywhere in a handler."""

    def __init__(self, status: int, error_code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code
        self.message = message


def topic_not_found(topic: str | None = None, v3: bool = False) -> RestError:
    if v3:
        return RestError(404, 404, f"This server does not host this topic-partition: {topic}")
    return RestError(404, 40401, "Topic not found.")


def partition_not_found(v3: bool = False) -> RestError:
    if v3:
        return RestError(404, 404, "This server does not host this topic-partition.")
    return RestError(404, 40402, "Partition not found.")


def consumer_instance_not_found() -> RestError:
    return RestError(404, 40403, "Consumer instance not found.")


def unprocessable(message: str, error_code: int = 422) -> RestError:
    return RestError(422, error_code, message)


def unsupported_media_type(content_type: str | None) -> RestError:
    return RestError(415, 415, f"HTTP 415 Unsupported Media Type: {content_type or 'none'}")


def error_response(request: Request | None, status: int, error_code: int,
                   message: str) -> Response:
    path = request.url.path if request is not None else ""
    media_type = V3_CONTENT_TYPE if path.startswith("/v3") else V2_CONTENT_TYPE
    body: dict[str, Any] = {"error_code": error_code, "message": message}
    return Response(orjson.dumps(body), status_code=status, media_type=media_type)
