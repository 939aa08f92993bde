"""``moldau top``: per-topic in/out rates and group lag in the terminal, every second.

For a server without a browser. Rates come from the same sampler as the web console's
charts: end-offset deltas (in) and committed-offset deltas of all groups (out), so what
``top`` shows and what the console charts agree.
"""

from __future__ import annotations

import time

import click
from rich.console import Group as RenderGroup
from rich.live import Live
from rich.table import Table

from ..console.throughput import Sample, rate, take_sample
from .connection import Connection, connection_options
from .output import stdout_console


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def render(before: Sample, after: Sample) -> RenderGroup:
    """Two tables: topics (in/s, out/s, records) and groups (lag per topic, out/s)."""
    seconds = after.at - before.at
    topics = Table(title="Topics", title_justify="left")
    for column in ("Topic", "In/s", "Out/s", "End offset"):
        topics.add_column(column, justify="left" if column == "Topic" else "right")
    out_by_topic: dict[str, float] = {}
    for (group, topic), committed in after.committed.items():
        value = rate(before.committed.get((group, topic)), committed, seconds)
        if value is not None:
            out_by_topic[topic] = out_by_topic.get(topic, 0.0) + value
    for topic in sorted(after.ends):
        topics.add_row(topic, _fmt(rate(before.ends.get(topic), after.ends[topic], seconds)),
                       _fmt(out_by_topic.get(topic)), str(after.ends[topic]))
    groups = Table(title="Consumer groups", title_justify="left")
    for column in ("Group", "Topic", "Lag", "Out/s"):
        groups.add_column(column, justify="left" if column in ("Group", "Topic") else "right")
    for key in sorted(after.committed):
        groups.add_row(key[0], key[1], str(after.lags.get(key, "-")),
                       _fmt(rate(before.committed.get(key), after.committed[key], seconds)))
    return RenderGroup(topics, groups)


@click.command("top")
@click.option("--interval", type=click.FloatRange(min=0.2), default=1.0, show_default=True,
              metavar="SECONDS", help="Time between refreshes.")
@click.option("--iterations", type=click.IntRange(min=1), metavar="N",
              help="Stop after N refreshes (default: until Ctrl-C).")
@click.option("--once", is_flag=True, help="One refresh, then exit (same as --iterations 1).")
@connection_options
def top(conn: Connection, interval: float, iterations: int | None, once: bool) -> None:
    """Per-topic in/out rates (records/s) and consumer group lag, refreshed live."""
    if once:
        iterations = 1
    admin = conn.admin()
    before = take_sample(conn, admin, groups=True)
    console = stdout_console()
    done = 0
    with Live(console=console, auto_refresh=False,
              transient=False) if console.is_terminal else _NoLive() as live:
        try:
            while iterations is None or done < iterations:
                time.sleep(max(0.0, interval - (time.monotonic() - before.at)))
                after = take_sample(conn, admin, groups=True)
                view = render(before, after)
                if isinstance(live, Live):
                    live.update(view, refresh=True)
                else:
                    console.print(view)
                before = after
                done += 1
        except KeyboardInterrupt:
            pass


class _NoLive:
    """Stand-in for rich's Live when stdout is no terminal: each refresh is printed."""

    def __enter__(self) -> _NoLive:
        return self

    def __exit__(self, *_exc: object) -> None:
        return None
