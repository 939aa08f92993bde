"""The two brokers under test, behind one small interface.

Both run as subprocesses on a free loopback port so that CPU and memory can be read from /proc
for exactly the broker's process tree, and both are started, stopped and killed the same way.
moldau keeps its data dir across restarts (start-up time after a clean and an unclean stop);
Tansu runs with its memory storage, the only storage its wheel supports.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from subprocess import DEVNULL, Popen
from typing import IO, Any

from . import procs, wire

START_TIMEOUT_S = 300.0  # recovering 5 GB after an unclean stop may take minutes
STOP_TIMEOUT_S = 120.0  # a clean stop flushes every log; SIGKILL too early would make it unclean


class Broker:
    """A broker subprocess. Subclasses say how to start it."""

    name = "broker"
    #: False when the broker keeps nothing across a restart (start-up workloads are n/a).
    persistent = False

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.port = 0
        self.proc: Popen[Any] | None = None
        self._log: IO[bytes] | None = None
        self.groups_supported = False

    # -- subclass hook -------------------------------------------------------------
    def command(self) -> tuple[list[str], dict[str, str]]:
        raise NotImplementedError

    # -- lifecycle -----------------------------------------------------------------
    def start(self) -> float:
        """Start on a new free port; return the seconds until it answered ApiVersions."""
        if self.proc is not None:
            raise RuntimeError(f"{self.name} is already running")
        self.port = procs.free_port()
        args, env = self.command()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._log = (self.workdir / f"{self.name}.log").open("ab")
        t0 = time.monotonic()
        self.proc = procs.popen(args, stdout=self._log, stderr=self._log, stdin=DEVNULL,
                                env=dict(os.environ, **env))
        procs.wait_listening(self.port, self.proc, START_TIMEOUT_S)
        versions = wire.api_versions("127.0.0.1", self.port)
        elapsed = time.monotonic() - t0
        self.groups_supported = (wire.API_KEY_FIND_COORDINATOR in versions
                                 and wire.API_KEY_JOIN_GROUP in versions)
        return elapsed

    def stop(self) -> None:
        """Clean stop (SIGTERM, as an operator would)."""
        if self.proc is not None:
            procs.stop(self.proc, STOP_TIMEOUT_S)
        self._forget()

    def kill(self) -> None:
        """Unclean stop: SIGKILL, so the next start has to recover."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            procs.stop(self.proc)  # only drops it from the list of children
        self._forget()

    def _forget(self) -> None:
        self.proc = None
        if self._log is not None:
            self._log.close()
            self._log = None

    # -- observation ---------------------------------------------------------------
    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        if self.proc is None:
            raise RuntimeError(f"{self.name} is not running")
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def thread_cpu(self) -> dict[tuple[int, int], int]:
        """Per-thread CPU ns of the broker (see :class:`bench.suite.CpuMeter`)."""
        return procs.thread_cpu_ns(self.pid)

    def rss_bytes(self) -> int:
        return procs.rss_bytes(self.pid)

    def log_tail(self, lines: int = 5) -> str:
        """The last lines of the broker's own log, to say why it died."""
        path = self.workdir / f"{self.name}.log"
        try:
            text = path.read_text(errors="replace")
        except OSError:
            return ""
        return " | ".join(text.strip().splitlines()[-lines:])


class MoldauBroker(Broker):
    """moldau from this checkout, with its default config and its data dir in ``workdir``."""

    name = "moldau"
    persistent = True

    def command(self) -> tuple[list[str], dict[str, str]]:
        args = [sys.executable, "-m", "moldau", "broker",
                "--override", f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
                "--override", f"log.dirs={self.workdir / 'data'}"]
        return args, {"MOLDAU_LOG_LEVEL": "WARNING"}


class TansuBroker(Broker):
    """Tansu with memory storage; every start is a new, empty broker."""

    name = "tansu"

    def __init__(self, workdir: Path, binary: Path) -> None:
        super().__init__(workdir)
        self.binary = binary

    def command(self) -> tuple[list[str], dict[str, str]]:
        url = f"tcp://127.0.0.1:{self.port}"
        args = [str(self.binary), "broker", "--listener-url", url,
                "--advertised-listener-url", url, "--storage-engine", "memory://tansu/"]
        return args, {"RUST_LOG": "warn"}
