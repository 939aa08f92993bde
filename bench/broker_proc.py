"""Start a moldau broker subprocess on a free loopback port for a benchmark run."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import procs


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class BenchBroker:
    """A broker in a temporary data directory; stopped and removed by :meth:`close`."""

    def __init__(self, *overrides: str, port: int | None = None) -> None:
        self.port = port or free_port()
        self._tmp = tempfile.TemporaryDirectory(prefix="moldau-bench-")
        self.data_dir = Path(self._tmp.name) / "data"
        args = [sys.executable, "-m", "moldau", "broker",
                "--override", f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
                "--override", f"log.dirs={self.data_dir}"]
        for o in overrides:
            args += ["--override", o]
        env = dict(os.environ, MOLDAU_LOG_LEVEL="WARNING")
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, env=env)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                if self.proc.poll() is not None:
                    raise RuntimeError("broker exited during start-up") from None
                time.sleep(0.05)
        raise RuntimeError("broker did not start listening within 30 s")

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def cpu_seconds(self) -> float:
        """User + system CPU time of the broker process so far, from /proc."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks = os.sysconf("SC_CLK_TCK")
        return (int(fields[11]) + int(fields[12])) / ticks

    def rss_bytes(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        return 0

    def close(self) -> None:
        procs.stop(self.proc, 20)
        self._tmp.cleanup()
