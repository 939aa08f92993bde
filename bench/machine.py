"""The machine's own limits, measured in the same run as the brokers.

A broker figure means little alone on a shared 2-core VM: "300 MB/s" is good or bad only next
to what loopback TCP and the disk can do at that moment. iperf3 gives one loopback TCP stream;
dd of 1 GiB with ``conv=fdatasync`` gives sequential disk write including the flush.

``python -m bench.machine`` prints the cost of writing into the page cache, first into memory
the machine has not touched lately and then into memory just freed (see
:func:`page_cache_write_cost`): on this VM the first costs about ten times the second, which is
why benchmark samples slow down while earlier samples' topics stay on the brokers.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

from . import procs


def loopback_mb_per_s(seconds: float) -> float:
    """One iperf3 TCP stream over 127.0.0.1, in MB/s; raises if iperf3 is missing or fails."""
    if shutil.which("iperf3") is None:
        raise FileNotFoundError("iperf3 not installed (make bench installs it as root)")
    port = procs.free_port()
    # No --one-off: the connection that checks the server is up would be its one client.
    server = procs.popen(["iperf3", "-s", "-B", "127.0.0.1", "-p", str(port)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        procs.wait_listening(port, server, 10)
        out = subprocess.run(
            ["iperf3", "-c", "127.0.0.1", "-p", str(port), "-t", str(seconds), "-J"],
            capture_output=True, text=True, timeout=seconds + 30, check=True,
        )
    finally:
        procs.stop(server, timeout=5)
    result = json.loads(out.stdout)
    if "error" in result:
        raise RuntimeError(f"iperf3: {result['error']}")
    return float(result["end"]["sum_received"]["bits_per_second"]) / 8 / 1e6


def disk_write_mb_per_s(directory: Path, mib: int = 1024) -> float:
    """``dd`` of ``mib`` MiB of zeros with fdatasync into ``directory``, in MB/s."""
    target = directory / "dd-write-test.bin"
    try:
        start = time.perf_counter()
        subprocess.run(
            ["dd", "if=/dev/zero", f"of={target}", "bs=1M", f"count={mib}", "conv=fdatasync",
             "status=none"],
            check=True, timeout=600,
        )
        elapsed = time.perf_counter() - start
    finally:
        target.unlink(missing_ok=True)
    return mib * 1024 * 1024 / elapsed / 1e6


def load_average() -> list[float]:
    """1/5/15-minute load: tells the reader how busy the machine was around the run."""
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


def page_cache_write_cost(directory: Path, mib: int = 1024) -> dict[str, float]:
    """CPU milliseconds per MiB to write ``mib`` MiB into a new file in ``directory`` (no sync:
    page cache only), then again into another new file right after deleting the first.

    The first pass takes pages the machine has not used lately; on a VM whose host reclaims
    free guest memory (virtio balloon free page reporting) each such page is faulted in by the
    host on first touch, which shows as a slow ``copy`` in the guest's kernel. The second pass
    reuses the pages the delete just freed. A broker's segment writes pay the same.
    """
    chunk = os.urandom(1 << 20)
    result: dict[str, float] = {"mib": mib}
    for name in ("first_pass", "rewrite"):
        target = directory / f"page-cache-test-{name}.bin"
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            cpu = time.process_time()
            for _ in range(mib):
                os.write(fd, chunk)
            result[f"{name}_cpu_ms_per_mib"] = round(
                (time.process_time() - cpu) * 1000 / mib, 3)
        finally:
            os.close(fd)
            target.unlink()
    return result


def main() -> None:
    import argparse
    import tempfile

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mib", type=int, default=1024, help="MiB per pass (default 1024)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cost = page_cache_write_cost(Path(tmp), args.mib)
    print(json.dumps({"workload": "page_cache_write", **cost, "load_average": load_average()}))


if __name__ == "__main__":
    main()
