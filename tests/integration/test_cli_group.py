"""End-to-end tests of ``moldau group`` against a real broker and real group consumers.

Every test builds its own group: a 3-partition topic with 10 records per partition
(timestamps one second apart, an hour ago), consumed by a real subscribing consumer
that commits partition 0 at 4 and partition 1 at 10 and leaves partition 2 uncommitted.
So the expected lag is exact: 6, 0 and unknown ('-'). What the CLI changed is read back
with confluent-kafka (committed offsets, and a consumer that starts from them), never
only through the CLI's own output.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from types import TracebackType
from typing import Any

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.helpers import (
    BrokerProcess,
    ExternalBroker,
    Result,
    ok,
    one_line_error,
    run_moldau,
)
from tests.integration.clients import create_topic, produce_all

Key = tuple[str, int]

PARTITIONS = 3
PER_PARTITION = 10
INITIAL_COMMITS = {0: 4, 1: 10}  # partition 2: nothing committed
STEP_MS = 1000
BOUND_S = 60.0  # every wait in this module gives up after this long


@dataclass
class Group:
    """A topic and a group with known committed offsets; ``run`` calls the CLI."""

    bootstrap: str
    topic: str
    group: str
    base_ms: int  # timestamp of offset 0 in every partition; offset i is base + i s

    def run(self, *args: str) -> Result:
        return run_moldau(*args, bootstrap=self.bootstrap, timeout=BOUND_S + 30)

    def consumer(self, **extra: Any) -> Consumer:
        config: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap,
            "group.id": self.group,
            "client.id": "group-test-client",
            "enable.auto.commit": False,
            # Only a committed offset can make a consumer start anywhere but the end.
            "auto.offset.reset": "latest",
            "fetch.wait.max.ms": 100,
        }
        config.update(extra)
        return Consumer(config)

    def committed(self) -> dict[int, int]:
        """The group's committed offsets as the broker returns them to any client."""
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        request = [ConsumerGroupTopicPartitions(
            self.group, [TopicPartition(self.topic, p) for p in range(PARTITIONS)]
        )]
        answer = admin.list_consumer_group_offsets(request)[self.group].result(timeout=BOUND_S)
        return {tp.partition: tp.offset for tp in answer.topic_partitions if tp.offset >= 0}

    def read_from_committed(self) -> dict[int, list[int]]:
        """Offsets a fresh group member reads before going idle, per partition."""
        consumer = self.consumer()
        seen: dict[int, list[int]] = {}
        try:
            consumer.subscribe([self.topic])
            deadline = time.monotonic() + BOUND_S
            idle_since: float | None = None
            while time.monotonic() < deadline:
                messages = consumer.consume(100, 0.5)
                for m in messages:
                    assert m.error() is None, m.error()
                    partition, offset = m.partition(), m.offset()
                    assert partition is not None and offset is not None
                    seen.setdefault(partition, []).append(offset)
                if messages or not consumer.assignment():
                    idle_since = None
                elif idle_since is None:
                    idle_since = time.monotonic()
                elif time.monotonic() - idle_since > 2.0:
                    return seen
            raise AssertionError(f"consumer did not settle within {BOUND_S} s: {seen}")
        finally:
            consumer.close()


def produce_records(bootstrap: str, topic: str, base_ms: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    records = [
        {"partition": p, "value": f"p{p}-{i}".encode(), "timestamp": base_ms + i * STEP_MS}
        for p in range(PARTITIONS)
        for i in range(PER_PARTITION)
    ]
    log = produce_all(producer, topic, records)
    assert not log.failed, log.failed


def consume_and_commit_part(group: Group) -> None:
    """A real group member reads every record, then commits only part of them."""
    consumer = group.consumer(**{"auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([group.topic])
        got = 0
        deadline = time.monotonic() + BOUND_S
        while got < PARTITIONS * PER_PARTITION and time.monotonic() < deadline:
            for m in consumer.consume(100, 0.5):
                assert m.error() is None, m.error()
                got += 1
        assert got == PARTITIONS * PER_PARTITION, f"read {got} records within {BOUND_S} s"
        consumer.commit(
            offsets=[TopicPartition(group.topic, p, o) for p, o in INITIAL_COMMITS.items()],
            asynchronous=False,
        )
    finally:
        consumer.close()


@pytest.fixture
def group(broker: BrokerProcess | ExternalBroker, topic_name: str) -> Group:
    base_ms = int(time.time() * 1000) - 3_600_000
    g = Group(broker.bootstrap, topic_name, f"{topic_name}-group", base_ms)
    create_topic(broker.bootstrap, topic_name, partitions=PARTITIONS)
    produce_records(broker.bootstrap, topic_name, base_ms)
    consume_and_commit_part(g)
    assert g.committed() == INITIAL_COMMITS
    return g


class ActiveMember:
    """A subscribed consumer polling in a thread until the ``with`` block ends.

    Entering waits (bounded) until the member owns partitions, so the group is Stable
    with one member; leaving closes it, which sends LeaveGroup and empties the group.
    """

    def __init__(self, group: Group) -> None:
        self._group = group
        self._stop = threading.Event()
        self._assigned = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            consumer = self._group.consumer()
            try:
                consumer.subscribe([self._group.topic])
                deadline = time.monotonic() + 2 * BOUND_S
                while not self._stop.is_set() and time.monotonic() < deadline:
                    consumer.poll(0.2)
                    if consumer.assignment():
                        self._assigned.set()
            finally:
                consumer.close()
        except BaseException as exc:  # reported by __exit__ in the test's thread
            self._error = exc

    def __enter__(self) -> ActiveMember:
        self._thread.start()
        if not self._assigned.wait(BOUND_S):
            self._stop.set()
            self._thread.join(BOUND_S)
            raise AssertionError(f"consumer got no assignment within {BOUND_S} s: {self._error}")
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join(BOUND_S)
        assert not self._thread.is_alive(), "consumer thread did not stop"
        if self._error is not None and kind is None:
            raise self._error



def offset_rows(output: str, topic: str) -> dict[int, list[str]]:
    """Offsets table of ``group describe``: {partition: [committed, end, lag, member]}."""
    rows = {}
    for line in output.splitlines():
        cells = line.split()
        if len(cells) == 6 and cells[0] == topic and cells[1].isdigit():
            rows[int(cells[1])] = cells[2:]
    return rows


def plan_rows(output: str, topic: str) -> dict[int, tuple[str, str]]:
    """Plan table of ``group reset-offsets``: {partition: (current, new)}."""
    rows = {}
    for line in output.splitlines():
        cells = line.split()
        if len(cells) == 4 and cells[0] == topic and cells[1].isdigit():
            rows[int(cells[1])] = (cells[2], cells[3])
    return rows


def listed(g: Group, *args: str) -> dict[str, list[str]]:
    """``group list`` rows: {group: [state, protocol type]}."""
    rows = {}
    for line in ok(g.run("group", "list", *args)).stdout.splitlines():
        cells = line.split()
        if len(cells) == 3 and cells[0] != "Group":
            rows[cells[0]] = cells[1:]
    return rows


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")


# -- list and describe -------------------------------------------------------------------


def test_list_shows_the_group_and_filters_by_state(group: Group) -> None:
    assert listed(group)[group.group] == ["Empty", "consumer"]
    assert group.group in listed(group, "--state", "Empty")
    assert group.group in listed(group, "--state", "empty", "--state", "Stable")
    assert group.group not in listed(group, "--state", "Stable")


def test_describe_active_group_shows_members_and_exact_lag(group: Group) -> None:
    with ActiveMember(group):
        assert listed(group, "--state", "Stable")[group.group] == ["Stable", "consumer"]
        text = ok(group.run("group", "describe", group.group)).stdout
        doc = json.loads(ok(group.run("group", "describe", group.group, "--format", "json")).stdout)

    assert f"Group: {group.group}  State: Stable  ProtocolType: consumer  Assignor: range" in text
    assert doc["state"] == "Stable"
    assert doc["protocol_type"] == "consumer"
    assert doc["assignor"] == "range"
    assert doc["coordinator"]["port"] == int(group.bootstrap.rsplit(":", 1)[1])
    assert f"Coordinator: {doc['coordinator']['id']} (" in text

    [member] = doc["members"]
    assert member["client_id"] == "group-test-client"
    assert member["group_instance_id"] is None
    assert member["host"]
    assert member["assignment"] == [{"topic": group.topic, "partition": p}
                                    for p in range(PARTITIONS)]
    assert member["member_id"] in text
    assert f"{group.topic}:0,1,2" in text

    expected = {0: (4, 10, 6), 1: (10, 10, 0), 2: (None, 10, None)}
    assert {r["partition"]: (r["committed_offset"], r["log_end_offset"], r["lag"])
            for r in doc["offsets"]} == expected
    assert {r["member_id"] for r in doc["offsets"]} == {member["member_id"]}
    assert offset_rows(text, group.topic) == {
        0: ["4", "10", "6", member["member_id"]],
        1: ["10", "10", "0", member["member_id"]],
        2: ["-", "10", "-", member["member_id"]],
    }


def test_describe_after_the_consumer_left(group: Group) -> None:
    text = ok(group.run("group", "describe", group.group)).stdout
    assert "State: Empty" in text
    assert "Members: none" in text
    # Only committed partitions remain: nobody owns partition 2 and nothing is committed.
    assert offset_rows(text, group.topic) == {0: ["4", "10", "6", "-"], 1: ["10", "10", "0", "-"]}


def test_describe_unknown_group(group: Group) -> None:
    one_line_error(group.run("group", "describe", f"no-such-{uuid.uuid4().hex[:8]}"),
                   "does not exist")


# -- reset-offsets -----------------------------------------------------------------------


def test_reset_to_earliest_dry_run_changes_nothing(group: Group) -> None:
    for extra in (("--dry-run",), ()):  # without --execute it is a dry run, as in Kafka
        result = ok(group.run("group", "reset-offsets", group.group, "--topic", group.topic,
                              "--to-earliest", *extra))
        assert plan_rows(result.stdout, group.topic) == {
            0: ("4", "0"), 1: ("10", "0"), 2: ("-", "0")
        }
        assert "Dry run" in result.stderr
        assert group.committed() == INITIAL_COMMITS


def test_reset_to_earliest_execute_then_consume_from_committed(group: Group) -> None:
    result = ok(group.run("group", "reset-offsets", group.group, "--topic", group.topic,
                          "--to-earliest", "--execute"))
    assert plan_rows(result.stdout, group.topic) == {0: ("4", "0"), 1: ("10", "0"), 2: ("-", "0")}
    assert f"Reset 3 partition(s) of group {group.group}" in result.stdout
    assert group.committed() == {0: 0, 1: 0, 2: 0}

    text = ok(group.run("group", "describe", group.group)).stdout
    assert offset_rows(text, group.topic) == {
        p: ["0", "10", "10", "-"] for p in range(PARTITIONS)
    }
    # auto.offset.reset=latest: reading everything proves the consumer used the commits.
    expected = list(range(PER_PARTITION))
    assert group.read_from_committed() == {p: expected for p in range(PARTITIONS)}


def test_reset_to_offset_on_chosen_partitions_clamps_to_the_log(group: Group) -> None:
    admin = AdminClient({"bootstrap.servers": group.bootstrap})
    # Partition 1 now starts at 3, so asking for 1 there must give 3.
    for future in admin.delete_records([TopicPartition(group.topic, 1, 3)]).values():
        future.result(timeout=BOUND_S)

    low = ok(group.run("group", "reset-offsets", group.group, "--topic", f"{group.topic}:0,1",
                       "--to-offset", "1", "--execute"))
    assert plan_rows(low.stdout, group.topic) == {0: ("4", "1"), 1: ("10", "3")}
    assert group.committed() == {0: 1, 1: 3}

    high = ok(group.run("group", "reset-offsets", group.group, "--topic", f"{group.topic}:2",
                        "--to-offset", "1000", "--execute"))
    assert plan_rows(high.stdout, group.topic) == {2: ("-", "10")}
    assert group.committed() == {0: 1, 1: 3, 2: 10}


def test_reset_shift_by(group: Group) -> None:
    result = ok(group.run("group", "reset-offsets", group.group, "--topic", f"{group.topic}:0,1",
                          "--shift-by", "-2", "--execute"))
    assert plan_rows(result.stdout, group.topic) == {0: ("4", "2"), 1: ("10", "8")}
    assert group.committed() == {0: 2, 1: 8}

    # Past either end the offset stops at the end, as Kafka's tool does.
    ok(group.run("group", "reset-offsets", group.group, "--topic", f"{group.topic}:0,1",
                 "--shift-by", "-5", "--execute"))
    assert group.committed() == {0: 0, 1: 3}
    ok(group.run("group", "reset-offsets", group.group, "--topic", f"{group.topic}:0",
                 "--shift-by", "50", "--execute"))
    assert group.committed() == {0: 10, 1: 3}


def test_reset_shift_by_needs_a_committed_offset(group: Group) -> None:
    result = group.run("group", "reset-offsets", group.group, "--topic", group.topic,
                       "--shift-by", "1", "--execute")
    one_line_error(result, f"{group.topic}:2", "no committed offset")
    assert group.committed() == INITIAL_COMMITS


def test_reset_to_datetime(group: Group) -> None:
    # Exactly the timestamp of offset 5, then half a second later (the next record is 6).
    for when, expected in ((group.base_ms + 5 * STEP_MS, 5), (group.base_ms + 5500, 6)):
        result = ok(group.run("group", "reset-offsets", group.group, "--topic", group.topic,
                              "--to-datetime", iso(when), "--execute"))
        assert {p: new for p, (_, new) in plan_rows(result.stdout, group.topic).items()} == {
            p: str(expected) for p in range(PARTITIONS)
        }
        assert group.committed() == {p: expected for p in range(PARTITIONS)}
    # No record is that new: the end of the log, as in Kafka.
    ok(group.run("group", "reset-offsets", group.group, "--topic", group.topic,
                 "--to-datetime", iso(int(time.time() * 1000) + 3_600_000), "--execute"))
    assert group.committed() == {p: PER_PARTITION for p in range(PARTITIONS)}


def test_reset_and_delete_refused_while_the_group_is_active(group: Group) -> None:
    with ActiveMember(group):
        for mode in ("--execute", "--dry-run"):
            result = group.run("group", "reset-offsets", group.group, "--topic", group.topic,
                               "--to-earliest", mode)
            one_line_error(result, group.group, "active", "Stable")
            assert result.stdout == ""
        one_line_error(group.run("group", "delete", group.group), "NON_EMPTY_GROUP")
        assert group.committed() == INITIAL_COMMITS


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ((), "give one of"),
        (("--to-earliest", "--to-latest"), "exclude each other"),
        (("--to-earliest", "--dry-run", "--execute"), "exclude each other"),
        (("--to-datetime", "yesterday"), "invalid --to-datetime"),
        (("--to-earliest", "--topic", "t:x"), "partitions must be numbers"),
    ],
)
def test_reset_user_mistakes(group: Group, args: tuple[str, ...], fragment: str) -> None:
    result = group.run("group", "reset-offsets", group.group, "--topic", group.topic, *args)
    one_line_error(result, fragment)
    assert group.committed() == INITIAL_COMMITS


def test_reset_unknown_topic_or_partition(group: Group) -> None:
    one_line_error(group.run("group", "reset-offsets", group.group, "--topic", f"{group.topic}:7",
                             "--to-earliest"), "no partition 7")
    one_line_error(group.run("group", "reset-offsets", group.group, "--topic", "no-such-topic-x",
                             "--to-earliest"), "does not exist")


# -- delete ------------------------------------------------------------------------------


def test_delete_empty_group_then_unknown_group(group: Group) -> None:
    result = ok(group.run("group", "delete", group.group))
    assert f"Deleted group {group.group}." in result.stdout
    assert group.group not in listed(group)
    assert group.committed() == {}

    one_line_error(group.run("group", "delete", group.group), group.group, "GROUP_ID_NOT_FOUND")


def test_delete_several_reports_each_failure(group: Group) -> None:
    missing = f"no-such-{uuid.uuid4().hex[:8]}"
    result = group.run("group", "delete", missing, group.group)
    assert result.returncode != 0
    assert f"Deleted group {group.group}." in result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and missing in lines[0], lines
