"""Run the activity pipeline: topics, generator, queries, progress lines, clean stop.

Ctrl-C (or SIGTERM) only sets a flag: PySpark's own SIGINT handler would cancel every
running Spark job at once, failing the micro-batches in flight with stack traces. On the
flag the generator thread stops within a tick, each query is stopped once its current
micro-batch has finished (bounded wait; the checkpoint makes the next start resume from
the last committed batch anyway) and the session is closed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from .generator import PageViewGenerator
from .job import ActivityConfig, start_queries
from .report import ReadCounter, outputs_summary, progress_line, quiet_logger, where_to_look

Echo = Callable[[str], None]
STOP_WAIT_S = 60.0


@dataclass(frozen=True)
class GeneratorConfig:
    rate: float = 50.0
    malformed_fraction: float = 0.01
    seed: int | None = None


def ensure_topics(bootstrap: str, config: ActivityConfig, partitions: int = 2) -> None:
    """Create the pipeline's topics when missing (an existing topic is fine)."""
    client: dict[str, Any] = {"bootstrap.servers": bootstrap, "logger": quiet_logger()}
    admin = AdminClient(client)
    names = [config.source_topic, config.dlq_topic, config.counts_topic]
    existing = admin.list_topics(timeout=30).topics
    wanted = [NewTopic(n, partitions, 1) for n in names if n not in existing]
    for future in (admin.create_topics(wanted) if wanted else {}).values():
        with contextlib.suppress(KafkaException):  # created meanwhile by somebody else
            future.result(30)


def build_session(app_name: str = "moldau-activity") -> Any:
    """A local SparkSession set up for Python data sources (see tests/spark for why)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    from ...datasource import MoldauDataSource

    spark = (SparkSession.builder.master("local[2]").appName(app_name)
             .config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.session.timeZone", "UTC")
             .config("spark.ui.showConsoleProgress", "false")  # our progress lines instead
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(MoldauDataSource)
    return spark


class QueryFailed(RuntimeError):
    """A streaming query of the pipeline stopped with an error."""


def _raise_failed(queries: dict[str, Any]) -> None:
    for name, query in queries.items():
        error = query.exception()
        if error is not None:
            raise QueryFailed(f"query {name} failed: {error}")


@contextlib.contextmanager
def _stop_on_signals(stop: threading.Event) -> Iterator[None]:
    """SIGINT/SIGTERM set ``stop`` while inside (main thread only; elsewhere a no-op)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    for sig in previous:
        signal.signal(sig, lambda *_: stop.set())
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def stop_gracefully(queries: dict[str, Any], wait_s: float = STOP_WAIT_S) -> None:
    """Stop each query between micro-batches when it gets there within ``wait_s``."""
    deadline = time.monotonic() + wait_s
    for query in queries.values():
        while query.isActive and time.monotonic() < deadline:
            with contextlib.suppress(Exception):
                if not query.status["isTriggerActive"]:
                    break
            time.sleep(0.2)
        with contextlib.suppress(Exception):
            query.stop()


def run(config: ActivityConfig, generator: GeneratorConfig | None, echo: Echo,
        progress_every_s: float = 5.0, duration_s: float | None = None,
        spark: Any = None, postgres_note: str | None = None) -> None:
    """Run until Ctrl-C/SIGTERM, ``duration_s``, or (available-now) the backlog is done.

    Prints where the results go, then a progress line every ``progress_every_s`` with
    counts (``postgres_note`` is said about the PostgreSQL server, e.g. that it is
    temporary), and on the way out the final counts and where to look again.
    """
    ensure_topics(config.bootstrap, config)
    own_session = spark is None
    spark = spark or build_session()
    stop = threading.Event()
    gen = (PageViewGenerator({"bootstrap.servers": config.bootstrap}, config.source_topic,
                             generator.rate, generator.malformed_fraction, generator.seed)
           if generator else None)
    thread = threading.Thread(target=gen.run, args=(stop,), daemon=True) if gen else None
    queries: dict[str, Any] = {}
    reads = ReadCounter()
    deadline = time.monotonic() + duration_s if duration_s else None
    try:
        with _stop_on_signals(stop):
            if thread:
                thread.start()
            queries = start_queries(spark, config)
            echo(f"pipeline running: {config.source_topic} -> {config.counts_topic}, "
                 f"{config.dlq_topic}, PostgreSQL, {config.archive_dir} (Ctrl-C stops)")
            for line in where_to_look(config, postgres_note):
                echo(line)
            next_report = time.monotonic() + progress_every_s
            while not stop.is_set():
                if all(not q.isActive for q in queries.values()):
                    break
                if deadline and time.monotonic() >= deadline:
                    break
                _raise_failed(queries)
                if time.monotonic() >= next_report:
                    reads.update(queries)
                    echo(progress_line(queries, gen.stats if gen else None, reads, config))
                    next_report += progress_every_s
                stop.wait(0.5)
            _raise_failed(queries)
    except KeyboardInterrupt:
        echo("stopping (Ctrl-C)...")
    finally:
        if stop.is_set():
            echo("stopping...")
        stop.set()
        if thread:
            thread.join(timeout=60)
        if queries:
            stop_gracefully(queries)
            with contextlib.suppress(Exception):
                reads.update(queries)
                echo("stopped: " + progress_line(queries, gen.stats if gen else None, reads))
        if own_session:
            spark.stop()
        if queries:
            with contextlib.suppress(Exception):
                echo(f"final results: {outputs_summary(config)}")
                for line in where_to_look(config, postgres_note):
                    echo(line)
