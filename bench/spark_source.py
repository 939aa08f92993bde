"""Records/s through the ``moldau`` Spark source into a ``noop`` sink, next to the client alone.

    python -m bench.spark_source [--records N] [--size B] [--partitions P] [--reps R]
                                 [--bootstrap H:P]

Fills a topic with N records of B bytes (default 1M x 100 B), then reads it all (a) with
``spark.read.format("moldau")`` written to Spark's ``noop`` sink on ``local[2]``, once through
the row path (``moldau.decoder=rows``) and once through the columnar path (the default), and
(b) with one confluent-kafka consumer, and prints one JSON object. The Spark figures include
task scheduling and the Arrow hand-over to the JVM, not the session start (timed separately)
nor the JVM's warm-up (an untimed read comes first).
Without ``--bootstrap`` a broker is started on a free loopback port in a temporary directory.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import uuid
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from .broker_proc import BenchBroker

TIME_LIMIT_S = 300.0


def fill(bootstrap: str, count: int, size: int, partitions: int) -> str:
    topic = f"bench-spark-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20,
                         "batch.size": 1_000_000, "queue.buffering.max.messages": 1_000_000,
                         "compression.type": "none"})
    payload = os.urandom(size)
    deadline = time.monotonic() + TIME_LIMIT_S
    for i in range(count):
        while True:
            try:
                producer.produce(topic, payload, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.01)
                if time.monotonic() > deadline:
                    raise TimeoutError("filling the topic took too long") from None
    if producer.flush(TIME_LIMIT_S):
        raise TimeoutError("records not acknowledged in time")
    return topic


def client_alone(bootstrap: str, topic: str, count: int, partitions: int) -> dict[str, Any]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-spark-client",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen = 0
    start = time.perf_counter()
    deadline = start + TIME_LIMIT_S
    while seen < count and time.perf_counter() < deadline:
        seen += sum(1 for m in consumer.consume(10_000, timeout=1.0) if m.error() is None)
    elapsed = time.perf_counter() - start
    consumer.close()
    return {"records": seen, "seconds": round(elapsed, 3),
            "records_per_s": round(seen / elapsed)}


def through_spark(bootstrap: str, topic: str, count: int,
                  reps: int) -> dict[str, dict[str, Any]]:
    """The row path's and the columnar path's figures, in one session: ``reps`` timed reads
    of each, alternating which goes first, and their median (the machine is shared)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    from moldau.spark import register

    started = time.perf_counter()
    spark = (SparkSession.builder.master("local[2]").appName("bench-spark-source")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    session_s = time.perf_counter() - started
    figures = {}
    try:
        # One untimed read first, so that neither timed read pays for the JVM's warm-up.
        (spark.read.format("moldau").option("kafka.bootstrap.servers", bootstrap)
         .option("subscribe", topic).load().write.format("noop").mode("overwrite").save())
        samples: dict[str, list[float]] = {"rows": [], "columnar": []}
        for rep in range(reps):
            for decoder in ("rows", "columnar") if rep % 2 == 0 else ("columnar", "rows"):
                df = (spark.read.format("moldau").option("kafka.bootstrap.servers", bootstrap)
                      .option("subscribe", topic).option("moldau.decoder", decoder).load())
                start = time.perf_counter()
                df.write.format("noop").mode("overwrite").save()
                samples[decoder].append(time.perf_counter() - start)
        for decoder, seconds in samples.items():
            df = (spark.read.format("moldau").option("kafka.bootstrap.servers", bootstrap)
                  .option("subscribe", topic).option("moldau.decoder", decoder).load())
            rows = df.count()  # a further read, only to check nothing was missed
            elapsed = statistics.median(seconds)
            figures[decoder] = {"records": rows, "seconds": round(elapsed, 3),
                                "samples_s": [round(x, 3) for x in seconds],
                                "records_per_s": round(count / elapsed),
                                "session_start_s": round(session_s, 1)}
    finally:
        spark.stop()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--bootstrap")
    parser.add_argument("--reps", type=int, default=3,
                        help="timed Spark reads per path (median reported)")
    args = parser.parse_args()
    broker = None if args.bootstrap else BenchBroker()
    bootstrap = args.bootstrap or broker.bootstrap  # type: ignore[union-attr]
    try:
        topic = fill(bootstrap, args.records, args.size, args.partitions)
        result = {
            "benchmark": "spark_source", "record_bytes": args.size,
            "partitions": args.partitions, "records": args.records,
        }
        spark = through_spark(bootstrap, topic, args.records, args.reps)
        result["spark_noop"] = spark["rows"]
        result["spark_noop_columnar"] = spark["columnar"]
        result["confluent_kafka"] = client_alone(bootstrap, topic, args.records,
                                                 args.partitions)
        client_rate = result["confluent_kafka"]["records_per_s"]
        result["spark_vs_client"] = round(spark["rows"]["records_per_s"] / client_rate, 3)
        result["columnar_vs_client"] = round(spark["columnar"]["records_per_s"] / client_rate, 3)
        result["columnar_vs_rows"] = round(spark["columnar"]["records_per_s"]
                                           / spark["rows"]["records_per_s"], 3)
        print(json.dumps(result))
    finally:
        if broker is not None:
            broker.close()


if __name__ == "__main__":
    main()
