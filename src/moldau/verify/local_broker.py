"""A moldau broker process that ``moldau verify --local-broker`` starts and owns.

Only a broker the tool started itself may be killed by its nemesis: this is that broker. It
is launched as a separate process (``python -m moldau broker``), exactly as a user would
start one, never imported: the verify tool stays a plain client of whatever it checks.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

HOST = "127.0.0.1"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


class LocalBrokerError(RuntimeError):
    """The broker exited or never listened; the message ends with its last log lines."""


class LocalBroker:
    """One broker on a free loopback port with its data under ``workdir``."""

    def __init__(self, workdir: Path, startup_timeout_s: float = 30.0) -> None:
        self.workdir = workdir
        self.port = _free_port()
        self.startup_timeout_s = startup_timeout_s
        self.log_path = workdir / "broker.log"
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> None:
        """Start (or start again, same port and data) and wait until the port accepts."""
        self._close_log()
        self._log = self.log_path.open("ab")
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "moldau", "broker",
             "--override", f"listeners=PLAINTEXT://{self.bootstrap}",
             "--override", f"log.dirs={self.workdir / 'data'}"],
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C reaches the tool, which stops the broker itself
        )
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise LocalBrokerError(f"the local broker exited ({self._proc.returncode}): "
                                       f"{self._tail()}")
            try:
                with socket.create_connection((HOST, self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.1)
        self.kill()
        raise LocalBrokerError(f"the local broker did not listen within "
                               f"{self.startup_timeout_s:g} s: {self._tail()}")

    def kill(self) -> None:
        """SIGKILL: nothing flushed, nothing closed."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()

    def stop(self, timeout_s: float = 15.0) -> None:
        """SIGTERM, then SIGKILL after ``timeout_s``."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
            try:
                self._proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.kill()
        self._close_log()

    def _tail(self) -> str:
        self._close_log()
        lines = self.log_path.read_text(errors="replace").strip().splitlines()
        return lines[-1] if lines else "no output"

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None
