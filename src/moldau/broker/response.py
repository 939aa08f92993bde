"""An encoded response body: bytes and file ranges, sent in order after a size prefix."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any, Protocol


class FileRange(Protocol):
    """A range of a segment file (``moldau.log`` FileSlice satisfies this)."""

    @property
    def fd(self) -> int: ...

    @property
    def position(self) -> int: ...

    @property
    def size(self) -> int: ...

    def read(self) -> bytes: ...


@dataclass(slots=True)
class Response:
    parts: list[bytes | FileRange]
    size: int
    #: The client is over a quota: the connection reads nothing more for this long once the
    #: response is sent (KIP-219).
    throttle_ms: int = 0

    @classmethod
    def of_bytes(cls, *chunks: bytes) -> Response:
        return cls(list(chunks), sum(len(c) for c in chunks))


class Deferred:
    """A handler's answer that is not ready yet: ``pending`` finishes it.

    An ``acks=all`` Produce returns one once its records are appended and only the wait for
    the ISR is left, so that the connection can append the client's next Produce meanwhile
    (see :mod:`.connection`). ``pending`` gives what the handler would have returned.
    """

    __slots__ = ("pending",)

    def __init__(self, pending: Awaitable[Any]) -> None:
        self.pending = pending


class Muted:
    """No response (a Produce with acks=0), but the client went over a quota: the connection
    reads nothing more for ``throttle_ms``, as Kafka mutes the channel of a throttled acks=0
    producer that no response could tell."""

    __slots__ = ("throttle_ms",)

    def __init__(self, throttle_ms: int) -> None:
        self.throttle_ms = throttle_ms


class Pending:
    """A response still being completed (a :class:`Deferred` handler answer, then encoded)."""

    __slots__ = ("future", "throttle_ms")

    def __init__(self, future: asyncio.Future[Response | None], throttle_ms: int = 0) -> None:
        self.future = future
        #: Over a quota: the connection handles nothing more until this response is sent
        #: (and then mutes itself, see :class:`Response`).
        self.throttle_ms = throttle_ms
