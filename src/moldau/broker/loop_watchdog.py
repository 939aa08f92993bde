"""A watchdog that logs every event-loop stall, naming the request that caused it.

The broker serves every client from one event loop thread, so one request doing seconds of
synchronous work stalls all of them, silently. A heartbeat coroutine stamps the time every
``interval``; a daemon thread checks the stamp. When it is older than the threshold
(``moldau.loop.stall.warn.ms``), the thread notes which task holds the loop and which request
that task is handling (recorded by :class:`RunningRequests` around each handler), and once the
loop beats again it logs one line with the stall's length. A stall that goes on is reported
once more while it lasts, so a broker stuck for good does not stay silent either.

The thread only reads: the running task (``asyncio.current_task(loop)``, a dict lookup) and
the frozen request objects and the loop thread's innermost moldau stack frame (where the time
goes, also when no request is running: a timer, a callback), so it cannot disturb the loop.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import sys
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

#: Report a stall still in progress once it has lasted this long.
STILL_STALLED_S = 10.0


@dataclass(frozen=True, slots=True)
class RunningRequest:
    api: str
    version: int
    client_id: str | None
    request: Any

    def describe(self) -> str:
        topics, partitions = count_topics_and_partitions(self.request)
        return (f"{self.api} v{self.version} from client {self.client_id!r} "
                f"({topics} topics, {partitions} partitions)")


def count_topics_and_partitions(request: Any) -> tuple[int, int]:
    """How many topics and partitions a request names (what its size scales with).

    Any tuple field whose name says topics or partitions counts its elements; partition
    counts asked for by number (CreateTopics ``num_partitions``, CreatePartitions ``count``)
    count as partitions too, since creating them is the work.
    """
    topics = partitions = 0
    stack = [request]
    while stack:
        obj = stack.pop()
        if not dataclasses.is_dataclass(obj):
            continue
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name, None)
            if isinstance(value, tuple):
                if "partition" in f.name:
                    partitions += len(value)
                elif "topic" in f.name or f.name == "resources":
                    topics += len(value)
                stack.extend(value)
            elif isinstance(value, int) and f.name in ("num_partitions", "count"):
                partitions += max(value, 0)
    return topics, partitions


class RunningRequests:
    """Which request each task is handling, for the watchdog (tasks are weakly held)."""

    def __init__(self) -> None:
        self._by_task: weakref.WeakKeyDictionary[asyncio.Task[Any], RunningRequest] = (
            weakref.WeakKeyDictionary())

    def begin(self, api: str, version: int, client_id: str | None, request: Any
              ) -> asyncio.Task[Any] | None:
        task = asyncio.current_task()
        if task is not None:
            self._by_task[task] = RunningRequest(api, version, client_id, request)
        return task

    def end(self, task: asyncio.Task[Any] | None) -> None:
        if task is not None:
            self._by_task.pop(task, None)

    def of(self, task: asyncio.Task[Any] | None) -> RunningRequest | None:
        if task is None:
            return None
        try:
            return self._by_task.get(task)
        except RuntimeError:  # resized by the loop thread meanwhile: no description
            return None


class LoopWatchdog:
    """Heartbeat on the loop, watcher on a daemon thread; ``threshold_s`` 0 disables it."""

    def __init__(self, loop: asyncio.AbstractEventLoop, threshold_s: float,
                 running: RunningRequests) -> None:
        self.loop = loop
        self.threshold_s = threshold_s
        self.running = running
        self.interval = min(0.1, threshold_s / 4) if threshold_s > 0 else 0.1
        self.stalls = 0
        self.longest_s = 0.0
        self._beat = time.monotonic()
        self._stop = threading.Event()
        self._task: asyncio.Task[None] | None = None
        self._loop_thread = threading.get_ident()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self.threshold_s <= 0:
            return
        self._beat = time.monotonic()
        self._loop_thread = threading.get_ident()  # start() runs on the loop's thread
        self._task = self.loop.create_task(self._heartbeat())
        self._thread = threading.Thread(target=self._watch, name="loop-watchdog", daemon=True)
        self._thread.start()

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._thread is not None:
            self._thread.join(1.0)

    async def _heartbeat(self) -> None:
        while True:
            self._beat = time.monotonic()
            await asyncio.sleep(self.interval)

    def _where(self) -> str:
        """The loop thread's innermost frame in moldau's code, as ``module.py:line function``."""
        frame = sys._current_frames().get(self._loop_thread)
        while frame is not None:
            path = frame.f_code.co_filename
            if "moldau" in path and not path.endswith("loop_watchdog.py"):
                name = path.rsplit("moldau", 1)[-1].lstrip("/")
                return f" at {name}:{frame.f_lineno} {frame.f_code.co_name}"
            frame = frame.f_back
        return ""

    def _culprit(self) -> str:
        task = asyncio.current_task(self.loop)
        request = self.running.of(task)
        if request is not None:
            what = "handling " + request.describe()
        elif task is None:
            what = "outside any task (a callback or I/O handler)"
        else:
            what = f"in task {task.get_name()} ({getattr(task.get_coro(), '__qualname__', '?')})"
        return what + self._where()

    def _watch(self) -> None:
        stalled_since: float | None = None
        culprit = ""
        reported_still = False
        while not self._stop.wait(self.interval):
            beat = self._beat
            lag = time.monotonic() - beat - self.interval
            if stalled_since is None:
                if lag > self.threshold_s:
                    stalled_since = beat
                    culprit = self._culprit()
                    reported_still = False
                continue
            if beat > stalled_since:  # the loop is back
                length = beat - stalled_since - self.interval
                self.stalls += 1
                self.longest_s = max(self.longest_s, length)
                log.warning("event loop stalled %.2f s %s", length, culprit)
                stalled_since = None
            elif not reported_still and lag > STILL_STALLED_S:
                reported_still = True
                log.warning("event loop stalled for %.0f s so far %s", lag, culprit)
