"""A real ``moldau registry`` in a subprocess, reached over HTTP like users reach it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from moldau.cluster.processes import die_with_parent, terminate

from .broker_process import free_port
from .http_wait import wait_until_serving


class RegistryStartError(RuntimeError):
    pass


class RegistryProcess:
    """``python -m moldau registry`` on a free loopback port.

    ``topic`` and ``group_id`` default to names of their own, so registries of different
    tests sharing one broker never see each other's schemas; give two processes the same
    ones to make them one registry.
    """

    def __init__(self, bootstrap: str, work_dir: Path, *, topic: str, group_id: str,
                 port: int | None = None, startup_timeout: float = 60.0) -> None:
        self.bootstrap = bootstrap
        self.work_dir = work_dir
        self.topic = topic
        self.group_id = group_id
        self.port = port or free_port()
        self.startup_timeout = startup_timeout
        self._proc: subprocess.Popen[bytes] | None = None
        self.runs = 0
        work_dir.mkdir(parents=True, exist_ok=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.work_dir / f"registry-{self.port}-{self.runs}.log"

    def start(self) -> RegistryProcess:
        self.runs += 1
        with self.log_path.open("wb") as log:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "moldau", "registry", "-b", self.bootstrap,
                 "--listen", f"127.0.0.1:{self.port}", "--topic", self.topic,
                 "--group-id", self.group_id],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                preexec_fn=die_with_parent,
            )
        try:
            code = wait_until_serving(self._proc, f"{self.url}/", self.startup_timeout)
        except TimeoutError:
            self.stop()
            raise RegistryStartError(f"registry not serving within {self.startup_timeout} s:\n"
                                     f"{self.log_text()}") from None
        if code is not None:
            raise RegistryStartError(f"registry exited with {code}:\n{self.log_text()}")
        return self

    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def kill9(self) -> None:
        """SIGKILL: the process cannot leave the election group; the broker notices only
        when its session times out."""
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
            self._proc = None

    def is_primary(self) -> bool:
        """From its log: the last election line says whether it holds the primary role."""
        lines = [line for line in self.log_text().splitlines() if "primary" in line
                 and "moldau.registry.election" in line]
        return bool(lines) and lines[-1].endswith("is the primary")

    def stop(self, timeout: float = 15.0) -> None:
        if self._proc is not None:
            terminate(self._proc, timeout)
            self._proc = None
