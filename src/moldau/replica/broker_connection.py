"""One connection from this broker to another: requests out, responses in order.

Replica fetchers, the pooled peer clients (transaction markers, KIP-890 verification) and
controlled shutdown all talk to other brokers through a :class:`BrokerConnection`.

A follower's Fetch responses carry up to megabytes of record batches, and a follower receives
every byte its leaders write, so the receive path is kept to one copy in Python. The
connection is an :class:`asyncio.BufferedProtocol` (:class:`ResponseStream`) that cuts frames
with the same :class:`~moldau.protocol.frame_reader.FrameReader` as the broker's client
connections: small responses are read into one scratch buffer, and a large one goes from the
socket straight into a pooled buffer sized from its length prefix, which kio copies the record
batches out of once when the response is decoded; the buffer then takes the next large
response. Before this, an ``asyncio.StreamReader`` copied each response about three times
(into its growing buffer, out as a slice, into ``bytes``) and paused and resumed the socket
every 128 KiB; on three brokers sharing two cores that was about a millisecond of each
follower's CPU per megabyte replicated, and it showed in the acks=all latency of every large
batch.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import ssl
import struct
from collections.abc import Awaitable, Callable
from typing import Any

from kio.serial import entity_reader

from ..protocol.buffer_pool import BufferPool
from ..protocol.codec import encode_request, response_body_offset
from ..protocol.frame_reader import Frame, FrameReader
from ..protocol.frames import FrameError
from ..protocol.schemas import response_schema

_SIZE = struct.Struct(">i")
_CLIENT_ID = b"moldau-replica-fetcher"
#: Scratch buffer for size prefixes and responses that fit in one read.
SCRATCH_BYTES = 64 * 1024
#: Responses at least this big that do not arrive in one read get a pooled buffer.
DIRECT_BYTES = 32 * 1024
#: Largest response accepted (a follower asks for at most 10 MiB per Fetch; this leaves room).
MAX_RESPONSE_BYTES = 256 << 20
#: Received buffers a connection keeps for its next large responses: one response is decoded
#: at a time, so this is about one Fetch response's worth (``replica.fetch.response.max.bytes``
#: is 10 MiB by default).
POOLED_BYTES = 16 << 20


class ResponseStream(asyncio.BufferedProtocol):
    """Hands the response frames a :class:`FrameReader` cuts from the socket's bytes (see the
    module docstring), in order, to :meth:`next_frame`."""

    def __init__(self) -> None:
        self._reader = FrameReader(
            MAX_RESPONSE_BYTES, BufferPool(POOLED_BYTES, POOLED_BYTES),
            scratch_bytes=SCRATCH_BYTES, direct_bytes=DIRECT_BYTES)
        self._frames: collections.deque[Frame] = collections.deque()
        self._waiter: asyncio.Future[None] | None = None
        self._writable: asyncio.Future[None] | None = None
        self._lost: ConnectionError | None = None
        self.transport: asyncio.Transport | None = None

    # asyncio.BufferedProtocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._reader.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        try:
            frames = self._reader.buffer_updated(nbytes)
        except FrameError as exc:
            self._fail(ConnectionError(f"peer sent an impossible response: {exc}"))
            return
        if frames:
            self._frames.extend(frames)
            self._wake()

    def eof_received(self) -> bool | None:
        self._fail(ConnectionResetError("the peer closed the connection"))
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(exc or ConnectionResetError("connection closed"))
        self._reader.close()
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)  # the sender's next_frame raises the loss

    def pause_writing(self) -> None:
        if self._writable is None or self._writable.done():
            self._writable = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)

    # For the connection

    async def next_frame(self) -> Frame:
        """The next response frame; raises ConnectionError once the connection is gone."""
        while not self._frames:
            if self._lost is not None:
                raise self._lost
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        return self._frames.popleft()

    def release(self, frame: Frame) -> None:
        """``frame`` has been decoded and nothing refers to its bytes: its buffer may take the
        next large frame."""
        self._reader.recycle(frame)

    @property
    def loss(self) -> ConnectionError | None:
        """Why the connection ended (None while it is up)."""
        return self._lost

    async def drained(self) -> None:
        """Returns once the transport's write buffer is below its high-water mark."""
        if self._lost is not None:
            raise self._lost
        if self._writable is not None:
            await self._writable

    def _fail(self, exc: BaseException) -> None:
        if self._lost is None:
            self._lost = exc if isinstance(exc, ConnectionError) else \
                ConnectionError(f"connection lost: {exc}")
        if self.transport is not None:
            self.transport.close()
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)


class BrokerConnection:
    """Requests to one broker over one socket, answered in order.

    ``before_request``, when set, runs before each request: the inter-broker connection
    factory uses it to re-authenticate a SASL session before the peer's
    ``connections.max.reauth.ms`` expires it (KIP-368)."""

    def __init__(self, transport: asyncio.Transport, stream: ResponseStream) -> None:
        self._transport = transport
        self._stream = stream
        self._ids = itertools.count(1)
        self.before_request: Callable[[BrokerConnection], Awaitable[None]] | None = None

    @classmethod
    async def open(cls, host: str, port: int, tls: ssl.SSLContext | None = None) -> \
            BrokerConnection:
        """A TCP (or TLS, with ``tls``) connection to ``host:port``; raises OSError or
        ssl.SSLError."""
        transport, stream = await asyncio.get_running_loop().create_connection(
            ResponseStream, host, port, ssl=tls, server_hostname=host if tls else None)
        return cls(transport, stream)

    @property
    def closed(self) -> bool:
        """The connection is closed or closing (the peer hung up, or :meth:`close`): a pool
        should open a new one rather than send on it."""
        return self._transport.is_closing()

    async def request(self, obj: Any) -> Any:
        if self.before_request is not None:
            await self.before_request(self)
        return await self.send(obj)

    async def send(self, obj: Any) -> Any:
        """One request and its answer, without the ``before_request`` hook. Raises
        ConnectionError when the connection is lost or the answer is out of step."""
        if self.closed:
            # uvloop's transport raises RuntimeError for a write once closed, the standard
            # loop drops it: either way the caller must see a lost connection.
            raise self._stream.loss or ConnectionError("the connection to the peer is closed")
        cls = type(obj)
        correlation = next(self._ids)
        self._transport.write(encode_request(obj, correlation, _CLIENT_ID))
        await self._stream.drained()
        frame = await self._stream.next_frame()
        try:
            if len(frame) < _SIZE.size:
                raise ConnectionError(f"response of {len(frame)} bytes has no correlation id")
            (got,) = _SIZE.unpack_from(frame, 0)
            if got != correlation:
                raise ConnectionError(f"response {got} to request {correlation}")
            schema = response_schema(int(cls.__api_key__), int(cls.__version__))
            try:
                value, _ = entity_reader(schema)(frame, response_body_offset(cls))
            except Exception as exc:  # kio raises several types for a malformed response
                raise ConnectionError(f"malformed {schema.__name__}: {exc}") from exc
        finally:
            self._stream.release(frame)  # kio copied what it keeps
        return value

    def close(self) -> None:
        self._transport.close()


async def plaintext_connect(address: tuple[str, int]) -> BrokerConnection:
    """A connection without TLS or SASL (a PLAINTEXT inter-broker listener)."""
    return await BrokerConnection.open(*address)
