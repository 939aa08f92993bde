"""A real ZooKeeper server (Debian's `zookeeper` package) in a subprocess, for cluster tests.

One standalone server per test session, started from the package's jars with a zoo.cfg of
our own in a temporary directory: client port on a free 127.0.0.1 port, admin server off,
the `ruok`/`srvr`/`mntr` four-letter words allowed (readiness checks), a short tick so short
session timeouts (down to 500 ms) can be used by session-expiry tests. Tests isolate
themselves with a chroot per test (``connect_string("/moldau-<test>")``), not a server each:
a JVM start costs seconds. ``restart`` (same port and data, so sessions may survive as with a
real ZooKeeper restart), ``kill`` and ``pause``/``resume`` (SIGSTOP) serve fault tests.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import IO

from .broker_process import HOST, _die_with_parent, free_port, terminate

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
# slf4j-simple prints ZooKeeper's log to stderr (into the server's log file); without a
# binding slf4j drops every line, which leaves nothing to read when a test fails.
SLF4J_BINDING = Path("/usr/share/java/slf4j-simple.jar")
MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"
TICK_MS = 250


def missing_reason() -> str | None:
    """Why a ZooKeeper server cannot be started here, or None when it can."""
    if not ZOOKEEPER_JAR.exists():
        return ("ZooKeeper is not installed (Debian package `zookeeper`: "
                "apt-get install zookeeper; `make test` installs it)")
    if shutil.which("java") is None:
        return "java is not installed (the `zookeeper` package depends on a JRE)"
    return None


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
    """One standalone ZooKeeper server process with its own config and data directory."""

    def __init__(self, workdir: Path, port: int | None = None) -> None:
        self.workdir = workdir
        self.port = port or free_port()
        self.data_dir = workdir / "data"
        self.config_path = workdir / "zoo.cfg"
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._starts = 0
        self.host = HOST  # the client port's address (a lab host's, in NetnsZooKeeper)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def connect_string(self, chroot: str = "") -> str:
        """``127.0.0.1:port`` followed by ``chroot`` (``/name``) when given."""
        return f"{self.address}{chroot}"

    @property
    def log_path(self) -> Path:
        return self.workdir / f"zookeeper-{self._starts}.log"

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
            # Every write is fsynced by default; tests do not need durability across power loss.
            "forceSync=no\n"
        )

    def start(self, timeout: float = 60.0) -> ZooKeeperServer:
        reason = missing_reason()
        if reason:
            raise RuntimeError(reason)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._write_config()
        self._starts += 1
        classpath = f"{ZOOKEEPER_JAR}:{SLF4J_BINDING}" if SLF4J_BINDING.exists() else str(
            ZOOKEEPER_JAR)
        command = [
            "java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            "-Dzookeeper.admin.enableServer=false", "-Dzookeeper.jmx.log4j.disable=true",
            "-cp", classpath, MAIN_CLASS, str(self.config_path),
        ]
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - kept open while it runs
        self._proc = subprocess.Popen(self.wrap(command), stdin=subprocess.DEVNULL,
                                      stdout=self._log, stderr=subprocess.STDOUT,
                                      preexec_fn=_die_with_parent, cwd=self.workdir)
        self._wait_ready(timeout)
        return self

    def wrap(self, command: list[str]) -> list[str]:
        """The server's command line as run (NetnsZooKeeper runs it inside a lab host)."""
        return command

    def word(self, word: str, timeout: float = 2.0) -> str:
        """A four-letter command sent to this server from where it is reachable."""
        return four_letter_word(self.port, word, timeout, self.host)

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self._proc is not None
            if self._proc.poll() is not None:
                raise RuntimeError(f"ZooKeeper exited with {self._proc.returncode}:\n"
                                   f"{self.log_text()[-3000:]}")
            if self.word("ruok", timeout=1.0) == "imok" and (
                    "Mode: standalone" in self.word("srvr", timeout=1.0)):
                return
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"ZooKeeper did not answer on {self.address} within {timeout:.0f} s:\n"
                           f"{self.log_text()[-3000:]}")

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

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
