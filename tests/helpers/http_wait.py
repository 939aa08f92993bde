"""Waiting for an HTTP service started as a subprocess (the registry, the REST Proxy)."""

from __future__ import annotations

import subprocess
import time

import httpx


def wait_until_serving(proc: subprocess.Popen[bytes], url: str, timeout: float,
                       request_timeout: float = 1.0) -> int | None:
    """Poll ``url`` until it answers 200 (None), the process exits (its exit code) or
    ``timeout`` passes (raises TimeoutError)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        code = proc.poll()
        if code is not None:
            return code
        try:
            if httpx.get(url, timeout=request_timeout).status_code == 200:
                return None
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise TimeoutError(url)
