"""The live brokers of /brokers/ids, cached and kept current by a children watch.

Every Metadata response lists the live brokers, so the list must be in memory: a children
watch on /brokers/ids adds a broker when its ephemeral registration appears and removes it
when the znode goes (its session ended). A registration is written once per session, so its
data needs no watch of its own; a broker that registers again after an expiry changes the
children (removed, then added back), so the same watch sees it, with a new broker epoch.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from . import znodes
from .zk_session import on_reconnect, watch_callback

log = logging.getLogger(__name__)


class BrokerCache:
    """Live brokers by id, read without a round trip."""

    def __init__(self, client: KazooClient,
                 on_change: Callable[[dict[int, znodes.BrokerRegistration]], None] | None = None
                 ) -> None:
        self._client = client
        self._on_change = on_change
        self._lock = threading.Lock()
        self._stopped = False
        #: Replaced, never changed in place: readers on other threads see a consistent dict.
        self.brokers: dict[int, znodes.BrokerRegistration] = {}
        #: Each live broker's epoch: the czxid of its registration, new in every session.
        self.epochs: dict[int, int] = {}
        self.loaded = threading.Event()

    def start(self) -> None:
        self._client.ChildrenWatch(znodes.BROKER_IDS, self._on_children)
        self._listener = on_reconnect(self._client, self._resync)

    def stop(self) -> None:
        self._stopped = True
        self._client.remove_listener(self._listener)

    @watch_callback("reading the live brokers again after reconnecting")
    def _resync(self) -> bool:
        """kazoo's watch calls back after a reconnection only if the children changed."""
        if self._stopped:
            return False
        return self._on_children(self._client.get_children(znodes.BROKER_IDS))

    @watch_callback("reading the live brokers")
    def _on_children(self, children: list[str]) -> bool:
        if self._stopped:
            return False
        # Every registration is read again (brokers are few): one that expired and came
        # back between two watch events has a new broker epoch (czxid) and maybe new data.
        current: dict[int, znodes.BrokerRegistration] = {}
        epochs: dict[int, int] = {}
        for child in sorted(children):
            if not child.isdigit():
                continue
            try:
                data, stat = self._client.get(znodes.broker_path(int(child)))
            except NoNodeError:
                continue  # gone between the listing and the read
            current[int(child)] = znodes.decode_broker(int(child), data)
            epochs[int(child)] = int(stat.czxid)
        with self._lock:
            changed = epochs != self.epochs
            self.brokers = dict(sorted(current.items()))
            self.epochs = epochs
        self.loaded.set()
        if changed and self._on_change is not None:
            try:
                self._on_change(self.brokers)
            except Exception:
                log.exception("broker change callback failed")
        return True
