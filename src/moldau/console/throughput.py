"""Records per second per topic, measured by sampling end and committed offsets.

The console needs no metrics endpoint on the broker: every few seconds it asks for the end
offset of every partition (ListOffsets, one request) and, when asked, for every group's
committed offsets (OffsetFetch). The difference between two samples divided by the time
between them is the rate in (records produced) and out (records the groups committed).
History is a bounded ring buffer, so a console left open for days holds the same memory
as one opened a minute ago; sampling runs only while the console (or ``moldau top``) runs.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, OffsetSpec

from ..cli.connection import Connection
from ..cli.errors import CliError, as_cli_error
from ..cli.group import committed_offsets, list_offsets

#: Samples kept per console: two minutes at the default interval of one second.
HISTORY = 120


@dataclass(frozen=True)
class Sample:
    """Offsets summed per topic at one moment (``at`` is time.monotonic())."""

    at: float
    ends: dict[str, int]
    committed: dict[tuple[str, str], int] = field(default_factory=dict)  # (group, topic)
    lags: dict[tuple[str, str], int] = field(default_factory=dict)  # (group, topic)


def take_sample(conn: Connection, admin: AdminClient, *, groups: bool) -> Sample:
    """One sample of every topic's end offsets and, with ``groups``, every group's commits."""
    try:
        metadata = admin.list_topics(timeout=conn.timeout)
    except KafkaException as exc:
        raise as_cli_error(exc, "cannot list topics") from exc
    keys = [(name, p) for name, topic in metadata.topics.items() for p in topic.partitions]
    partition_ends = list_offsets(conn, admin, {k: OffsetSpec.latest() for k in keys},
                                  strict=False)
    ends: dict[str, int] = {}
    for (topic, _), end in partition_ends.items():
        ends[topic] = ends.get(topic, 0) + max(end, 0)
    committed: dict[tuple[str, str], int] = {}
    lags: dict[tuple[str, str], int] = {}
    if groups:
        listing = conn.result(admin.list_consumer_groups(request_timeout=conn.timeout),
                              "cannot list consumer groups")
        for group in sorted(g.group_id for g in listing.valid or []):
            for (topic, p), offset in committed_offsets(conn, admin, group).items():
                key = (group, topic)
                committed[key] = committed.get(key, 0) + offset
                partition_end = partition_ends.get((topic, p))
                if partition_end is not None:
                    lags[key] = lags.get(key, 0) + max(0, partition_end - offset)
    return Sample(time.monotonic(), ends, committed, lags)


def rate(before: int | None, after: int | None, seconds: float) -> float | None:
    """Records per second between two counts; None when either is unknown.

    A count that went down (a topic deleted and created again) is no negative rate.
    """
    if before is None or after is None or seconds <= 0:
        return None
    return max(0, after - before) / seconds


class History:
    """The last :data:`HISTORY` samples, shared between the sampler and page handlers."""

    def __init__(self, size: int = HISTORY) -> None:
        self._samples: deque[Sample] = deque(maxlen=size)
        self._lock = threading.Lock()
        self.last_error: str | None = None

    def add(self, sample: Sample) -> None:
        with self._lock:
            self._samples.append(sample)
        self.last_error = None

    def samples(self) -> list[Sample]:
        with self._lock:
            return list(self._samples)

    def in_rates(self, topic: str) -> list[float]:
        """Records/s into ``topic`` between each pair of samples, oldest first."""
        samples = self.samples()
        series = []
        for before, after in itertools.pairwise(samples):
            value = rate(before.ends.get(topic), after.ends.get(topic), after.at - before.at)
            series.append(value or 0.0)
        return series

    def total_in_rates(self) -> list[float]:
        """Records/s into all topics together, oldest first."""
        samples = self.samples()
        return [
            (max(0, sum(after.ends.values()) - sum(before.ends.values()))
             / (after.at - before.at)) if after.at > before.at else 0.0
            for before, after in itertools.pairwise(samples)
        ]

    def topics(self) -> list[str]:
        samples = self.samples()
        return sorted(samples[-1].ends) if samples else []


class Sampler:
    """Samples into a :class:`History` on its own daemon thread until :meth:`stop`.

    A failed sample (broker away) is recorded as ``history.last_error`` and retried at the
    next tick; the thread never dies of it.
    """

    def __init__(self, conn: Connection, admin: Callable[[], AdminClient], history: History,
                 interval: float = 1.0, *, groups: bool = False) -> None:
        self._conn = conn
        self._admin = admin
        self.history = history
        self._interval = interval
        self._groups = groups
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="moldau-sampler", daemon=True)

    def start(self) -> Sampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=self._conn.timeout + 5)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.history.add(take_sample(self._conn, self._admin(), groups=self._groups))
            except (CliError, KafkaException) as exc:
                self.history.last_error = str(exc)
            self._stop.wait(self._interval)
