"""A real ZooKeeper server (Debian's `zookeeper` package) in a subprocess, for cluster tests.

The server itself is moldau's own launcher (``moldau.cluster.zk_server``, also behind
``moldau cluster up``); this adds what tests want: a free 127.0.0.1 port, no fsync per write,
and one log file per start (``zookeeper-<n>.log``) so a failing test shows each run. One
standalone server per test session; tests isolate themselves with a chroot per test
(``connect_string("/moldau-<test>")``), not a server each: a JVM start costs seconds.
``restart`` (same port and data, so sessions may survive as with a real ZooKeeper restart),
``kill`` and ``pause``/``resume`` (SIGSTOP) serve fault tests.
"""

from __future__ import annotations

from pathlib import Path

from moldau.cluster import zk_server
from moldau.cluster.zk_server import four_letter_word, missing_reason

from .broker_process import free_port

__all__ = ["ZooKeeperServer", "four_letter_word", "missing_reason"]


class ZooKeeperServer(zk_server.ZooKeeperServer):
    """moldau's ZooKeeper launcher on a free loopback port, without fsync, a log per start."""

    def __init__(self, workdir: Path, port: int | None = None) -> None:
        super().__init__(workdir, port or free_port(), fsync=False)

    @property
    def log_path(self) -> Path:
        return self.workdir / f"zookeeper-{self._starts}.log"
