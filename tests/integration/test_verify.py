"""``moldau verify`` against a real broker: a clean run, and a run with real loss.

The loss is real: the delete-records nemesis asks the broker (DeleteRecords, through the
admin client) to drop the older half of what it acknowledged, before the read phase; the
test checks with its own consumer that those offsets are gone, and that the tool reports
exactly them as lost and exits 1.
"""

from __future__ import annotations

import json
import re
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from tests.helpers import ok, one_line_error, run_moldau


def verify(broker: Any, *args: str, timeout: float = 90.0) -> tuple[int, dict[str, Any]]:
    result = run_moldau("verify", "--format", "json", *args, bootstrap=broker.bootstrap,
                        timeout=timeout)
    assert "Traceback" not in result.stderr, result.stderr
    return result.returncode, json.loads(result.stdout)


def test_a_clean_run_exits_0_with_every_record_counted(broker: Any, topic_name: str) -> None:
    code, report = verify(broker, "--topic", topic_name, "--records", "3000",
                          "--producers", "3", "--consumers", "2", "--partitions", "4")
    assert code == 0, report
    assert report["clean"] and report["settings"]["topic"] == "created"
    assert report["partitions"] == 4
    assert (report["sent"], report["acked"], report["failed"]) == (3000, 3000, 0)
    assert (report["values_read"], report["records_read"]) == (3000, 6000)
    assert report["read_complete"] and report["foreign"] == 0
    assert set(report["ack_latency_ms"]) == {"p50", "p95", "p99", "max"}
    assert report["anomalies"] == dict.fromkeys(
        ["lost", "duplicated", "reordered", "inconsistent", "unexpected"], 0)

    # A second run on the same topic starts where the first ended: its records are not read.
    code, again = verify(broker, "--topic", topic_name, "--records", "500", "--consumers", "1",
                         "--no-idempotence", "--acks", "1")
    assert code == 0, again
    assert again["settings"]["topic"] == "existing"
    assert (again["acked"], again["records_read"], again["foreign"]) == (500, 500, 0)


def test_a_duration_bounded_run_stops_by_itself(broker: Any, topic_name: str) -> None:
    result = ok(run_moldau("verify", "--topic", topic_name, "--duration", "1.5",
                           "--rate", "1000", bootstrap=broker.bootstrap))
    produced = re.search(r"produced: (\d+) sent, (\d+) acked, 0 failed in ([\d.]+) s",
                         result.stdout)
    assert produced, result.stdout
    assert int(produced[2]) == int(produced[1]) > 100
    assert 1.4 < float(produced[3]) < 30, result.stdout
    assert result.stdout.rstrip().endswith("result: clean")


def low_watermarks(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "verify-test-probe"})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[0]
                for p in range(partitions)}
    finally:
        consumer.close()


def test_acknowledged_records_deleted_on_the_broker_are_reported_lost(
        broker: Any, topic_name: str) -> None:
    code, report = verify(broker, "--topic", topic_name, "--records", "2000",
                          "--nemesis", "delete-records", "--max-examples", "5000")
    assert code == 1, report
    assert not report["clean"]
    assert report["nemesis"] and "deleted records" in report["nemesis"][0]["event"]
    lost = report["anomalies"]["lost"]
    assert lost >= 3  # half of each of 3 partitions' acks, each got some of 2000 records
    assert lost == report["acked"] - report["values_read"]
    assert sum(report["anomalies"].values()) == lost
    # Exactly the offsets the broker no longer has are reported, no others.
    starts = low_watermarks(broker.bootstrap, topic_name, report["partitions"])
    where = [tuple(map(int, m.groups())) for m in
             (re.search(r"acked at (\d+):(\d+)$", line) for line in report["examples"]["lost"])
             if m]
    assert len(where) == lost
    assert all(offset < starts[partition] for partition, offset in where), (where, starts)
    assert sum(starts.values()) == lost  # the topic was new: everything below the start was ours


def test_user_mistakes_are_one_error_line(broker: Any, topic_name: str) -> None:
    one_line_error(run_moldau("verify", "--records", "5", "--acks", "1",
                              bootstrap=broker.bootstrap), "--no-idempotence")
    one_line_error(run_moldau("verify", "-b", "127.0.0.1:1", "--timeout", "1", "--records", "5"),
                   "cannot reach a broker")
    one_line_error(run_moldau("verify", "--topic", "bad/name", "--records", "5",
                              bootstrap=broker.bootstrap), "cannot create topic")
    one_line_error(run_moldau("verify", "--records", "5", "--nemesis", "kill",
                              bootstrap=broker.bootstrap), "--local-broker")
