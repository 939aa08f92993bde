"""One client connection: split the byte stream into frames, answer them in order.

Kafka clients pipeline requests (several in flight per connection) and expect the responses in
request order, so each connection handles its frames one after another, in a worker task
started by its first frame (a connection that never sent anything has no task), which then
sleeps on a bare future between frames: cheaper than starting a task per request. One
exception to one-at-a-time: an ``acks=all`` Produce whose records are appended hands back a
:class:`~.response.Pending` while it waits for the ISR, and the worker goes on to the next frame
if that is a Produce too (its records are appended in order, after the first's); any other
request waits until every earlier response is sent. The responses are sent in request order
by a sender task. Kafka keeps the connection muted instead; appending the next Produce at once
lets the followers fetch both in one round trip rather than one after the other. The event
loop reads straight into buffers of a
:class:`~moldau.protocol.frame_reader.FrameReader`, which hands back each frame as soon as it is
complete; a frame that cannot be a Kafka request (bad size, garbage header, unknown API) closes
this connection only, with one log line. Response bodies may contain file ranges, which go to
the socket with ``sendfile``.

Reading stops (``pause_reading``) while any of these holds, so that what a connection costs
stays bounded whatever its client does:

- ``MAX_QUEUED_FRAMES`` frames wait to be handled or answered (a client pipelining faster than
  we answer);
- the transport's write buffer is over its high-water mark (a client that does not read its
  responses): no new request is taken until it drains, and a response is written in pieces of
  ``SEND_CHUNK_BYTES``, each only once the previous ones have drained;
- the broker's request memory (``queued.max.request.bytes``) is exhausted and a new frame waits
  for its share;
- the client went over a quota: once the response carrying its throttle time is sent, the
  connection is muted for that long (KIP-219): nothing read, no queued frame handled; a timer
  of the loop (``call_later``) unmutes it.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import socket
import time
from typing import TYPE_CHECKING, cast

from ..metrics.counters import RequestTiming
from ..protocol.apis import PRODUCE
from ..protocol.frame_reader import Frame, FrameReader
from ..protocol.frames import FrameError, frame_prefix
from .response import Muted, Pending, Response
from .session import Session

if TYPE_CHECKING:
    from .network import Network

log = logging.getLogger(__name__)

# Below this size a file range is copied with pread: one syscall either way, and it can be
# coalesced with the surrounding bytes into a single socket write.
SENDFILE_MIN_BYTES = 64 * 1024
# Stop reading from a client that pipelines faster than we answer.
MAX_QUEUED_FRAMES = 64
# Copied parts of a response are handed to the transport in pieces of about this size, each
# after the previous ones have drained below the high-water mark.
SEND_CHUNK_BYTES = 256 * 1024
# The most of a file range read into memory at once when sendfile cannot be used.
FILE_CHUNK_BYTES = 1 << 20


def _api_key(frame: Frame) -> int:
    """The API key of a request frame (its first two bytes, big-endian)."""
    return (frame[0] << 8 | frame[1]) if len(frame) >= 2 else -1


def _api_version(frame: Frame) -> int:
    """The API version of a request frame (its bytes 2-3, big-endian)."""
    return (frame[2] << 8 | frame[3]) if len(frame) >= 4 else -1


class KafkaConnection(asyncio.BufferedProtocol):
    def __init__(self, network: Network, client_ip: str = "",
                 session: Session | None = None) -> None:
        self._network = network
        self._broker = network.broker
        # Read once: socket.request.max.bytes is static, and this runs on every frame.
        self._reader = FrameReader(
            self._broker.config.socket_request_max_bytes, self._broker.frame_buffers,
            scratch=network.scratch, memory=network.memory,
            limit_name="socket.request.max.bytes",
        )
        self._frames: collections.deque[Frame] = collections.deque()
        self._transport: asyncio.Transport | None = None
        #: Set while the transport's write buffer is below its high-water mark.
        self._can_write: asyncio.Event | None = None
        self._reading_paused = False
        self._closed = False
        self._worker: asyncio.Task[None] | None = None
        #: What the worker sleeps on when no frame waits.
        self._wakeup: asyncio.Future[None] | None = None
        #: Responses still to be sent in order while Produces wait for their ISR; the sender
        #: task runs exactly while this is not empty.
        self._unsent: collections.deque[asyncio.Future[Response | None]] = collections.deque()
        self._sender: asyncio.Task[None] | None = None
        #: The broker's counters when metrics are on (``metrics.listener``), else None: then
        #: no request is timed at all.
        self._metrics = self._broker.metrics
        #: When metrics are on: when each frame in ``_frames`` was complete (perf_counter_ns),
        #: and the timing of each response in ``_unsent``.
        self._arrivals: collections.deque[int] = collections.deque()
        self._unsent_timings: collections.deque[RequestTiming | None] = collections.deque()
        #: A request handler is running (a parked fetch counts): not idle, whatever the clock.
        self._handling = False
        self.client_ip = client_ip
        #: The listener this client came in on and who it authenticated as.
        self.session = session or Session(network.broker.config.listeners[0], client_ip)
        self._peer = "?"
        self._client_host = ""
        #: While muted for a quota: resolved when the throttle time is over, and its timer.
        self._unmuted: asyncio.Future[None] | None = None
        self._unmute_timer: asyncio.TimerHandle | None = None
        self._muted_until = 0.0

    # -- asyncio.Protocol --------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses but offer the same methods.
        self._transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        self._peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self._client_host = f"/{peer[0]}" if peer else ""
        if not self.session.transport_ready(transport, self._network.broker.config):
            transport.close()
        self._network.connection_opened(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        if self._can_write is not None:
            self._can_write.set()
        self._network.connection_closed(self)
        self._reader.close()
        while self._frames:
            self._reader.recycle(self._frames.popleft())
        if self._worker is not None and not self._worker.done():
            self._worker.cancel()
        if self._sender is not None and not self._sender.done():
            self._sender.cancel()
        for pending in self._unsent:
            pending.cancel()
        if self._unmute_timer is not None:
            self._unmute_timer.cancel()

    @property
    def in_request(self) -> bool:
        """A request is being handled or answered: not idle, whatever the clock says."""
        return self._handling or bool(self._unsent)

    def pause_writing(self) -> None:
        if self._can_write is None:
            self._can_write = asyncio.Event()
        self._can_write.clear()
        self._update_reading()

    def resume_writing(self) -> None:
        if self._can_write is not None:
            self._can_write.set()
        self._update_reading()

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._reader.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        self._network.idle.touch(self)
        try:
            frames = self._reader.buffer_updated(nbytes)
        except FrameError as exc:
            self.abort(str(exc))
            return
        if frames:
            self._frames.extend(frames)
            if self._metrics is not None:
                now = time.perf_counter_ns()
                self._arrivals.extend(now for _ in frames)
            wakeup = self._wakeup
            if wakeup is not None:
                self._wakeup = None
                if not wakeup.done():
                    wakeup.set_result(None)
            elif self._worker is None:
                self._worker = asyncio.get_running_loop().create_task(self._work())
        if self._reader.blocked:
            self._network.memory.wait(self, self._memory_freed)
        self._update_reading()

    def eof_received(self) -> bool | None:
        if self._reader.partial_bytes:
            log.info("connection %s closed in the middle of a frame (%d bytes received)",
                     self._peer, self._reader.partial_bytes)
        return None

    # -- flow control ------------------------------------------------------------------------

    @property
    def _write_blocked(self) -> bool:
        return self._can_write is not None and not self._can_write.is_set()

    def _update_reading(self) -> None:
        """Pause or resume reading from the socket, for any of the reasons in the module doc."""
        transport = self._transport
        if transport is None or self._closed:
            return
        queued = len(self._frames) + len(self._unsent)
        pause = (
            self._unmuted is not None
            or self._reader.blocked
            or self._write_blocked
            or queued >= MAX_QUEUED_FRAMES
            or (self._reading_paused and queued >= MAX_QUEUED_FRAMES // 2)
        )
        if pause != self._reading_paused:
            self._reading_paused = pause
            if pause:
                transport.pause_reading()
            else:
                transport.resume_reading()

    def _memory_freed(self) -> None:
        if self._closed:
            return
        if self._reader.unblock():
            self._update_reading()
        else:
            self._network.memory.wait(self, self._memory_freed)

    # -- work --------------------------------------------------------------------------------

    async def close(self, reason: str) -> None:
        """Abort the connection and wait for its worker to finish (clean shutdown)."""
        tasks = [t for t in (self._worker, self._sender) if t is not None]
        self.abort(reason)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def abort(self, reason: str, level: int = logging.WARNING) -> None:
        """Close this connection because of something the client sent (or did not send)."""
        if not self._closed:
            log.log(level, "closing connection %s: %s", self._peer, reason)
            self._closed = True
            if self._transport is not None:
                self._transport.abort()

    async def _work(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while not self._closed:
                if not self._frames:
                    self._wakeup = loop.create_future()
                    await self._wakeup
                    continue
                if self._unmuted is not None:
                    await self._unmuted
                    continue
                frame = self._frames[0]
                produce = _api_key(frame) == PRODUCE
                if self._unsent and not produce:
                    # Only a Produce may overtake the wait of an earlier one.
                    assert self._sender is not None
                    await asyncio.shield(self._sender)
                    continue
                self._frames.popleft()
                if self._reading_paused:
                    self._update_reading()
                timing = None
                if self._metrics is not None:
                    timing = RequestTiming(_api_key(frame), _api_version(frame),
                                           self._arrivals.popleft(), time.perf_counter_ns())
                self._handling = True
                try:
                    response = await self._broker.handle_frame(frame, self._client_host,
                                                               may_defer=produce, timing=timing,
                                                               session=self.session)
                except FrameError as exc:
                    self.abort(str(exc))
                    return
                finally:
                    self._handling = False
                    # The request was decoded into objects of its own: the bytes can go.
                    self._reader.recycle(frame)
                    del frame
                if self._closed:
                    return
                if timing is not None:
                    timing.handled = time.perf_counter_ns()
                if isinstance(response, Muted):
                    self._mute(response.throttle_ms)
                    response = None
                if isinstance(response, Pending):
                    if timing is not None:
                        response.future.add_done_callback(timing.mark_remote_done)
                    self._queue(response.future, timing)
                    if response.throttle_ms > 0 and self._sender is not None:
                        # Over a quota: no later Produce overtakes; the connection mutes
                        # once this response is sent.
                        await asyncio.shield(self._sender)
                elif self._unsent:
                    if response is not None:
                        done = loop.create_future()
                        done.set_result(response)
                        self._queue(done, timing)
                    elif timing is not None:
                        self._request_done(timing)
                elif response is not None:
                    if timing is not None:
                        timing.send_start = time.perf_counter_ns()
                    await self._send(response)
                    if timing is not None:
                        self._request_done(timing)
                elif timing is not None:
                    self._request_done(timing)
                if self.session.closing:
                    self.abort("failed authentication", logging.INFO)
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("unexpected error on connection %s", self._peer)
            self.abort("internal error")

    def _request_done(self, timing: RequestTiming) -> None:
        """The request's response is sent (or it has none): count it and file its times."""
        assert self._metrics is not None
        self._metrics.request_done(timing, time.perf_counter_ns())

    def _queue(self, pending: asyncio.Future[Response | None],
               timing: RequestTiming | None = None) -> None:
        """Send ``pending`` after the responses queued before it."""
        self._unsent.append(pending)
        if self._metrics is not None:
            self._unsent_timings.append(timing)
        if len(self._unsent) == 1:
            self._sender = asyncio.get_running_loop().create_task(self._send_unsent())
        self._update_reading()

    async def _send_unsent(self) -> None:
        """Send the queued responses in order, each once it is complete; ends when none is
        left (with no await between the last check and the end, so a response queued later
        starts a new sender)."""
        try:
            while self._unsent:
                try:
                    response = await self._unsent[0]
                except FrameError as exc:
                    self.abort(str(exc))
                    return
                timing = self._unsent_timings[0] if self._metrics is not None else None
                if response is not None and not self._closed:
                    if timing is not None:
                        timing.send_start = time.perf_counter_ns()
                    await self._send(response)
                self._unsent.popleft()
                if self._metrics is not None:
                    self._unsent_timings.popleft()
                    if timing is not None:
                        self._request_done(timing)
                if self._reading_paused:
                    self._update_reading()
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("unexpected error on connection %s", self._peer)
            self.abort("internal error")

    def _mute(self, throttle_ms: int) -> None:
        """Read and handle nothing more from this client for ``throttle_ms`` (KIP-219)."""
        loop = asyncio.get_running_loop()
        until = loop.time() + throttle_ms / 1000
        if self._unmuted is not None and until <= self._muted_until:
            return
        self._muted_until = until
        if self._unmute_timer is not None:
            self._unmute_timer.cancel()
        if self._unmuted is None:
            self._unmuted = loop.create_future()
        self._unmute_timer = loop.call_at(until, self._unmute)
        self._update_reading()

    def _unmute(self) -> None:
        unmuted, self._unmuted, self._unmute_timer = self._unmuted, None, None
        if unmuted is not None and not unmuted.done():
            unmuted.set_result(None)
        self._update_reading()

    async def _drained(self) -> None:
        """Wait until the write buffer is below its high-water mark again."""
        can_write = self._can_write
        if can_write is not None and not can_write.is_set():
            await can_write.wait()

    async def _send(self, response: Response) -> None:
        transport = self._transport
        assert transport is not None
        pending: list[bytes] = [frame_prefix(response.size)]
        pending_bytes = 0
        for part in response.parts:
            if isinstance(part, bytes):
                pending.append(part)
                pending_bytes += len(part)
                continue
            if part.size >= SENDFILE_MIN_BYTES:
                await self._send_file(b"".join(pending), part.fd, part.position, part.size)
                pending, pending_bytes = [], 0
                continue
            if pending_bytes >= SEND_CHUNK_BYTES:
                # Read no more of the files while the client has not taken what we wrote.
                transport.write(b"".join(pending))
                pending, pending_bytes = [], 0
                await self._drained()
                if self._closed:
                    return
            pending.append(part.read())
            pending_bytes += part.size
        if pending:
            transport.write(b"".join(pending))
        self._network.idle.touch(self)
        if response.throttle_ms > 0:
            self._mute(response.throttle_ms)
        await self._drained()

    async def _send_file(self, head: bytes, fd: int, position: int, size: int) -> None:
        """Send ``head`` (the bytes before a file range: the response's size and header, the
        partition's fields), then the file range: zero-copy while the socket takes it,
        copying the rest.

        ``os.sendfile`` goes straight to the socket only when the transport has nothing
        buffered, so the bytes stay in order; whatever the socket does not take at once is read
        and handed to the transport, which keeps this path free of polling on any event loop.
        The socket is corked (``TCP_CORK``) from ``head`` to the end of the ``sendfile``, so
        the two leave as one stream of full segments: the peer (typically a follower, on every
        replicated write) wakes once for the response instead of once for a few dozen bytes
        and again for the megabyte behind them.
        """
        transport = self._transport
        assert transport is not None
        # Over TLS the bytes must go through the transport's encryption: copy them.
        sock = transport.get_extra_info("socket") \
            if transport.get_write_buffer_size() == 0 and not self.session.uses_tls else None
        if sock is not None:
            corked = _cork(sock, True)
            try:
                transport.write(head)  # the buffer is empty: straight to the socket
                head = b""
                if transport.get_write_buffer_size() == 0:
                    try:
                        sent = os.sendfile(sock.fileno(), fd, position, size)
                    except (BlockingIOError, InterruptedError):
                        sent = 0
                    position += sent
                    size -= sent
            finally:
                if corked:
                    _cork(sock, False)  # whatever is held leaves now
        elif head:
            transport.write(head)
        while size > 0:
            await self._drained()
            if self._closed:
                return
            chunk = os.pread(fd, min(size, FILE_CHUNK_BYTES), position)
            if not chunk:
                raise OSError(f"segment file ended {size} bytes early")
            transport.write(chunk)
            position += len(chunk)
            size -= len(chunk)


def _cork(sock: object, on: bool) -> bool:
    """Set TCP_CORK on a transport's socket (Linux); False where it cannot be set."""
    option = getattr(socket, "TCP_CORK", None)
    if option is None:
        return False
    try:
        sock.setsockopt(socket.IPPROTO_TCP, option, int(on))  # type: ignore[attr-defined]
    except OSError:
        return False
    return True
