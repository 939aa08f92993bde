"""``moldau verify --local-cluster``: its own ZooKeeper and three brokers, and a nemesis.

Run as a user would run it (the console script, JSON report). The rotate run goes through
kill -9, SIGSTOP, a partition (when brokers can live in network namespaces: root), SIGTERM,
a pause past the ZooKeeper session and a ZooKeeper restart, then heals; nothing acknowledged
may be lost or read at another offset. The unclean run forces an unclean leader election on a
topic that allows it: the checker must report the acknowledged records it threw away, which
is what shows the checker can fail at all.

Duplicates and reorderings are allowed in the rotate run (``--allow``). The broker writes a
retried batch once, but librdkafka re-sends records under a new producer epoch after an
OUT_OF_ORDER_SEQUENCE_NUMBER from a new leader that lacks an unacknowledged tail (it bumps the
epoch for every partition, and records whose answer was an error after their append are
written again), as it would against Kafka. They are reported, and counted in the test output.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from moldau.cluster.zk_server import missing_reason
from moldau.verify.own_cluster import netns_reason
from tests.helpers.cli import one_line_error, run_moldau

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(autouse=True)
def _zookeeper_installed() -> None:
    reason = missing_reason()
    if reason:
        pytest.skip(reason)


def verify(*args: str, timeout: float = 280) -> tuple[dict[str, Any], int]:
    result = run_moldau("verify", "--local-cluster", "3", "--format", "json", *args,
                        timeout=timeout)
    assert "Traceback" not in result.stderr, result.stderr
    assert result.stdout.strip(), result.stderr
    return json.loads(result.stdout), result.returncode


# About 50 s / 35 s: in `make test-long-faults` (`make verify` is the long form), so `make
# test` stays within its 30-minute budget.
@pytest.mark.long_faults
def test_rotate_nemesis_loses_nothing_acknowledged() -> None:
    report, status = verify("--duration", "40", "--rate", "600", "--nemesis-interval", "1.5",
                            "--allow", "duplicated", "--allow", "reordered")
    events = [e["event"] for e in report["nemesis"]]
    # acked_without_offset: librdkafka's implicit acks (checked for loss only, see checker.py).
    print(json.dumps({k: report[k] for k in ("acked", "acked_without_offset", "failed",
                                              "values_read", "anomalies", "produce_seconds",
                                              "read_seconds")}))
    print("\n".join(events))
    counts = report["anomalies"]
    assert counts["lost"] == 0 and counts["inconsistent"] == 0 and counts["unexpected"] == 0, (
        counts, report["examples"])
    assert status == 0 and report["failing"] == [], report
    assert report["acked"] > 5000 and report["read_complete"], report
    assert report["values_read"] >= report["acked"]
    assert report["settings"]["topic_configs"] == "min.insync.replicas=2"
    kinds = {event.split(":", 1)[0] for event in events}
    wanted = {"kill", "pause", "restart", "pause-session"}
    if netns_reason() is None:
        wanted.add("partition")
    assert wanted <= kinds, events
    # Every fault was undone, then every replica came back in sync before reading.
    assert events[-1].startswith("heal:") and "every replica in sync" in events[-1], events


# About 50 s / 35 s: in `make test-long-faults` (`make verify` is the long form), so `make
# test` stays within its 30-minute budget.
@pytest.mark.long_faults
def test_unclean_election_is_reported_as_loss() -> None:
    report, status = verify("--unclean", "--nemesis", "none", "--duration", "30",
                            "--rate", "600", "--read-timeout", "15")
    events = [e["event"] for e in report["nemesis"]]
    print(json.dumps({k: report[k] for k in ("acked", "failed", "values_read", "anomalies")}))
    print("\n".join(events))
    assert any("(unclean election)" in e for e in events), events
    assert report["anomalies"]["lost"] > 0 and "lost" in report["failing"], report
    assert "unclean.leader.election.enable=true" in report["settings"]["topic_configs"]
    assert status == 1


@pytest.mark.parametrize(("args", "fragment"), [
    (["--nemesis", "pause"], "--nemesis pause needs --local-cluster"),
    (["--nemesis", "rotate"], "--nemesis rotate needs --local-cluster"),
    (["--nemesis", "kill"], "needs --local-broker or --local-cluster"),
    (["--unclean"], "--unclean needs --local-cluster"),
    (["--override", "a=b"], "--override needs --local-cluster"),
    (["--cluster-dir", "x"], "--cluster-dir needs --local-cluster"),
    (["--local-broker", "--local-cluster", "3"], "exclude each other"),
    (["-b", "127.0.0.1:1", "--local-cluster", "3"], "give one or the other"),
    (["--local-cluster", "3", "--override", "nonsense"], "invalid --override 'nonsense'"),
    (["--local-cluster", "3", "--no-netns", "--nemesis", "partition"],
     "--nemesis partition needs --netns"),
])
def test_bad_options_get_one_line(args: list[str], fragment: str) -> None:
    one_line_error(run_moldau("verify", *args), fragment)


def test_too_few_brokers_is_refused_before_starting_anything() -> None:
    result = run_moldau("verify", "--local-cluster", "2")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "'--local-cluster': 2 is not in the range 3<=x<=9" in result.stderr
