"""A real moldau broker in a subprocess, for integration and fault tests.

Tests talk to the broker only over the network, exactly as users do; a subprocess (not a
thread) is what lets fault tests kill -9 or SIGSTOP it. Each start writes the broker's
stdout and stderr to numbered files in the work directory, so a failing test can show
what the broker logged, run by run, across restarts.
"""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from moldau.cluster.processes import HOST, port_accepts, terminate
from moldau.cluster.processes import die_with_parent as _die_with_parent

#: Test servers listen on ports below Linux's ephemeral range (32768-60999 by default), so
#: that no client connection's local port, made by any test in any worker, can take a port
#: between the moment it was picked and the moment the server binds it. Each pytest-xdist
#: worker draws from its own slice, and a process never hands out one port twice.
_PORT_LOW, _PORT_HIGH, _SLICES = 20_000, 32_000, 4
_handed_out: set[int] = set()


def _worker_slice() -> range:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    index = int(worker) % _SLICES if worker.isdigit() else 0
    width = (_PORT_HIGH - _PORT_LOW) // _SLICES
    return range(_PORT_LOW + index * width, _PORT_LOW + (index + 1) * width)


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A loopback TCP port that was free a moment ago, never handed out before by this
    process, outside the OS's ephemeral range (the OS picks one as a last resort)."""
    ports = _worker_slice()
    for _ in range(200):
        port = random.choice(ports)
        if port not in _handed_out and _bindable(port):
            _handed_out.add(port)
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def reserve_ports(ports: range) -> None:
    """Note ports a test uses without ``free_port`` (a run after a base port), so that
    ``free_port`` does not hand them out later in this process."""
    _handed_out.update(ports)


class BrokerStartError(RuntimeError):
    """The broker died or never listened; the message carries the tail of its stderr."""


@dataclass(frozen=True)
class ExternalBroker:
    """A broker somebody else runs (``MOLDAU_TEST_BOOTSTRAP``): only its address is known."""

    host: str
    port: int

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @classmethod
    def parse(cls, bootstrap: str) -> ExternalBroker:
        host, _, port = bootstrap.rpartition(":")
        return cls(host or HOST, int(port))


class BrokerProcess:
    """``python -m moldau broker`` on a loopback port with its own data directory.

    ``overrides`` are ``key=value`` broker configs passed as ``--override`` after the
    listener and data directory, so they can change anything else. ``restart()`` keeps the
    port and the data directory: it is the same broker coming back.
    """

    def __init__(
        self,
        workdir: Path,
        *,
        port: int | None = None,
        overrides: Sequence[str] = (),
        config_file: Path | None = None,
        env: Mapping[str, str] | None = None,
        startup_timeout: float = 20.0,
    ) -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.data_dir = self.workdir / "data"
        self.port = port if port is not None else free_port()
        self.host = HOST
        self.overrides = list(overrides)
        self.config_file = config_file
        self.env = dict(env or {})
        self.startup_timeout = startup_timeout
        self.runs = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._files: list[IO[bytes]] = []

    # -- addresses and logs --------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    @property
    def stdout_path(self) -> Path:
        """stdout of the current (or last) run."""
        return self.workdir / f"broker-{self.runs}.stdout"

    @property
    def stderr_path(self) -> Path:
        """stderr of the current (or last) run."""
        return self.workdir / f"broker-{self.runs}.stderr"

    def stdout_text(self) -> str:
        return self.stdout_path.read_text(errors="replace") if self.stdout_path.exists() else ""

    def stderr_text(self) -> str:
        return self.stderr_path.read_text(errors="replace") if self.stderr_path.exists() else ""

    def command(self) -> list[str]:
        args = [sys.executable, "-m", "moldau", "broker"]
        if self.config_file is not None:
            args += ["--config", str(self.config_file)]
        args += ["--override", f"listeners=PLAINTEXT://{self.host}:{self.port}"]
        args += ["--override", f"log.dirs={self.data_dir}"]
        for override in self.overrides:
            args += ["--override", override]
        return args

    # -- life cycle ----------------------------------------------------------------------

    def rss_bytes(self) -> int:
        """Resident memory of the broker process now (Linux: VmRSS)."""
        assert self.pid is not None
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise RuntimeError("no VmRSS in /proc status")

    def open_fds(self) -> int:
        """File descriptors the broker process holds now (Linux)."""
        assert self.pid is not None
        return len(os.listdir(f"/proc/{self.pid}/fd"))

    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> BrokerProcess:
        """Start the broker and wait until its port accepts connections."""
        if self.is_running():
            raise RuntimeError("broker is already running")
        self._close_files()
        self.runs += 1
        stdout = self.stdout_path.open("wb")
        stderr = self.stderr_path.open("wb")
        self._files = [stdout, stderr]
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **self.env}
        self._proc = subprocess.Popen(
            self.command(),
            stdout=stdout,
            stderr=stderr,
            stdin=subprocess.DEVNULL,
            env=env,
            preexec_fn=_die_with_parent,
        )
        self._wait_ready()
        return self

    def accepting(self) -> bool:
        """True when the broker's listener accepts TCP connections (from where it is reachable)."""
        return port_accepts(self.port, self.host)

    def _wait_ready(self) -> None:
        assert self._proc is not None
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            code = self._proc.poll()
            if code is not None:
                raise BrokerStartError(
                    f"broker exited with status {code} during start-up; stderr:\n"
                    f"{self._stderr_tail()}"
                )
            if self.accepting():
                return
            time.sleep(0.05)
        self.kill9()
        raise BrokerStartError(
            f"broker did not listen on {self.bootstrap} within {self.startup_timeout:g} s; "
            f"stderr:\n{self._stderr_tail()}"
        )

    def _stderr_tail(self, lines: int = 40) -> str:
        return "\n".join(self.stderr_text().splitlines()[-lines:])

    def stop(self, timeout: float = 15.0) -> int | None:
        """SIGTERM (a clean shutdown), then SIGKILL if it takes longer than ``timeout``."""
        proc = self._proc
        if proc is None:
            return None
        terminate(proc, timeout)
        self._close_files()
        return proc.returncode

    def kill9(self) -> None:
        """SIGKILL: no chance to flush or close anything, like a power cut for the process."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        self._close_files()

    def pause(self) -> None:
        """SIGSTOP: the broker keeps its sockets open but answers nothing."""
        if self._proc is not None:
            self._proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        if self._proc is not None:
            self._proc.send_signal(signal.SIGCONT)

    def restart(self) -> BrokerProcess:
        """Stop (cleanly, if still running) and start again on the same port and data."""
        self.stop()
        return self.start()

    def _close_files(self) -> None:
        for handle in self._files:
            handle.close()
        self._files = []

    def __enter__(self) -> BrokerProcess:
        return self if self.is_running() else self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.is_running() else "stopped"
        return f"<BrokerProcess {self.bootstrap} {state} data={self.data_dir}>"
