"""A bound on the file descriptors that segments keep open: the least recently used go first.

Kafka keeps every segment's files open and runs with a very high RLIMIT_NOFILE. Here an idle
segment holds no descriptor at all: a segment opens its ``.log`` (read handle, and the write
descriptor while it is active) and its index files only when it is read or appended to, and
then registers here. When more than :attr:`OpenSegments.capacity` segments hold descriptors,
the least recently used one releases them (``LogSegment.release_files``) and reopens them on
its next use. So 20,000 idle partitions cost no descriptor, and a busy partition's active
segment stays open because it is always among the most recently used.

Releasing only drops the segment's own reference to its read handle: a
:class:`~moldau.log.file_slice.FileSlice` being sent with ``sendfile``, or held by the
cleaner's snapshot, keeps the handle and its descriptor alive until it is dropped (see
:mod:`file_slice`), so an eviction never closes a descriptor under an in-flight read.

Threads: segments registered here are used by one thread, the event loop (or the main thread
before it runs), and only that thread evicts, so a write descriptor is never closed under an
append. Segments written by another thread (the cleaner's ``.cleaned`` output) are created
untracked and join the cache when the loop adopts them (``LogSegment.track_files``). The lock
only keeps the bookkeeping itself consistent.
"""

from __future__ import annotations

import resource
import threading
from collections import OrderedDict
from typing import Protocol

#: Never keep fewer segments open than this (a fetch across two segments must not thrash).
MIN_OPEN_SEGMENTS = 16


class HasFiles(Protocol):
    def release_files(self) -> None: ...


def default_capacity() -> int:
    """Segments allowed to hold descriptors: an eighth of the soft RLIMIT_NOFILE.

    An active segment holds up to four descriptors (read, write, two indexes), an inactive
    one at most its read handle, so this keeps segment files to at most half the limit and
    leaves the rest to client connections. Read when the log manager starts, so a limit
    raised at start-up counts.
    """
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft <= 0:
        soft = 1 << 20
    return max(MIN_OPEN_SEGMENTS, soft // 8)


class OpenSegments:
    """The segments that hold descriptors, in least-recently-used order."""

    def __init__(self, capacity: int | None = None) -> None:
        self._entries: OrderedDict[HasFiles, None] = OrderedDict()
        self._lock = threading.Lock()
        self.capacity = max(MIN_OPEN_SEGMENTS, capacity or default_capacity())

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, segment: object) -> bool:
        return segment in self._entries

    def set_capacity(self, capacity: int) -> None:
        """Change the bound, releasing the least recently used segments beyond it at once."""
        self.capacity = max(MIN_OPEN_SEGMENTS, capacity)
        self._evict()

    def touch(self, segment: HasFiles) -> None:
        """``segment`` holds descriptors and was just used: make it the most recent."""
        with self._lock:
            entries = self._entries
            if segment in entries:
                entries.move_to_end(segment)
                return
            entries[segment] = None
        if len(entries) > self.capacity:
            self._evict()

    def forget(self, segment: HasFiles) -> None:
        """Stop tracking ``segment`` (closed, deleted or handed to another thread)."""
        with self._lock:
            self._entries.pop(segment, None)

    def _evict(self) -> None:
        while True:
            with self._lock:
                if len(self._entries) <= self.capacity:
                    return
                oldest, _ = self._entries.popitem(last=False)
            oldest.release_files()


#: The process-wide cache every log segment uses unless told otherwise.
SEGMENT_FILES = OpenSegments()
