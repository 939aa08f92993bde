"""What the metrics cost on the produce path: one broker with ``metrics.listener``, one
without, in the same run, as JSON lines.

    python -m bench.metrics_overhead [--quick] [--rounds N] [--scrape-interval S]

Both brokers run side by side (free loopback ports, temporary dirs), started afresh in every
round, in alternating order: of two identical brokers the first started was measured 11 %
slower per request on this machine, which a fixed order would have charged to the metrics.
Each round produces the same workloads to each broker, alternating which goes first, on a
new topic each time:
``batched`` (100 B records, acks=all, linger 5 ms: few large requests) and ``one_per_request``
(100 B records, acks=all, one record per Produce request and one request in flight: the
per-request cost of counting and timing shows most there). The metrics broker is scraped
every ``--scrape-interval`` seconds during its runs (15, a usual Prometheus setting; 0: not
at all). Each sample gives records/s and the broker's CPU microseconds per record (less
sensitive to the other load of a shared machine than throughput); the summary gives medians
and ``on_over_off`` ratios (the target: throughput within 3 %). A last line gives what one
scrape costs the broker (CPU and wall milliseconds, lines of text), with all the topics of
the last round in it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
import urllib.request
from typing import Any

from confluent_kafka import Producer

from .broker_proc import BenchBroker, free_port
from .clients import produce_with
from .machine import load_average
from .throughput import TIME_LIMIT_S, _create_topic

#: Producer settings per workload (on top of acks=all).
WORKLOADS: dict[str, dict[str, Any]] = {
    "batched": {"linger.ms": 5, "batch.size": 1_000_000},
    "one_per_request": {"linger.ms": 0, "batch.num.messages": 1,
                        "max.in.flight.requests.per.connection": 1},
}


def produce(bootstrap: str, topic: str, count: int, settings: dict[str, Any]
            ) -> dict[str, Any]:
    """Produce ``count`` records of 100 B (bounded by TIME_LIMIT_S); records/s and failures."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "queue.buffering.max.messages": 1_000_000,
                         "queue.buffering.max.kbytes": 1_048_576, **settings})
    start = time.monotonic()
    acked = produce_with(producer, topic, count, 100, start + TIME_LIMIT_S)
    elapsed = time.monotonic() - start
    return {"records": acked, "records_per_s": round(acked / elapsed), "failed": count - acked}


class Scraper:
    """Scrapes ``url`` every ``interval_s`` while running (until the ``with`` block ends)."""

    def __init__(self, url: str, interval_s: float) -> None:
        self.url = url
        self.interval_s = interval_s
        self.scrapes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Scraper:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            with urllib.request.urlopen(self.url, timeout=10) as response:
                response.read()
            self.scrapes += 1


def run_one(broker: BenchBroker, metrics_url: str | None, workload: str, count: int,
            scrape_interval_s: float) -> dict[str, Any]:
    topic = _create_topic(broker.bootstrap, 6)
    cpu0 = broker.cpu_seconds()
    scraper = Scraper(metrics_url + "/metrics", scrape_interval_s) \
        if metrics_url and scrape_interval_s > 0 else None
    if scraper is not None:
        with scraper:
            result = produce(broker.bootstrap, topic, count, WORKLOADS[workload])
    else:
        result = produce(broker.bootstrap, topic, count, WORKLOADS[workload])
    cpu = broker.cpu_seconds() - cpu0
    return {"workload": workload, "metrics": metrics_url is not None,
            "records": result["records"], "records_per_s": result["records_per_s"],
            "broker_cpu_us_per_record": round(cpu / max(result["records"], 1) * 1e6, 3),
            "failed": result["failed"], "scrapes": scraper.scrapes if scraper else 0}


def scrape_cost(broker: BenchBroker, url: str, scrapes: int = 20) -> dict[str, Any]:
    """CPU and wall time of one scrape of ``url``/metrics, averaged over ``scrapes``."""
    with urllib.request.urlopen(url + "/metrics", timeout=30) as response:
        lines = response.read().count(b"\n")
    cpu0, wall0 = broker.cpu_seconds(), time.perf_counter()
    for _ in range(scrapes):
        with urllib.request.urlopen(url + "/metrics", timeout=30) as response:
            response.read()
    return {"workload": "scrape", "lines": lines,
            "broker_cpu_ms_per_scrape": round((broker.cpu_seconds() - cpu0) / scrapes * 1e3, 1),
            "wall_ms_per_scrape": round((time.perf_counter() - wall0) / scrapes * 1e3, 1),
            "load_average": load_average()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer records and rounds")
    parser.add_argument("--rounds", type=int, default=None,
                        help="rounds (default 6; quick 2): even, so each broker starts first "
                             "as often as the other")
    parser.add_argument("--scrape-interval", type=float, default=15.0,
                        help="seconds between scrapes of the metrics broker (0: none)")
    args = parser.parse_args()
    rounds = args.rounds or (2 if args.quick else 6)
    counts = {"batched": 1_000_000, "one_per_request": 20_000}
    if args.quick:
        counts = {k: v // 5 for k, v in counts.items()}
    samples: list[dict[str, Any]] = []
    cost: dict[str, Any] = {}
    for round_no in range(rounds):
        metrics_port = free_port()
        url = f"http://127.0.0.1:{metrics_port}"
        first_on = round_no % 2 == 0
        started: list[BenchBroker] = []
        try:
            for metrics in (first_on, not first_on):
                started.append(BenchBroker(f"metrics.listener={url}") if metrics
                               else BenchBroker())
            on, off = started if first_on else started[::-1]
            for workload, count in counts.items():
                order = [(on, url), (off, None)]
                if round_no % 2:
                    order.reverse()
                for broker, metrics_url in order:
                    sample = run_one(broker, metrics_url, workload, count,
                                     args.scrape_interval)
                    sample["round"] = round_no
                    sample["load_average"] = load_average()
                    samples.append(sample)
                    print(json.dumps(sample), flush=True)
            if round_no == rounds - 1:
                cost = scrape_cost(on, url)
        finally:
            for broker in started:
                broker.close()
    for workload in counts:
        summary: dict[str, Any] = {"summary": workload, "rounds": rounds}
        for metrics, key in ((True, "on"), (False, "off")):
            mine = [s for s in samples if s["workload"] == workload and s["metrics"] is metrics]
            rates = [s["records_per_s"] for s in mine]
            cpu = [s["broker_cpu_us_per_record"] for s in mine]
            summary[f"{key}_records_per_s_median"] = round(statistics.median(rates))
            summary[f"{key}_records_per_s_range"] = [min(rates), max(rates)]
            summary[f"{key}_cpu_us_per_record_median"] = round(statistics.median(cpu), 3)
        summary["on_over_off_records_per_s"] = round(
            summary["on_records_per_s_median"] / summary["off_records_per_s_median"], 3)
        summary["on_over_off_cpu_per_record"] = round(
            summary["on_cpu_us_per_record_median"] / summary["off_cpu_us_per_record_median"], 3)
        print(json.dumps(summary), flush=True)
    print(json.dumps(cost), flush=True)


if __name__ == "__main__":
    main()
