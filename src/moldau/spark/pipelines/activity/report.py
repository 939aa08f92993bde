"""What the activity pipeline tells its user: where the results are and how many so far.

A demo that only prints "batch 7, 40 rows/s" leaves people asking whether anything came
out and where. The start-up lines name every output (the PostgreSQL tables with a ready
``psql`` command, the Parquet directory, the output topics with a ready ``moldau consume``
command); each progress line counts what is in them. Counting is cheap: two aggregate
queries, a directory walk and one ListOffsets request per report.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from .generator import GeneratorStats
from .job import ActivityConfig

LATEST_COUNTS_SQL = ("SELECT window_start, page, views, unique_users FROM page_view_counts "
                     "ORDER BY window_start DESC, views DESC LIMIT 20")


def where_to_look(config: ActivityConfig, postgres_note: str | None = None) -> list[str]:
    """Lines naming each output and the command that shows it."""
    dsn = config.postgres_dsn
    lines = ["results:", f"  PostgreSQL tables page_view_counts and window_totals: "
                         f"psql '{dsn}' -c '{LATEST_COUNTS_SQL}'"]
    if postgres_note:
        lines.append(f"    ({postgres_note})")
    lines += [
        f"  Parquet archive of valid events (by date): {config.archive_dir}",
        f"  topic {config.counts_topic} (latest value per window|page key): moldau consume "
        f"{config.counts_topic} -b {config.bootstrap} --from-beginning --print-key "
        "--timeout-ms 2000",
        f"  topic {config.dlq_topic} (malformed events, reason in headers): moldau consume "
        f"{config.dlq_topic} -b {config.bootstrap} --from-beginning --print-headers "
        "--timeout-ms 2000",
    ]
    return lines


@dataclass
class ReadCounter:
    """Rows each query has read, summed over the micro-batches it reported."""

    totals: dict[str, int] = field(default_factory=dict)
    _last_batch: dict[str, int] = field(default_factory=dict)

    def update(self, queries: Mapping[str, Any]) -> None:
        for name, query in queries.items():
            with contextlib.suppress(Exception):  # a stopped query may refuse to answer
                for progress in query.recentProgress:
                    batch = int(progress["batchId"])
                    if batch > self._last_batch.get(name, -1):
                        self._last_batch[name] = batch
                        rows = int(progress["numInputRows"] or 0)
                        self.totals[name] = self.totals.get(name, 0) + rows


def _lag(progress: Any) -> int | None:
    """Records between what the query has read and the end of the topic."""
    try:
        source = progress["sources"][0]
        end, latest = source.get("endOffset"), source.get("latestOffset")
        end = json.loads(end) if isinstance(end, str) else end
        latest = json.loads(latest) if isinstance(latest, str) else latest
        if not latest:
            return None
        return sum(max(0, int(o) - int((end or {}).get(t, {}).get(p, 0)))
                   for t, parts in latest.items() for p, o in parts.items())
    except (KeyError, IndexError, TypeError, ValueError):
        return None


def postgres_counts(dsn: str) -> tuple[int, int] | None:
    """(rows in page_view_counts, views summed over window_totals); None if unreachable."""
    import psycopg

    try:
        with psycopg.connect(dsn, connect_timeout=5) as conn:
            rows = conn.execute("SELECT count(*) FROM page_view_counts").fetchone()
            views = conn.execute("SELECT coalesce(sum(views), 0) FROM window_totals").fetchone()
    except psycopg.Error:
        return None
    return (int(rows[0]) if rows else 0, int(views[0]) if views else 0)


def parquet_files(directory: Path) -> int:
    return sum(1 for _ in directory.rglob("*.parquet")) if directory.is_dir() else 0


def quiet_logger() -> logging.Logger:
    """librdkafka's own log lines (a destroyed client's "Purging ... events") stay out of
    the progress output."""
    logger = logging.getLogger("moldau.spark.activity.librdkafka")
    if not logger.handlers:
        logger.addHandler(logging.NullHandler())
        logger.propagate = False
    return logger


def topic_records(bootstrap: str, topics: Iterable[str]) -> dict[str, int]:
    """Records in each topic (sum of log end offsets minus log start offsets)."""
    client: dict[str, Any] = {"bootstrap.servers": bootstrap, "logger": quiet_logger()}
    admin = AdminClient(client)
    result: dict[str, int] = {}
    try:
        metadata = admin.list_topics(timeout=5).topics
        partitions = [TopicPartition(t, p) for t in topics if t in metadata
                      for p in metadata[t].partitions]
        if not partitions:
            return {}
        ends = {}
        for spec in (OffsetSpec.earliest(), OffsetSpec.latest()):
            futures = admin.list_offsets({tp: spec for tp in partitions}, request_timeout=5)
            ends[str(spec)] = {(tp.topic, tp.partition): f.result(10).offset
                               for tp, f in futures.items()}
        first, last = ends.values()
        for (topic, partition), offset in last.items():
            result[topic] = result.get(topic, 0) + offset - first[(topic, partition)]
    except KafkaException:
        return {}
    return result


def progress_line(queries: Mapping[str, Any], stats: GeneratorStats | None,
                  reads: ReadCounter | None = None, config: ActivityConfig | None = None) -> str:
    """One line: generator, each query's batch and reads, and what the outputs hold."""
    parts = []
    if stats is not None:
        parts.append(f"generated {stats.produced} ({stats.malformed} malformed)")
    for name, query in queries.items():
        progress = query.lastProgress
        if not progress:
            parts.append(f"{name}: starting")
            continue
        lag = _lag(progress)
        read = "" if reads is None else f", read {reads.totals.get(name, 0)}"
        parts.append(f"{name}: batch {progress['batchId']}{read}"
                     + (f", lag {lag}" if lag is not None else ""))
    if config is not None:
        parts.append(outputs_summary(config))
    return " | ".join(parts)


def outputs_summary(config: ActivityConfig) -> str:
    """What the outputs hold now: PostgreSQL rows, Parquet files, records per topic."""
    pg = postgres_counts(config.postgres_dsn)
    pg_text = "PostgreSQL unreachable" if pg is None else (
        f"PostgreSQL {pg[0]} page/window rows, {pg[1]} views")
    topics = topic_records(config.bootstrap, [config.counts_topic, config.dlq_topic])
    return (f"{pg_text}; Parquet {parquet_files(config.archive_dir)} files; "
            f"{config.counts_topic} {topics.get(config.counts_topic, 0)}, "
            f"{config.dlq_topic} {topics.get(config.dlq_topic, 0)} records")
