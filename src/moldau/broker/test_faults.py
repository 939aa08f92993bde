"""Test-only fault hooks, off by default: never set them on a broker that serves anyone.

``moldau.test.drop.produce.response.after.append=N`` (0: off) answers every Nth Produce that
wrote new records (not a producer's retry of a batch already written) by closing the
connection instead, after the records were appended and, for ``acks=all``, replicated: the
producer cannot know they were written and retries, which is what idempotence must survive.
With ``moldau.test.stop.after.dropped.response=true`` the broker then stops itself (SIGSTOP),
so a test can kill it with the answer lost and see the retry go to the new leader.
"""

from __future__ import annotations

import logging
import os
import signal

from ..protocol.frames import FrameError

log = logging.getLogger(__name__)


class DroppedResponse(FrameError):
    """Close the connection without answering (passes the handler-failure answer)."""


class ProduceResponseDropper:
    """Counts the Produce requests that wrote records and picks the ones to drop."""

    def __init__(self, every: int, stop_after: bool) -> None:
        self.every = every
        self.stop_after = stop_after
        self._count = 0

    def should_drop(self) -> bool:
        if self.every <= 0:
            return False
        self._count += 1
        return self._count % self.every == 0

    def drop(self, what: str) -> DroppedResponse:
        """The exception that closes the connection; stops the broker first if asked."""
        log.warning("test fault hook: dropping the response to %s", what)
        if self.stop_after:
            log.warning("test fault hook: stopping the broker (SIGSTOP)")
            for handler in logging.getLogger().handlers:
                handler.flush()
            os.kill(os.getpid(), signal.SIGSTOP)
        return DroppedResponse(f"test fault hook dropped the response to {what}")
