"""Blocking socket reads shared by raw-protocol tests, the fuzzer and the benchmarks."""

from __future__ import annotations

import socket


def read_exact(sock: socket.socket, size: int) -> bytes:
    """Exactly ``size`` bytes from ``sock``; ConnectionError if the peer closes first."""
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(min(size - len(data), 1 << 20))
        if not chunk:
            raise ConnectionError(f"closed after {len(data)} of {size} bytes")
        data += chunk
    return bytes(data)
