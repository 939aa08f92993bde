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
import threading
import time
from pathlib import Path
from typing import Any

from moldau.cluster.processes import terminate

_PR_SET_PDEATHSIG = 1
# Looked up once here: between fork and exec the child should only call, not dlopen (another
# thread of the harness, e.g. librdkafka's, may hold the loader's lock at the fork).
_prctl = ctypes.CDLL(None, use_errno=True).prctl
_started: list[subprocess.Popen[Any]] = []
STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}


def _die_with_parent() -> None:
    """Runs in the child before exec: SIGKILL it if the harness goes away, even by kill -9.

    Also undoes :func:`route_signals_to_main`'s blocking, which a child would inherit.
    """
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)


def popen(args: list[str], **kwargs: Any) -> subprocess.Popen[Any]:
    """Start a child that dies with the harness, and remember it for :func:`kill_all`.

    The child gets its own session, so a Ctrl-C in the terminal reaches only the harness,
    which then stops brokers in order instead of finding them already gone mid-workload.
    """
    proc: subprocess.Popen[Any] = subprocess.Popen(
        args, preexec_fn=_die_with_parent, start_new_session=True, **kwargs
    )
    _started.append(proc)
    return proc


def stop(proc: subprocess.Popen[Any], timeout: float = 20.0) -> None:
    """SIGTERM, then SIGKILL after ``timeout``: a broker gets the chance to shut down cleanly."""
    terminate(proc, timeout)
    with contextlib.suppress(ValueError):
        _started.remove(proc)


def _interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def route_signals_to_main() -> None:
    """Make Ctrl-C, SIGTERM and SIGHUP interrupt the main thread promptly.

    The kernel hands a process signal to any thread that does not block it; with librdkafka's
    threads around, the main thread may then sit in a 60 s wait before Python notices. So the
    stop signals are blocked here, before any client thread exists (threads inherit the mask),
    and one watcher thread takes them with ``sigwait`` and forwards each to the main thread as
    SIGUSR1, which interrupts whatever it is waiting in and raises KeyboardInterrupt.
    Call once, first thing in ``main``.
    """
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    signal.signal(signal.SIGUSR1, _interrupt)
    main = threading.main_thread().ident
    assert main is not None

    def watch() -> None:
        while True:
            signal.sigwait(STOP_SIGNALS)
            signal.pthread_kill(main, signal.SIGUSR1)

    threading.Thread(target=watch, name="signal-watcher", daemon=True).start()


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


def thread_cpu_ns(pid: int) -> dict[tuple[int, int], int]:
    """On-CPU nanoseconds of every live thread of a process tree, from /proc/.../schedstat.

    Nanoseconds rather than the 10 ms ticks of /proc/<pid>/stat: a quick workload may cost a
    broker only a few ticks. Keyed by (pid, tid) so that a window can subtract thread by thread
    and a thread that exits mid-window does not take its earlier time with it.
    """
    out: dict[tuple[int, int], int] = {}
    for p in _descendants(pid):
        try:
            tids = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                out[(p, int(tid))] = int(Path(f"/proc/{p}/task/{tid}/schedstat").read_text()
                                         .split()[0])
            except (OSError, ValueError, IndexError):
                continue
    return out


def cpu_ns_between(before: dict[tuple[int, int], int], after: dict[tuple[int, int], int]) -> int:
    """CPU spent between two :func:`thread_cpu_ns` snapshots (threads born in between count)."""
    return sum(ns - before.get(key, 0) for key, ns in after.items())


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
