"""Writing every byte of several buffers to a file descriptor.

``os.write`` and ``os.writev`` may write less than asked (a signal, a full disk on the way to
an error), so every writer of log files loops until all is written or an OSError says why not.
``writev`` lets an append hand the kernel a patched batch header and the untouched record bytes
behind it without joining them into a new buffer first.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

#: What a log file is written from.
Chunk = bytes | bytearray | memoryview

#: Most buffers one writev may take (POSIX IOV_MAX; 1024 on Linux).
IOV_MAX = os.sysconf("SC_IOV_MAX") if hasattr(os, "sysconf") else 1024


def write_all(fd: int, chunks: Sequence[Chunk]) -> int:
    """Write ``chunks`` in order at the descriptor's position; return the bytes written."""
    views = [memoryview(c).cast("B") for c in chunks]
    views = [v for v in views if len(v)]
    total = 0
    first = 0
    while first < len(views):
        written = os.writev(fd, views[first : first + IOV_MAX])
        total += written
        while written:
            size = len(views[first])
            if written >= size:
                written -= size
                first += 1
            else:
                views[first] = views[first][written:]
                written = 0
    return total
