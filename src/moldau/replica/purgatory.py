"""Where fetch requests wait for data (Kafka's "fetch purgatory").

A fetch that finds fewer than ``min.bytes`` parks here, watching the partitions it asked for.
Every append calls :meth:`FetchPurgatory.notify_append` with the bytes it added; a waiter wakes
as soon as enough bytes arrived on its partitions, or when its ``max.wait.ms`` ends. There is no
polling: waking costs one future resolution, and an append with no waiters costs one dict lookup.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

PartitionKey = tuple[str, int]


class FetchWaiter:
    """One parked fetch: wakes once ``needed`` more bytes have been appended where it watches
    (for a read_committed fetch: once that many became stable, below the LSO)."""

    __slots__ = ("future", "keys", "needed", "read_committed")

    def __init__(self, keys: Iterable[PartitionKey], needed: int,
                 read_committed: bool = False) -> None:
        self.keys = tuple(keys)
        self.needed = needed
        self.read_committed = read_committed
        self.future: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def add(self, size: int) -> None:
        self.needed -= size
        if self.needed <= 0 and not self.future.done():
            self.future.set_result(None)


class FetchPurgatory:
    def __init__(self) -> None:
        self._waiters: dict[PartitionKey, set[FetchWaiter]] = {}
        #: Fetches waiting now (the purgatory size the metrics endpoint reports).
        self.size = 0

    def notify_append(self, key: PartitionKey, size: int, stable: int | None = None) -> None:
        """``size`` bytes became visible on ``key``, ``stable`` of them (default: all) to
        read_committed fetches (the last stable offset moved that far)."""
        waiters = self._waiters.get(key)
        if waiters:
            for waiter in tuple(waiters):
                waiter.add(stable if waiter.read_committed and stable is not None else size)

    def wake_all(self, key: PartitionKey) -> None:
        """Wake every fetch watching ``key`` (the partition was deleted or truncated)."""
        for waiter in tuple(self._waiters.get(key, ())):
            waiter.add(waiter.needed)

    async def wait(self, keys: Iterable[PartitionKey], needed: int, timeout_s: float,
                   read_committed: bool = False) -> None:
        """Wait until ``needed`` bytes arrive on ``keys`` (are stable, for
        ``read_committed``) or ``timeout_s`` passes."""
        waiter = FetchWaiter(keys, needed, read_committed)
        for key in waiter.keys:
            self._waiters.setdefault(key, set()).add(waiter)
        self.size += 1
        try:
            await asyncio.wait_for(asyncio.shield(waiter.future), timeout_s)
        except TimeoutError:
            pass
        finally:
            self.size -= 1
            for key in waiter.keys:
                bucket = self._waiters.get(key)
                if bucket is not None:
                    bucket.discard(waiter)
                    if not bucket:
                        del self._waiters[key]
