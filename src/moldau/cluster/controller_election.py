"""Controller election as Kafka does it in ZooKeeper: the first to create /controller wins.

Every broker watches the ephemeral /controller znode. When it is absent, each tries one
ZooKeeper transaction: create /controller (ephemeral, its broker id) and write
/controller_epoch + 1 conditionally on the epoch znode's version. Exactly one transaction
succeeds; the winner's epoch is higher than any before it, and the version of
/controller_epoch it wrote (``epoch_zk_version``) fences all its later writes: once another
broker is elected, the version has moved and the old controller's writes fail
(``ZkMetadataStore``'s ``controller_epoch_zk_version`` arguments). The controller znode
vanishes with its session (close, crash, expiry); the others see it through the watch and
elect again. A broker whose session was lost steps down at once and runs for election
again in its new session.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from . import znodes
from .zk_session import on_reconnect, watch_callback
from .zookeeper import ZkMetadataStore

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ControllerLease:
    """What the elected controller needs to fence its writes."""

    broker_id: int
    epoch: int
    epoch_zk_version: int


class ControllerElection:
    """Runs for controller for ``store``'s broker and follows who the controller is."""

    def __init__(self, store: ZkMetadataStore, *,
                 on_elected: Callable[[ControllerLease], None] | None = None,
                 on_resigned: Callable[[], None] | None = None) -> None:
        self._store = store
        self._client = store.client
        self._on_elected = on_elected
        self._on_resigned = on_resigned
        self._lock = threading.RLock()
        self._elect_lock = threading.Lock()  # the watch and a reconnection may both try
        self._stopped = False
        self.lease: ControllerLease | None = None
        #: The controller's broker id as last seen in /controller (-1: none).
        self.controller_id = -1
        self.changed = threading.Condition(self._lock)

    @property
    def is_controller(self) -> bool:
        return self.lease is not None

    def start(self) -> None:
        self._store.session.on_lost(self._resign)
        self._client.DataWatch(znodes.CONTROLLER, self._on_controller)
        self._listener = on_reconnect(self._client, self._check)

    def stop(self) -> None:
        """Stop following elections (closing the store's session resigns for real)."""
        with self._lock:
            self._stopped = True
        self._client.remove_listener(self._listener)

    @watch_callback("checking the controller after reconnecting")
    def _check(self) -> bool:
        """After a reconnection: an election attempt cut short by the connection loss is
        not retried by the watch (it fires only on changes), so look again."""
        if self._stopped:
            return False
        try:
            data, _ = self._client.get(znodes.CONTROLLER)
        except NoNodeError:
            data = None
        return self._on_controller(data, None)

    @watch_callback("following the controller")
    def _on_controller(self, data: bytes | None, _stat: object) -> bool:
        if self._stopped:
            return False
        if data is None:
            with self._lock:
                self.controller_id = -1
            self._resign()
            self._elect()
        else:
            controller = znodes.decode_controller(data)
            with self._lock:
                self.controller_id = controller
                if controller != self._store.broker_id and self.lease is not None:
                    self._resign()
                self.changed.notify_all()
        return True

    def _elect(self) -> None:
        """One attempt (Kafka's registerControllerAndIncrementControllerEpoch)."""
        with self._elect_lock:
            if self.lease is None:
                self._try_elect()

    def _try_elect(self) -> None:
        me = self._store.broker_id
        epoch, version = self._read_or_create_epoch()
        txn = self._client.transaction()
        txn.create(znodes.CONTROLLER, znodes.encode_controller(me), ephemeral=True)
        txn.set_data(znodes.CONTROLLER_EPOCH, znodes.encode_controller_epoch(epoch + 1), version)
        results = txn.commit()
        if isinstance(results[0], NodeExistsError) or isinstance(results[1], BadVersionError):
            log.info("Broker %d lost the controller election", me)
            return
        if any(isinstance(r, Exception) for r in results):
            log.warning("Controller election by broker %d failed: %r", me, results)
            return
        lease = ControllerLease(me, epoch + 1, int(results[1].version))
        with self._lock:
            self.lease = lease
            self.controller_id = me
            self.changed.notify_all()
        log.info("Broker %d is the controller, epoch %d", me, lease.epoch)
        if self._on_elected is not None:
            self._on_elected(lease)

    def _read_or_create_epoch(self) -> tuple[int, int]:
        try:
            data, stat = self._client.get(znodes.CONTROLLER_EPOCH)
            return znodes.decode_controller_epoch(data), int(stat.version)
        except NoNodeError:
            pass
        try:
            self._client.create(znodes.CONTROLLER_EPOCH, znodes.encode_controller_epoch(
                znodes.INITIAL_CONTROLLER_EPOCH))
            return znodes.INITIAL_CONTROLLER_EPOCH, 0
        except NodeExistsError:
            data, stat = self._client.get(znodes.CONTROLLER_EPOCH)
            return znodes.decode_controller_epoch(data), int(stat.version)

    def resign(self) -> None:
        """Stop following elections and delete /controller if it is this broker's (a
        controlled shutdown): the others elect a new controller at once instead of when
        this broker's session ends."""
        self.stop()
        self._resign()
        try:
            data, stat = self._client.get(znodes.CONTROLLER)
            if znodes.decode_controller(data) == self._store.broker_id:
                self._client.delete(znodes.CONTROLLER, version=stat.version)
                log.info("Broker %d resigned as controller", self._store.broker_id)
        except (NoNodeError, BadVersionError):
            pass  # gone already, or someone else's now

    def _resign(self) -> None:
        with self._lock:
            if self.lease is None:
                return
            log.info("Broker %d is no longer the controller (epoch %d)", self.lease.broker_id,
                     self.lease.epoch)
            self.lease = None
            self.changed.notify_all()
        if self._on_resigned is not None:
            self._on_resigned()

    def wait(self, predicate: Callable[[ControllerElection], bool], timeout: float) -> bool:
        """Block until ``predicate(self)`` holds (tests and shutdown), at most ``timeout`` s."""
        with self._lock:
            return self.changed.wait_for(lambda: predicate(self), timeout)
