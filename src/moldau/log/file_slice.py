"""A byte range of a segment file, handed to the network layer for ``sendfile``.

The broker answers a fetch by sending ``[position, position + size)`` of a segment file
straight from the page cache to the socket. The range must stay readable even if retention
or a topic deletion unlinks the segment while the response is still queued, so a slice holds
a reference to the segment's read handle rather than a bare fd number: the handle (and with it
the unlinked file's data) lives as long as any slice does, and closes itself when the last
reference goes away.
"""

from __future__ import annotations

import contextlib
import io
import os
from dataclasses import dataclass
from typing import BinaryIO


class ReadHandle(io.FileIO):
    """Unbuffered read-only handle of one segment file, shared by the segment and its slices.

    Closing is left to garbage collection (reference counting closes it as soon as the segment
    and every slice have dropped it), and done quietly: an unreferenced handle is the normal
    end of its life here, not a leak worth a ResourceWarning.
    """

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()


@dataclass(frozen=True, slots=True)
class FileSlice:
    """``size`` bytes of ``file`` starting at ``position``: whole record batches.

    ``file`` is shared by every slice of the same segment, so its file position means nothing:
    always pass explicit offsets (``os.sendfile(sock, slice.fd, slice.position, slice.size)``,
    ``os.pread``, or asyncio's native ``loop.sendfile`` path). A reader that needs its own
    file position should use :meth:`read`.
    """

    file: BinaryIO
    position: int
    size: int

    @property
    def fd(self) -> int:
        return self.file.fileno()

    def read(self) -> bytes:
        """The slice's bytes, read with ``os.pread`` (no shared file position involved)."""
        data = os.pread(self.fd, self.size, self.position)
        if len(data) == self.size:
            return data
        parts = [data]
        got = len(data)
        while got < self.size:
            more = os.pread(self.fd, self.size - got, self.position + got)
            if not more:
                break
            parts.append(more)
            got += len(more)
        return b"".join(parts)
