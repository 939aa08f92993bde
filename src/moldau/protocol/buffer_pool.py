"""Reusable receive buffers for large frames (requests on the broker, responses from peers).

A produce request of a few MB used to get a fresh ``bytearray``. For allocations that size
glibc maps new pages from the kernel and unmaps them on free, so every request paid a page
fault per 4 KiB while the socket filled the buffer: about 2 ms per 2 MB, measured here, against
0.2 ms to fill a buffer that already exists. Frames are decoded into objects of their own
(kio copies every field), so a frame's buffer can be reused as soon as its request has been
handled. One pool serves every client connection of the broker, and each connection to
another broker has a small one of its own (a follower's Fetch responses); a pool keeps at most
``max_pooled_bytes`` in total and never keeps a buffer over ``max_buffer_bytes``, so an idle
broker holds a bounded amount of memory whatever its clients sent once.

A new buffer is an anonymous ``mmap``, not a ``bytearray``: ``bytearray(n)`` writes n zero
bytes, so a client announcing a 100 MiB frame and sending nothing more cost 100 MiB of RAM at
once. Mapped pages become resident only when the socket writes into them, so a buffer costs
what has actually been received.
"""

from __future__ import annotations

import mmap

#: Buffers are sized in steps of this, so requests of similar size share buffers.
GRANULE = 1 << 20

#: A receive buffer: pooled buffers of earlier versions may still be bytearrays in tests.
Buffer = bytearray | mmap.mmap


class BufferPool:
    """Free buffers by capacity; single-threaded (the event loop's thread)."""

    def __init__(self, max_pooled_bytes: int = 64 << 20, max_buffer_bytes: int = 16 << 20
                 ) -> None:
        self._free: list[Buffer] = []
        self._pooled_bytes = 0
        self.max_pooled_bytes = max_pooled_bytes
        self.max_buffer_bytes = max_buffer_bytes

    @property
    def pooled_bytes(self) -> int:
        return self._pooled_bytes

    def take(self, size: int) -> Buffer:
        """A buffer of at least ``size`` bytes (contents undefined), pooled or new."""
        best = -1
        for i, buf in enumerate(self._free):
            if len(buf) >= size and (best < 0 or len(buf) < len(self._free[best])):
                best = i
        if best >= 0:
            buf = self._free.pop(best)
            self._pooled_bytes -= len(buf)
            return buf
        # Pages are mapped lazily: only what the socket writes becomes resident.
        return mmap.mmap(-1, max(-(-size // GRANULE) * GRANULE, GRANULE))

    def give(self, buf: Buffer) -> None:
        """Return a buffer from :meth:`take`; kept if it fits the pool's limits.

        A buffer not kept is simply dropped: it is unmapped when the last view of it goes.
        """
        size = len(buf)
        if size <= self.max_buffer_bytes and self._pooled_bytes + size <= self.max_pooled_bytes:
            self._free.append(buf)
            self._pooled_bytes += size
