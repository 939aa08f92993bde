"""One client connection: split the byte stream into frames, answer them in order.

Kafka clients pipeline requests (several in flight per connection) and expect the responses in
request order, so each connection has one worker that handles its frames one after another.
The event loop reads straight into buffers of a :class:`~.frame_reader.FrameReader`, which hands
back each frame as soon as it is complete; a frame that cannot be a Kafka request (bad size,
garbage header, unknown API) closes this connection only, with one log line. Response bodies
may contain file ranges, which go to the socket with ``sendfile``.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
from typing import TYPE_CHECKING, cast

from ..protocol.frames import FrameError, frame_prefix
from .frame_reader import Frame, FrameReader
from .response import Response

if TYPE_CHECKING:
    from .broker import Broker

log = logging.getLogger(__name__)

# Below this size a file range is copied with pread: one syscall either way, and it can be
# coalesced with the surrounding bytes into a single socket write.
SENDFILE_MIN_BYTES = 64 * 1024
# Stop reading from a client that pipelines faster than we answer.
MAX_QUEUED_FRAMES = 64


class KafkaConnection(asyncio.BufferedProtocol):
    def __init__(self, broker: Broker) -> None:
        self._broker = broker
        # Read once: socket.request.max.bytes is static, and this runs on every frame.
        self._reader = FrameReader(broker.config.socket_request_max_bytes, broker.frame_buffers)
        self._frames: collections.deque[Frame] = collections.deque()
        self._frame_ready: asyncio.Event = asyncio.Event()
        self._transport: asyncio.Transport | None = None
        self._can_write: asyncio.Event = asyncio.Event()
        self._can_write.set()
        self._reading_paused = False
        self._closed = False
        self._worker: asyncio.Task[None] | None = None
        self._peer = "?"
        self._client_host = ""

    # -- asyncio.Protocol --------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses but offer the same methods.
        self._transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        self._peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self._client_host = f"/{peer[0]}" if peer else ""
        self._worker = asyncio.get_running_loop().create_task(self._work())
        self._broker.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self._can_write.set()
        self._frame_ready.set()
        self._broker.connections.discard(self)
        if self._worker is not None and not self._worker.done():
            self._worker.cancel()

    def pause_writing(self) -> None:
        self._can_write.clear()

    def resume_writing(self) -> None:
        self._can_write.set()

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._reader.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        try:
            frames = self._reader.buffer_updated(nbytes)
        except FrameError as exc:
            self.abort(str(exc))
            return
        if frames:
            self._frames.extend(frames)
            self._frame_ready.set()
            if len(self._frames) >= MAX_QUEUED_FRAMES and self._transport is not None:
                self._transport.pause_reading()
                self._reading_paused = True

    def eof_received(self) -> bool | None:
        if self._reader.partial_bytes:
            log.info("connection %s closed in the middle of a frame (%d bytes received)",
                     self._peer, self._reader.partial_bytes)
        return None

    # -- work --------------------------------------------------------------------------------

    async def close(self, reason: str) -> None:
        """Abort the connection and wait for its worker to finish (clean shutdown)."""
        worker = self._worker
        self.abort(reason)
        if worker is not None:
            worker.cancel()
            await asyncio.gather(worker, return_exceptions=True)

    def abort(self, reason: str) -> None:
        """Close this connection because of something the client sent."""
        if not self._closed:
            log.warning("closing connection %s: %s", self._peer, reason)
            self._closed = True
            if self._transport is not None:
                self._transport.abort()

    async def _work(self) -> None:
        try:
            while not self._closed:
                if not self._frames:
                    self._frame_ready.clear()
                    await self._frame_ready.wait()
                    continue
                frame = self._frames.popleft()
                if self._reading_paused and len(self._frames) < MAX_QUEUED_FRAMES // 2:
                    self._reading_paused = False
                    if self._transport is not None:
                        self._transport.resume_reading()
                try:
                    response = await self._broker.handle_frame(frame, self._client_host)
                except FrameError as exc:
                    self.abort(str(exc))
                    return
                finally:
                    # The request was decoded into objects of its own: the bytes can go.
                    self._reader.recycle(frame)
                    del frame
                if response is not None and not self._closed:
                    await self._send(response)
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("unexpected error on connection %s", self._peer)
            self.abort("internal error")

    async def _send(self, response: Response) -> None:
        transport = self._transport
        assert transport is not None
        pending: list[bytes] = [frame_prefix(response.size)]
        for part in response.parts:
            if isinstance(part, bytes):
                pending.append(part)
            elif part.size < SENDFILE_MIN_BYTES:
                pending.append(part.read())
            else:
                transport.write(b"".join(pending))
                pending = []
                await self._send_file(part.fd, part.position, part.size)
        if pending:
            transport.write(b"".join(pending))
        if not self._can_write.is_set():
            await self._can_write.wait()

    async def _send_file(self, fd: int, position: int, size: int) -> None:
        """Send a file range: zero-copy while the socket takes it, copying the rest.

        ``os.sendfile`` goes straight to the socket only when the transport has nothing
        buffered, so the bytes stay in order; whatever the socket does not take at once is read
        and handed to the transport, which keeps this path free of polling on any event loop.
        """
        transport = self._transport
        assert transport is not None
        if transport.get_write_buffer_size() == 0:
            sock = transport.get_extra_info("socket")
            if sock is not None:
                try:
                    sent = os.sendfile(sock.fileno(), fd, position, size)
                except (BlockingIOError, InterruptedError):
                    sent = 0
                position += sent
                size -= sent
        while size > 0:
            chunk = os.pread(fd, min(size, 1 << 20), position)
            if not chunk:
                raise OSError(f"segment file ended {size} bytes early")
            transport.write(chunk)
            position += len(chunk)
            size -= len(chunk)
            if not self._can_write.is_set():
                await self._can_write.wait()
