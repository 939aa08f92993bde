"""The metrics' building blocks without a server: the histogram, request timing by stage,
and the ``metrics.listener`` key."""

from __future__ import annotations

import pytest

from moldau.config import BrokerConfig, ConfigError
from moldau.metrics.counters import STAGES, BrokerCounters, RequestTiming
from moldau.metrics.histogram import DurationHistogram


def test_histogram_buckets_are_cumulative_with_inf_last() -> None:
    histogram = DurationHistogram((0.001, 0.01))
    for ns in (500_000, 1_000_000, 5_000_000, 20_000_000):
        histogram.observe(ns)
    # A duration equal to a bound falls in that bound's bucket (Prometheus' "le").
    assert histogram.cumulative() == [("0.001", 2), ("0.01", 3), ("+Inf", 4)]
    assert histogram.count == 4
    assert histogram.sum_ns == 26_500_000


def test_request_stages_add_up_to_the_total() -> None:
    counters = BrokerCounters(["PLAINTEXT"])
    timing = RequestTiming(api_key=0, version=9, arrived=1_000, started=3_000)
    timing.handled = 10_000
    timing.remote_ns = 4_000  # of the handler's 7,000 ns, 4,000 waited in a purgatory
    timing.send_start = 12_000
    counters.request_done(timing, end=15_000)
    assert counters.requests == {(0, 9): 1}
    sums = {stage: h.sum_ns for stage, h in zip(STAGES, counters.request_times[0], strict=True)}
    assert sums == {"queue": 2_000, "local": 3_000, "remote": 4_000, "response_queue": 2_000,
                    "send": 3_000, "total": 14_000}
    assert sum(v for k, v in sums.items() if k != "total") == sums["total"]


def test_deferred_response_counts_its_wait_as_remote() -> None:
    counters = BrokerCounters(["PLAINTEXT"])
    timing = RequestTiming(api_key=0, version=9, arrived=0, started=100)
    timing.handled = 600          # appended: the handler returned a deferred answer
    timing.remote_done = 5_600    # the ISR had the records 5,000 ns later
    timing.send_start = 6_000     # behind an earlier response of the connection
    counters.request_done(timing, end=6_500)
    sums = {stage: h.sum_ns for stage, h in zip(STAGES, counters.request_times[0], strict=True)}
    assert sums["local"] == 500 and sums["remote"] == 5_000
    assert sums["response_queue"] == 400 and sums["send"] == 500 and sums["total"] == 6_500


@pytest.mark.parametrize(("raw", "expected"), [
    ("http://127.0.0.1:9644", ("127.0.0.1", 9644)),
    ("http://:9644", ("", 9644)),
    ("http://[::1]:9644/", ("::1", 9644)),
])
def test_metrics_listener_values(raw: str, expected: tuple[str, int]) -> None:
    assert BrokerConfig({"metrics.listener": raw}).metrics_listener == expected


@pytest.mark.parametrize("raw", ["127.0.0.1:9644", "https://127.0.0.1:9644",
                                 "http://127.0.0.1", "http://127.0.0.1:70000",
                                 "http://127.0.0.1:9644/metrics"])
def test_bad_metrics_listener_values(raw: str) -> None:
    with pytest.raises(ConfigError, match=r"for configuration metrics\.listener"):
        BrokerConfig({"metrics.listener": raw})


def test_metrics_are_off_by_default() -> None:
    assert BrokerConfig({}).metrics_listener is None
