"""Handlers of requests naming thousands of partitions hand the event loop back now and then.

Produce, Fetch, ListOffsets, DeleteRecords and OffsetForLeaderEpoch do synchronous work per
partition (tens of microseconds: a write, an index lookup), Metadata per topic. A legal request
may name thousands of them, and without a pause the loop would serve no one else until it is
done. Each of these handlers ticks a :class:`Pacer` once per partition (or topic); every
:data:`YIELD_EVERY` ticks it yields to the loop, which bounds a pause to a few milliseconds
and costs nothing measurable on the usual one-partition requests.
"""

from __future__ import annotations

import asyncio

YIELD_EVERY = 200


class Pacer:
    __slots__ = ("_count",)

    def __init__(self) -> None:
        self._count = 0

    async def tick(self) -> None:
        self._count += 1
        if self._count % YIELD_EVERY == 0:
            await asyncio.sleep(0)
