"""Recording and summarising samples: JSON lines for the record, a rich table for people.

A *sample* is one measurement of one workload on one broker in one repetition. It carries its
own display hints (``label``, ``show``: the metrics worth a table row, ``limit``: which physical
limit its MB/s is compared with), so the table and the chart can be rebuilt from a results file
alone, without the code that produced it.
"""

from __future__ import annotations

import json
import statistics
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any

from rich.console import Console
from rich.table import Table

SUBJECT, PEER = "moldau", "tansu"

#: How each metric is shown; the arrow says which direction is better.
METRIC_NAMES = {
    "records_per_s": "records/s ↑",
    "mb_per_s": "MB/s ↑",
    "cpu_s_per_gb": "CPU s/GB ↓",
    "ack_p50_ms": "ack p50 ms ↓",
    "ack_p99_ms": "ack p99 ms ↓",
    "ack_p999_ms": "ack p99.9 ms ↓",
    "e2e_p50_ms": "e2e p50 ms ↓",
    "e2e_p99_ms": "e2e p99 ms ↓",
    "e2e_p999_ms": "e2e p99.9 ms ↓",
    "first_record_s": "first record s ↓",
    "rss_mb": "RSS MB ↓",
    "startup_s": "start-up s ↓",
    "shutdown_s": "clean stop s ↓",
}


class Recorder:
    """Appends every line to the results file and echoes it to ``echo`` as it happens."""

    def __init__(self, path: Path, echo: IO[str] | None = sys.stdout) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._file = path.open("w", encoding="utf-8")
        self._echo = echo
        self.samples: list[dict[str, Any]] = []
        self.limits: dict[str, float] = {}

    def write(self, line: dict[str, Any]) -> None:
        text = json.dumps(line, default=str)
        self._file.write(text + "\n")
        self._file.flush()
        if self._echo is not None:
            print(text, file=self._echo, flush=True)

    def sample(self, line: dict[str, Any]) -> None:
        line = {"kind": "sample", **line}
        self.samples.append(line)
        self.write(line)

    def close(self) -> None:
        self._file.close()


@dataclass
class Summary:
    """min/median/max of one metric of one workload on one broker, over its good samples."""

    workload: str
    label: str
    metric: str
    broker: str
    n: int
    min: float | None
    median: float | None
    max: float | None
    status: str  # "ok", or the status of the samples when none was ok
    reason: str = ""
    total: int = 0  # samples taken, good or not


def load(path: Path) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """Samples and machine limits of a results file."""
    samples, limits = [], {}
    for raw in path.read_text(encoding="utf-8").splitlines():
        if not raw.strip():
            continue
        line = json.loads(raw)
        if line.get("kind") == "sample":
            samples.append(line)
        elif line.get("kind") == "limits":
            limits = {k: v for k, v in line.items() if k != "kind" and isinstance(v, float)}
    return samples, limits


def summarise(samples: list[dict[str, Any]]) -> list[Summary]:
    """One Summary per (workload, shown metric, broker), in the order workloads were run."""
    order: dict[str, dict[str, Any]] = {}
    for s in samples:
        order.setdefault(s["workload"], s)
    out = []
    for workload, first in order.items():
        mine = [s for s in samples if s["workload"] == workload]
        for metric in first.get("show", []):
            for broker in (SUBJECT, PEER):
                theirs = [s for s in mine if s["broker"] == broker]
                good = [float(s[metric]) for s in theirs
                        if s["status"] == "ok" and s.get(metric) is not None]
                if good:
                    out.append(Summary(workload, first["label"], metric, broker, len(good),
                                       min(good), statistics.median(good), max(good), "ok",
                                       total=len(theirs)))
                elif theirs:
                    bad = theirs[-1]
                    out.append(Summary(workload, first["label"], metric, broker, 0, None, None,
                                       None, bad["status"], str(bad.get("reason", "")),
                                       total=len(theirs)))
    return out


def _fmt(x: float | None) -> str:
    if x is None:
        return "-"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    if abs(x) >= 100:
        return f"{x:.0f}"
    if abs(x) >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}" if abs(x) >= 0.1 else f"{x:.3f}"


def _cell(s: Summary | None) -> str:
    """``median (min-max)``; ``[good/taken]`` after it when some samples were not ok."""
    if s is None:
        return "-"
    if s.status != "ok":
        return s.status
    text = f"[bold]{_fmt(s.median)}[/]"
    if s.n > 1:
        text += f" ({_fmt(s.min)}-{_fmt(s.max)})"
    return text if s.n >= s.total else f"{text} \\[{s.n}/{s.total} ok]"


def _share(s: Summary | None, limit: float | None) -> str:
    if s is None or s.median is None or not limit:
        return "-"
    return f"{100 * s.median / limit:.0f}%"


def table(samples: list[dict[str, Any]], limits: dict[str, float]) -> Table:
    """The side-by-side table: median (min-max) per broker, ratio, share of the machine limit."""
    t = Table(title="moldau vs Tansu: median (min-max) over repetitions", show_lines=False)
    for col, kw in (("workload", {}), ("metric", {}), (SUBJECT, {"justify": "right"}),
                    (PEER, {"justify": "right"}), ("moldau/tansu", {"justify": "right"}),
                    ("% loopback m / t", {"justify": "right"}),
                    ("% disk m", {"justify": "right"})):
        t.add_column(col, **kw)  # type: ignore[arg-type]
    first = {s["workload"]: s for s in reversed(samples)}
    by_key = {(s.workload, s.metric, s.broker): s for s in summarise(samples)}
    seen: set[tuple[str, str]] = set()
    for s in summarise(samples):
        key = (s.workload, s.metric)
        if key in seen:
            continue
        seen.add(key)
        mine, peer = by_key.get((*key, SUBJECT)), by_key.get((*key, PEER))
        ratio = ""
        if mine and peer and mine.median is not None and peer.median:
            ratio = f"{mine.median / peer.median:.2f}"
        net = disk = ""
        limit = first[s.workload].get("limit") or ""
        if s.metric == "mb_per_s" and "net" in limit and "net" in limits:
            net = f"{_share(mine, limits['net'])} / {_share(peer, limits['net'])}"
        if s.metric == "mb_per_s" and "disk" in limit and "disk" in limits:
            # Only moldau writes to disk; Tansu's memory storage has no disk limit to share.
            disk = _share(mine, limits["disk"])
        t.add_row(s.label, METRIC_NAMES.get(s.metric, s.metric), _cell(mine), _cell(peer),
                  ratio, net, disk)
    return t


def reasons(samples: list[dict[str, Any]]) -> list[str]:
    """One line per (workload, broker, status) that was not ok, to print under the table."""
    seen: dict[tuple[str, str, str], str] = {}
    for s in samples:
        if s["status"] != "ok":
            seen.setdefault((s["label"], s["broker"], s["status"]), str(s.get("reason", "")))
    return [f"{label} on {broker}: {status}: {why}"
            for (label, broker, status), why in seen.items()]


def print_report(samples: list[dict[str, Any]], limits: dict[str, float], notes: list[str],
                 console: Console | None = None) -> None:
    console = console or Console()
    if not console.is_terminal:
        console.width = max(console.width, 170)  # a file or pipe: do not wrap at 80 columns
    console.print(table(samples, limits))
    for line in notes + reasons(samples):
        console.print(f"  {line}", highlight=False, markup=False)


def summary_lines(samples: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Summaries as JSON lines, with the moldau/peer ratio of medians on moldau's line."""
    sums = summarise(samples)
    medians = {(s.workload, s.metric, s.broker): s.median for s in sums}
    lines = []
    for s in sums:
        line: dict[str, Any] = {"kind": "summary", **asdict(s)}
        if s.broker == SUBJECT:
            peer = medians.get((s.workload, s.metric, PEER))
            line["ratio_to_peer"] = (round(s.median / peer, 3)
                                     if s.median is not None and peer else None)
        lines.append(line)
    return lines
