"""Child processes of a local cluster (ZooKeeper, brokers): tied to their parent, stopped cleanly.

``moldau cluster up`` and the test helpers start JVMs and brokers as children. A parent that
dies (Ctrl-C, kill -9, a CI timeout) must not leave them holding ports and data directories,
so every child asks Linux to kill it when its parent dies, and runs in a process group of its
own so a terminal's Ctrl-C reaches only the parent, which then stops them in order.

Linux's "parent" there is the *thread* that forked the child: a child started from a thread
that ends (a verify nemesis restarting a broker) would be killed with that thread. So
``spawn`` forks every child from one thread that lives as long as the process.
"""

from __future__ import annotations

import ctypes
import signal
import socket
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any

HOST = "127.0.0.1"


def die_with_parent() -> None:
    """In the child (``preexec_fn``): SIGKILL this process when its parent dies (Linux)."""
    if sys.platform.startswith("linux"):
        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)


#: The one thread that forks children tied to this process (``spawn``); lives until exit.
_spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="moldau-spawner")


def spawn(args: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
    """``subprocess.Popen(args, **kwargs)`` in a child Linux kills when this process dies.

    Forked from the spawner thread, never from the caller's (see the module docstring);
    ``kwargs`` must not set ``preexec_fn``.
    """
    def fork() -> subprocess.Popen[bytes]:
        return subprocess.Popen(args, preexec_fn=die_with_parent, **kwargs)
    return _spawner.submit(fork).result()


def terminate(proc: subprocess.Popen[Any], timeout: float) -> None:
    """SIGTERM (a clean shutdown), then SIGKILL if the process takes longer than ``timeout``."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGCONT)  # a paused process cannot handle SIGTERM
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def port_accepts(port: int, host: str = HOST, timeout: float = 0.5) -> bool:
    """True when something accepts TCP connections on host:port."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def bind_error(port: int, host: str = HOST) -> str | None:
    """Why ``host:port`` cannot be listened on now (the system's reason), or None when it can."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as servers bind
        try:
            sock.bind((host, port))
        except OSError as exc:
            return exc.strerror or str(exc)
    return None
