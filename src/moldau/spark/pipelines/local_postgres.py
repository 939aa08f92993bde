"""A throw-away PostgreSQL server in a temporary directory, for tests and demo runs.

``moldau pipeline activity`` without ``--postgres`` and the Spark tests both need a real
PostgreSQL without asking anybody to set one up. This runs Debian's (or any) ``initdb`` and
``pg_ctl`` on a free loopback port with trust authentication and fsync off; everything is
deleted on :meth:`LocalPostgres.stop`. PostgreSQL refuses to run as root, so as root the
server runs as the ``postgres`` system user (created if missing) in a directory it owns.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

SERVER_USER = "postgres"
DB_USER = "moldau"


class PostgresUnavailable(RuntimeError):
    """No PostgreSQL server binaries here, or the server would not start."""


def find_bindir() -> Path:
    """The newest ``/usr/lib/postgresql/*/bin`` (Debian), else the directory of initdb."""
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                        key=lambda p: int(Path(p).parent.parent.name.split(".")[0]))
    if candidates:
        return Path(candidates[-1]).parent
    initdb = shutil.which("initdb")
    if initdb:
        return Path(initdb).parent
    raise PostgresUnavailable(
        "PostgreSQL server binaries not found (Debian: apt-get install postgresql)"
    )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LocalPostgres:
    """``start()`` → ``.dsn`` → ``stop()``; also a context manager."""

    def __init__(self) -> None:
        self.bindir = find_bindir()
        self.port = _free_port()
        self.root = Path(tempfile.mkdtemp(prefix="moldau-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self._as_other_user = os.geteuid() == 0

    @property
    def dsn(self) -> str:
        return f"postgresql://{DB_USER}@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str, timeout: float = 120) -> None:
        command = [str(self.bindir / args[0]), *args[1:]]
        if self._as_other_user:
            command = ["runuser", "-u", SERVER_USER, "--", *command]
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                                check=False)
        if result.returncode != 0:
            log = self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""
            raise PostgresUnavailable(
                f"{args[0]} failed ({result.returncode}): {result.stderr.strip()}\n{log}"
            )

    def _prepare_user(self) -> None:
        try:
            pwd.getpwnam(SERVER_USER)
        except KeyError:
            subprocess.run(["useradd", "--system", "--no-create-home", SERVER_USER],
                           check=True, capture_output=True, timeout=60)
        user = pwd.getpwnam(SERVER_USER)
        os.chown(self.root, user.pw_uid, user.pw_gid)

    def start(self) -> LocalPostgres:
        try:
            if self._as_other_user:
                self._prepare_user()
            self._run("initdb", "-D", str(self.data), "-U", DB_USER, "--auth=trust",
                      "-E", "UTF8", "--no-sync")
            options = (f"-p {self.port} -c listen_addresses=127.0.0.1 "
                       f"-c unix_socket_directories={self.root} -c fsync=off "
                       "-c synchronous_commit=off -c full_page_writes=off")
            self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", options,
                      "-w", "-t", "90", "start")
        except BaseException:
            shutil.rmtree(self.root, ignore_errors=True)
            raise
        return self

    def stop(self) -> None:
        if self.data.exists():
            # Already gone is fine: the directory goes anyway.
            with contextlib.suppress(PostgresUnavailable, subprocess.TimeoutExpired):
                self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "-t", "30",
                          "stop", timeout=60)
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> LocalPostgres:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()
