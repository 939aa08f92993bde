"""Schema lookups per second from ``moldau registry``, as JSON lines.

    python -m bench.registry [--requests 5000] [--schemas 50] [--clients 1]

Starts a broker and one registry process on free loopback ports, registers ``--schemas``
Avro schemas (one subject each), then times ``--requests`` requests of each kind with
httpx over keep-alive connections, ``--clients`` threads sharing the count:

- ``get_by_id``: ``GET /schemas/ids/{id}`` (what a deserializer asks, once per id);
- ``lookup``: ``POST /subjects/{s}`` with the schema (what a serializer with
  ``auto.register.schemas=false`` asks, once per schema);
- ``register_existing``: ``POST /subjects/{s}/versions`` of an already registered schema.

Each kind is bounded by the request count and by ``--max-seconds``. Prints one JSON line
per kind (requests, seconds, requests/s, p50/p99 latency in ms) and a ``meta`` line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from . import procs
from .broker_proc import BenchBroker, free_port


def _schema(index: int) -> str:
    return json.dumps({"type": "record", "name": f"Bench{index}", "namespace": "bench",
                       "fields": [{"name": "id", "type": "long"},
                                  {"name": "payload", "type": "string"},
                                  {"name": "score", "type": ["null", "double"],
                                   "default": None}]})


def _start_registry(bootstrap: str, log_dir: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with (log_dir / "registry.log").open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "moldau", "registry", "-b", bootstrap,
             "--listen", f"127.0.0.1:{port}"], stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.1)
    procs.stop(proc, 10)
    raise RuntimeError("registry did not start within 60 s")


def _timed(kind: str, requests: int, clients: int, max_seconds: float,
           make_call: Callable[[httpx.Client, int], httpx.Response]) -> dict[str, object]:
    latencies: list[float] = []
    lock = threading.Lock()
    counter = iter(range(requests))
    deadline = time.monotonic() + max_seconds
    failures = [0]

    def worker(url: str) -> None:
        with httpx.Client(base_url=url, timeout=30) as client:
            while time.monotonic() < deadline:
                with lock:
                    index = next(counter, None)
                if index is None:
                    return
                started = time.perf_counter()
                response = make_call(client, index)
                elapsed = time.perf_counter() - started
                with lock:
                    latencies.append(elapsed)
                    if response.status_code != 200:
                        failures[0] += 1

    threads = [threading.Thread(target=worker, args=(_URL[0],)) for _ in range(clients)]
    began = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - began
    latencies.sort()
    return {
        "kind": kind, "requests": len(latencies), "failures": failures[0], "clients": clients,
        "seconds": round(seconds, 3), "per_second": round(len(latencies) / seconds, 1),
        "p50_ms": round(statistics.median(latencies) * 1000, 3),
        "p99_ms": round(latencies[int(len(latencies) * 0.99) - 1] * 1000, 3),
    }


_URL: list[str] = []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--schemas", type=int, default=50)
    parser.add_argument("--clients", type=int, default=1)
    parser.add_argument("--max-seconds", type=float, default=60.0)
    args = parser.parse_args()

    broker = BenchBroker("group.initial.rebalance.delay.ms=0")
    registry = None
    try:
        with tempfile.TemporaryDirectory(prefix="moldau-bench-registry-") as tmp:
            registry, url = _start_registry(broker.bootstrap, Path(tmp))
            _URL.append(url)
            ids = []
            with httpx.Client(base_url=url, timeout=30) as client:
                for index in range(args.schemas):
                    answer = client.post(f"/subjects/bench-{index}/versions",
                                         json={"schema": _schema(index)})
                    answer.raise_for_status()
                    ids.append(answer.json()["id"])
            print(json.dumps({"meta": "registry", "schemas": args.schemas,
                              "load_avg": os.getloadavg()[0]}), flush=True)
            n = args.schemas
            calls: dict[str, Callable[[httpx.Client, int], httpx.Response]] = {
                "get_by_id": lambda c, i: c.get(f"/schemas/ids/{ids[i % n]}"),
                "lookup": lambda c, i: c.post(f"/subjects/bench-{i % n}",
                                              json={"schema": _schema(i % n)}),
                "register_existing": lambda c, i: c.post(f"/subjects/bench-{i % n}/versions",
                                                         json={"schema": _schema(i % n)}),
            }
            for kind, call in calls.items():
                result = _timed(kind, args.requests, args.clients, args.max_seconds, call)
                print(json.dumps(result), flush=True)
            procs.stop(registry, 20)
            registry = None
    finally:
        if registry is not None:
            procs.stop(registry, 20)
        broker.close()


if __name__ == "__main__":
    main()
