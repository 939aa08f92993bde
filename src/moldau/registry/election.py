"""Which registry process is the primary (the one that writes ``_schemas``).

Election goes through the broker's consumer groups: every registry process joins the
group ``--group-id`` (default ``schema-registry``) subscribed to the one-partition topic
``_schemas_election``; the member assigned partition 0 is the primary. A new primary
announces its URL by writing ``{"url": ...}`` to that topic, and every process reads the
topic (without joining anything) to learn where to forward writes. When the primary dies
or leaves, the group rebalances (after ``session.timeout.ms`` for a crash) and another
member gets partition 0 and announces itself.
"""

from __future__ import annotations

import json
import logging
import threading
import uuid
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from .store import ensure_topic

log = logging.getLogger(__name__)


class PrimaryElection:
    def __init__(self, client_config: dict[str, Any], group_id: str, my_url: str,
                 topic: str = "_schemas_election") -> None:
        self.topic = topic
        self.my_url = my_url
        self._client_config = client_config
        self._member_id = str(uuid.uuid4())
        self._is_primary = False
        self._primary_url: str | None = None
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._stop = threading.Event()
        self._member = Consumer({
            **client_config,
            "group.id": group_id,
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 1000,
            "partition.assignment.strategy": "range",
        })
        self._watcher = Consumer({
            **client_config,
            "group.id": f"moldau-registry-watch-{self._member_id}",
            "enable.auto.commit": False,
        })
        self._producer = Producer({**client_config, "acks": "all"})
        self._threads: list[threading.Thread] = []

    @property
    def is_primary(self) -> bool:
        with self._lock:
            return self._is_primary

    @property
    def primary_url(self) -> str | None:
        with self._lock:
            return self.my_url if self._is_primary else self._primary_url

    def start(self, timeout: float = 30.0) -> None:
        ensure_topic(AdminClient(self._client_config), self.topic, timeout)
        self._watcher.assign([TopicPartition(self.topic, 0, 0)])
        self._member.subscribe([self.topic], on_assign=self._assigned, on_revoke=self._revoked,
                               on_lost=self._revoked)
        for target, name in ((self._membership_loop, "registry-election"),
                             (self._watch_loop, "registry-primary-watch")):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def wait_for_primary(self, timeout: float) -> str | None:
        with self._changed:
            self._changed.wait_for(lambda: self._is_primary or self._primary_url is not None,
                                   timeout)
        return self.primary_url

    def close(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=5)
        # Leaving the group hands partition 0 to another member at once.
        self._member.close()
        self._watcher.close()

    def _assigned(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        primary = any(p.topic == self.topic and p.partition == 0 for p in partitions)
        with self._changed:
            self._is_primary = primary
            self._changed.notify_all()
        if primary:
            log.info("this registry (%s) is the primary", self.my_url)
            announcement = json.dumps({"url": self.my_url, "member": self._member_id})
            self._producer.produce(self.topic, key=b"primary", value=announcement.encode(),
                                   partition=0)
            self._producer.flush(10)

    def _revoked(self, _consumer: Consumer, _partitions: list[TopicPartition]) -> None:
        with self._changed:
            if self._is_primary:
                log.info("this registry (%s) is no longer the primary", self.my_url)
            self._is_primary = False
            self._changed.notify_all()

    def _membership_loop(self) -> None:
        while not self._stop.is_set():
            try:
                self._member.poll(0.2)  # drives heartbeats and rebalance callbacks
            except KafkaException as exc:  # pragma: no cover - broker trouble, retried
                log.warning("registry election: %s", exc)

    def _watch_loop(self) -> None:
        while not self._stop.is_set():
            try:
                message = self._watcher.poll(0.2)
            except KafkaException as exc:  # pragma: no cover
                log.warning("reading %s: %s", self.topic, exc)
                continue
            value = None if message is None or message.error() else message.value()
            if value is None:
                continue
            try:
                url = json.loads(value)["url"]
            except (ValueError, KeyError, TypeError):
                continue
            with self._changed:
                self._primary_url = str(url)
                self._changed.notify_all()
