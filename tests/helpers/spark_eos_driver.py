"""A Spark driver for the exactly-once sink's fault tests: copy one topic to another.

Run as its own process (``python -m tests.helpers.spark_eos_driver ...``) so a test can
kill -9 the driver (its whole process group: Python driver, JVM, Python workers) and start it
again from the same checkpoint. It runs one Trigger.AvailableNow query (a few micro-batches,
bounded by ``--max-per-trigger``) and exits 0 once all input present at the start has been
copied. Executors may retry a failed task up to three
times (``local[2,3]``), which the single-attempt ``local[2]`` of the shared session does not.
"""

from __future__ import annotations

import argparse
import os
import sys


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("bootstrap")
    parser.add_argument("source")
    parser.add_argument("target")
    parser.add_argument("checkpoint")
    parser.add_argument("--max-per-trigger", type=int, default=50)
    parser.add_argument("--fail-task-once", default=None)
    parser.add_argument("--die-after-commit-once", default=None)
    args = parser.parse_args()

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from pyspark.sql import SparkSession

    from moldau.spark import register

    spark = (SparkSession.builder.master("local[2,3]").appName("moldau-eos-driver")
             .config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.driver.memory", "512m")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    writer = (spark.readStream.format("moldau")
              .option("kafka.bootstrap.servers", args.bootstrap)
              .option("subscribe", args.source).option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", str(args.max_per_trigger)).load()
              .select("key", "value")
              .writeStream.format("moldau")
              .option("kafka.bootstrap.servers", args.bootstrap).option("topic", args.target)
              .option("exactlyOnce", "true")
              .option("checkpointLocation", args.checkpoint))
    if args.fail_task_once:
        writer = writer.option("moldau.test.failTaskOnce", args.fail_task_once)
    if args.die_after_commit_once:
        writer = writer.option("moldau.test.dieAfterCommitOnce", args.die_after_commit_once)
    query = writer.trigger(availableNow=True).start()
    query.awaitTermination()
    if query.exception() is not None:
        print(f"query failed: {query.exception()}", flush=True)
        return 1
    print("done", flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
