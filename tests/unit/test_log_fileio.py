"""write_all: every byte of many buffers, in order, through writev."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from moldau.log.fileio import IOV_MAX, write_all


def test_writes_more_buffers_than_one_writev_takes(tmp_path: Path) -> None:
    chunks = [bytes([i % 251]) * (i % 7) for i in range(IOV_MAX * 2 + 5)]
    path = tmp_path / "f"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        assert write_all(fd, [b"head", *chunks, memoryview(b"tail")]) == (
            8 + sum(len(c) for c in chunks))
    finally:
        os.close(fd)
    assert path.read_bytes() == b"head" + b"".join(chunks) + b"tail"


def test_short_writes_resume_where_they_stopped(tmp_path: Path, monkeypatch: Any) -> None:
    """The kernel may take fewer bytes than offered; make every writev do so (at most 7)."""
    real_writev = os.writev

    def short_writev(fd: int, buffers: Sequence[memoryview]) -> int:
        return real_writev(fd, [memoryview(buffers[0])[:7]])

    monkeypatch.setattr(os, "writev", short_writev)
    payload = [os.urandom(1000), bytearray(os.urandom(30)), b"x", memoryview(os.urandom(99))]
    path = tmp_path / "f"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        assert write_all(fd, payload) == 1130
    finally:
        os.close(fd)
    assert path.read_bytes() == b"".join(bytes(p) for p in payload)
