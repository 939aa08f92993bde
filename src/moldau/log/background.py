"""Background workers over the logs: a thread that runs passes, reaching logs via owner calls.

Partition logs are single-threaded: they belong to the thread that owns them (the broker's
event loop). The log cleaner and the log scrubber each run on a thread of their own and touch a
log only through an *owner call*, which runs a callable on the owner thread and hands back a
future. :class:`BackgroundWorker` is the part they share: start and stop the thread, run one
pass after another with a rest in between, and wait for owner calls in a way that gives up
as soon as the worker is asked to stop (so that stopping from the owner thread cannot
deadlock against an owner call that will never run).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, Protocol, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")
#: Runs a callable on the thread that owns the logs; the future holds its result.
OwnerCall = Callable[[Callable[[], Any]], Future[Any]]


class StopRequested(Exception):
    """Raised inside a pass to abandon it because the worker was asked to stop."""


class _Loop(Protocol):
    def call_soon_threadsafe(self, callback: Callable[[], object], /) -> object: ...


def run_inline(fn: Callable[[], Any]) -> Future[Any]:
    """The owner call for a single-threaded user: run ``fn`` now, on the calling thread."""
    future: Future[Any] = Future()
    future.set_running_or_notify_cancel()
    try:
        future.set_result(fn())
    except BaseException as exc:
        future.set_exception(exc)
    return future


def loop_owner(loop: _Loop) -> OwnerCall:
    """The owner call for logs that live on an asyncio event loop.

    The callable is scheduled with ``call_soon_threadsafe``; if the worker cancels the future
    before the loop gets to it (it does when asked to stop), the callable does not run.
    """

    def call(fn: Callable[[], Any]) -> Future[Any]:
        future: Future[Any] = Future()

        def run() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                future.set_result(fn())
            except BaseException as exc:
                future.set_exception(exc)

        loop.call_soon_threadsafe(run)
        return future

    return call


class BackgroundWorker:
    """A thread running :meth:`run_pass` again and again, resting ``backoff_ms`` when idle.

    Subclasses set :attr:`thread_name` and :attr:`description` (for log lines) and implement
    :meth:`run_pass`; they check :attr:`_stop` in long loops and raise :class:`StopRequested`.
    """

    thread_name = "log-worker"
    description = "log worker"

    def __init__(self, owner: OwnerCall, backoff_ms: int) -> None:
        self._owner = owner
        self._backoff_ms = backoff_ms
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def run_pass(self) -> bool:
        """One pass; True when it did work and the next pass should follow without a rest."""
        raise NotImplementedError

    def start(self) -> None:
        """Start the thread (once)."""
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)
        self._thread.start()

    def stop(self, timeout: float | None = 30.0) -> None:
        """Stop the thread; a pass in progress is abandoned.

        Safe to call from the thread that owns the logs: the worker does not wait for that
        thread once asked to stop.
        """
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout)
            if thread.is_alive():
                log.warning("the %s did not stop within %s s", self.description, timeout)

    def _run(self) -> None:
        backoff = max(self._backoff_ms, 0) / 1000
        while not self._stop.is_set():
            try:
                busy = self.run_pass()
            except StopRequested:
                break
            except Exception:
                log.exception("%s pass failed", self.description)
                busy = False
            if not busy:
                self._stop.wait(backoff)

    def _on_owner(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` on the owner thread and wait, giving up when asked to stop."""
        future = self._owner(fn)
        while True:
            try:
                result: T = future.result(timeout=0.05)
                return result
            except TimeoutError:
                if self._stop.is_set() and future.cancel():
                    raise StopRequested from None
