"""``python -m bench.chart RESULTS.jsonl [-o PNG]``: throughput and latency, side by side.

Left: MB/s of the produce and consume workloads, moldau next to Tansu, bars at the median with
whiskers from min to max. Right: the latency percentiles on a log scale, since a peer without
fetch wake-up sits two orders of magnitude above a broker with it. A workload a broker could not
run gets a text mark instead of a bar, so a missing bar is never mistaken for zero.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from .report import PEER, SUBJECT, Summary, load, summarise

COLOURS = {SUBJECT: "#2a6f97", PEER: "#e07a1f"}
LATENCY_METRICS = ("ack_p50_ms", "ack_p99_ms", "ack_p999_ms",
                   "e2e_p50_ms", "e2e_p99_ms", "e2e_p999_ms")
#: The chart shows the issue's latency workload (linger 0); linger 5 is in the table only.
LATENCY_WORKLOAD = "latency.5k"
LATENCY_NAMES = ("ack p50", "ack p99", "ack p99.9", "e2e p50", "e2e p99", "e2e p99.9")


def _meta(path: Path) -> dict[str, Any]:
    for raw in path.read_text(encoding="utf-8").splitlines():
        if raw.strip():
            line = json.loads(raw)
            if line.get("kind") == "meta":
                return dict(line)
    return {}


def _pairs(sums: list[Summary], metric: str, prefixes: tuple[str, ...]
           ) -> list[tuple[str, dict[str, Summary]]]:
    """(label, {broker: summary}) for workloads starting with one of ``prefixes``, in run order."""
    rows: dict[str, tuple[str, dict[str, Summary]]] = {}
    for s in sums:
        if s.metric == metric and s.workload.startswith(prefixes):
            rows.setdefault(s.workload, (s.label, {}))[1][s.broker] = s
    return list(rows.values())


def _bar(ax: Any, x: float, s: Summary | None, width: float, broker: str, horizontal: bool,
         label: str | None) -> None:
    """One bar with min-max whiskers, or the broker's status as text where there is no figure."""
    if s is None or s.median is None or s.min is None or s.max is None:
        text = s.status if s is not None else "n/a"
        if horizontal:
            ax.text(0, x, f" {broker}: {text}", va="center", fontsize=7, color=COLOURS[broker])
        return
    err = [[s.median - s.min], [s.max - s.median]]
    if horizontal:
        ax.barh(x, s.median, height=width, xerr=err, color=COLOURS[broker], label=label,
                error_kw={"elinewidth": 0.8, "capsize": 2})
    else:
        ax.bar(x, s.median, width=width, yerr=err, color=COLOURS[broker], label=label,
               error_kw={"elinewidth": 0.8, "capsize": 2})


def draw(results: Path, out: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")  # no display on a build machine
    import matplotlib.pyplot as plt

    samples, limits = load(results)
    sums = summarise(samples)
    meta = _meta(results)
    fig, (left, right) = plt.subplots(1, 2, figsize=(15, 7.5),
                                      gridspec_kw={"width_ratios": [1.25, 1]})

    rows = _pairs(sums, "mb_per_s", ("produce.", "consume."))
    width = 0.38
    labelled: set[str] = set()
    for i, (_label, by_broker) in enumerate(rows):
        for j, broker in enumerate((SUBJECT, PEER)):
            y = i + (j - 0.5) * width
            first = broker not in labelled and broker in by_broker
            _bar(left, y, by_broker.get(broker), width, broker, True, broker if first else None)
            labelled |= {broker} if first else set()
    left.set_yticks(range(len(rows)), [label for label, _ in rows], fontsize=8)
    left.invert_yaxis()
    left.set_xlabel("MB/s (payload), median with min-max")
    left.set_title("Throughput, 6 partitions, acks=all, linger 5 ms")
    if "net" in limits:
        left.axvline(limits["net"], color="grey", linestyle=":", linewidth=1)
        left.text(limits["net"], -0.7, " loopback", fontsize=7, color="grey")
    if "disk" in limits:
        left.axvline(limits["disk"], color="grey", linestyle="--", linewidth=1)
        left.text(limits["disk"], -0.7, " disk (dd)", fontsize=7, color="grey")
    # Room for the limit labels right of the last line.
    left.set_xlim(0, max([left.get_xlim()[1], *limits.values()]) * 1.12)
    left.legend(loc="lower right")
    left.grid(axis="x", alpha=0.3)

    lat = {m: {s.broker: s for s in sums if s.metric == m and s.workload == LATENCY_WORKLOAD}
           for m in LATENCY_METRICS}
    for i, metric in enumerate(LATENCY_METRICS):
        for j, broker in enumerate((SUBJECT, PEER)):
            _bar(right, i + (j - 0.5) * width, lat[metric].get(broker), width, broker, False,
                 broker if i == 0 else None)
    right.set_xticks(range(len(LATENCY_METRICS)), LATENCY_NAMES, fontsize=8)
    right.set_yscale("log")
    right.set_ylabel("ms (log scale), median with min-max")
    right.set_title("Latency at 5,000 records/s, linger 0\n"
                    "ack: produce to acknowledgement; e2e: produce to consumer")
    right.legend(loc="upper left")
    right.grid(axis="y", alpha=0.3, which="both")

    fig.suptitle(f"moldau {meta.get('moldau_commit', '?')} vs {meta.get('tansu') or 'Tansu'} - "
                 f"{meta.get('scale', '?')} run {meta.get('stamp', '')}, "
                 f"{meta.get('reps', '?')} repetitions, {meta.get('cpus', '?')} CPUs, "
                 f"load average at start {meta.get('load_average', '?')}", fontsize=10)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.chart", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", type=Path, help="a bench/results/*.jsonl file")
    default = Path(__file__).resolve().parent.parent / "docs" / "bench.png"
    parser.add_argument("-o", "--out", type=Path, default=default, help=f"default {default}")
    args = parser.parse_args(argv)
    print(draw(args.results, args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
