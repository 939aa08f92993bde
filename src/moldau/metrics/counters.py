"""The broker's hot-path counters: plain ints and dicts, touched only on the event loop.

Everything the broker counts while it serves (requests, bytes and messages per topic, failed
requests, connections, request time per stage) lands here, incremented once per request or
once per partition of a request, never per record. The broker is one event-loop thread, so
there is nothing to lock: ``prometheus_client``'s own Counter and Histogram take a lock on
every increment, which this module avoids. :mod:`moldau.metrics.collector` turns these into
Prometheus metric families when ``/metrics`` is scraped.

A broker without ``metrics.listener`` has no ``BrokerCounters`` at all (``broker.metrics`` is
None) and its hot paths skip even the increments.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Sequence

from .histogram import DurationHistogram

#: The stages of a request's time, as Kafka's RequestMetrics split it (RequestQueueTimeMs,
#: LocalTimeMs, RemoteTimeMs, ResponseQueueTimeMs, ResponseSendTimeMs, TotalTimeMs).
STAGES = ("queue", "local", "remote", "response_queue", "send", "total")


class TopicCounters:
    """Kafka's BrokerTopicMetrics for one topic (client traffic only; replication apart)."""

    __slots__ = ("bytes_in", "bytes_out", "failed_fetch", "failed_produce", "messages_in")

    def __init__(self) -> None:
        self.bytes_in = 0
        self.messages_in = 0
        self.bytes_out = 0
        self.failed_produce = 0
        self.failed_fetch = 0


class RequestTiming:
    """Monotonic timestamps of one request, one ``perf_counter_ns`` per stage boundary.

    ``arrived``: the frame was complete in the connection's buffer; ``started``: its handler
    began; ``handled``: the handler returned; ``remote_ns``: time the handler spent waiting in
    a purgatory (a fetch's wait for data), and ``remote_done``: a deferred Produce's wait for
    the ISR ended; ``send_start``: the response began to be written.
    """

    __slots__ = ("api_key", "arrived", "handled", "remote_done", "remote_ns", "send_start",
                 "started", "version")

    def __init__(self, api_key: int, version: int, arrived: int, started: int) -> None:
        self.api_key = api_key
        self.version = version
        self.arrived = arrived
        self.started = started
        self.handled = started
        self.remote_ns = 0
        self.remote_done = 0
        self.send_start = 0

    def mark_remote_done(self, _future: object = None) -> None:
        """A deferred response is complete (a future's done callback)."""
        self.remote_done = time.perf_counter_ns()


class BrokerCounters:
    """Every counter the broker increments while serving; see the module docstring."""

    def __init__(self, listeners: Sequence[str]) -> None:
        #: Connections accepted and closed per listener name (the ``listener`` label), every
        #: configured listener present from the start so each series exists at 0.
        self.connections_created: dict[str, int] = dict.fromkeys(listeners, 0)
        self.connections_closed: dict[str, int] = dict.fromkeys(listeners, 0)
        #: Requests answered (or handled, for acks=0) per (API key, version).
        self.requests: dict[tuple[int, int], int] = {}
        #: Request time per API key: one histogram per stage, in the order of :data:`STAGES`.
        self.request_times: dict[int, tuple[DurationHistogram, ...]] = {}
        self.topics: dict[str, TopicCounters] = {}
        #: Bytes read by follower fetches (Kafka's ReplicationBytesOutPerSec).
        self.replication_bytes_out = 0
        #: Segments deleted by retention (time, size, or below the log start offset).
        self.retention_deleted_segments = 0

    def topic(self, name: str) -> TopicCounters:
        counters = self.topics.get(name)
        if counters is None:
            counters = self.topics[name] = TopicCounters()
        return counters

    def forget_topic(self, name: str) -> None:
        """A deleted topic's series go, as Kafka removes its BrokerTopicMetrics."""
        self.topics.pop(name, None)

    def request_done(self, timing: RequestTiming, end: int) -> None:
        """Count one request and file its time per stage (``end``: its response was sent).

        Runs for every request, so DurationHistogram.observe is written out inline."""
        key = (timing.api_key, timing.version)
        requests = self.requests
        requests[key] = requests.get(key, 0) + 1
        handled = timing.handled
        ready = timing.remote_done or handled
        send_start = timing.send_start or end
        histograms = self.request_times.get(timing.api_key)
        if histograms is None:
            histograms = self.request_times[timing.api_key] = tuple(
                DurationHistogram() for _ in STAGES)
        queue, local, remote, response_queue, send, total = histograms
        bounds = queue.bounds_ns
        d = timing.started - timing.arrived
        queue.counts[bisect_left(bounds, d)] += 1
        queue.sum_ns += d
        d = handled - timing.started - timing.remote_ns
        local.counts[bisect_left(bounds, d)] += 1
        local.sum_ns += d
        d = timing.remote_ns + (ready - handled)
        remote.counts[bisect_left(bounds, d)] += 1
        remote.sum_ns += d
        d = send_start - ready
        response_queue.counts[bisect_left(bounds, d)] += 1
        response_queue.sum_ns += d
        d = end - send_start
        send.counts[bisect_left(bounds, d)] += 1
        send.sum_ns += d
        d = end - timing.arrived
        total.counts[bisect_left(bounds, d)] += 1
        total.sum_ns += d
