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

File descriptors are opened lazily and released by :meth:`close_file` once a segment stops
being active, so a partition with many old segments does not hold index fds open.
"""

from __future__ import annotations

import os
import struct
from array import array
from bisect import bisect_right
from collections.abc import Iterable
from pathlib import Path

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")


class _IndexFile:
    """The append-only file behind an index: lazy fd, truncation, fsync, unlink."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None
        self._dirty = False

    def _open(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        return self._fd

    def create(self) -> None:
        """Make sure the file exists (empty) so a later open can tell 'no entries' from 'lost'."""
        self._open()

    def write(self, data: bytes) -> None:
        fd = self._open()
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
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
        """Move the file to ``path`` (the cleaner's ``.cleaned`` -> ``.swap`` -> final)."""
        self.close()
        os.rename(self.path, path)
        self.path = path


class OffsetIndex:
    """Offset -> position index of one segment (``<base>.index``).

    Entries map the *last* offset of a batch to the position where that batch starts, as
    Kafka does; looking up the largest entry <= target therefore yields a position at or
    before the batch holding the target.
    """

    ENTRY_SIZE = _OFFSET_ENTRY.size

    def __init__(self, path: Path, base_offset: int, max_entries: int) -> None:
        self.base_offset = base_offset
        self.max_entries = max(1, max_entries)
        self._file = _IndexFile(path)
        self._relative = array("i")
        self._positions = array("i")

    @property
    def path(self) -> Path:
        return self._file.path

    def __len__(self) -> int:
        return len(self._relative)

    @property
    def is_full(self) -> bool:
        return len(self._relative) >= self.max_entries

    def load(self) -> bool:
        """Read the entries from disk; False when the file is missing or visibly torn."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return False
        if len(data) % self.ENTRY_SIZE:
            return False
        self._relative = array("i")
        self._positions = array("i")
        for relative, position in _OFFSET_ENTRY.iter_unpack(data):
            self._relative.append(relative)
            self._positions.append(position)
        return True

    def sanity_problem(self, log_size: int) -> str | None:
        """Cheap consistency check against the log (Kafka-style: first and last entries)."""
        if not self._relative:
            return None
        if self._relative[0] < 0 or self._relative[-1] < self._relative[0]:
            return "offsets are not increasing"
        if self._positions[-1] >= log_size or self._positions[-1] < self._positions[0]:
            return f"last position {self._positions[-1]} is outside the log ({log_size} bytes)"
        return None

    def create(self) -> None:
        self._file.create()

    def append(self, offset: int, position: int) -> None:
        """Add an entry; offsets and positions must grow (they do: the log is append-only)."""
        relative = offset - self.base_offset
        if self._relative and (relative <= self._relative[-1] or position <= self._positions[-1]):
            raise ValueError(f"index entry ({offset}, {position}) does not follow the last one")
        self._relative.append(relative)
        self._positions.append(position)
        self._file.write(_OFFSET_ENTRY.pack(relative, position))

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the largest entry <= ``offset``; (base_offset, 0) if none."""
        i = bisect_right(self._relative, offset - self.base_offset) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self._relative[i], self._positions[i]

    def position_floor(self, position: int) -> int:
        """Largest indexed position <= ``position`` (0 if none): always a batch boundary."""
        i = bisect_right(self._positions, position) - 1
        return self._positions[i] if i >= 0 else 0

    def last_entry(self) -> tuple[int, int]:
        if not self._relative:
            return self.base_offset, 0
        return self.base_offset + self._relative[-1], self._positions[-1]

    def truncate(self, offset: int, position: int) -> None:
        """Drop entries for offsets >= ``offset`` or positions >= ``position``."""
        keep = min(
            bisect_right(self._relative, offset - self.base_offset - 1),
            bisect_right(self._positions, position - 1),
        )
        self._keep(keep)

    def _keep(self, count: int) -> None:
        if count < len(self._relative):
            del self._relative[count:]
            del self._positions[count:]
            self._file.truncate(count * self.ENTRY_SIZE)

    def rebuild(self, entries: Iterable[tuple[int, int]]) -> None:
        """Replace every entry (recovery), writing the file in one go."""
        self._relative = array("i")
        self._positions = array("i")
        out = bytearray()
        for offset, position in entries:
            relative = offset - self.base_offset
            self._relative.append(relative)
            self._positions.append(position)
            out += _OFFSET_ENTRY.pack(relative, position)
        self._file.truncate(0)
        self._file.write(bytes(out))

    def flush(self) -> None:
        self._file.flush()

    def close_file(self) -> None:
        self._file.close()

    def delete(self) -> None:
        self._file.delete()

    def rename(self, path: Path) -> None:
        self._file.rename(path)


class TimeIndex:
    """Timestamp -> offset index of one segment (``<base>.timeindex``).

    An entry records the largest timestamp seen so far in the segment and the offset of the
    batch that carried it. Entries are added only when the timestamp grows, so the file is
    monotonic even when producers' CreateTime clocks are not, which is what makes binary
    search valid.
    """

    ENTRY_SIZE = _TIME_ENTRY.size

    def __init__(self, path: Path, base_offset: int, max_entries: int) -> None:
        self.base_offset = base_offset
        self.max_entries = max(1, max_entries)
        self._file = _IndexFile(path)
        self._timestamps = array("q")
        self._relative = array("i")

    @property
    def path(self) -> Path:
        return self._file.path

    def __len__(self) -> int:
        return len(self._timestamps)

    @property
    def is_full(self) -> bool:
        return len(self._timestamps) >= self.max_entries

    def load(self) -> bool:
        """Read the entries from disk; False when the file is missing or visibly torn."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return False
        if len(data) % self.ENTRY_SIZE:
            return False
        self._timestamps = array("q")
        self._relative = array("i")
        for timestamp, relative in _TIME_ENTRY.iter_unpack(data):
            self._timestamps.append(timestamp)
            self._relative.append(relative)
        return True

    def sanity_problem(self, next_offset: int) -> str | None:
        """Cheap consistency check: monotonic ends, offsets inside the segment."""
        if not self._timestamps:
            return None
        if self._timestamps[-1] < self._timestamps[0] or self._relative[-1] < self._relative[0]:
            return "entries are not increasing"
        if self._relative[0] < 0 or self.base_offset + self._relative[-1] >= next_offset:
            return "entries point outside the segment"
        return None

    def create(self) -> None:
        self._file.create()

    def maybe_append(self, timestamp: int, offset: int) -> bool:
        """Add (timestamp, offset) if the timestamp is newer than the last entry's."""
        if self._timestamps and timestamp <= self._timestamps[-1]:
            return False
        relative = offset - self.base_offset
        if self._relative and relative < self._relative[-1]:
            raise ValueError(f"time index offset {offset} goes backwards")
        self._timestamps.append(timestamp)
        self._relative.append(relative)
        self._file.write(_TIME_ENTRY.pack(timestamp, relative))
        return True

    def lookup(self, timestamp: int, *, strict: bool = False) -> tuple[int, int]:
        """(timestamp, offset) of the largest entry <= ``timestamp`` (< with ``strict``).

        Returns (-1, base_offset) when no entry qualifies, i.e. scan from the segment start.
        """
        i = bisect_right(self._timestamps, timestamp - 1 if strict else timestamp) - 1
        if i < 0:
            return -1, self.base_offset
        return self._timestamps[i], self.base_offset + self._relative[i]

    def last_entry(self) -> tuple[int, int]:
        if not self._timestamps:
            return -1, self.base_offset
        return self._timestamps[-1], self.base_offset + self._relative[-1]

    def truncate(self, offset: int) -> None:
        """Drop entries whose offset is >= ``offset``."""
        count = bisect_right(self._relative, offset - self.base_offset - 1)
        if count < len(self._timestamps):
            del self._timestamps[count:]
            del self._relative[count:]
            self._file.truncate(count * self.ENTRY_SIZE)

    def rebuild(self, entries: Iterable[tuple[int, int]]) -> None:
        """Replace every entry (recovery), writing the file in one go."""
        self._timestamps = array("q")
        self._relative = array("i")
        out = bytearray()
        for timestamp, offset in entries:
            relative = offset - self.base_offset
            self._timestamps.append(timestamp)
            self._relative.append(relative)
            out += _TIME_ENTRY.pack(timestamp, relative)
        self._file.truncate(0)
        self._file.write(bytes(out))

    def flush(self) -> None:
        self._file.flush()

    def close_file(self) -> None:
        self._file.close()

    def delete(self) -> None:
        self._file.delete()

    def rename(self, path: Path) -> None:
        self._file.rename(path)
