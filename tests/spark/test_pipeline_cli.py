"""``moldau pipeline activity`` as a user runs it: generates, counts, stops on Ctrl-C."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="Spark tests need pyspark: pip install -e '.[spark]'")

import psycopg

from tests.helpers import free_port, moldau_executable
from tests.helpers.broker_process import port_accepts

from .conftest import _missing_requirement, fresh_database

START_LIMIT_S = 180
STOP_LIMIT_S = 120


def _counted_views(dsn: str) -> int:
    try:
        with psycopg.connect(dsn) as conn:
            row = conn.execute("SELECT coalesce(sum(views), 0) FROM window_totals").fetchone()
    except psycopg.errors.UndefinedTable:
        return 0
    return int(row[0]) if row else 0


@pytest.mark.timeout(420)  # Spark queries on a busy 2-core machine
def test_pipeline_command_counts_and_stops_cleanly_on_ctrl_c(
        spark: Any, make_broker: Any, postgres_dsn: str, tmp_path: Path) -> None:
    broker = make_broker()
    dsn = fresh_database(postgres_dsn)
    log = tmp_path / "pipeline.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            [moldau_executable(), "pipeline", "activity", "-b", broker.bootstrap,
             "--postgres", dsn, "--state-dir", str(tmp_path / "state"), "--rate", "40",
             "--trigger-seconds", "2"],
            stdout=out, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + START_LIMIT_S
            while _counted_views(dsn) == 0:
                assert process.poll() is None, log.read_text()[-3000:]
                assert time.monotonic() < deadline, "no counts within the time limit"
                time.sleep(1)
            process.send_signal(signal.SIGINT)
            assert process.wait(STOP_LIMIT_S) == 0, log.read_text()[-3000:]
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    output = log.read_text()
    assert "pipeline running" in output
    assert "stopping..." in output
    assert "generated " in output
    # Where the results are, and counts of what they hold, while running and at the end.
    assert f"psql '{dsn}'" in output
    assert f"Parquet archive of valid events (by date): {tmp_path / 'state' / 'archive'}" in output
    assert "moldau consume page-view-counts" in output
    assert "moldau consume page-views-dlq" in output
    assert re.search(r"PostgreSQL [1-9]\d* page/window rows, [1-9]\d* views", output), output
    assert re.search(r"final results: PostgreSQL [1-9]\d* page/window rows", output), output
    assert "Traceback" not in output
    assert (tmp_path / "state" / "checkpoints" / "counts" / "offsets").is_dir()


REPO = Path(__file__).resolve().parents[2]
PROGRESS_WITH_COUNTS = re.compile(r"PostgreSQL [1-9]\d* page/window rows")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


# About 35 s; in `make test-long-faults` (the Ctrl-C test of `moldau pipeline` above stays in
# `make test`).
@pytest.mark.long_faults
@pytest.mark.timeout(480)  # Spark on a busy 2-core machine, twice the broker
def test_make_pipeline_ctrl_c_stops_the_pipeline_then_its_broker(tmp_path: Path) -> None:
    """``make pipeline`` as a terminal runs it: Ctrl-C is SIGINT to the whole foreground
    process group (make, its shell, the pipeline, Spark). The broker that make started must
    outlive the pipeline, so the pipeline's last micro-batches finish without connection
    errors, and then be stopped by make."""
    reason = _missing_requirement()
    if reason:
        pytest.skip(f"make pipeline needs Java and pyspark: {reason}")
    from moldau.spark.pipelines.local_postgres import find_bindir

    try:
        find_bindir()
    except RuntimeError as exc:
        pytest.skip(f"make pipeline needs the PostgreSQL server binaries: {exc}")
    if shutil.which("make") is None or shutil.which("setsid") is None:
        pytest.fail("make and setsid (util-linux) are part of every Debian install")
    venv = Path(sys.executable).parent.parent  # the venv running the tests, not ./.venv
    port = free_port()
    log = tmp_path / "make.log"
    command = [
        "make", "--no-print-directory", "-o", f"{venv}/.stamp-test", "-o", "apt-deps",
        "pipeline", f"VENV={venv}", f"PORT={port}", f"DATA={tmp_path / 'data'}",
        f"PIPELINE_ARGS=--state-dir {tmp_path / 'state'} --rate 40 --trigger-seconds 2",
    ]
    broker_pid = None
    with log.open("w") as out:
        # A session of its own: the test plays the terminal and signals the whole group.
        process = subprocess.Popen(command, cwd=REPO, stdout=out, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            deadline = time.monotonic() + START_LIMIT_S
            while not PROGRESS_WITH_COUNTS.search(log.read_text()):
                assert process.poll() is None, log.read_text()[-3000:]
                assert time.monotonic() < deadline, log.read_text()[-3000:]
                time.sleep(1)
            found = re.search(r"started a broker \(pid (\d+)\)", log.read_text())
            assert found, log.read_text()[-3000:]
            broker_pid = int(found.group(1))
            os.killpg(process.pid, signal.SIGINT)  # Ctrl-C
            process.wait(STOP_LIMIT_S)
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
            if broker_pid is not None and _alive(broker_pid):
                os.kill(broker_pid, signal.SIGTERM)
    output = log.read_text()
    assert broker_pid is not None and not _alive(broker_pid), output[-3000:]
    assert not port_accepts(port), output[-3000:]
    # The order: the pipeline stops (its last line), then make stops the broker.
    stopped = output.index("stopped: ")
    final = output.index("final results: ")
    handover = output.index("the pipeline exited (0); stopping the broker")
    shutdown = output.index("shutting down")
    assert stopped < final < handover < shutdown, output[-3000:]
    assert "shut down cleanly" in output[shutdown:]
    for noise in ("Traceback", "Connection refused", "|FAIL|", "KafkaException"):
        assert noise not in output, output[-3000:]
