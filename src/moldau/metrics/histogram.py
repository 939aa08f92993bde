"""A latency histogram of plain ints, cheap enough to fill on the broker's hot paths.

``prometheus_client.Histogram.observe`` takes a lock and walks its buckets in Python on every
call; the broker is one event-loop thread, so it needs neither. :meth:`DurationHistogram.observe`
is one ``bisect`` (in C) and three integer additions. The buckets are exported as a Prometheus
histogram at scrape time (see :mod:`moldau.metrics.collector`). This module imports nothing of
moldau, so any layer (the log's flush timing included) may use it.
"""

from __future__ import annotations

from bisect import bisect_left

#: Upper bounds in seconds: 100 µs to 30 s (request times span sub-millisecond local handling
#: to fetch.max.wait.ms-long purgatory waits). Every bound is a line per series in each scrape
#: (an API has six stages), so there are only 13.
DEFAULT_BOUNDS_S: tuple[float, ...] = (
    0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0,
)


class DurationHistogram:
    """Counts of durations (given in nanoseconds) per bucket, their sum and their count."""

    __slots__ = ("bounds_ns", "bounds_s", "counts", "sum_ns")

    def __init__(self, bounds_s: tuple[float, ...] = DEFAULT_BOUNDS_S) -> None:
        self.bounds_s = bounds_s
        #: The bounds in nanoseconds, for ``bisect_left`` (hot callers may inline observe).
        self.bounds_ns = [int(b * 1e9) for b in bounds_s]
        #: counts[i]: durations <= bounds_s[i] and above the bound before; the last: above all.
        self.counts = [0] * (len(bounds_s) + 1)
        self.sum_ns = 0

    def observe(self, duration_ns: int) -> None:
        self.counts[bisect_left(self.bounds_ns, duration_ns)] += 1
        self.sum_ns += duration_ns

    @property
    def count(self) -> int:
        return sum(self.counts)

    def cumulative(self) -> list[tuple[str, int]]:
        """Prometheus' buckets: (``le`` bound, observations <= it), ending with ``+Inf``."""
        out: list[tuple[str, int]] = []
        running = 0
        for bound, n in zip((*(repr(b) for b in self.bounds_s), "+Inf"), self.counts,
                            strict=True):
            running += n
            out.append((bound, running))
        return out
