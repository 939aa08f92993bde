"""Relaying one HTTP request from the metrics endpoint to a local HTTP server (the console).

The endpoint has read the request line and headers; this forwards them with the path
rewritten and ``Connection: close`` (one request per connection, as the endpoint answers
everything), then copies bytes both ways: the rest of the client's request (a form's body)
to the server, the server's whole answer back, until the server closes. Nothing is parsed
or buffered beyond a read's worth, so it costs the broker's loop a few callbacks per request.
"""

from __future__ import annotations

import asyncio
import contextlib

#: Chunk size of the copies.
CHUNK = 65536


async def _copy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while chunk := await reader.read(CHUNK):
        writer.write(chunk)
        await writer.drain()


async def relay(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter,
                request_line: str, headers: list[bytes], port: int, timeout_s: float) -> bool:
    """Forward the request to 127.0.0.1:``port``; False if nothing listens there."""
    try:
        server_reader, server_writer = await asyncio.wait_for(
            asyncio.open_connection("127.0.0.1", port), timeout_s)
    except (OSError, TimeoutError):
        return False
    try:
        kept = [h for h in headers if not h.lower().startswith((b"connection:", b"keep-alive:"))]
        server_writer.write(request_line.encode("latin-1") + b"\r\n" + b"".join(kept)
                            + b"Connection: close\r\n\r\n")
        upload = asyncio.ensure_future(_copy(client_reader, server_writer))
        try:
            await asyncio.wait_for(_copy(server_reader, client_writer), timeout_s)
        finally:
            upload.cancel()
            with contextlib.suppress(asyncio.CancelledError, OSError):
                await upload
    finally:
        server_writer.close()
        with contextlib.suppress(Exception):
            await server_writer.wait_closed()
    return True
