"""The console's one AdminClient, made when first needed.

The console may start before the cluster does (or while it is away): making the client on
first use lets it start anyway and answer each page with "cannot reach a broker" until the
cluster is there. Pages and the throughput sampler share it; librdkafka's clients are
thread-safe.
"""

from __future__ import annotations

import threading

from confluent_kafka.admin import AdminClient

from ..cli.connection import Connection


class LazyAdmin:
    """Call it for the AdminClient; the first call checks the broker is reachable."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self._admin: AdminClient | None = None
        self._lock = threading.Lock()

    def __call__(self) -> AdminClient:
        with self._lock:
            if self._admin is None:
                self._conn.check_reachable()
                self._admin = AdminClient(self._conn.client_config(**{
                    "client.id": "moldau-console"}))
            return self._admin
