"""The HTTP endpoint of ``metrics.listener``: ``/metrics``, ``/health/live``, ``/health/ready``.

It runs on the broker's own event loop (``asyncio.start_server``): the collection reads the
broker's state where that state lives, with no lock, in one pass over partitions and groups
(see :mod:`.collector`; the partition logs a slice at a time), into objects of its own.
Building the per-partition families and rendering the text, most of a scrape's time
(``generate_latest`` formats each sample in Python, ~3-10 µs a line), run on a worker
thread: they touch none of the broker's state, and the interpreter hands the loop back every
switch interval (5 ms), so a large scrape does not stall the clients.

With ``console.enable``, requests under ``/console/`` are relayed to the web console's child
process (:mod:`.proxy`, :mod:`moldau.broker.console_child`).

The HTTP it speaks is the least a scraper, a load balancer's health check or curl needs: one
``GET`` (or ``HEAD``) per connection, answered with ``Connection: close``. A request line or
headers that do not come within :data:`READ_TIMEOUT_S`, or exceed :data:`MAX_HEADER_LINES`,
close that connection only.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import CollectorRegistry

from .collector import BrokerCollector, LogRows, snapshot_logs
from .counters import BrokerCounters
from .health import readiness, starting_checks
from .loop_lag import LoopLag
from .proxy import relay

if TYPE_CHECKING:
    from ..broker.broker import Broker
    from ..config import BrokerConfig

log = logging.getLogger(__name__)

#: A client gets this long to send its request line and headers.
READ_TIMEOUT_S = 10.0
#: Longest request line or header line (asyncio's StreamReader limit).
MAX_LINE_BYTES = 8192
MAX_HEADER_LINES = 100
#: Where the web console is served when ``console.enable`` is set, and how long one of its
#: answers may take (its pages query the cluster).
CONSOLE_PREFIX = "/console"
CONSOLE_TIMEOUT_S = 60.0

_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
            503: "Service Unavailable"}


class _Collected:
    """Metric families already collected, in the shape ``generate_latest`` reads."""

    def __init__(self, families: Iterable[Metric]) -> None:
        self._families = list(families)

    def collect(self) -> list[Metric]:
        return self._families


class MetricsEndpoint:
    """The broker's counters, their collector and the HTTP server that exposes them.

    It listens before the broker exists (``serve`` opens it, then loads the logs): while the
    logs load, ``/health/live`` answers 200, ``/health/ready`` 503 with every check failing
    and ``/metrics`` 503. :meth:`attach` hands it the loaded broker, which turns metrics on
    (the broker's hot paths start counting, ``broker.metrics``); it must happen before the
    first client connects.
    """

    def __init__(self, config: BrokerConfig, host: str, port: int) -> None:
        self.config = config
        self.host = host
        self.port = port
        self.broker: Broker | None = None
        self.counters = BrokerCounters([listener.name for listener in config.listeners])
        self.loop_lag = LoopLag()
        self.registry = CollectorRegistry(auto_describe=False)
        ProcessCollector(namespace="moldau", registry=self.registry)
        self._server: asyncio.Server | None = None
        #: Loopback port of the web console relayed under ``/console/`` (``console.enable``).
        self.console_port: int | None = None

    def attach(self, broker: Broker) -> None:
        """The broker finished loading: count its work and serve its metrics from now on."""
        broker.metrics = self.counters
        self.registry.register(BrokerCollector(broker, self.counters, self.loop_lag))
        self.broker = broker

    async def start(self) -> None:
        """Listen (raises OSError when the address cannot be bound) and start measuring."""
        self._server = await asyncio.start_server(
            self._serve, self.host or None, self.port, limit=MAX_LINE_BYTES,
            reuse_address=True)
        sockets = self._server.sockets
        if sockets and self.port == 0:
            self.port = int(sockets[0].getsockname()[1])
        self.loop_lag.start()

    async def stop(self) -> None:
        await self.loop_lag.stop()
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 5)
            self._server = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    # -- HTTP ----------------------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await asyncio.wait_for(_read_request(reader), READ_TIMEOUT_S)
            if request is None:
                status, content_type, body = 400, "text/plain", b"bad request\n"
                method = "GET"
            else:
                method, target, headers = request
                path = target.split("?", 1)[0]
                if self.console_port is not None and (
                        path == CONSOLE_PREFIX or path.startswith(CONSOLE_PREFIX + "/")):
                    forwarded = f"{method} {target[len(CONSOLE_PREFIX):] or '/'} HTTP/1.1"
                    if await relay(reader, writer, forwarded, headers, self.console_port,
                                   CONSOLE_TIMEOUT_S):
                        return
                    status, content_type, body = (503, "text/plain",
                                                  b"the web console is not running (yet)\n")
                else:
                    status, content_type, body = self._route(method, path)
                if path == "/metrics" and status == 200:
                    assert self.broker is not None
                    body = await self._scrape(self.broker)
            head = (f"HTTP/1.1 {status} {_REASONS[status]}\r\n"
                    f"Content-Type: {content_type}\r\n"
                    f"Content-Length: {len(body)}\r\n"
                    "Connection: close\r\n\r\n").encode()
            writer.write(head if method == "HEAD" else head + body)
            await asyncio.wait_for(writer.drain(), READ_TIMEOUT_S)
        except (TimeoutError, ConnectionError, asyncio.IncompleteReadError):
            pass
        except Exception:
            log.exception("metrics endpoint: request failed")
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _scrape(self, broker: Broker) -> bytes:
        """Read the broker's state on the loop (the logs a slice at a time), then build the
        per-partition families and render the text on a worker thread."""
        rows = await snapshot_logs(broker)
        families = list(self.registry.collect())

        def render() -> bytes:
            return generate_latest(_Collected([*families, *LogRows(rows).collect()]))

        return await asyncio.to_thread(render)

    def _route(self, method: str, path: str) -> tuple[int, str, bytes]:
        if path not in ("/metrics", "/health/live", "/health/ready"):
            return 404, "text/plain", b"not found: try /metrics, /health/live, /health/ready\n"
        if method not in ("GET", "HEAD"):
            return 405, "text/plain", b"method not allowed\n"
        if path == "/metrics":
            if self.broker is None:
                return 503, "text/plain", b"the broker is starting: its logs are loading\n"
            return 200, CONTENT_TYPE_LATEST, b""  # the body is rendered by the caller
        if path == "/health/live":
            return 200, "application/json", b'{"status": "live"}\n'
        checks = readiness(self.broker) if self.broker is not None \
            else starting_checks(self.config)
        ready = all(checks.values())
        body = {"status": "ready" if ready else "not ready", "checks": checks,
                "failing": [name for name, ok in checks.items() if not ok]}
        return (200 if ready else 503), "application/json", json.dumps(body).encode() + b"\n"


async def _read_request(reader: asyncio.StreamReader
                        ) -> tuple[str, str, list[bytes]] | None:
    """(method, target, header lines) of an HTTP request; None if malformed."""
    headers: list[bytes] = []
    try:
        line = await reader.readuntil(b"\n")
        for _ in range(MAX_HEADER_LINES):
            header = await reader.readuntil(b"\n")
            if header in (b"\r\n", b"\n"):
                break
            headers.append(header)
        else:
            return None
    except asyncio.LimitOverrunError:
        return None
    parts = line.decode("latin-1").split()
    if len(parts) != 3 or not parts[2].startswith("HTTP/"):
        return None
    return parts[0], parts[1], headers
