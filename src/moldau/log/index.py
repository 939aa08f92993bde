"""Sparse per-segment indexes in Kafka's file formats: ``.index`` and ``.timeindex``.

``.index`` maps offsets to file positions with 8-byte entries (int32 offset relative to the
segment's base offset, int32 byte position). ``.timeindex`` maps timestamps to offsets with
12-byte entries (int64 timestamp, int32 relative offset). Both are big-endian and sparse: the
segment adds an entry only every ``index.interval.bytes`` of log, so a lookup lands at most a
few KiB before the wanted batch and a header scan covers the rest.

Unlike Kafka, the files are not preallocated and memory-mapped. The entries live in Python
arrays (binary search via :mod:`bisect`) and each new entry is appended to the file with one
``os.write``; the file is therefore always exactly ``entries * entry_size`` bytes, which makes
"size is not a multiple of the entry size" a reliable sign of a torn write. ``max_entries``
(from ``segment.index.bytes``) is a roll trigger, not a hard capacity: with no preallocated
file there is nothing to overflow, so an append that carries several batches may go a few
entries past it before the segment rolls.

File descriptors are opened lazily (only to write) and released by :meth:`close_file` once a
segment stops being active or the cache of open segments evicts it (:mod:`open_files`), so
partitions that are not written to hold no index fds.
"""

from __future__ import annotations

import contextlib
import os
import struct
from array import array
from bisect import bisect_right
from collections.abc import Callable, Iterable
from pathlib import Path

from .fileio import write_all

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")


class _IndexFile:
    """The append-only file behind an index: lazy fd, truncation, fsync, unlink.

    ``on_open`` is called whenever a descriptor is opened, so the owning segment can register
    with the cache that bounds open descriptors (:mod:`open_files`).
    """

    def __init__(self, path: Path, on_open: Callable[[], None] | None = None) -> None:
        self.path = path
        self._fd: int | None = None
        self._dirty = False
        self.on_open = on_open

    def _open(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            if self.on_open is not None:
                self.on_open()
        return self._fd

    def create(self) -> None:
        """Make sure the file exists (empty) so a later open can tell 'no entries' from 'lost'.

        No descriptor stays open: a new partition may never be written to.
        """
        if self._fd is None:
            os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644))

    def write(self, data: bytes, size_before: int) -> None:
        """Append ``data``; on failure (a full disk) cut the file back to ``size_before``."""
        fd = self._open()
        try:
            write_all(fd, (data,))
        except OSError:
            os.ftruncate(fd, size_before)  # never leave a torn entry behind
            raise
        self._dirty = True

    def truncate(self, size: int) -> None:
        os.ftruncate(self._open(), size)
        self._dirty = True

    def flush(self) -> None:
        """fsync if anything was written since the last flush (reopening if the fd is closed)."""
        if not self._dirty:
            return
        if self._fd is not None:
            os.fsync(self._fd)
        elif self.path.exists():
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        self._dirty = False

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def delete(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)

    def rename(self, path: Path) -> None:
        """Move the file to ``path`` (the cleaner's ``.cleaned`` -> ``.swap`` -> final);
        a file never made (an empty segment's) just takes the new name."""
        self.close()
        with contextlib.suppress(FileNotFoundError):
            os.rename(self.path, path)
        self.path = path


class _SparseIndex:
    """What both indexes share: two parallel columns in memory, mirrored by an append-only file.

    Each entry is a pair of numbers packed with ``_ENTRY``; the columns keep them unpacked so
    that :mod:`bisect` can search either one. Subclasses name the columns and add the lookups.
    """

    _ENTRY: struct.Struct
    _TYPECODES: tuple[str, str]

    def __init__(self, path: Path, base_offset: int, max_entries: int,
                 on_open: Callable[[], None] | None = None) -> None:
        self.base_offset = base_offset
        self.max_entries = max(1, max_entries)
        self._file = _IndexFile(path, on_open)
        self._first, self._second = self._empty_columns()

    def _empty_columns(self) -> tuple[array[int], array[int]]:
        return array(self._TYPECODES[0]), array(self._TYPECODES[1])

    @property
    def path(self) -> Path:
        return self._file.path

    def relocate(self, directory: Path) -> None:
        """Follow a rename of the directory holding the file (an open descriptor follows)."""
        self._file.path = directory / self._file.path.name

    def __len__(self) -> int:
        return len(self._first)

    @property
    def is_full(self) -> bool:
        return len(self._first) >= self.max_entries

    def load(self) -> bool:
        """Read the entries from disk; False when the file is missing or visibly torn."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return False
        if len(data) % self._ENTRY.size:
            return False
        self._first, self._second = self._empty_columns()
        for first, second in self._ENTRY.iter_unpack(data):
            self._first.append(first)
            self._second.append(second)
        return True

    def create(self) -> None:
        self._file.create()

    def set_on_open(self, on_open: Callable[[], None] | None) -> None:
        self._file.on_open = on_open

    def reset(self) -> None:
        """No entries, without touching the file (an empty segment: see :meth:`start_file`)."""
        self._first, self._second = self._empty_columns()

    def start_file(self) -> None:
        """Make the file exist and match the entries, before a new segment's first append.

        Needed because a new segment's index files are only made with its first data (and a
        file left from before must not keep stale entries).
        """
        if not self._first:
            self._file.truncate(0)

    def _append_entry(self, first: int, second: int) -> None:
        # File first: a failed write (full disk) leaves memory and file as they were.
        self._file.write(self._ENTRY.pack(first, second), len(self._first) * self._ENTRY.size)
        self._first.append(first)
        self._second.append(second)

    def keep(self, count: int) -> None:
        """Drop every entry after the first ``count`` (undoing appends that must not stay)."""
        if count < len(self._first):
            del self._first[count:]
            del self._second[count:]
            self._file.truncate(count * self._ENTRY.size)

    def _rebuild(self, rows: Iterable[tuple[int, int]]) -> None:
        """Replace every entry (recovery), writing the file in one go."""
        self._first, self._second = self._empty_columns()
        out = bytearray()
        for first, second in rows:
            self._first.append(first)
            self._second.append(second)
            out += self._ENTRY.pack(first, second)
        self._file.truncate(0)
        self._file.write(bytes(out), 0)

    def flush(self) -> None:
        self._file.flush()

    def close_file(self) -> None:
        self._file.close()

    def delete(self) -> None:
        self._file.delete()

    def rename(self, path: Path) -> None:
        self._file.rename(path)


class OffsetIndex(_SparseIndex):
    """Offset -> position index of one segment (``<base>.index``).

    Entries map the *last* offset of a batch to the position where that batch starts, as
    Kafka does; looking up the largest entry <= target therefore yields a position at or
    before the batch holding the target. Columns: relative offset, file position.
    """

    _ENTRY = _OFFSET_ENTRY
    _TYPECODES = ("i", "i")
    ENTRY_SIZE = _OFFSET_ENTRY.size

    def sanity_problem(self, log_size: int) -> str | None:
        """Cheap consistency check against the log (Kafka-style: first and last entries)."""
        relative, positions = self._first, self._second
        if not relative:
            return None
        if relative[0] < 0 or relative[-1] < relative[0]:
            return "offsets are not increasing"
        if positions[-1] >= log_size or positions[-1] < positions[0]:
            return f"last position {positions[-1]} is outside the log ({log_size} bytes)"
        return None

    def append(self, offset: int, position: int) -> None:
        """Add an entry; offsets and positions must grow (they do: the log is append-only)."""
        relative = offset - self.base_offset
        if self._first and (relative <= self._first[-1] or position <= self._second[-1]):
            raise ValueError(f"index entry ({offset}, {position}) does not follow the last one")
        self._append_entry(relative, position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the largest entry <= ``offset``; (base_offset, 0) if none."""
        i = bisect_right(self._first, offset - self.base_offset) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self._first[i], self._second[i]

    def position_floor(self, position: int) -> int:
        """Largest indexed position <= ``position`` (0 if none): always a batch boundary."""
        i = bisect_right(self._second, position) - 1
        return self._second[i] if i >= 0 else 0

    def last_entry(self) -> tuple[int, int]:
        if not self._first:
            return self.base_offset, 0
        return self.base_offset + self._first[-1], self._second[-1]

    def truncate(self, offset: int, position: int) -> None:
        """Drop entries for offsets >= ``offset`` or positions >= ``position``."""
        keep = min(
            bisect_right(self._first, offset - self.base_offset - 1),
            bisect_right(self._second, position - 1),
        )
        self.keep(keep)

    def rebuild(self, entries: Iterable[tuple[int, int]]) -> None:
        """Replace every entry with (offset, position) pairs (recovery)."""
        self._rebuild((offset - self.base_offset, position) for offset, position in entries)


class TimeIndex(_SparseIndex):
    """Timestamp -> offset index of one segment (``<base>.timeindex``).

    An entry records the largest timestamp seen so far in the segment and the offset of the
    batch that carried it. Entries are added only when the timestamp grows, so the file is
    monotonic even when producers' CreateTime clocks are not, which is what makes binary
    search valid. Columns: timestamp, relative offset.
    """

    _ENTRY = _TIME_ENTRY
    _TYPECODES = ("q", "i")
    ENTRY_SIZE = _TIME_ENTRY.size

    def sanity_problem(self, next_offset: int) -> str | None:
        """Cheap consistency check: monotonic ends, offsets inside the segment."""
        timestamps, relative = self._first, self._second
        if not timestamps:
            return None
        if timestamps[-1] < timestamps[0] or relative[-1] < relative[0]:
            return "entries are not increasing"
        if relative[0] < 0 or self.base_offset + relative[-1] >= next_offset:
            return "entries point outside the segment"
        return None

    def maybe_append(self, timestamp: int, offset: int) -> bool:
        """Add (timestamp, offset) if the timestamp is newer than the last entry's."""
        if self._first and timestamp <= self._first[-1]:
            return False
        relative = offset - self.base_offset
        if self._second and relative < self._second[-1]:
            raise ValueError(f"time index offset {offset} goes backwards")
        self._append_entry(timestamp, relative)
        return True

    def lookup(self, timestamp: int, *, strict: bool = False) -> tuple[int, int]:
        """(timestamp, offset) of the largest entry <= ``timestamp`` (< with ``strict``).

        Returns (-1, base_offset) when no entry qualifies, i.e. scan from the segment start.
        """
        i = bisect_right(self._first, timestamp - 1 if strict else timestamp) - 1
        if i < 0:
            return -1, self.base_offset
        return self._first[i], self.base_offset + self._second[i]

    def last_entry(self) -> tuple[int, int]:
        if not self._first:
            return -1, self.base_offset
        return self._first[-1], self.base_offset + self._second[-1]

    def truncate(self, offset: int) -> None:
        """Drop entries whose offset is >= ``offset``."""
        self.keep(bisect_right(self._second, offset - self.base_offset - 1))

    def rebuild(self, entries: Iterable[tuple[int, int]]) -> None:
        """Replace every entry with (timestamp, offset) pairs (recovery)."""
        self._rebuild((timestamp, offset - self.base_offset) for timestamp, offset in entries)
