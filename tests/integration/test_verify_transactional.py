"""``moldau verify --transactional`` against a real broker: a clean run, and one that must fail.

The clean run writes in transactions with confluent-kafka, aborts a share of them on purpose
(after their values reached the log), reads with read_committed and must read every committed
value once, in order, and no aborted one. The same run read with read_uncommitted is how a
broker that ignored the isolation level would look: every aborted value that reached the log
is read, and the tool must report each as an aborted read and exit 1.
"""

from __future__ import annotations

import json
from typing import Any

from tests.helpers import one_line_error, run_moldau

KINDS = ["aborted_read", "lost", "duplicated", "reordered", "inconsistent", "unexpected"]


def verify(broker: Any, *args: str, timeout: float = 100.0) -> tuple[int, dict[str, Any]]:
    result = run_moldau("verify", "--transactional", "--format", "json", *args,
                        bootstrap=broker.bootstrap, timeout=timeout)
    assert "Traceback" not in result.stderr, result.stderr
    assert result.stdout.strip(), result.stderr
    return result.returncode, json.loads(result.stdout)


def test_a_transactional_run_reads_every_committed_value_and_no_aborted_one(
        broker: Any, topic_name: str) -> None:
    code, report = verify(broker, "--topic", topic_name, "--records", "3000", "--txn-size", "50",
                          "--abort-fraction", "0.3", "--producers", "2", "--consumers", "2")
    assert code == 0, report
    assert report["clean"] and report["anomalies"] == dict.fromkeys(KINDS, 0), report
    assert report["settings"]["isolation"] == "read_committed"
    assert report["settings"]["transactional"] is True
    txn = report["transactional"]
    counts = txn["transactions"]
    assert counts["committed"] + counts["aborted"] + counts["in-doubt"] == 60, txn
    assert counts["in-doubt"] == 0 and counts["aborted"] == txn["chosen_aborts"] > 0, txn
    assert txn["committed_values"] == txn["committed_values_read"] == 50 * counts["committed"]
    assert txn["committed_values"] == report["values_read"]
    # The aborted values were in the log (acknowledged) and the consumers skipped them.
    assert txn["aborted_values"] == txn["aborted_values_acked"] == 50 * counts["aborted"]
    assert txn["aborted_values_read"] == 0
    assert report["sent"] == report["acked"] == 3000 and report["read_complete"]


def test_read_uncommitted_is_reported_as_aborted_reads(broker: Any, topic_name: str) -> None:
    code, report = verify(broker, "--topic", topic_name, "--records", "1000", "--txn-size", "20",
                          "--abort-fraction", "0.5", "--producers", "1", "--consumers", "1",
                          "--isolation-level", "read_uncommitted", "--max-examples", "3")
    assert code == 1, report
    txn = report["transactional"]
    assert txn["aborted_values_acked"] > 0, txn
    # Every aborted value in the log was read, each once; nothing else is wrong.
    assert report["anomalies"]["aborted_read"] == txn["aborted_values_acked"], report
    assert txn["aborted_values_read"] == txn["aborted_values_acked"]
    assert report["failing"] == ["aborted_read"]
    assert sum(report["anomalies"].values()) == report["anomalies"]["aborted_read"]
    assert len(report["examples"]["aborted_read"]) == 3
    assert "(its transaction" in report["examples"]["aborted_read"][0]


def test_transactional_option_mistakes_are_one_error_line(broker: Any) -> None:
    one_line_error(run_moldau("verify", "--records", "5", "--txn-size", "5",
                              bootstrap=broker.bootstrap), "--txn-size needs --transactional")
    one_line_error(run_moldau("verify", "--records", "5", "--abort-fraction", "0.5",
                              bootstrap=broker.bootstrap), "--abort-fraction needs --transactional")
    one_line_error(run_moldau("verify", "--records", "5", "--transactional", "--no-idempotence",
                              bootstrap=broker.bootstrap), "--transactional needs idempotent")
