"""The website activity pipeline end to end: real Spark, real broker, real PostgreSQL.

Known events go in; counts must come out exactly, in PostgreSQL and on the counts topic,
also after a stop and a restart from the checkpoint with more events (no loss, no double
counting). Malformed events must land in the dead-letter topic and nowhere else.
"""

from __future__ import annotations

import json
import random
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="Spark tests need pyspark: pip install -e '.[spark]'")

import psycopg
from confluent_kafka import Consumer, TopicPartition

from moldau.spark.pipelines.activity.events import EventFactory, PageView
from moldau.spark.pipelines.activity.job import ActivityConfig
from moldau.spark.pipelines.activity.runner import ensure_topics, run

from .conftest import fresh_database
from .records import consume_all, consume_isolated, produce

BASE = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
Counts = dict[tuple[datetime, str], tuple[int, int]]


def _events(factory: EventFactory, count: int, start: datetime,
            span_s: int) -> list[PageView]:
    rng = random.Random(count)
    moments = sorted(start + timedelta(milliseconds=rng.randrange(span_s * 1000))
                     for _ in range(count))
    return [factory.next(moment) for moment in moments]


def _expected(events: list[PageView]) -> tuple[Counts, Counts]:
    """(per window and page, per window): (views, unique users), computed independently."""
    views: dict[tuple[datetime, str], int] = defaultdict(int)
    users: dict[tuple[datetime, str], set[str]] = defaultdict(set)
    for event in events:
        moment = datetime.fromisoformat(event.timestamp.replace("Z", "+00:00"))
        window = moment.replace(second=0, microsecond=0)
        for scope in (event.page, "*"):
            views[(window, scope)] += 1
            users[(window, scope)].add(event.user_id)
    per_page = {k: (v, len(users[k])) for k, v in views.items() if k[1] != "*"}
    per_window = {k: (v, len(users[k])) for k, v in views.items() if k[1] == "*"}
    return per_page, per_window


def _postgres_counts(dsn: str) -> tuple[Counts, Counts]:
    with psycopg.connect(dsn) as conn:
        pages = conn.execute(
            "SELECT window_start, page, views, unique_users FROM page_view_counts").fetchall()
        totals = conn.execute(
            "SELECT window_start, views, unique_users FROM window_totals").fetchall()
    return ({(w.astimezone(UTC), p): (v, u) for w, p, v, u in pages},
            {(w.astimezone(UTC), "*"): (v, u) for w, v, u in totals})


def _topic_counts(bootstrap: str, topic: str) -> tuple[Counts, Counts]:
    """The latest value per key on the counts topic, as a compacting read_committed consumer
    would see (the exactly-once sink leaves aborted copies of replayed batches)."""
    latest: dict[bytes, dict[str, Any]] = {}
    for message in sorted(consume_isolated(bootstrap, topic, 2, "read_committed"),
                          key=lambda m: json.loads(m.value())["batch_id"]):
        latest[message.key()] = json.loads(message.value())
    per_page: Counts = {}
    per_window: Counts = {}
    for value in latest.values():
        window = datetime.fromisoformat(value["window_start"].replace("Z", "+00:00"))
        target = per_window if value["page"] == "*" else per_page
        target[(window, value["page"])] = (value["views"], value["unique_users"])
    return per_page, per_window


def _assert_transactional(bootstrap: str, topic: str) -> None:
    """Commit markers take offsets: a topic written in transactions ends past its records."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "spark-tests-reader"})
    try:
        ends = sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
                   for p in range(2))
    finally:
        consumer.close()
    records = len(consume_isolated(bootstrap, topic, 2, "read_uncommitted"))
    assert ends > records > 0, (ends, records)


def _produce_batch(bootstrap: str, topic: str, events: list[PageView],
                   malformed: list[bytes]) -> None:
    records = [{"key": e.user_id.encode(), "value": e.to_json()} for e in events]
    records += [{"value": raw} for raw in malformed]
    random.Random(len(records)).shuffle(records)
    produce(bootstrap, topic, records)


@pytest.mark.timeout(300)  # Spark queries on a busy 2-core machine
def test_activity_pipeline_counts_exactly_across_a_restart(
        spark: Any, broker: Any, postgres_dsn: str, tmp_path: Path) -> None:
    postgres_dsn = fresh_database(postgres_dsn)
    suffix = tmp_path.name[-8:].replace("_", "-").strip("-") or "t"
    config = ActivityConfig(
        bootstrap=broker.bootstrap, postgres_dsn=postgres_dsn,
        checkpoint_dir=tmp_path / "checkpoints", archive_dir=tmp_path / "archive",
        source_topic=f"page-views-{suffix}", dlq_topic=f"page-views-dlq-{suffix}",
        counts_topic=f"page-view-counts-{suffix}", available_now=True)
    ensure_topics(broker.bootstrap, config, partitions=2)
    factory = EventFactory(seed=7, users=40)
    first = _events(factory, 300, BASE, span_s=300)
    bad_first = [factory.malformed() for _ in range(12)] + [b"", b"{}"]
    _produce_batch(broker.bootstrap, config.source_topic, first, bad_first)

    run(config, None, lambda _line: None, progress_every_s=3600, spark=spark)

    want = _expected(first)
    assert _postgres_counts(postgres_dsn) == want
    assert _topic_counts(broker.bootstrap, config.counts_topic) == want
    _assert_transactional(broker.bootstrap, config.counts_topic)
    dlq = consume_all(broker.bootstrap, config.dlq_topic, 2)
    assert sorted(m.value() for m in dlq) == sorted(bad_first)
    assert all(dict(m.headers())["error"] for m in dlq)

    # Stop, more events later in time (and more garbage), start again from the checkpoint.
    second = _events(factory, 200, BASE + timedelta(minutes=6), span_s=180)
    bad_second = [factory.malformed() for _ in range(5)]
    _produce_batch(broker.bootstrap, config.source_topic, second, bad_second)

    run(config, None, lambda _line: None, progress_every_s=3600, spark=spark)

    want = _expected(first + second)
    assert _postgres_counts(postgres_dsn) == want
    assert _topic_counts(broker.bootstrap, config.counts_topic) == want
    dlq = consume_all(broker.bootstrap, config.dlq_topic, 2)
    assert sorted(m.value() for m in dlq) == sorted(bad_first + bad_second)

    archived = spark.read.parquet(str(config.archive_dir))
    assert sorted(r.event_id for r in archived.select("event_id").collect()) == sorted(
        e.event_id for e in first + second)
    assert {r.date.isoformat() for r in archived.select("date").distinct().collect()} == {
        "2024-05-01"}
