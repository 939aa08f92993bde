"""``max.connections``, ``max.connections.per.ip`` and its overrides, as Kafka applies them.

Kafka's ``ConnectionQuotas``: a connection from an address that already holds its limit is
closed as soon as it is accepted (with one log line); at ``max.connections`` the broker stops
accepting, so new clients wait in the listen backlog until a connection closes. The limits are
read from the broker's current config on every check, so dynamic changes apply to new
connections (existing ones are never closed for it, as in Kafka). Override hosts may be names;
they are resolved when the overrides change.
"""

from __future__ import annotations

import collections
import ipaddress
import logging
import socket
from collections.abc import Callable

from ..config import BrokerConfig

log = logging.getLogger(__name__)


def _resolve(host: str) -> list[str]:
    """The addresses of an override host (itself when it is an address already)."""
    try:
        return [str(ipaddress.ip_address(host))]
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError as exc:
        log.warning("max.connections.per.ip.overrides: cannot resolve %s (%s); entry ignored",
                    host, exc)
        return []
    return sorted({str(info[4][0]) for info in infos})


class ConnectionQuotas:
    def __init__(self, config: Callable[[], BrokerConfig]) -> None:
        self._config = config
        self._per_ip: collections.Counter[str] = collections.Counter()
        self.total = 0
        self._overrides_raw: dict[str, int] | None = None
        self._overrides: dict[str, int] = {}

    def count(self, ip: str) -> int:
        return self._per_ip[ip]

    @property
    def max_connections(self) -> int:
        return self._config().max_connections

    def at_max(self) -> bool:
        """True when the broker holds ``max.connections``: accept nothing until one closes."""
        return self.total >= self.max_connections

    def limit_for(self, ip: str) -> int:
        cfg = self._config()
        raw = cfg.max_connections_per_ip_overrides
        if raw != self._overrides_raw:
            self._overrides_raw = raw
            self._overrides = {addr: count for host, count in raw.items()
                               for addr in _resolve(host)}
        return self._overrides.get(ip, cfg.max_connections_per_ip)

    def admit(self, ip: str) -> bool:
        """Count a new connection from ``ip``, or log and refuse it (the caller closes it)."""
        limit = self.limit_for(ip)
        if self._per_ip[ip] >= limit:
            log.info("Rejected connection from %s, address already has the configured maximum "
                     "of %d connections.", ip, limit)
            return False
        self._per_ip[ip] += 1
        self.total += 1
        return True

    def release(self, ip: str) -> None:
        self.total -= 1
        left = self._per_ip[ip] - 1
        if left > 0:
            self._per_ip[ip] = left
        else:
            del self._per_ip[ip]
