"""Real storage faults for tests: a small tmpfs that fills up, is remounted read-only, or goes.

Mounting needs root (CI containers run as root); without it the tests that need a real full
or failing disk skip, since a fake one (an LD_PRELOAD shim, a mocked ``os.write``) would test
the fake. Every mount is lazily unmounted at the end, even while a broker still holds files.
"""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=30, check=False)


@contextmanager
def tmpfs(path: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` (mount's syntax: 16m) at ``path``; skips the test without root."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    path.mkdir(parents=True, exist_ok=True)
    mounted = _run("mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path))
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        _run("umount", "-l", str(path))


def fill(directory: Path, name: str = "filler") -> Path:
    """Write a file in ``directory`` until the file system has no space left; return it."""
    path = directory / name
    chunk = b"\0" * (1 << 20)
    with open(path, "wb", buffering=0) as fh:
        while True:
            try:
                fh.write(chunk)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                chunk = chunk[: len(chunk) // 2]
                if len(chunk) < 512:
                    return path


def remount_read_only(path: Path) -> None:
    result = _run("mount", "-o", "remount,ro", str(path))
    assert result.returncode == 0, result.stderr
