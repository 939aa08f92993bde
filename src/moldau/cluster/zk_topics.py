"""The topics of /brokers/topics and /config/topics, cached and kept current by watches.

Brokers look topics up on every request, so lookups must not wait for ZooKeeper. The cache
holds a ``TopicMetadata`` and the replica assignment per topic; a children watch on
/brokers/topics adds and removes topics, a data watch per topic follows its assignment
(CreatePartitions) and one per topic config follows its overrides (any broker may change
them). Lookups read dicts that are replaced, never changed in place, so a reader on another
thread iterates a consistent snapshot; the ``TopicMetadata`` objects themselves are updated in
place, as the local store does, because the broker keeps references to them.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from . import znodes
from .metadata import TopicMetadata
from .zk_session import on_reconnect, watch_callback

log = logging.getLogger(__name__)


class TopicCache:
    """Topics as ZooKeeper has them, read without a round trip."""

    def __init__(self, client: KazooClient,
                 on_change: Callable[[str], None] | None = None) -> None:
        self._client = client
        self._on_change = on_change
        self._lock = threading.RLock()
        self._watched: set[str] = set()
        self._stopped = False
        self.topics: dict[str, TopicMetadata] = {}
        self.by_id: dict[uuid.UUID, TopicMetadata] = {}
        self.assignments: dict[str, dict[int, list[int]]] = {}
        #: Partitions being reassigned: topic -> partition -> (adding, removing) replicas.
        self.reassigning: dict[str, dict[int, tuple[tuple[int, ...], tuple[int, ...]]]] = {}

    def start(self) -> None:
        self._client.ChildrenWatch(znodes.TOPICS, self._on_children)
        self._listener = on_reconnect(self._client, self._resync)

    def stop(self) -> None:
        self._stopped = True
        self._client.remove_listener(self._listener)

    @watch_callback("reading the topics again after reconnecting")
    def _resync(self) -> bool:
        """Read every topic and config again: changes made while disconnected may be missed."""
        if self._stopped:
            return False
        children = self._client.get_children(znodes.TOPICS)
        for name in set(self.topics) - set(children):
            self.drop(name)
        for name in sorted(children):
            self._load(name)
        return True

    # --- changes we made ourselves (read-your-writes) ---------------------------------------

    def put(self, topic: TopicMetadata, replicas: Mapping[int, Sequence[int]]) -> None:
        with self._lock:
            existing = self.topics.get(topic.name)
            if existing is not None and existing.topic_id == topic.topic_id:
                existing.partitions, existing.configs = topic.partitions, topic.configs
                topic = existing
            self.topics = {**self.topics, topic.name: topic}
            self.by_id = {**self.by_id, topic.topic_id: topic}
            self.assignments = {**self.assignments,
                                topic.name: {p: list(r) for p, r in replicas.items()}}
        self._watch(topic.name)
        self._changed(topic.name)

    def update_partitions(self, name: str, replicas: Mapping[int, Sequence[int]]) -> None:
        with self._lock:
            topic = self.topics.get(name)
            if topic is None:
                return
            topic.partitions = len(replicas)
            self.assignments = {**self.assignments,
                                name: {p: list(r) for p, r in replicas.items()}}
        self._changed(name)

    def update_reassignments(self, name: str, adding: Mapping[int, Sequence[int]],
                             removing: Mapping[int, Sequence[int]]) -> None:
        """The topic znode's ``adding_replicas`` / ``removing_replicas`` (reassignments)."""
        moving = {p: (tuple(adding.get(p, ())), tuple(removing.get(p, ())))
                  for p in sorted(set(adding) | set(removing)) if adding.get(p) or removing.get(p)}
        with self._lock:
            if self.reassigning.get(name, {}) == moving:
                return
            rest = {k: v for k, v in self.reassigning.items() if k != name}
            self.reassigning = {**rest, name: moving} if moving else rest

    def update_configs(self, name: str, configs: Mapping[str, str]) -> None:
        with self._lock:
            topic = self.topics.get(name)
            if topic is None or topic.configs == dict(configs):
                return
            topic.configs = dict(configs)
        self._changed(name)

    def drop(self, name: str) -> None:
        with self._lock:
            topic = self.topics.get(name)
            if topic is None:
                return
            self.topics = {k: v for k, v in self.topics.items() if k != name}
            self.by_id = {k: v for k, v in self.by_id.items() if k != topic.topic_id}
            self.assignments = {k: v for k, v in self.assignments.items() if k != name}
            self.reassigning = {k: v for k, v in self.reassigning.items() if k != name}
        self._changed(name)

    # --- changes seen through watches ------------------------------------------------------

    @watch_callback("reading the topics")
    def _on_children(self, children: list[str]) -> bool:
        if self._stopped:
            return False
        present = set(children)
        for name in sorted(present - set(self.topics)):
            self._load(name)
        for name in set(self.topics) - present:
            self.drop(name)
        return True

    def _load(self, name: str) -> None:
        try:
            data, _ = self._client.get(znodes.topic_path(name))
        except NoNodeError:
            return
        assignment = znodes.decode_topic(data)
        if assignment.topic_id is None:
            log.warning("topic %s has no topic id in ZooKeeper (written by an old Kafka); "
                        "ignored", name)
            return
        try:
            configs = znodes.decode_config(self._client.get(
                znodes.config_path("topics", name))[0])
        except NoNodeError:
            configs = {}
        existing = self.topics.get(name)
        if existing is not None and existing.topic_id != assignment.topic_id:
            self.drop(name)  # deleted and created again
        self.update_reassignments(name, assignment.adding, assignment.removing)
        self.put(TopicMetadata(name, assignment.topic_id, len(assignment.partitions), configs),
                 assignment.partitions)

    def _watch(self, name: str) -> None:
        with self._lock:
            if name in self._watched:
                return
            self._watched.add(name)

        @watch_callback(f"reading topic {name}")
        def on_topic(data: bytes | None, _stat: object) -> bool:
            if self._stopped:
                return False
            if data is None:
                with self._lock:
                    self._watched.discard(name)
                self.drop(name)
                return False
            assignment = znodes.decode_topic(data)
            topic = self.topics.get(name)
            if topic is not None and assignment.topic_id == topic.topic_id:
                self.update_reassignments(name, assignment.adding, assignment.removing)
                if self.assignments.get(name) != assignment.partitions:
                    self.update_partitions(name, assignment.partitions)
            elif topic is not None:  # deleted and created again between two watch events
                self._load(name)
            return True

        @watch_callback(f"reading the configs of topic {name}")
        def on_config(data: bytes | None, _stat: object) -> bool:
            if self._stopped or name not in self._watched:
                return False
            if data is not None:
                self.update_configs(name, znodes.decode_config(data))
            return True

        self._client.DataWatch(znodes.topic_path(name), on_topic)
        self._client.DataWatch(znodes.config_path("topics", name), on_config)

    def _changed(self, name: str) -> None:
        if self._on_change is not None:
            try:
                self._on_change(name)
            except Exception:
                log.exception("topic change callback failed for %s", name)
