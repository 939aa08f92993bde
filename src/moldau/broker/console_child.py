"""The web console served by the broker (``console.enable=true``): a ``moldau console`` child.

The console is a Kafka client (confluent-kafka, blocking calls on worker threads, a uvicorn
server, a sampler thread); inside the broker it would share the interpreter and the event
loop's process with the hot paths, and a console bug could take the broker down. So the
broker runs it as a child process on a private loopback port, connected to the broker's own
Kafka listener like any client, and the metrics endpoint relays ``/console/`` to it
(:mod:`moldau.metrics.proxy`). The child dies with the broker (``PR_SET_PDEATHSIG``), even
after a kill -9, and is stopped with it otherwise.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import subprocess
import sys

from ..cluster.processes import spawn, terminate
from ..metrics.endpoint import CONSOLE_PREFIX as PREFIX

log = logging.getLogger(__name__)


def _free_loopback_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ConsoleChild:
    """One ``moldau console`` process, listening on 127.0.0.1:``port``."""

    def __init__(self, bootstrap: str, metrics_url: str) -> None:
        self.bootstrap = bootstrap
        self.metrics_url = metrics_url
        self.port = _free_loopback_port()
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    async def start(self) -> None:
        """Fork the console (off the loop: forking a large process takes milliseconds)."""
        args = [sys.executable, "-m", "moldau", "console",
                "--listen", f"127.0.0.1:{self.port}", "--url-prefix", PREFIX,
                "--metrics-url", self.metrics_url, "--bootstrap-server", self.bootstrap]
        self._proc = await asyncio.to_thread(spawn, args, stdin=subprocess.DEVNULL)
        log.info("web console (pid %d) on 127.0.0.1:%d, served under %s/", self._proc.pid,
                 self.port, PREFIX)

    async def stop(self) -> None:
        if self._proc is not None:
            await asyncio.to_thread(terminate, self._proc, 5.0)
            self._proc = None
