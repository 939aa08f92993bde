"""The aborted-transaction index of one segment: ``<20-digit base>.txnindex`` (Kafka's layout).

One 34-byte entry per transaction whose ABORT marker is in the segment, in marker order:
``version int16 = 0, producer id int64, first offset int64, last offset int64 (the marker's
offset), last stable offset int64 (the partition's LSO when the marker was written)``.
read_committed fetches take from it the aborted transactions overlapping the range they
return, so consumers can drop those producers' records; the cleaner uses it to remove
aborted data.

Entries are few (one per aborted transaction), so the index is held in memory and the file
is only appended to; like Kafka, the file exists only once the segment has an entry. A
torn last entry (a crash mid-write) is dropped at load; crash recovery rebuilds the whole
index from the markers in the log anyway.
"""

from __future__ import annotations

import contextlib
import logging
import os
import struct
from pathlib import Path
from typing import NamedTuple

log = logging.getLogger(__name__)

TXN_INDEX_SUFFIX = ".txnindex"
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size
_VERSION = 0
assert ENTRY_SIZE == 34


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TransactionIndex:
    """The aborted transactions of one segment, in memory and in its ``.txnindex`` file."""

    __slots__ = ("entries", "path")

    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: list[AbortedTxn] = []

    def load(self) -> None:
        """Read the file if there is one (a torn tail entry is ignored, with a warning)."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            self.entries = []
            return
        whole = len(data) - len(data) % ENTRY_SIZE
        if whole != len(data):
            log.warning("%s: ignoring %d bytes of a torn entry", self.path.name,
                        len(data) - whole)
        entries = []
        for version, pid, first, last, lso in _ENTRY.iter_unpack(memoryview(data)[:whole]):
            if version != _VERSION:
                log.warning("%s: entry of unknown version %d; ignoring the rest",
                            self.path.name, version)
                break
            entries.append(AbortedTxn(pid, first, last, lso))
        self.entries = entries

    def append(self, entry: AbortedTxn) -> None:
        """Add an aborted transaction (its marker was just written to the segment)."""
        if self.entries and entry.last_offset <= self.entries[-1].last_offset:
            raise ValueError(f"aborted transaction ending at {entry.last_offset} is not after "
                             f"the last one of {self.path.name}")
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, _ENTRY.pack(_VERSION, *entry))
        finally:
            os.close(fd)
        self.entries.append(entry)

    def rebuild(self, entries: list[AbortedTxn]) -> None:
        """Replace the file by ``entries``, fsynced (truncation, or a cleaned segment taking
        over the entries of those it replaces)."""
        self.entries = list(entries)
        if not entries:
            self.path.unlink(missing_ok=True)
            return
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, b"".join(_ENTRY.pack(_VERSION, *e) for e in entries))
            os.fsync(fd)
        finally:
            os.close(fd)

    def truncate(self, offset: int) -> None:
        """Forget the transactions whose marker is at or after ``offset``."""
        keep = [e for e in self.entries if e.last_offset < offset]
        if len(keep) != len(self.entries):
            self.rebuild(keep)

    def flush(self) -> None:
        if not self.entries:
            return
        with contextlib.suppress(FileNotFoundError):
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def delete(self) -> None:
        self.path.unlink(missing_ok=True)

    def rename(self, path: Path) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.rename(self.path, path)
        self.path = path

    def overlapping(self, start: int, end: int) -> list[AbortedTxn]:
        """Entries of transactions overlapping ``[start, end)``."""
        return [e for e in self.entries if e.last_offset >= start and e.first_offset < end]
