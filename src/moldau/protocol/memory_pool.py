"""The bound on memory held by requests being received or waiting to be handled.

Kafka's ``queued.max.request.bytes`` memory pool: every request frame reserves its declared
size when its size prefix has been read, and gives it back once the request has been handled
(or its connection closed). While the pool is exhausted no connection starts receiving a new
frame: it reads the 4-byte prefix only, then stops reading until memory is given back, so the
bytes held by all requests in flight stay within the limit plus one frame (like Kafka's
non-strict pool, a reservation succeeds whenever any memory is left, so a request larger than
what remains still gets through). Frames already being received keep reading: each one holds
its whole reservation, so it can always complete and nothing deadlocks.

The limit counts reservations, not resident memory: large frames are received into lazily
mapped buffers (see :mod:`.buffer_pool`), so a client that announces 100 MiB and stalls holds
100 MiB of the pool but almost no RAM. A limit of -1 (Kafka's default) disables the pool.
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Callable

log = logging.getLogger(__name__)


class MemoryPool:
    """Reservations against an optional limit, and the waiters to wake when memory frees.

    Single-threaded (the event loop's thread).
    """

    def __init__(self, limit: int = -1) -> None:
        self.limit: int | None = limit if limit > 0 else None
        self.used = 0
        self._waiters: collections.OrderedDict[object, Callable[[], None]] = (
            collections.OrderedDict()
        )

    @property
    def exhausted(self) -> bool:
        """True when no new frame may start: the reservations reach the limit."""
        return self.limit is not None and self.used >= self.limit

    def try_reserve(self, size: int) -> bool:
        """Reserve ``size`` bytes if any memory is left (the request may overdraw it)."""
        if self.limit is not None and self.used >= self.limit:
            return False
        self.used += size
        return True

    def reserve(self, size: int) -> None:
        """Reserve unconditionally: for bytes that have already arrived."""
        self.used += size

    def release(self, size: int) -> None:
        self.used -= size
        if self._waiters and not self.exhausted:
            self._wake()

    def wait(self, key: object, callback: Callable[[], None]) -> None:
        """Call ``callback`` once memory is available again (in the order of waiting)."""
        if not self._waiters:
            log.debug("request memory exhausted (%d of %s bytes reserved): connections wait",
                      self.used, self.limit)
        self._waiters[key] = callback

    def cancel_wait(self, key: object) -> None:
        self._waiters.pop(key, None)

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    def _wake(self) -> None:
        # A callback reserves (or waits again); stop as soon as the pool is exhausted again.
        while self._waiters and not self.exhausted:
            _key, callback = self._waiters.popitem(last=False)
            callback()
