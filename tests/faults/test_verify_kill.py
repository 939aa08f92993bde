"""``moldau verify`` through a kill -9 of the broker: nothing acknowledged is lost.

The test owns the broker (``make_broker``), runs the verify command as a user would, kills
the broker with SIGKILL in the middle of the produce phase and starts it again on the same
port and data. The idempotent producers retry what was in flight; the checker must find
every acknowledged record once, in order, at its acknowledged offset.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from typing import Any

import pytest

from tests.helpers import moldau_executable

pytestmark = pytest.mark.timeout(180)


def test_verify_reports_no_loss_across_a_kill9_and_restart(make_broker: Any) -> None:
    broker = make_broker()
    env = {k: v for k, v in os.environ.items() if k != "MOLDAU_CLIENT_LOG"}
    command = [moldau_executable(), "verify", "-b", broker.bootstrap, "--topic", "killed",
               "--duration", "8", "--rate", "2000", "--producers", "2", "--partitions", "3",
               "--read-timeout", "60", "--format", "json"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          env=env, text=True) as run:
        # Wait for the broker to have taken some of this run's records, then pull the plug.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not list(broker.data_dir.glob("killed-*/*.log")):
            time.sleep(0.2)
        time.sleep(2.0)
        broker.kill9()
        time.sleep(0.5)
        broker.start()
        stdout, stderr = run.communicate(timeout=150)
    assert "Traceback" not in stderr, stderr
    report = json.loads(stdout)
    counts = report["anomalies"]
    assert report["acked"] > 1000, report
    assert counts == dict.fromkeys(counts, 0), (counts, report["examples"])
    assert run.returncode == 0, (stdout, stderr)
    assert report["read_complete"]
    # Every acked record read back by both consumers (failed sends may or may not be there).
    assert report["values_read"] >= report["acked"]
    # The outage fell inside the timed produce phase: some acks waited for the restart.
    assert broker.runs == 2 and report["ack_latency_ms"]["max"] > 400, report


def test_the_kill_nemesis_kills_and_restarts_its_own_broker_with_no_loss() -> None:
    result = subprocess.run(
        [moldau_executable(), "verify", "--local-broker", "--nemesis", "kill",
         "--nemesis-interval", "1.5", "--duration", "5", "--rate", "1000", "--format", "json"],
        capture_output=True, text=True, timeout=150, check=False)
    assert "Traceback" not in result.stderr, result.stderr
    report = json.loads(result.stdout)
    events = [e["event"] for e in report["nemesis"]]
    assert events[:2] == ["kill -9 the broker", "restarted the broker"], events
    assert events[-1] == "restarted the broker", events  # healed before the read phase
    assert report["anomalies"] == dict.fromkeys(report["anomalies"], 0), report["examples"]
    assert report["acked"] > 500 and report["read_complete"], report
    assert result.returncode == 0, result.stderr
