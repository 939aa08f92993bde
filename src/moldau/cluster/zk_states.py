"""Every partition's state znode (leader, leader epoch, ISR), cached through data watches.

This is how leadership reaches the brokers: instead of the controller sending
LeaderAndIsr/UpdateMetadata requests, every broker watches the state znode of every
partition (``/brokers/topics/<t>/partitions/<p>/state``) and applies what it reads. The
znodes are written only by the controller (fenced by /controller_epoch, see
``ZkMetadataStore.update_partition_state``) and by a leader changing its ISR (fenced by the
znode version), so what a broker reads is always a state some legitimate writer committed;
a broker applies a state only if its leader epoch is not older than the one it holds
(``Partition.make_leader``/``make_follower`` ignore older epochs), so a late watch event
cannot roll leadership back.

Metadata requests are answered from the same cache on every broker: no round trip.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable

from kazoo.client import KazooClient

from . import znodes
from .zk_session import on_reconnect, watch_callback

log = logging.getLogger(__name__)

StateCallback = Callable[[str, int, "znodes.PartitionState | None"], None]


class PartitionStateCache:
    """``(topic, partition) -> PartitionState`` kept current by one data watch per partition."""

    def __init__(self, client: KazooClient, on_change: StateCallback | None = None) -> None:
        self._client = client
        self._on_change = on_change
        self._lock = threading.Lock()
        self._watched: set[tuple[str, int]] = set()
        self._stopped = False
        #: Replaced on every change, never changed in place (readers on other threads).
        self.states: dict[tuple[str, int], znodes.PartitionState] = {}

    def start(self) -> None:
        self._listener = on_reconnect(self._client, self._resync)

    def stop(self) -> None:
        self._stopped = True
        self._client.remove_listener(self._listener)

    def get(self, topic: str, partition: int) -> znodes.PartitionState | None:
        return self.states.get((topic, partition))

    def watch_topic(self, topic: str, partitions: Iterable[int]) -> None:
        """Watch these partitions' states (idempotent; blocks on ZooKeeper: not on the loop)."""
        for p in partitions:
            key = (topic, p)
            with self._lock:
                if key in self._watched:
                    continue
                self._watched.add(key)
            self._client.DataWatch(znodes.partition_state_path(topic, p),
                                   self._watcher(topic, p))

    def unwatch_topic(self, topic: str) -> None:
        """Stop following a deleted topic (its watches end at their next event)."""
        with self._lock:
            self._watched = {k for k in self._watched if k[0] != topic}
            self.states = {k: v for k, v in self.states.items() if k[0] != topic}

    def _watcher(self, topic: str, partition: int) -> Callable[..., bool]:
        @watch_callback(f"reading the state of {topic}-{partition}")
        def on_state(data: bytes | None, stat: object) -> bool:
            if self._stopped:
                return False
            with self._lock:
                if (topic, partition) not in self._watched:
                    return False
            version = getattr(stat, "version", -1)
            self._store(topic, partition,
                        None if data is None else znodes.decode_partition_state(data, version))
            return True
        return on_state

    def _store(self, topic: str, partition: int, state: znodes.PartitionState | None) -> None:
        key = (topic, partition)
        with self._lock:
            if key not in self._watched:
                return
            if state is None:
                if key not in self.states:
                    return
                self.states = {k: v for k, v in self.states.items() if k != key}
            else:
                old = self.states.get(key)
                if old is not None and old.zk_version >= state.zk_version:
                    return  # a resync read what a watch already delivered
                self.states = {**self.states, key: state}
        if self._on_change is not None:
            try:
                self._on_change(topic, partition, state)
            except Exception:
                log.exception("partition state callback failed for %s-%d", topic, partition)

    @watch_callback("reading the partition states again after reconnecting")
    def _resync(self) -> bool:
        """A change made while disconnected reaches the watch only if the znode changed again."""
        if self._stopped:
            return False
        for topic, partition in sorted(self._watched):
            stat = self._client.exists(znodes.partition_state_path(topic, partition))
            if stat is None:
                continue
            data, stat = self._client.get(znodes.partition_state_path(topic, partition))
            self._store(topic, partition, znodes.decode_partition_state(data, stat.version))
        return True
