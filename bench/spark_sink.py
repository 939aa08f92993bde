"""Records/s from a DataFrame into a topic through the ``moldau`` sink, by write path.

    python -m bench.spark_sink [--records N] [--size B] [--partitions P] [--rounds R]
                               [--bootstrap H:P]

Builds a DataFrame of N rows (a text key, a B-byte binary value; default 1M x 100 B) on
``local[2]``, caches it, then writes it with ``df.write.format("moldau")`` once per path and
round, alternating ``writePath=rows`` (the original row-by-row loop), ``columnar``
(librdkafka fed column by column) and ``batches`` (the default: record batches built from
the columns and sent directly), each into a fresh topic of P partitions, after one small
untimed write per path (which starts Spark's Python workers), and prints one JSON object
with the best round and the median of each path (wall seconds, and CPU seconds of the
bench's process tree: Spark's JVM and Python workers and the broker, a figure less swayed
by other load on the machine) and each path's speed-up over ``rows``. Every write is
checked: the topic must then hold exactly N records. Spark's ``noop`` sink and a Python
sink that only receives the Arrow batches (once per round, best kept) are timed on the same
cached DataFrame too: the floors no sink, and no Python sink, can beat. Without ``--bootstrap`` a
broker is started on a free loopback port.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from .broker_proc import BenchBroker

PATHS = ("rows", "columnar", "batches")


def new_topic(admin: AdminClient, partitions: int) -> str:
    topic = f"bench-sink-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    return topic


def records_in(bootstrap: str, topic: str, partitions: int) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-spark-sink"})
    try:
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
                   for p in range(partitions))
    finally:
        consumer.close()


def session() -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    from moldau.spark import register

    spark = (SparkSession.builder.master("local[2]").appName("bench-spark-sink")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def register_discard(spark: Any) -> None:
    """A Python sink that only receives the Arrow batches: the floor of any Python writer."""
    from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage

    class DiscardWriter(DataSourceArrowWriter):
        def write(self, iterator: Any) -> WriterCommitMessage:
            for _ in iterator:
                pass
            return WriterCommitMessage()

    class Discard(DataSource):
        @classmethod
        def name(cls) -> str:
            return "bench_discard"

        def writer(self, schema: Any, overwrite: bool) -> DiscardWriter:
            return DiscardWriter()

    spark.dataSource.register(Discard)


def frame(spark: Any, count: int, size: int) -> Any:
    """``key`` = the row number as text, ``value`` = ``size`` bytes; cached in memory."""
    from pyspark.sql import functions as f

    df = spark.range(0, count, 1, 2).select(
        f.col("id").cast("string").alias("key"),
        f.expr(f"cast(lpad(cast(id as string), {size}, 'x') as binary)").alias("value"))
    df.cache()
    assert df.count() == count
    return df


def tree_cpu_seconds(root: int) -> float:
    """User + system CPU of ``root`` and every live descendant (Spark's JVM, its Python
    workers and, when the bench started it, the broker), from /proc."""
    ticks = os.sysconf("SC_CLK_TCK")
    parents: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # the process ended meanwhile
        parents[int(entry.name)] = int(fields[1])
        cpu[int(entry.name)] = (int(fields[11]) + int(fields[12])) / ticks
    tree, grew = {root}, True
    while grew:
        more = {pid for pid, parent in parents.items() if parent in tree} - tree
        grew = bool(more)
        tree |= more
    return sum(cpu.get(pid, 0.0) for pid in tree)


def timed_write(df: Any, bootstrap: str, topic: str, path: str) -> tuple[float, float]:
    """Wall seconds and CPU seconds (this process tree) of one write."""
    cpu = tree_cpu_seconds(os.getpid())
    start = time.perf_counter()
    (df.write.format("moldau").option("kafka.bootstrap.servers", bootstrap)
     .option("topic", topic).option("writePath", path).mode("append").save())
    return time.perf_counter() - start, tree_cpu_seconds(os.getpid()) - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--bootstrap")
    args = parser.parse_args()
    broker = None if args.bootstrap else BenchBroker()
    bootstrap = args.bootstrap or broker.bootstrap  # type: ignore[union-attr]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    spark = session()
    try:
        df = frame(spark, args.records, args.size)
        # The first Python write of a session starts and warms the Python workers (seconds):
        # pay that before timing anything.
        warm_up = new_topic(admin, args.partitions)
        for path in PATHS:
            timed_write(df.limit(1000), bootstrap, warm_up, path)
        start = time.perf_counter()
        df.write.format("noop").mode("overwrite").save()
        noop_s = time.perf_counter() - start
        register_discard(spark)
        df.limit(1000).write.format("bench_discard").mode("append").save()
        discard: list[float] = []
        seconds: dict[str, list[float]] = {path: [] for path in PATHS}
        cpu: dict[str, list[float]] = {path: [] for path in PATHS}
        for _ in range(args.rounds):
            start = time.perf_counter()
            df.write.format("bench_discard").mode("append").save()
            discard.append(time.perf_counter() - start)
            for path in PATHS:
                topic = new_topic(admin, args.partitions)
                wall, used = timed_write(df, bootstrap, topic, path)
                seconds[path].append(wall)
                cpu[path].append(used)
                written = records_in(bootstrap, topic, args.partitions)
                if written != args.records:
                    raise AssertionError(f"{path}: {written} of {args.records} records written")
        result: dict[str, Any] = {
            "benchmark": "spark_sink", "records": args.records, "record_bytes": args.size,
            "partitions": args.partitions, "rounds": args.rounds,
            "spark_noop": {"seconds": round(noop_s, 3),
                           "records_per_s": round(args.records / noop_s)},
            "python_discard": {"seconds": round(min(discard), 3),
                               "records_per_s": round(args.records / min(discard))},
        }
        for path in PATHS:
            best = min(seconds[path])
            result[path] = {"seconds": round(best, 3),
                            "median_seconds": round(statistics.median(seconds[path]), 3),
                            "all_seconds": [round(s, 3) for s in
                                                                      seconds[path]],
                            "records_per_s": round(args.records / best),
                            "cpu_seconds": round(min(cpu[path]), 3)}
        for path in PATHS[1:]:
            result[f"{path}_vs_rows"] = round(min(seconds["rows"]) / min(seconds[path]), 3)
            result[f"{path}_vs_rows_cpu"] = round(min(cpu["rows"]) / min(cpu[path]), 3)
            result[f"{path}_vs_rows_median"] = round(statistics.median(seconds["rows"])
                                                     / statistics.median(seconds[path]), 3)
        print(json.dumps(result))
    finally:
        spark.stop()
        if broker is not None:
            broker.close()


if __name__ == "__main__":
    main()
