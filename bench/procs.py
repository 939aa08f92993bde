"""Process helpers for the side-by-side benchmark: ports, /proc accounting, child clean-up.

Every process the harness starts (brokers, kcat, iperf3, producer workers) is started through
:func:`popen`, which asks the kernel to kill it when the harness dies, and is remembered so
that :func:`kill_all` can stop whatever is still running on Ctrl-C or an error. Nothing is
ever killed by name: only the pids started here.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

_PR_SET_PDEATHSIG = 1
# Looked up once here: between fork and exec the child should only call, not dlopen (another
# thread of the harness, e.g. librdkafka's, may hold the loader's lock at the fork).
_prctl = ctypes.CDLL(None, use_errno=True).prctl
_started: list[subprocess.Popen[Any]] = []


def _die_with_parent() -> None:
    """Runs in the child before exec: SIGKILL it if the harness goes away, even by kill -9."""
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def popen(args: list[str], **kwargs: Any) -> subprocess.Popen[Any]:
    """Start a child that dies with the harness, and remember it for :func:`kill_all`."""
    proc: subprocess.Popen[Any] = subprocess.Popen(
        args, preexec_fn=_die_with_parent, **kwargs
    )
    _started.append(proc)
    return proc


def stop(proc: subprocess.Popen[Any], timeout: float = 20.0) -> None:
    """SIGTERM, then SIGKILL after ``timeout``: a broker gets the chance to shut down cleanly."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    with contextlib.suppress(ValueError):
        _started.remove(proc)


def kill_all() -> None:
    """Kill every child still running; used on the way out, including after Ctrl-C."""
    for proc in list(_started):
        if proc.poll() is None:
            proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(5)
        _started.remove(proc)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_listening(port: int, proc: subprocess.Popen[Any], timeout: float) -> float:
    """Seconds until ``port`` accepts a connection; raises if ``proc`` exits or time runs out."""
    start = time.monotonic()
    deadline = start + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return time.monotonic() - start
        except OSError:
            if proc.poll() is not None:
                code = proc.returncode
                raise RuntimeError(f"process exited with {code} during start-up") from None
            time.sleep(0.01)
    raise RuntimeError(f"nothing listening on port {port} after {timeout:.0f} s")


def _descendants(pid: int) -> list[int]:
    """``pid`` and every process below it: a broker may fork helpers, their CPU counts too."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        todo.extend(children.get(p, []))
    return found


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process tree so far (all threads included), from /proc."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for p in _descendants(pid):
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / ticks


def rss_bytes(pid: int) -> int:
    """Resident memory of a process tree, from VmRSS in /proc/<pid>/status."""
    total = 0
    for p in _descendants(pid):
        try:
            status = Path(f"/proc/{p}/status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1]) * 1024
    return total
