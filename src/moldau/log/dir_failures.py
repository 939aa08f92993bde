"""What the broker knows about failing log dirs: Kafka's LogDirFailureChannel, with one change.

In Kafka any IOException on a log dir takes the whole dir offline until a restart, a full disk
included. moldau does that for every other error (EIO, a read-only remount, a dir that
vanished): its partitions answer KAFKA_STORAGE_ERROR, the other dirs keep serving, and once
every dir is offline the broker shuts down, as Kafka's does. A full disk (ENOSPC, EDQUOT),
however, only fails the writes that need space: each gets KAFKA_STORAGE_ERROR and leaves
nothing behind, reads go on, and writes succeed again as soon as space is freed, with no
restart. One broker has no other replica to fail over to, so refusing the writes it cannot do
is more useful than refusing every read as well.

Log lines: one per subject (a partition, a dir's checkpoints, the metadata store) when it
starts failing for lack of space and one when it writes again; one per dir going offline.
"""

from __future__ import annotations

import errno
import logging
from collections.abc import Callable
from pathlib import Path

from .errors import DiskFullError, LogDirOfflineError, StorageError

log = logging.getLogger(__name__)

#: errnos that mean "no space": the write may succeed later, nothing is broken.
DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


class LogDirFailures:
    """Offline log dirs, and subjects currently failing on a full disk (one per broker)."""

    def __init__(self) -> None:
        self._offline: dict[Path, str] = {}
        self._full: set[str] = set()
        self._listeners: list[Callable[[Path], None]] = []

    def add_listener(self, listener: Callable[[Path], None]) -> None:
        """Call ``listener(log_dir)`` once when a dir goes offline."""
        self._listeners.append(listener)

    @property
    def offline(self) -> dict[Path, str]:
        """Offline dirs and why."""
        return dict(self._offline)

    def is_offline(self, log_dir: Path) -> bool:
        return bool(self._offline) and log_dir in self._offline

    def io_failed(self, log_dir: Path, subject: str, exc: OSError) -> StorageError:
        """Classify an OSError from ``subject`` (in ``log_dir``): the error to raise instead.

        A full disk is logged once per subject until :meth:`io_succeeded`; anything else
        takes the dir offline (logged once per dir).
        """
        if exc.errno in DISK_FULL_ERRNOS:
            if subject not in self._full:
                self._full.add(subject)
                log.warning("%s: no space left in log dir %s; its writes answer "
                            "KAFKA_STORAGE_ERROR until space is freed", subject, log_dir)
            return DiskFullError(f"{subject}: no space left in log dir {log_dir}")
        self.mark_offline(log_dir, f"{subject}: {exc.strerror or exc}")
        return LogDirOfflineError(f"log dir {log_dir} is offline ({self._offline[log_dir]})")

    def io_succeeded(self, subject: str) -> None:
        """``subject`` wrote again: end its disk-full event (logged if there was one)."""
        if self._full and subject in self._full:
            self._full.discard(subject)
            log.info("%s: writing again, space was freed", subject)

    def mark_offline(self, log_dir: Path, reason: str) -> None:
        """Take ``log_dir`` offline until restart (no-op if it already is)."""
        if log_dir in self._offline:
            return
        self._offline[log_dir] = reason
        log.error("log dir %s is offline (%s): its partitions answer KAFKA_STORAGE_ERROR "
                  "until the broker restarts", log_dir, reason)
        for listener in self._listeners:
            listener(log_dir)

    def offline_error(self, log_dir: Path) -> LogDirOfflineError:
        return LogDirOfflineError(f"log dir {log_dir} is offline ({self._offline[log_dir]})")
