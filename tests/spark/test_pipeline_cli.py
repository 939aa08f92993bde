"""``moldau pipeline activity`` as a user runs it: generates, counts, stops on Ctrl-C."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="Spark tests need pyspark: pip install -e '.[spark]'")

import psycopg

from tests.helpers import moldau_executable

from .conftest import fresh_database

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
    assert "Traceback" not in output
    assert (tmp_path / "state" / "checkpoints" / "counts" / "offsets").is_dir()
