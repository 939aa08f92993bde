"""An error a handler answers with: a Kafka error code plus a message for the client."""

from __future__ import annotations

from kio.schema.errors import ErrorCode


class ClusterStartError(Exception):
    """The broker cannot join its cluster (ZooKeeper unreachable, its id registered by a
    live broker): one line at start-up, as for any other refusal."""


class ApiError(Exception):
    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or code.name)
        self.code = code
        self.message = message
