"""A standalone ZooKeeper server from Debian's ``zookeeper`` package, run as a child process.

Used by ``moldau cluster up`` and by the tests (``tests/helpers/zookeeper.py``). The
package's ``zookeeper.jar`` names its dependencies in its manifest, so the classpath is that
jar plus slf4j-simple (without a binding slf4j drops every log line, leaving nothing to read
when something fails). We write our own ``zoo.cfg`` in the server's directory: client port
on one address, admin server off, the ``ruok``/``srvr``/``mntr`` four-letter words allowed
(readiness checks), a short tick so session timeouts down to 500 ms are possible. The JVM
runs in the foreground of its own process group and dies with its parent; ready means
``ruok`` answers ``imok`` and ``srvr`` says standalone.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

from .processes import HOST, spawn, terminate

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
SLF4J_BINDING = Path("/usr/share/java/slf4j-simple.jar")
MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"
TICK_MS = 250
INSTALL_HINT = "apt-get install zookeeper"


class ZooKeeperError(RuntimeError):
    """ZooKeeper is missing, exited during start-up or never answered (one-line message,
    plus the log tail in ``detail``)."""

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message + (f"\n{detail}" if detail else ""))
        self.message = message
        self.detail = detail


def missing_reason() -> str | None:
    """Why a ZooKeeper server cannot be started here (one line), or None when it can."""
    if not ZOOKEEPER_JAR.exists():
        return f"ZooKeeper is not installed (Debian package `zookeeper`: {INSTALL_HINT})"
    if shutil.which("java") is None:
        return "java is not installed (the `zookeeper` package depends on a JRE)"
    return None


def classpath() -> str:
    """The package's jar (its manifest lists the rest) and a logging binding when present."""
    parts = [ZOOKEEPER_JAR] + ([SLF4J_BINDING] if SLF4J_BINDING.exists() else [])
    return ":".join(str(p) for p in parts)


def four_letter_word(port: int, word: str, timeout: float = 2.0, host: str = HOST) -> str:
    """Send a four-letter command and return the whole answer ('' when nothing answers)."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(word.encode())
            chunks = []
            while chunk := sock.recv(4096):
                chunks.append(chunk)
            return b"".join(chunks).decode(errors="replace")
    except OSError:
        return ""


class ZooKeeperServer:
    """One standalone ZooKeeper server process with its own config and data directory.

    ``workdir`` holds ``zoo.cfg``, ``data/`` and the log; starting again with the same
    ``workdir`` keeps the znodes. ``fsync=False`` skips ZooKeeper's fsync per write (tests).
    """

    def __init__(self, workdir: Path, port: int, *, host: str = HOST, fsync: bool = True,
                 launcher: Callable[[list[str]], list[str]] | None = None) -> None:
        self.workdir = Path(workdir)
        self.port = port
        self.host = host
        self.fsync = fsync
        self._launcher = launcher
        self.data_dir = self.workdir / "data"
        self.config_path = self.workdir / "zoo.cfg"
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._starts = 0

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def connect_string(self, chroot: str = "") -> str:
        """``host:port`` followed by ``chroot`` (``/name``) when given."""
        return f"{self.address}{chroot}"

    @property
    def log_path(self) -> Path:
        """Where the server's output goes (appended to across starts)."""
        return self.workdir / "zookeeper.log"

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def _write_config(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(
            f"tickTime={TICK_MS}\n"
            f"dataDir={self.data_dir}\n"
            f"clientPort={self.port}\n"
            f"clientPortAddress={self.host}\n"
            "minSessionTimeout=500\n"
            "maxSessionTimeout=60000\n"
            "maxClientCnxns=0\n"
            "admin.enableServer=false\n"
            "4lw.commands.whitelist=ruok,srvr,mntr,stat,cons\n"
            f"forceSync={'yes' if self.fsync else 'no'}\n"
        )

    def command(self) -> list[str]:
        """The JVM command line: small heap, quick start-up, no JMX or admin server."""
        return [
            "java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            "-Dzookeeper.admin.enableServer=false", "-Dzookeeper.jmx.log4j.disable=true",
            "-cp", classpath(), MAIN_CLASS, str(self.config_path),
        ]

    def wrap(self, command: list[str]) -> list[str]:
        """The server's command line as run (a seam: the netns lab runs it inside a host)."""
        return self._launcher(command) if self._launcher is not None else command

    def word(self, word: str, timeout: float = 2.0) -> str:
        """A four-letter command sent to this server from where it is reachable."""
        return four_letter_word(self.port, word, timeout, self.host)

    def start(self, timeout: float = 60.0) -> ZooKeeperServer:
        """Start the JVM and wait until it answers; ZooKeeperError when it cannot."""
        reason = missing_reason()
        if reason:
            raise ZooKeeperError(reason)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._write_config()
        self._starts += 1
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - kept open while it runs
        self._proc = spawn(self.wrap(self.command()), stdin=subprocess.DEVNULL,
                           stdout=self._log, stderr=subprocess.STDOUT, process_group=0,
                           cwd=self.workdir)
        self._wait_ready(timeout)
        return self

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self._proc is not None
            if self._proc.poll() is not None:
                code = self._proc.returncode
                self.stop()
                raise ZooKeeperError(f"ZooKeeper exited with status {code} during start-up "
                                     f"(log: {self.log_path})", self.log_text()[-3000:])
            if self.word("ruok", timeout=1.0) == "imok" and (
                    "Mode: standalone" in self.word("srvr", timeout=1.0)):
                return
            time.sleep(0.1)
        self.stop()
        raise ZooKeeperError(f"ZooKeeper did not answer on {self.address} within "
                             f"{timeout:.0f} s (log: {self.log_path})", self.log_text()[-3000:])

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def exit_status(self) -> int | None:
        """The exit status once the server has exited on its own, else None."""
        return None if self._proc is None else self._proc.poll()

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM (ZooKeeper's clean shutdown), SIGKILL after ``timeout``."""
        if self._proc is not None:
            terminate(self._proc, timeout)
            self._proc = None
        if self._log is not None:
            self._log.close()
            self._log = None

    def kill(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()
        self.stop()

    def restart(self, *, hard: bool = False, down_for: float = 0.0) -> None:
        """Stop (SIGKILL when ``hard``), stay down ``down_for`` seconds, start on the same port.

        The data directory is kept, so znodes and (within their timeout) sessions survive,
        as they do across a real ZooKeeper restart.
        """
        if hard:
            self.kill()
        else:
            self.stop()
        time.sleep(down_for)
        self.start()

    def pause(self) -> None:
        """SIGSTOP the server: connections stay open but nothing answers."""
        if self._proc is not None:
            os.kill(self._proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        if self._proc is not None:
            os.kill(self._proc.pid, signal.SIGCONT)
