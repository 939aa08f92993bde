"""Event-loop lag: how late a callback scheduled on the broker's loop actually runs.

Kafka reports its network threads' idle ratio; moldau serves every client from one event loop,
so the equivalent is how long a ready callback waits for the loop. A task sleeps
``interval_s`` and measures how much later than asked it woke: near zero on an idle broker,
growing as the loop gets busy, and as long as a stall when one handler holds the loop. One
timer per interval, no busy loop.
"""

from __future__ import annotations

import asyncio
import contextlib

from .histogram import DurationHistogram

#: Lag bounds in seconds: a loop that keeps up wakes within a millisecond or so.
LAG_BOUNDS_S = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
                5.0, 10.0)


class LoopLag:
    def __init__(self, interval_s: float = 0.5) -> None:
        self.interval_s = interval_s
        self.histogram = DurationHistogram(LAG_BOUNDS_S)
        #: The latest measurement, in seconds.
        self.last_s = 0.0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._measure())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _measure(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            due = loop.time() + self.interval_s
            await asyncio.sleep(self.interval_s)
            lag = max(loop.time() - due, 0.0)
            self.last_s = lag
            self.histogram.observe(int(lag * 1e9))
