"""ResponseStream, the receive side of a broker-to-broker connection, fed bytes the way the
event loop feeds a BufferedProtocol: into the buffer it hands out, in reads of any size.
Then a BrokerConnection against a real socket server that answers in pieces or hangs up."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable

import pytest
import uvloop
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest

from moldau.replica.broker_connection import (
    POOLED_BYTES,
    SCRATCH_BYTES,
    BrokerConnection,
    ResponseStream,
)

REQUEST = FindCoordinatorRequest(key_type=0, coordinator_keys=("g",))


def _frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def _feed(stream: ResponseStream, data: bytes, read_size: int) -> None:
    """Hand ``data`` to the stream ``read_size`` bytes (at most) per read."""
    view = memoryview(data)
    while view:
        buffer = stream.get_buffer(-1)
        n = min(len(buffer), read_size, len(view))
        buffer[:n] = view[:n]
        stream.buffer_updated(n)
        view = view[n:]


def _frames(stream: ResponseStream) -> list[bytes]:
    async def drain() -> list[bytes]:
        got = []
        while stream._frames:  # what has arrived; next_frame would wait for more
            frame = await stream.next_frame()
            got.append(bytes(frame))
            stream.release(frame)
        return got
    return asyncio.run(drain())


@pytest.mark.parametrize("read_size", [1, 3, 4, 5, 4096, 1 << 20])
def test_frames_come_out_whole_and_in_order_whatever_the_reads(read_size: int) -> None:
    payloads = [b"", b"a", b"small" * 10, bytes(range(256)) * 1000,  # 256,000 B: own buffer
                b"after", bytes(SCRATCH_BYTES - 4), bytes(SCRATCH_BYTES * 3)]
    stream = ResponseStream()
    _feed(stream, b"".join(_frame(p) for p in payloads), read_size)
    assert _frames(stream) == payloads


def test_a_released_large_buffer_takes_the_next_large_frame() -> None:
    stream = ResponseStream()
    first, second = b"x" * 300_000, b"y" * 200_000
    _feed(stream, _frame(first), 1 << 20)
    frame = asyncio.run(stream.next_frame())
    buffer = frame.obj  # type: ignore[union-attr]
    assert bytes(frame) == first
    stream.release(frame)
    _feed(stream, _frame(second), 65536)
    again = asyncio.run(stream.next_frame())
    assert again.obj is buffer and bytes(again) == second  # type: ignore[union-attr]
    # Not released: the next large frame gets a buffer of its own.
    _feed(stream, _frame(first), 65536)
    third = asyncio.run(stream.next_frame())
    assert third.obj is not buffer and bytes(third) == first  # type: ignore[union-attr]
    assert bytes(again) == second  # the frame still in use was not written over


def test_a_buffer_larger_than_a_connection_keeps_is_not_kept() -> None:
    stream = ResponseStream()
    _feed(stream, _frame(b"a" * (POOLED_BYTES + 1)), 1 << 20)
    frame = asyncio.run(stream.next_frame())
    big = frame.obj  # type: ignore[union-attr]
    stream.release(frame)
    _feed(stream, _frame(b"b" * (POOLED_BYTES + 1)), 1 << 20)
    frame = asyncio.run(stream.next_frame())
    assert frame.obj is not big  # type: ignore[union-attr]


def test_a_negative_or_absurd_size_ends_the_connection() -> None:
    for size in (-1, 1 << 30):
        stream = ResponseStream()
        _feed(stream, struct.pack(">i", size) + b"rest", 100)
        with pytest.raises(ConnectionError, match="impossible response: frame of"):
            asyncio.run(stream.next_frame())


def test_frames_before_a_hang_up_are_still_read_then_the_loss_is_raised() -> None:
    stream = ResponseStream()
    _feed(stream, _frame(b"one") + _frame(b"two")[:5], 100)
    stream.connection_lost(None)

    async def read() -> None:
        assert bytes(await stream.next_frame()) == b"one"
        with pytest.raises(ConnectionError):
            await stream.next_frame()
    asyncio.run(read())


async def _serve(answer: bytes, chunk: int) -> tuple[asyncio.Server, int]:
    """A server that reads one request and writes ``answer`` in ``chunk``-byte pieces, then
    closes the connection."""
    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        (size,) = struct.unpack(">i", await reader.readexactly(4))
        await reader.readexactly(size)
        for i in range(0, len(answer), chunk):
            writer.write(answer[i:i + chunk])
            await writer.drain()
            await asyncio.sleep(0)
        writer.close()
    server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


def test_a_response_sent_in_pieces_is_decoded_and_a_hang_up_is_a_connection_error() -> None:
    # FindCoordinator v4 response: correlation id 1 and no header tags; throttle 0, no
    # coordinators, no tags.
    body = struct.pack(">i", 1) + b"\x00" + struct.pack(">i", 0) + b"\x01\x00"

    async def run() -> None:
        server, port = await _serve(_frame(body), 3)
        async with server:
            conn = await BrokerConnection.open("127.0.0.1", port)
            response = await conn.request(REQUEST)
            assert response.coordinators == ()
            with pytest.raises(ConnectionError):
                await conn.request(REQUEST)  # the server hung up after the first answer
            conn.close()
    asyncio.run(run())


@pytest.mark.parametrize("loop_factory", [asyncio.new_event_loop, uvloop.new_event_loop],
                         ids=["asyncio", "uvloop"])
def test_a_request_once_the_peer_hung_up_is_a_connection_error(
        loop_factory: Callable[[], asyncio.AbstractEventLoop]) -> None:
    # The broker runs on uvloop, whose transport raises RuntimeError for a write once closed:
    # a pooled connection to a peer that was killed must still fail as a lost connection
    # (a RuntimeError once ended the task writing a transaction's markers).
    body = struct.pack(">i", 1) + b"\x00" + struct.pack(">i", 0) + b"\x01\x00"

    async def run() -> None:
        server, port = await _serve(_frame(body), 1 << 16)
        async with server:
            conn = await BrokerConnection.open("127.0.0.1", port)
            await conn.request(REQUEST)
            for _ in range(200):  # until the hang-up has reached the connection
                if conn.closed:
                    break
                await asyncio.sleep(0.01)
            assert conn.closed
            with pytest.raises(ConnectionError):
                await conn.request(REQUEST)
            conn.close()
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        runner.run(run())


@pytest.mark.parametrize(("answer", "error"), [
    (b"\x00\x01", "no correlation id"),  # too short to name its request
    (struct.pack(">i", 7) + b"\x00" + struct.pack(">i", 0) + b"\x01\x00",
     "response 7 to request 1"),  # a well-formed answer to another request
    (struct.pack(">i", 1) + b"\x00\xff", "malformed"),  # the body kio cannot read
])
def test_an_answer_that_is_not_the_requests_is_a_connection_error(answer: bytes,
                                                                   error: str) -> None:
    async def run() -> None:
        server, port = await _serve(_frame(answer), 1 << 16)
        async with server:
            conn = await BrokerConnection.open("127.0.0.1", port)
            with pytest.raises(ConnectionError, match=error):
                await conn.request(REQUEST)
            conn.close()
    asyncio.run(run())
