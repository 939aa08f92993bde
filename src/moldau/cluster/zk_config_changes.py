"""Kafka's config change notifications: /config/changes/config_change_<seq>, watched.

Whoever changes an entity's config under /config (``users/alice``, ``clients/app``,
``users/alice/clients/app``, ``topics/t``) also creates a sequential znode naming it
(``{"version":2,"entity_path":"users/alice"}``), as Kafka 3.9's AdminZkClient does. Every
broker keeps a children watch on /config/changes and, for each notification newer than the
last one it handled, tells its callback which entity changed: so a quota set through one
broker applies on all of them as fast as ZooKeeper delivers the watch (milliseconds).

Like Kafka's ZkNodeChangeNotificationListener, notifications older than 15 minutes are
deleted by whichever broker sees them, so the directory does not grow forever; the
notifications present at start-up are skipped (the broker loads every config at start).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from . import znodes
from .zk_session import on_reconnect, watch_callback

log = logging.getLogger(__name__)

#: Kafka's changeExpirationMs.
EXPIRATION_MS = 15 * 60 * 1000
_PREFIX = znodes.CONFIG_CHANGE_PREFIX.rsplit("/", 1)[1]


def _sequence(child: str) -> int:
    try:
        return int(child[len(_PREFIX):]) if child.startswith(_PREFIX) else -1
    except ValueError:
        return -1


class ConfigChangeListener:
    """Calls ``on_change(entity_path)`` (on a kazoo thread) for each new notification."""

    def __init__(self, client: KazooClient, on_change: Callable[[str], None]) -> None:
        self._client = client
        self._on_change = on_change
        self._stopped = False
        self._last = -1
        self._listener: Callable[[str], None] | None = None

    def start(self) -> None:
        """Skip what exists now, then watch (blocking: one round trip)."""
        self._client.ensure_path(znodes.CONFIG_CHANGES)
        children = self._client.get_children(znodes.CONFIG_CHANGES)
        self._last = max((_sequence(c) for c in children), default=-1)
        self._client.ChildrenWatch(znodes.CONFIG_CHANGES, self._on_children)
        self._listener = on_reconnect(self._client, self._resync)

    def stop(self) -> None:
        self._stopped = True
        if self._listener is not None:
            self._client.remove_listener(self._listener)

    @watch_callback("reading config changes again after reconnecting")
    def _resync(self) -> bool:
        if self._stopped:
            return False
        return self._on_children(self._client.get_children(znodes.CONFIG_CHANGES))

    @watch_callback("reading config change notifications")
    def _on_children(self, children: list[str]) -> bool:
        if self._stopped:
            return False
        now_ms = time.time() * 1000
        for child in sorted(children, key=_sequence):
            seq = _sequence(child)
            if seq < 0:
                continue
            path = f"{znodes.CONFIG_CHANGES}/{child}"
            if seq > self._last:
                try:
                    data, stat = self._client.get(path)
                except NoNodeError:
                    continue
                self._last = seq
                try:
                    entity_path = znodes.decode_config_change(data)
                except (ValueError, KeyError, TypeError):
                    log.warning("ignoring config change notification %s: not Kafka's format",
                                child)
                    continue
                try:
                    self._on_change(entity_path)
                except Exception:
                    log.exception("applying config change of %s failed", entity_path)
                if now_ms - stat.ctime < EXPIRATION_MS:
                    continue
            else:
                stat = self._client.exists(path)
                if stat is None or now_ms - stat.ctime < EXPIRATION_MS:
                    continue
            with contextlib.suppress(NoNodeError):
                self._client.delete(path)
        return True
