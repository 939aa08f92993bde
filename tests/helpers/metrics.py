"""Reading a broker's metrics endpoint in tests: plain HTTP and Prometheus' own text parser."""

from __future__ import annotations

import http.client
from collections.abc import Mapping

from prometheus_client.parser import text_string_to_metric_families

#: (sample name, sorted label items) -> value
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def http_get(url: str, method: str = "GET", timeout: float = 10.0) -> tuple[int, bytes]:
    """(status, body) of one request to ``http://host:port/path``."""
    assert url.startswith("http://")
    hostport, _, path = url[len("http://"):].partition("/")
    host, _, port = hostport.rpartition(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
    try:
        conn.request(method, "/" + path)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def scrape(base_url: str) -> Samples:
    """Every sample of ``base_url``/metrics, parsed by prometheus_client."""
    status, body = http_get(base_url + "/metrics")
    assert status == 200, body
    samples: Samples = {}
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples: Samples, name: str, labels: Mapping[str, str] | None = None,
          default: float = 0.0) -> float:
    """One sample's value (``default`` when the series does not exist yet)."""
    return samples.get((name, tuple(sorted((labels or {}).items()))), default)


def exposed_names(base_url: str) -> set[str]:
    """Every sample name ``base_url``/metrics declares, samples or not yet (a labelled
    family with no series still has its ``# TYPE`` line)."""
    status, body = http_get(base_url + "/metrics")
    assert status == 200, body
    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"),
                "summary": ("_sum", "_count")}
    names: set[str] = set()
    for family in text_string_to_metric_families(body.decode()):
        names.add(family.name)
        names.update(family.name + suffix for suffix in suffixes.get(family.type, ()))
        names.update(sample.name for sample in family.samples)
    return names
