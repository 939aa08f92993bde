"""The exactly-once sink under faults: a task failing after writing, a driver killed -9.

Each run of the query is a separate driver process (tests/helpers/spark_eos_driver.py) in
its own process group, so a kill -9 takes the Python driver, its JVM and its Python workers
at once, as a crashed driver machine would. The output is checked with a read_committed
consumer (every input value exactly once) and a read_uncommitted one (aborted copies exist,
so the test would fail if the sink did not use transactions).
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from .conftest import _missing_requirement, create_topic
from .records import consume_isolated, produce

ROOT = Path(__file__).resolve().parents[2]
RUN_TIMEOUT_S = 150.0


@pytest.fixture(scope="module", autouse=True)
def _needs_spark() -> None:
    reason = _missing_requirement()
    if reason:
        pytest.skip(f"Spark tests need Java and pyspark: {reason}")


class Copy:
    """One input topic with ``count`` known values, an output topic, a checkpoint."""

    def __init__(self, bootstrap: str, tmp_path: Path, count: int) -> None:
        self.bootstrap = bootstrap
        self.source = create_topic(bootstrap, partitions=2, prefix="eos-in")
        self.target = create_topic(bootstrap, partitions=2, prefix="eos-out")
        self.checkpoint = tmp_path / "checkpoint"
        self.logs = tmp_path
        self.values = [f"v{i}".encode() for i in range(count)]
        produce(bootstrap, self.source,
                [{"key": f"k{i}".encode(), "value": v} for i, v in enumerate(self.values)])
        self.runs = 0

    def start(self, *extra: str, max_per_trigger: int = 50) -> subprocess.Popen[bytes]:
        self.runs += 1
        log = open(self.logs / f"driver-{self.runs}.log", "wb")  # noqa: SIM115
        return subprocess.Popen(
            [sys.executable, "-m", "tests.helpers.spark_eos_driver", self.bootstrap,
             self.source, self.target, str(self.checkpoint),
             "--max-per-trigger", str(max_per_trigger), *extra],
            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def run(self, *extra: str, max_per_trigger: int = 50) -> int:
        process = self.start(*extra, max_per_trigger=max_per_trigger)
        try:
            return process.wait(RUN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            kill_group(process)
            raise AssertionError(f"driver run {self.runs} did not finish: "
                                 f"{self.log_tail()}") from None

    def committed_batches(self) -> int:
        """How many micro-batches Spark's commit log holds."""
        commits = self.checkpoint / "commits"
        return sum(1 for f in commits.iterdir() if f.name.isdigit()) if commits.exists() else 0

    def log_tail(self) -> str:
        return (self.logs / f"driver-{self.runs}.log").read_text(errors="replace")[-3000:]

    def read(self, isolation: str) -> list[bytes]:
        return read_values(self.bootstrap, self.target, isolation)

    def assert_exactly_once(self) -> list[bytes]:
        """read_committed holds every input once; returns what read_uncommitted holds."""
        expected = Counter(self.values)
        deadline = time.monotonic() + 30
        committed = self.read("read_committed")
        while len(committed) < len(self.values) and time.monotonic() < deadline:
            time.sleep(0.5)  # commit markers are written just after EndTxn returns
            committed = self.read("read_committed")
        got = Counter(committed)
        assert got == expected, (f"missing {sorted(expected - got)[:10]}, "
                                 f"duplicated {sorted(got - expected)[:10]}")
        return self.read("read_uncommitted")


def kill_group(process: subprocess.Popen[bytes]) -> None:
    """kill -9 the driver's process group (Python driver, JVM, Python workers)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(30)


def read_values(bootstrap: str, topic: str, isolation: str) -> list[bytes]:
    """Every value of ``topic`` (2 partitions) up to each partition's end for ``isolation``."""
    return [m.value() for m in consume_isolated(bootstrap, topic, 2, isolation)]


@pytest.mark.timeout(300)
def test_failed_task_is_retried_and_its_zombie_fenced(broker: Any, tmp_path: Path) -> None:
    copy = Copy(broker.bootstrap, tmp_path, 100)
    fault = tmp_path / "fail-task-once"
    assert copy.run("--fail-task-once", str(fault)) == 0, copy.log_tail()
    assert fault.exists(), "the injected task failure never fired"
    uncommitted = copy.assert_exactly_once()
    # The failed attempt's records were written, then aborted when its retry fenced it.
    assert len(uncommitted) > len(copy.values)


@pytest.mark.timeout(300)
def test_driver_killed_after_ending_transactions_resumes_without_duplicates(
        broker: Any, tmp_path: Path) -> None:
    copy = Copy(broker.bootstrap, tmp_path, 100)
    fault = tmp_path / "die-after-commit-once"
    code = copy.run("--die-after-commit-once", str(fault))
    assert code == -signal.SIGKILL, f"driver exited with {code}: {copy.log_tail()}"
    assert fault.exists()
    # Restarted from its checkpoint: the batch whose transactions were committed is not in
    # Spark's commit log, so it is replayed; its new transactions must be aborted.
    assert copy.run() == 0, copy.log_tail()
    uncommitted = copy.assert_exactly_once()
    assert len(uncommitted) > len(copy.values)


@pytest.mark.long_faults
@pytest.mark.timeout(900)
def test_driver_killed_at_random_points_copies_exactly_once(
        broker: Any, tmp_path: Path) -> None:
    copy = Copy(broker.bootstrap, tmp_path, 600)
    rng = random.Random()
    kills = 0
    for _ in range(4):
        before = copy.committed_batches()
        process = copy.start(max_per_trigger=30)
        # Once this run has committed a batch of its own, kill it within the next ~2 s:
        # mid-batch, while committing, or between batches, wherever that lands.
        deadline = time.monotonic() + 120
        while (copy.committed_batches() <= before and process.poll() is None
               and time.monotonic() < deadline):
            time.sleep(0.2)
        time.sleep(rng.uniform(0.0, 2.0))
        if process.poll() is not None:
            break  # the query finished before the kill
        kill_group(process)
        kills += 1
    assert kills >= 2, "the query finished before it could be killed twice"
    assert copy.run(max_per_trigger=30) == 0, copy.log_tail()
    uncommitted = copy.assert_exactly_once()
    assert len(uncommitted) > len(copy.values)


def test_exactly_once_is_refused_for_a_batch_write(spark: Any, broker: Any) -> None:
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException

    topic = create_topic(broker.bootstrap, partitions=1)
    with pytest.raises((PySparkException, Py4JJavaError), match="applies to streaming writes"):
        (spark.createDataFrame([(b"x",)], "value binary").write.format("moldau")
         .option("kafka.bootstrap.servers", broker.bootstrap).option("topic", topic)
         .option("exactlyOnce", "true").mode("append").save())
