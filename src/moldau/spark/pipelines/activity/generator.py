"""Produce page views to Kafka at a steady rate until told to stop.

Events are paced against a clock (not by sleeping a fixed time per event), so the rate
holds whatever producing costs; a ``threading.Event`` stops the loop within one tick,
which is what lets Ctrl-C end the pipeline cleanly. Records are keyed by user, so one
user's views stay in order in one partition.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from confluent_kafka import KafkaError, Producer

from .events import EventFactory

_TICK_S = 0.05


@dataclass
class GeneratorStats:
    produced: int = 0
    malformed: int = 0
    failed: int = 0


class PageViewGenerator:
    """Sends ``rate`` events per second to ``topic``; a fraction of them malformed."""

    def __init__(self, client_config: dict[str, Any], topic: str, rate: float,
                 malformed_fraction: float = 0.0, seed: int | None = None) -> None:
        self.topic = topic
        self.rate = rate
        self.malformed_fraction = malformed_fraction
        self.factory = EventFactory(seed if seed is not None else time.time_ns())
        self.stats = GeneratorStats()
        self.producer = Producer({"linger.ms": 20, **client_config,
                                  "enable.idempotence": True, "on_delivery": self._delivered})

    def _delivered(self, error: KafkaError | None, _message: Any) -> None:
        if error is not None:
            self.stats.failed += 1

    def _send_one(self) -> None:
        if self.factory.random.random() < self.malformed_fraction:
            key, value = None, self.factory.malformed()
            self.stats.malformed += 1
        else:
            event = self.factory.next(datetime.now(UTC))
            key, value = event.user_id.encode(), event.to_json()
        while True:
            try:
                self.producer.produce(self.topic, value=value, key=key)
                break
            except BufferError:
                self.producer.poll(0.05)
        self.stats.produced += 1

    def run(self, stop: threading.Event, limit: int | None = None) -> GeneratorStats:
        """Produce until ``stop`` is set (or ``limit`` events are out); then flush."""
        started = time.monotonic()
        while not stop.is_set() and (limit is None or self.stats.produced < limit):
            due = int((time.monotonic() - started) * self.rate)
            while self.stats.produced < due and (limit is None or self.stats.produced < limit):
                self._send_one()
            self.producer.poll(0)
            stop.wait(_TICK_S)
        self.producer.flush(30)
        return self.stats
