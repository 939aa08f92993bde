"""``moldau verify --transactional --local-cluster 3`` under the rotate nemesis (long_faults).

Its own ZooKeeper and three brokers (the transaction state topic RF 3, min.insync.replicas 2),
two transactional producers writing 50-value transactions, a fifth aborted on purpose, while
the nemesis kill -9s, SIGSTOPs, partitions (as root), SIGTERMs brokers, pauses one past its
ZooKeeper session and restarts ZooKeeper; the brokers hit are partition leaders, so the
transaction coordinator's broker and the leaders of the written partitions are among them.
Read with read_committed afterwards: no value of an aborted transaction may be read, no
value of a committed one may be missing, none twice or out of order. Transactions the faults
left in doubt may go either way; they are only counted (the report prints them).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from moldau.cluster.zk_server import missing_reason
from moldau.verify.own_cluster import netns_reason
from tests.helpers.cli import run_moldau

pytestmark = [pytest.mark.long_faults, pytest.mark.timeout(420)]


@pytest.fixture(autouse=True)
def _zookeeper_installed() -> None:
    reason = missing_reason()
    if reason:
        pytest.skip(reason)


def verify(*args: str, timeout: float = 400) -> tuple[dict[str, Any], int]:
    result = run_moldau("verify", "--local-cluster", "3", "--transactional", "--format", "json",
                        *args, timeout=timeout)
    assert "Traceback" not in result.stderr, result.stderr
    assert result.stdout.strip(), result.stderr
    return json.loads(result.stdout), result.returncode


def test_rotate_nemesis_transactions_no_aborted_reads_no_lost_commits_no_duplicates() -> None:
    report, status = verify("--duration", "40", "--rate", "500", "--txn-size", "50",
                            "--nemesis-interval", "1.5", "--read-timeout", "60")
    events = [e["event"] for e in report["nemesis"]]
    txn = report["transactional"]
    print(json.dumps({k: report[k] for k in ("acked", "failed", "values_read", "anomalies",
                                              "produce_seconds", "read_seconds")}))
    print(json.dumps({k: v for k, v in txn.items() if k != "in_doubt_read_examples"}))
    print("\n".join(events))
    assert report["anomalies"] == dict.fromkeys(
        ["aborted_read", "lost", "duplicated", "reordered", "inconsistent", "unexpected"], 0), (
        report["anomalies"], report["examples"])
    assert status == 0 and report["clean"], report
    counts = txn["transactions"]
    assert counts["committed"] > 50 and txn["chosen_aborts"] > 5, txn
    assert txn["committed_values_read"] == txn["committed_values"] > 2500, txn
    assert txn["aborted_values_acked"] > 0 and txn["aborted_values_read"] == 0, txn
    assert report["read_complete"], report
    kinds = {event.split(":", 1)[0] for event in events}
    wanted = {"kill", "pause", "restart", "pause-session"}
    if netns_reason() is None:
        wanted.add("partition")
    assert wanted <= kinds, events
    assert any(e.startswith("heal:") and "every replica in sync" in e for e in events), events


def test_unclean_election_loses_committed_transactions_and_is_reported() -> None:
    """The checker can fail on a real cluster: an unclean election throws away committed
    values (the new leader never had them), and the run must report them lost."""
    report, status = verify("--unclean", "--nemesis", "none", "--duration", "30",
                            "--rate", "600", "--txn-size", "50", "--read-timeout", "20")
    events = [e["event"] for e in report["nemesis"]]
    txn = report["transactional"]
    print(json.dumps({k: report[k] for k in ("acked", "failed", "values_read", "anomalies")}))
    print("\n".join(events))
    assert any("(unclean election)" in e for e in events), events
    assert report["anomalies"]["lost"] > 0 and "lost" in report["failing"], report
    assert txn["committed_values_read"] < txn["committed_values"], txn
    assert report["anomalies"]["aborted_read"] == 0, report["examples"]
    assert status == 1
