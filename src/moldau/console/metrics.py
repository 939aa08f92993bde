"""Broker metrics on a page: a scrape of a Prometheus endpoint, shown as a table.

Optional (``moldau console --metrics-url URL``): the console's own charts come from offsets
and need no endpoint. Metric names are the broker's business, so the page shows whatever
the endpoint exposes, filtered by name, rather than expecting particular ones.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx
from prometheus_client.parser import text_string_to_metric_families

from ..cli.errors import CliError

#: Most rows one page shows (a broker with many partitions exposes thousands of samples).
MAX_ROWS = 500


@dataclass(frozen=True)
class MetricSample:
    name: str
    labels: str  # rendered as Prometheus writes them: a="x",b="y"
    value: float


def scrape(url: str, needle: str, timeout: float) -> list[MetricSample]:
    """Samples whose name contains ``needle``, at most :data:`MAX_ROWS`, sorted by name."""
    try:
        answer = httpx.get(url, timeout=timeout)
        answer.raise_for_status()
    except httpx.HTTPError as exc:
        raise CliError(f"cannot read metrics from {url}: {exc}") from None
    try:
        families = list(text_string_to_metric_families(answer.text))
    except ValueError as exc:
        raise CliError(f"{url} did not answer in Prometheus' text format: {exc}") from None
    found = []
    for family in families:
        for sample in family.samples:
            if needle in sample.name:
                labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
                found.append(MetricSample(sample.name, labels, sample.value))
    found.sort(key=lambda s: (s.name, s.labels))
    return found[:MAX_ROWS]
