"""Requests from this broker to other brokers of the cluster (WriteTxnMarkers,
AddPartitionsToTxn for KIP-890 verification).

One connection per peer (through the cluster's inter-broker connector: TLS and SASL as the
inter-broker listener asks), opened on first use and reopened after any failure. A connection
answers in order, so requests to one peer take turns (a lock); different peers run in
parallel. A failed or timed-out request closes the connection (a late answer would otherwise
be read as the answer to the next request) and raises to the caller, which decides whether to
retry: callers here always retry with a backoff, so no request is lost to a reconnect.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..replica.broker_connection import BrokerConnection

if TYPE_CHECKING:
    from .broker import Broker

log = logging.getLogger(__name__)

#: How long one request may take (Kafka's request.timeout.ms for inter-broker requests).
REQUEST_TIMEOUT_S = 30.0
CONNECT_TIMEOUT_S = 10.0


@dataclass(slots=True)
class _Peer:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    conn: BrokerConnection | None = None


class PeerClients:
    """Pooled connections to the other brokers (see the module docstring)."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self._peers: dict[int, _Peer] = {}

    def _address(self, broker_id: int) -> tuple[str, int]:
        cluster = self.broker.cluster
        address = None if cluster is None else cluster.endpoint_of(broker_id)
        if address is None:
            raise ConnectionError(f"broker {broker_id} is not registered")
        return address

    async def request(self, broker_id: int, request_obj: Any,
                      timeout_s: float = REQUEST_TIMEOUT_S) -> Any:
        """Send one request (a flexible-version kio request object) to ``broker_id`` and
        return its response. Raises ConnectionError, OSError or TimeoutError."""
        peer = self._peers.setdefault(broker_id, _Peer())
        async with peer.lock:
            if peer.conn is not None and peer.conn.closed:
                peer.conn = None  # the peer hung up since (restarted, say): connect again
            if peer.conn is None:
                cluster = self.broker.cluster
                assert cluster is not None  # _address raised otherwise
                peer.conn = await cluster.connector.connect(self._address(broker_id),
                                                            CONNECT_TIMEOUT_S)
            try:
                return await asyncio.wait_for(peer.conn.request(request_obj), timeout_s)
            except BaseException as exc:  # cancelled too: the stream is out of step now
                peer.conn.close()
                peer.conn = None
                if isinstance(exc, asyncio.IncompleteReadError | ValueError):
                    raise ConnectionError(f"broker {broker_id}: {exc}") from exc
                raise

    def close(self) -> None:
        for peer in self._peers.values():
            if peer.conn is not None:
                peer.conn.close()
                peer.conn = None
        self._peers.clear()
