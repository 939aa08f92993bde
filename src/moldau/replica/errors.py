"""The one error the replica layer raises: a Kafka error code with its message.

Handlers answer with ``code`` as it is; log-level failures (CorruptRecordError, StorageError,
...) pass through the replica layer unchanged.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode


class ReplicaError(Exception):
    """A request the replica layer refuses: not the leader, a stale epoch, too small an ISR."""

    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or code.name.upper())
        self.code = code
        self.message = message
