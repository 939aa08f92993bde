"""Cut size-prefixed Kafka frames out of a TCP byte stream with at most one copy each.

Both ends of the broker's connections use it: the broker's client connections for requests
(``broker/connection.py``) and its connections to other brokers for responses
(``replica/broker_connection.py``), whose Fetch responses carry every replicated byte. Each is
an :class:`asyncio.BufferedProtocol`: the event loop reads from the socket straight into the
buffer :meth:`FrameReader.get_buffer` hands out. Small frames land in a scratch buffer and are
copied out once, as ``bytes``. A frame of ``direct_bytes`` or more (produce requests, fetch
responses) gets a buffer of its own, sized from its length prefix, and the socket fills it
directly: its bytes are never copied in Python on the way in. Before this, a produce request's
bytes were copied three times (into the receive buffer, out of it as a slice, into ``bytes``),
about a fifth of the broker's CPU when producing 1 KiB records. Those buffers come from a
:class:`~.buffer_pool.BufferPool` and go back to it through :meth:`FrameReader.recycle` once
the frame has been decoded.

Idle connections must cost next to nothing (Kafka brokers serve tens of thousands), so the
broker shares one scratch buffer among all its client connections: the event loop is
single-threaded and calls ``get_buffer`` and then ``buffer_updated`` for one connection before
it reads from any other, so the scratch only has to hold one read. A frame that is not complete
at the end of a read continues in a buffer of its own: pooled for large frames, a ``bytearray``
of the frame's size for small ones. Only a partial size prefix (or the start of a frame waiting
for memory) is kept as bytes and put back at the front of the scratch before the next read. A
connection between frames holds no buffer at all.

Every frame reserves its size in a :class:`~.memory_pool.MemoryPool` (the broker's
``queued.max.request.bytes``; unlimited by default) when its prefix has been read, and
:meth:`recycle` gives it back. While the pool is exhausted a connection between frames reads
only the 4 prefix bytes, and a frame that cannot reserve leaves the reader
:attr:`~FrameReader.blocked` until :meth:`~FrameReader.unblock` succeeds: the connection stops
reading meanwhile.

No I/O and no asyncio here: the protocol classes feed it.
"""

from __future__ import annotations

import mmap

from .buffer_pool import BufferPool
from .frames import FrameError, read_frame_size
from .memory_pool import MemoryPool

#: Scratch buffer for frame prefixes and small frames: one read at most.
SCRATCH_BYTES = 256 * 1024
#: Frames at least this big are received into a buffer of their own.
DIRECT_BYTES = 64 * 1024

#: A complete frame: ``bytes``, or a read-only view of the frame's own buffer.
Frame = bytes | memoryview

_NO_BYTES = b""


class FrameReader:
    """Frame assembly for one connection (no I/O: the protocol feeds it)."""

    def __init__(self, max_frame: int, pool: BufferPool | None = None,
                 scratch_bytes: int = SCRATCH_BYTES, direct_bytes: int = DIRECT_BYTES, *,
                 scratch: bytearray | None = None, memory: MemoryPool | None = None,
                 limit_name: str = "the largest frame accepted") -> None:
        if scratch is None:
            scratch = bytearray(scratch_bytes)
        if direct_bytes + 4 > len(scratch):
            raise ValueError("the scratch buffer must hold any frame smaller than direct_bytes")
        self._max_frame = max_frame
        #: What ``max_frame`` is called in the error for a frame over it.
        self._limit_name = limit_name
        self._pool = pool if pool is not None else BufferPool()
        self._memory = memory if memory is not None else MemoryPool()
        self._direct_bytes = direct_bytes
        self._scratch = scratch
        self._scratch_view = memoryview(scratch)
        #: Received bytes of a size prefix, or of a frame waiting for memory (blocked).
        self._pending: bytes = _NO_BYTES
        self._blocked = False
        #: The frame being received into a buffer of its own (it has reserved its size).
        self._body: memoryview | None = None
        self._body_filled = 0

    @property
    def partial_bytes(self) -> int:
        """Bytes received of a frame that is not complete yet (0 between frames)."""
        if self._body is not None:
            return 4 + self._body_filled
        return len(self._pending)

    @property
    def blocked(self) -> bool:
        """A frame has begun but cannot reserve memory: stop reading until :meth:`unblock`."""
        return self._blocked

    def get_buffer(self) -> memoryview:
        """Where the next bytes from the socket should go."""
        if self._body is not None:
            return self._body[self._body_filled :]
        kept = len(self._pending)
        if kept:
            self._scratch[:kept] = self._pending
        if kept < 4 and self._memory.exhausted:
            # No memory for a new frame: read its size only (it then waits in unblock()).
            return self._scratch_view[kept:4]
        return self._scratch_view[kept:]

    def buffer_updated(self, nbytes: int) -> list[Frame]:
        """``nbytes`` arrived in the last buffer handed out; return the frames now complete.

        Raises :class:`FrameError` for a size prefix outside ``0..max_frame``: the stream can
        not be resynchronised after that, so the caller closes the connection.
        """
        if self._body is not None:
            self._body_filled += nbytes
            if self._body_filled < len(self._body):
                return []
            frames: list[Frame] = [self._body.toreadonly()]
            self._body = None
            self._body_filled = 0
            return frames
        return self._cut_frames(len(self._pending) + nbytes)

    def unblock(self) -> bool:
        """Try again to reserve memory for the waiting frame; True once it has."""
        if not self._blocked:
            return True
        size = read_frame_size(self._pending, 0)
        if not self._memory.try_reserve(size):
            return False
        self._blocked = False
        self._start_body(size, memoryview(self._pending)[4:])
        self._pending = _NO_BYTES
        return True

    def recycle(self, frame: Frame) -> None:
        """``frame`` has been handled and nothing refers to its bytes: free its memory.

        Large frames had a pooled buffer of their own: it goes back to the pool.
        """
        self._memory.release(len(frame))
        if isinstance(frame, memoryview) and isinstance(frame.obj, mmap.mmap):
            self._pool.give(frame.obj)

    def close(self) -> None:
        """The connection is gone: give back what the unfinished frame holds."""
        body = self._body
        if body is not None:
            self._body = None
            self._memory.release(len(body))
            if isinstance(body.obj, mmap.mmap):
                self._pool.give(body.obj)
        self._pending = _NO_BYTES
        self._blocked = False

    def _cut_frames(self, end: int) -> list[Frame]:
        frames: list[Frame] = []
        view = self._scratch_view
        start = 0
        while end - start >= 4:
            size = read_frame_size(self._scratch, start)
            if size < 0 or size > self._max_frame:
                raise FrameError(
                    f"frame of {size} bytes is outside 0..{self._limit_name} "
                    f"({self._max_frame})"
                )
            frame_end = start + 4 + size
            if frame_end <= end:
                self._memory.reserve(size)  # its bytes are here already
                frames.append(bytes(view[start + 4 : frame_end]))
                start = frame_end
                continue
            if self._memory.try_reserve(size):
                # The rest of the frame goes straight into a buffer of its own.
                self._start_body(size, view[start + 4 : end])
                start = end
            else:
                self._blocked = True
            break
        self._pending = bytes(view[start:end]) if start < end else _NO_BYTES
        return frames

    def _start_body(self, size: int, received: memoryview) -> None:
        # Large frames get a pooled (lazily mapped) buffer; small ones a bytearray, so that
        # the rest of the frame never goes through the shared scratch buffer again.
        buf = self._pool.take(size) if size >= self._direct_bytes else bytearray(size)
        body = memoryview(buf)[:size]
        have = len(received)
        body[:have] = received
        self._body, self._body_filled = body, have
