"""``connections.max.idle.ms``: close connections nothing has happened on for that long.

As Kafka's ``IdleExpiryManager``: connections are kept in order of their last activity (bytes
read, or a response written), so the oldest is always first. One timer, set for the moment the
oldest would expire, closes whatever has expired when it fires and sets itself again for the
new oldest; touching a connection only moves it to the end. No per-connection timers, no
polling. A connection whose request is still being handled (a long-poll fetch, say) is not idle.
A negative value disables expiry, as in Kafka.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from typing import Protocol

log = logging.getLogger(__name__)


class Expirable(Protocol):
    @property
    def in_request(self) -> bool: ...

    def abort(self, reason: str, level: int = ...) -> None: ...


class IdleExpiry:
    def __init__(self, max_idle_ms: int) -> None:
        self._max_idle = max_idle_ms / 1000 if max_idle_ms >= 0 else None
        self._last: collections.OrderedDict[Expirable, float] = collections.OrderedDict()
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def touch(self, conn: Expirable) -> None:
        """Something happened on ``conn`` now."""
        if self._max_idle is None:
            return
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        last = self._last
        last[conn] = loop.time()
        last.move_to_end(conn)
        if self._timer is None:
            self._timer = loop.call_at(loop.time() + self._max_idle, self._expire)

    def forget(self, conn: Expirable) -> None:
        self._last.pop(conn, None)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def __len__(self) -> int:
        return len(self._last)

    def _expire(self) -> None:
        self._timer = None
        loop, max_idle = self._loop, self._max_idle
        assert loop is not None and max_idle is not None
        now = loop.time()
        last = self._last
        while last:
            conn, seen = next(iter(last.items()))
            idle = now - seen
            if idle < max_idle:
                break
            if conn.in_request:
                last[conn] = now
                last.move_to_end(conn)
                continue
            del last[conn]
            conn.abort(f"idle for {idle * 1000:.0f} ms (connections.max.idle.ms)",
                       logging.DEBUG)
        if last:
            seen = next(iter(last.values()))
            self._timer = loop.call_at(seen + max_idle, self._expire)
