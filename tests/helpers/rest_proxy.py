"""A real REST Proxy (``python -m moldau rest``) in a subprocess, for its integration tests.

Ready means it answers ``GET /v3/clusters`` with 200: the app has started and its Kafka
clients reached the broker.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from moldau.cluster.processes import HOST, terminate
from moldau.cluster.processes import die_with_parent as _die_with_parent

from .broker_process import free_port
from .http_wait import wait_until_serving


class RestProxyProcess:
    def __init__(self, work_dir: Path, bootstrap: str, *options: str) -> None:
        self.work_dir = work_dir
        self.bootstrap = bootstrap
        self.options = options
        self.port = free_port()
        self.url = f"http://{HOST}:{self.port}"
        self.log_path = work_dir / f"rest-{self.port}.log"
        self._proc: subprocess.Popen[bytes] | None = None

    def command(self) -> list[str]:
        return [sys.executable, "-m", "moldau", "rest", "-b", self.bootstrap,
                "--listen", f"{HOST}:{self.port}", *self.options]

    def start(self, timeout: float = 30.0) -> RestProxyProcess:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("wb") as log:
            self._proc = subprocess.Popen(
                self.command(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env={**os.environ, "PYTHONUNBUFFERED": "1"}, preexec_fn=_die_with_parent)
        try:
            code = wait_until_serving(self._proc, f"{self.url}/v3/clusters", timeout, 2.0)
        except TimeoutError:
            self.stop()
            raise RuntimeError(f"REST proxy did not answer within {timeout:g} s:\n"
                               f"{self.log_text()}") from None
        if code is not None:
            raise RuntimeError(f"REST proxy exited during start-up:\n{self.log_text()}")
        return self

    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self, timeout: float = 15.0) -> int | None:
        if self._proc is None:
            return None
        terminate(self._proc, timeout)
        return self._proc.returncode
