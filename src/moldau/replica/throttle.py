"""Replication throttles (KIP-73): a bytes/s budget for replicas that are catching up.

Kafka limits the traffic of *throttled* replicas so that a reassignment does not swamp the
network and disks. Two sides, each a broker-wide rate and a per-topic list:

- leader side: ``leader.replication.throttled.rate`` (dynamic broker config) caps what this
  broker, as leader, sends to followers outside the ISR of the partitions named in the topic's
  ``leader.replication.throttled.replicas`` (``*`` or ``partition:broker`` pairs naming this
  broker). Over budget, those partitions get no data in the fetch response (the follower asks
  again; the fetch waits its max wait first);
- follower side: ``follower.replication.throttled.rate`` caps what this broker fetches for
  the partitions named (with its id) in ``follower.replication.throttled.replicas`` while it
  is not in sync; over budget, they are left out of its fetch requests.

The budget is a token bucket of one second's worth of bytes: a throttled read asks for at most
what is left (at least one batch), and what it got is spent after the fact (a batch may
overshoot; the next reads wait), like Kafka's quota which compares a measured rate with the
limit. Nothing is checked per record or when nothing is throttled: ``active`` is one attribute
test on the fetch paths.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

from ..config.definitions import LONG_MAX

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]

#: Every partition of a topic (the ``*`` value).
ALL = frozenset({-1})


def throttled_partitions(value: Iterable[str], broker_id: int) -> frozenset[int]:
    """The partitions a throttled-replicas list names for ``broker_id`` (``ALL`` for ``*``),
    as Kafka's TopicConfigHandler.parseThrottledPartitions reads it."""
    items = [v.strip() for v in value if v.strip()]
    if items == ["*"]:
        return ALL
    found = set()
    for item in items:
        partition, _, broker = item.partition(":")
        if broker.strip() == str(broker_id):
            found.add(int(partition))
    return frozenset(found)


class ReplicationQuota:
    """One side's rate (bytes/s) and the partitions it applies to on this broker."""

    def __init__(self) -> None:
        self._monotonic = time.monotonic
        self.rate = LONG_MAX
        self._topics: dict[str, frozenset[int]] = {}
        self._tokens = 0.0
        self._updated = self._monotonic()
        #: True when a rate is set and some partition is throttled: the only test made on the
        #: fetch paths when nothing is throttled.
        self.active = False

    def set_rate(self, rate: int) -> None:
        if rate != self.rate:
            self.rate = rate
            self._tokens = float(min(rate, LONG_MAX))
            self._updated = self._monotonic()
            self._refresh()

    def set_topic(self, topic: str, partitions: frozenset[int]) -> None:
        """The partitions of ``topic`` throttled on this broker (empty: none)."""
        if partitions:
            self._topics[topic] = partitions
        else:
            self._topics.pop(topic, None)
        self._refresh()

    def _refresh(self) -> None:
        self.active = self.rate < LONG_MAX and bool(self._topics)

    def throttled(self, topic: str) -> frozenset[int]:
        return self._topics.get(topic, frozenset())

    def is_throttled(self, key: TopicPartition) -> bool:
        partitions = self._topics.get(key[0])
        return partitions is not None and (partitions is ALL or key[1] in partitions)

    def _refill(self) -> None:
        now = self._monotonic()
        self._tokens = min(float(self.rate), self._tokens + (now - self._updated) * self.rate)
        self._updated = now

    def exceeded(self) -> bool:
        """Whether the budget is spent (throttled replicas must wait)."""
        self._refill()
        return self._tokens <= 0

    def available(self) -> int:
        """Bytes the budget allows now: a throttled read asks for no more (whole batches
        may still overshoot it by one batch)."""
        self._refill()
        return max(int(self._tokens), 0)

    def record(self, size: int) -> None:
        """``size`` bytes of throttled replication were sent or received."""
        self._refill()
        self._tokens -= size

    def delay_s(self) -> float:
        """How long until the budget allows more (0 when it does now)."""
        self._refill()
        if self._tokens > 0:
            return 0.0
        return 1.0 if self.rate <= 0 else -self._tokens / self.rate + 0.001


class ReplicationThrottles:
    """This broker's two quotas, kept current from its config and the topics' configs."""

    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        self.leader = ReplicationQuota()
        self.follower = ReplicationQuota()

    def set_rates(self, leader_rate: int, follower_rate: int) -> None:
        if (leader_rate, follower_rate) != (self.leader.rate, self.follower.rate):
            log.info("replication throttle rates: leader %s, follower %s bytes/s",
                     _rate(leader_rate), _rate(follower_rate))
        self.leader.set_rate(leader_rate)
        self.follower.set_rate(follower_rate)

    def set_topic(self, topic: str, leader_replicas: Iterable[str],
                  follower_replicas: Iterable[str]) -> None:
        leader = throttled_partitions(leader_replicas, self.broker_id)
        follower = throttled_partitions(follower_replicas, self.broker_id)
        if (leader, follower) != (self.leader.throttled(topic), self.follower.throttled(topic)):
            log.info("replication throttle of %s: leader side %s, follower side %s", topic,
                     _partitions(leader), _partitions(follower))
        self.leader.set_topic(topic, leader)
        self.follower.set_topic(topic, follower)

    def drop_topic(self, topic: str) -> None:
        self.leader.set_topic(topic, frozenset())
        self.follower.set_topic(topic, frozenset())


def _rate(rate: int) -> str:
    return "unlimited" if rate >= LONG_MAX else str(rate)


def _partitions(partitions: frozenset[int]) -> str:
    if partitions is ALL:
        return "all partitions"
    return "partitions " + ",".join(map(str, sorted(partitions))) if partitions else "none"
