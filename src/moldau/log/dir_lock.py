"""One broker per log dir: an exclusive ``flock`` on ``<log.dir>/.lock`` (Kafka's file name).

Two brokers on one data directory destroy it: the second "recovers" (truncates) segments the
first is still appending to, and both hand out the same offsets. So before anything in a dir is
read or written, the broker takes a non-blocking exclusive lock on the dir's ``.lock`` file and
keeps the descriptor open for its whole life. ``flock`` locks belong to the open file, so the
kernel drops them when the process ends in any way, kill -9 included: a stale lock file never
keeps a broker from starting. The file's content (``pid=`` and ``node.id=`` lines, replaced on
every start) only serves the error message naming the holder; the lock itself is the flock.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from collections.abc import Sequence
from pathlib import Path

from .errors import LogError

LOCK_FILE = ".lock"


class LogDirLockedError(LogError):
    """Another process holds the lock of a log dir (it is running a broker on that dir)."""


def _holder(fd: int) -> str:
    """What the current holder wrote into the lock file, as 'pid 123, node.id 1'."""
    try:
        text = os.pread(fd, 256, 0).decode(errors="replace")
    except OSError:
        return "another process"
    fields = dict(line.partition("=")[::2] for line in text.splitlines() if "=" in line)
    parts = [f"{key} {fields[key].strip()}" for key in ("pid", "node.id") if key in fields]
    return ", ".join(parts) or "another process"


class LogDirLock:
    """The held lock of one log dir; :meth:`release` (or process exit) gives it up."""

    def __init__(self, log_dir: Path, node_id: int) -> None:
        """Create the dir if needed and lock it, or raise :class:`LogDirLockedError`."""
        self.log_dir = log_dir
        log_dir.mkdir(parents=True, exist_ok=True)
        path = log_dir / LOCK_FILE
        # Held read-only: a dir with no file open for writing can still be remounted
        # read-only, and flock needs no write access.
        fd = os.open(path, os.O_RDONLY | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = _holder(fd)
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise LogDirLockedError(
                    f"log dir {log_dir} is in use by another broker ({holder}); "
                    f"stop it first or give this broker another log.dirs"
                ) from None
            raise
        self._fd: int | None = fd
        # Best effort: on a full disk the lock still holds, only the message loses its pid.
        with contextlib.suppress(OSError), open(path, "w") as fh:
            fh.write(f"pid={os.getpid()}\nnode.id={node_id}\n")

    def release(self) -> None:
        """Unlock and close (idempotent). The file stays, as Kafka's does."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)


def lock_log_dirs(log_dirs: Sequence[Path], node_id: int) -> list[LogDirLock]:
    """Lock every dir, in order; on a failure release those already taken and re-raise."""
    locks: list[LogDirLock] = []
    try:
        for log_dir in log_dirs:
            locks.append(LogDirLock(Path(log_dir), node_id))
    except BaseException:
        for lock in locks:
            lock.release()
        raise
    return locks
