"""The Structured Streaming queries of the activity pipeline.

Three queries read ``page-views`` independently, each with its own checkpoint under one
root, so each sink gets the guarantee its kind allows:

- ``dlq``: rows that are not a valid page view (bad JSON, missing user/page, bad timestamp,
  empty value) go to ``page-views-dlq`` unchanged, with headers saying why and where from.
  Parsing uses ``from_json`` and ``try_to_timestamp``, which give NULL on bad input instead
  of raising (Spark 4 runs in ANSI mode), so no input can crash the job.
- ``archive``: valid events as Parquet partitioned by date (the file sink is exactly once).
- ``counts``: views and unique users per page per 1-minute event-time window, with a
  watermark; also per window over all pages. Each event is counted once under its page and
  once under page NULL, so a single aggregation yields both. Unique users are exact
  (``size(collect_set(user))``): streaming does not allow COUNT(DISTINCT). In update mode
  every micro-batch carries the current totals of the windows it touched; ``foreachBatch``
  upserts them into PostgreSQL and publishes them to ``page-view-counts`` keyed by
  ``window_start|page`` (a consumer keeps the latest value per key) through the exactly-once
  sink (Spark refuses Update mode for Python data source sinks, hence a batch write in
  ``foreachBatch`` naming the query and batch id), so read_committed readers see each
  batch's totals once even when a batch is replayed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.types import StringType, StructField, StructType

from .store import WindowCount, create_schema, upsert_counts

EVENT_SCHEMA = StructType([
    StructField("event_id", StringType()),
    StructField("user_id", StringType()),
    StructField("session_id", StringType()),
    StructField("page", StringType()),
    StructField("referrer", StringType()),
    StructField("timestamp", StringType()),
    StructField("user_agent", StringType()),
])

ALL_PAGES_KEY = "*"


@dataclass(frozen=True)
class ActivityConfig:
    """Where the pipeline reads, writes and keeps its state."""

    bootstrap: str
    postgres_dsn: str
    checkpoint_dir: Path
    archive_dir: Path
    source_topic: str = "page-views"
    dlq_topic: str = "page-views-dlq"
    counts_topic: str = "page-view-counts"
    window: str = "1 minute"
    watermark: str = "2 minutes"
    starting_offsets: str = "earliest"
    max_offsets_per_trigger: int | None = None
    trigger_seconds: float = 5.0
    available_now: bool = False


def read_source(spark: SparkSession, config: ActivityConfig) -> DataFrame:
    reader = (spark.readStream.format("moldau")
              .option("kafka.bootstrap.servers", config.bootstrap)
              .option("subscribe", config.source_topic)
              .option("startingOffsets", config.starting_offsets))
    if config.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(config.max_offsets_per_trigger))
    return reader.load()


def parse(raw: DataFrame) -> DataFrame:
    """Kafka rows → parsed columns plus ``error``: NULL for a valid event, else the reason."""
    text = F.col("value").cast("string")
    event = F.from_json(text, EVENT_SCHEMA)
    parsed = raw.select(
        "key", "value", "topic", "partition", "offset",
        event.alias("e"),
        F.try_to_timestamp(event["timestamp"]).alias("event_time"),
    )
    error = (F.when(F.col("value").isNull() | (F.length("value") == 0), F.lit("empty value"))
             .when(F.col("e").isNull(), F.lit("not a JSON object"))
             .when(_blank(F.col("e.user_id")), F.lit("missing user_id"))
             .when(_blank(F.col("e.page")), F.lit("missing page"))
             .when(F.col("e.timestamp").isNull(), F.lit("missing timestamp"))
             .when(F.col("event_time").isNull(), F.lit("invalid timestamp")))
    return parsed.withColumn("error", error)


def _blank(column: Column) -> Column:
    return column.isNull() | (F.trim(column) == "")


def dead_letters(parsed: DataFrame) -> DataFrame:
    """Malformed rows as the sink wants them: original key and value, reason in headers."""
    origin = F.concat_ws("/", "topic", F.col("partition").cast("string"),
                         F.col("offset").cast("string"))
    headers = F.array(
        F.struct(F.lit("error").alias("key"), F.col("error").cast("binary").alias("value")),
        F.struct(F.lit("origin").alias("key"), origin.cast("binary").alias("value")),
    )
    return parsed.where(F.col("error").isNotNull()).select("key", "value",
                                                           headers.alias("headers"))


def valid_events(parsed: DataFrame) -> DataFrame:
    return parsed.where(F.col("error").isNull()).select(
        "e.event_id", "e.user_id", "e.session_id", "e.page", "e.referrer", "e.user_agent",
        "event_time", F.col("partition").alias("source_partition"),
        F.col("offset").alias("source_offset"),
    )


def window_counts(events: DataFrame, window: str, watermark: str) -> DataFrame:
    """Views and exact unique users per (window, page) and per window (page NULL)."""
    scoped = events.withColumn(
        "page_scope", F.explode(F.array(F.col("page"), F.lit(None).cast("string")))
    )
    return (scoped.withWatermark("event_time", watermark)
            .groupBy(F.window("event_time", window).alias("w"), F.col("page_scope"))
            .agg(F.count(F.lit(1)).alias("views"),
                 F.size(F.collect_set("user_id")).alias("unique_users"))
            .select(F.col("w.start").alias("window_start"), F.col("w.end").alias("window_end"),
                    F.col("page_scope").alias("page"), "views", "unique_users"))


def _query_id(checkpoint: Path) -> str:
    """The query's id, which Spark keeps in its checkpoint: stable across restarts and
    distinct between pipelines, as the exactly-once sink's transactional ids must be."""
    return str(json.loads((checkpoint / "metadata").read_text())["id"])


def counts_writer(config: ActivityConfig) -> Callable[[DataFrame, int], None]:
    """The ``foreachBatch`` function: upsert into PostgreSQL, then publish to Kafka."""

    def write(batch: DataFrame, batch_id: int) -> None:
        rows = [WindowCount(r.window_start, r.window_end, r.page, r.views, r.unique_users)
                for r in batch.collect()]
        if not rows:
            return
        upsert_counts(config.postgres_dsn, batch_id, rows)
        page = F.coalesce(F.col("page"), F.lit(ALL_PAGES_KEY))
        start = F.date_format("window_start", "yyyy-MM-dd'T'HH:mm:ssXXX")
        (batch.select(F.concat_ws("|", start, page).alias("key"),
                      F.to_json(F.struct(start.alias("window_start"),
                                         F.date_format("window_end",
                                                       "yyyy-MM-dd'T'HH:mm:ssXXX")
                                         .alias("window_end"),
                                         page.alias("page"), "views", "unique_users",
                                         F.lit(batch_id).alias("batch_id"))).alias("value"))
         .write.format("moldau")
         .option("kafka.bootstrap.servers", config.bootstrap)
         .option("topic", config.counts_topic)
         .option("exactlyOnce", "true")
         .option("queryId", _query_id(config.checkpoint_dir / "counts"))
         .option("batchId", str(batch_id))
         .mode("append").save())

    return write


def _trigger(writer: Any, config: ActivityConfig) -> Any:
    if config.available_now:
        return writer.trigger(availableNow=True)
    return writer.trigger(processingTime=f"{config.trigger_seconds:g} seconds")


def start_queries(spark: SparkSession, config: ActivityConfig) -> dict[str, StreamingQuery]:
    """Start the three queries; the caller waits for them and stops them."""
    create_schema(config.postgres_dsn)
    checkpoints = config.checkpoint_dir
    queries: dict[str, StreamingQuery] = {}
    try:
        dlq = (dead_letters(parse(read_source(spark, config))).writeStream
               .format("moldau").queryName("activity-dlq")
               .option("kafka.bootstrap.servers", config.bootstrap)
               .option("topic", config.dlq_topic)
               .option("checkpointLocation", str(checkpoints / "dlq")))
        queries["dlq"] = _trigger(dlq, config).start()

        archive = (valid_events(parse(read_source(spark, config)))
                   .withColumn("date", F.to_date("event_time"))
                   .writeStream.format("parquet").queryName("activity-archive")
                   .partitionBy("date")
                   .option("path", str(config.archive_dir))
                   .option("checkpointLocation", str(checkpoints / "archive")))
        queries["archive"] = _trigger(archive, config).start()

        counts = (window_counts(valid_events(parse(read_source(spark, config))),
                                config.window, config.watermark)
                  .writeStream.outputMode("update").queryName("activity-counts")
                  .foreachBatch(counts_writer(config))
                  .option("checkpointLocation", str(checkpoints / "counts")))
        queries["counts"] = _trigger(counts, config).start()
    except BaseException:
        for query in queries.values():
            query.stop()
        raise
    return queries
