"""One ZooKeeper session per broker (kazoo), with what must happen again after it expires.

A ZooKeeper session carries the broker's ephemeral znodes (its registration, the controller
znode when it is the controller). When the session expires (the broker was paused or cut off
for longer than the session timeout) the server deletes them; kazoo then reports LOST and
opens a new session. ``ZkSession`` runs the callbacks registered with ``on_lost`` at once (the
controller steps down) and those registered with ``on_new_session`` once the new session is
connected (the broker registers again, the election runs again), in that order on one
thread of their own: kazoo's state listeners must not block.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import ConnectionLoss, SessionExpiredError, ZookeeperStoppedError

log = logging.getLogger(__name__)
F = TypeVar("F", bound=Callable[..., bool])

# Reconnect forever, at most a second apart (kazoo's default backs off to a minute, which
# would keep a broker away from ZooKeeper long after the network healed).
_RECONNECT = {"max_tries": -1, "delay": 0.1, "backoff": 2, "max_jitter": 0.2, "max_delay": 1.0}


def split_connect(connect: str) -> tuple[str, str]:
    """``host:port,host:port/chroot`` -> (hosts, chroot or '')."""
    hosts, slash, chroot = connect.partition("/")
    return hosts, (slash + chroot).rstrip("/") if slash else ""


class ZkSession:
    """A started kazoo client on ``zookeeper.connect`` (chroot created first, as Kafka does)."""

    def __init__(self, connect: str, *, session_timeout_ms: int = 18_000,
                 connection_timeout_ms: int = 18_000) -> None:
        self.connect = connect
        self.session_timeout_ms = session_timeout_ms
        self.connection_timeout_ms = connection_timeout_ms
        self._lost_callbacks: list[Callable[[], None]] = []
        self._new_session_callbacks: list[Callable[[], None]] = []
        self._lost = False
        self._lock = threading.Lock()
        self._work: queue.Queue[list[Callable[[], None]] | None] = queue.Queue()
        self._worker = threading.Thread(target=self._run_callbacks, name="zk-session-events",
                                        daemon=True)
        self.client = KazooClient(hosts=connect, timeout=session_timeout_ms / 1000,
                                  connection_retry=_RECONNECT)

    def start(self) -> None:
        hosts, chroot = split_connect(self.connect)
        if chroot:
            self._ensure_chroot(hosts, chroot)
        self._worker.start()
        self.client.add_listener(self._on_state)
        self.client.start(timeout=self.connection_timeout_ms / 1000)

    def _ensure_chroot(self, hosts: str, chroot: str) -> None:
        root = KazooClient(hosts=hosts, timeout=self.session_timeout_ms / 1000)
        root.start(timeout=self.connection_timeout_ms / 1000)
        try:
            root.ensure_path(chroot)
        finally:
            root.stop()
            root.close()

    def close(self) -> None:
        """End the session: the server deletes its ephemeral znodes at once."""
        self.client.remove_listener(self._on_state)
        self.client.stop()
        self.client.close()
        self._work.put(None)

    def on_lost(self, callback: Callable[[], None]) -> None:
        self._lost_callbacks.append(callback)

    def on_new_session(self, callback: Callable[[], None]) -> None:
        self._new_session_callbacks.append(callback)

    @property
    def session_id(self) -> int | None:
        session = self.client.client_id
        return int(session[0]) if session else None

    def _on_state(self, state: str) -> None:
        # Runs on kazoo's connection thread: only hand work to other threads here.
        if state == KazooState.LOST:
            with self._lock:
                self._lost = True
            log.warning("ZooKeeper session lost (expired or closed); ephemeral znodes are gone")
            self._work.put(self._lost_callbacks)
        elif state == KazooState.SUSPENDED:
            log.warning("ZooKeeper connection suspended; the session may still be alive")
        elif state == KazooState.CONNECTED:
            with self._lock:
                was_lost, self._lost = self._lost, False
            if was_lost:
                log.info("ZooKeeper: new session established after expiry")
                self._work.put(self._new_session_callbacks)

    def _run_callbacks(self) -> None:
        while (callbacks := self._work.get()) is not None:
            for callback in list(callbacks):
                try:
                    callback()
                except Exception:
                    log.exception("ZooKeeper session callback %s failed", callback)


def watch_callback(what: str) -> Callable[[F], F]:
    """Make a kazoo watch callback survive a lost connection with one log line.

    A watch callback that reads ZooKeeper fails while the connection is down; kazoo's
    watchers call it again once connected (they re-read on every CONNECTED), so the event
    is only logged (the traceback at DEBUG) and the watch kept. A stopped client ends it.
    """
    def decorate(func: F) -> F:
        @wraps(func)
        def guarded(*args: Any) -> bool:
            try:
                return func(*args)
            except ZookeeperStoppedError:
                return False
            except (ConnectionLoss, SessionExpiredError) as exc:
                log.warning("%s: ZooKeeper unreachable (%s); retried on reconnection", what,
                            type(exc).__name__)
                log.debug("%s failed", what, exc_info=True)
                return True
        return guarded  # type: ignore[return-value]
    return decorate


def on_reconnect(client: KazooClient, resync: Callable[[], object]) -> Callable[[str], None]:
    """Run ``resync`` on a thread of its own each time ``client`` is connected again.

    kazoo's watchers call back after a reconnection only when the watched znode changed, so
    a callback that failed while the connection was down is not retried by them: a cache
    reads its whole part of the tree again instead. Returns the listener (to remove it).
    """
    def listener(state: str) -> None:
        if state == KazooState.CONNECTED:
            client.handler.spawn(resync)

    client.add_listener(listener)
    return listener
