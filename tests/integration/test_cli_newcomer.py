"""The rough edges a new user hits with the ``moldau`` command (issue 10, section 5).

Narrow terminals must never cut a value; ``consume --group --timeout-ms`` must not give up
before the group's first assignment; ``produce`` lets the broker auto-create a topic;
Kafka's console-tool flags work where they mean the same.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import struct
import subprocess
import termios
import time
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer

from tests.helpers import BrokerProcess, moldau_executable, ok, one_line_error, run_moldau

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")

# Kafka's default: the first member of a new group waits this long for others to join.
KAFKA_INITIAL_REBALANCE_DELAY = "group.initial.rebalance.delay.ms=3000"


def run_in_terminal(args: Sequence[str], columns: int, env: dict[str, str]) -> str:
    """Run ``moldau ARGS`` with a pseudo-terminal of ``columns`` as its stdout and stderr."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    full_env = {**os.environ, **env, "TERM": "xterm"}
    full_env.pop("COLUMNS", None)
    full_env.pop("LINES", None)
    proc = subprocess.Popen([moldau_executable(), *args], stdin=slave, stdout=slave,
                            stderr=slave, env=full_env, close_fds=True)
    os.close(slave)
    chunks = []
    try:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: every holder of the terminal has closed it
                break
            if not data:
                break
            chunks.append(data)
        assert proc.wait(60) == 0, b"".join(chunks).decode(errors="replace")
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
    return ANSI.sub("", b"".join(chunks).decode(errors="replace").replace("\r\n", "\n"))


Runner = Callable[[Sequence[str], int], str]


@pytest.fixture(params=["pipe", "terminal"])
def narrow(request: pytest.FixtureRequest, broker: Any) -> Runner:
    """Run a command at a given width: piped with COLUMNS set, or in a real terminal."""
    env = {"MOLDAU_BOOTSTRAP_SERVER": broker.bootstrap}

    def run(args: Sequence[str], columns: int) -> str:
        if request.param == "terminal":
            return run_in_terminal(args, columns, env)
        return ok(run_moldau(*args, env={**env, "COLUMNS": str(columns)})).stdout

    return run


def assert_whole(output: str, *values: str) -> None:
    """Each value appears as a whole word somewhere in the output."""
    words = set(output.split())
    missing = [v for v in values if v not in words]
    assert not missing, f"cut or missing: {missing}\n{output}"


def fill_group(bootstrap: str, topic: str, group: str, records: int) -> str:
    """Produce ``records`` and have a live member of ``group`` commit all but 5; returns its
    member id (the consumer is closed again before returning)."""
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(records):
        producer.produce(topic, f"v{i}".encode())
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "client.id": "a-client-id-that-is-rather-long-too"})
    consumer.subscribe([topic])
    seen = 0
    deadline = time.monotonic() + 60
    while seen < records - 5 and time.monotonic() < deadline:
        seen += len(consumer.consume(records - 5 - seen, 0.5))
    assert seen == records - 5
    consumer.commit(asynchronous=False)
    member = consumer.memberid() or ""
    consumer.close()
    return member


@pytest.mark.parametrize("columns", [80, 40])
def test_group_describe_in_a_narrow_terminal_cuts_nothing(
        narrow: Runner, broker: Any, columns: int) -> None:
    topic = "a-topic-with-a-name-long-enough-to-squeeze-an-80-column-table-" + os.urandom(
        3).hex()
    group = f"demo-{os.urandom(3).hex()}"
    ok(run_moldau("topic", "create", topic, "--partitions", "1", bootstrap=broker.bootstrap))
    fill_group(broker.bootstrap, topic, group, 55)
    output = narrow(["group", "describe", group], columns)
    assert_whole(output, group, topic, "50", "55", "5")
    # The row says End 55 for committed 50, whichever layout was chosen.
    assert re.search(r"\b50\s+55\s+5\b", output) or re.search(
        r"Committed:\s+50\s+End:\s+55\s+Lag:\s+5\b", output), output


@pytest.mark.parametrize("columns", [80, 40])
def test_config_describe_all_in_a_narrow_terminal_keeps_every_column(
        narrow: Runner, broker: Any, columns: int) -> None:
    output = narrow(["config", "describe", "--broker", "0", "--all"], columns)
    # Every config name, its value and its source appear whole.
    admin_rows = json_configs(broker.bootstrap)
    for name, value in admin_rows.items():
        assert_whole(output, name)
        if value:
            assert value in output, (name, value)
    assert "default" in output.split()


def json_configs(bootstrap: str) -> dict[str, str]:
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.BROKER, "0")
    entries = admin.describe_configs([resource])[resource].result(30)
    return {e.name: e.value or "" for e in entries.values() if not e.is_sensitive}


def test_topic_describe_in_a_narrow_terminal(narrow: Runner, broker: Any) -> None:
    topic = "narrow-" + "x" * 50 + os.urandom(3).hex()
    ok(run_moldau("topic", "create", topic, "--partitions", "2", "--config",
                  "retention.ms=86400000", bootstrap=broker.bootstrap))
    output = narrow(["topic", "describe", topic], 40)
    assert_whole(output, topic, "retention.ms", "86400000")


# -- consume --group --timeout-ms, produce to a new topic --------------------------------


def test_group_timeout_counts_from_the_first_assignment(make_broker: Any) -> None:
    """With Kafka's 3 s initial rebalance delay, a 3 s idle timeout still reads it all."""
    broker: BrokerProcess = make_broker(KAFKA_INITIAL_REBALANCE_DELAY)
    ok(run_moldau("topic", "create", "full", "--partitions", "2", bootstrap=broker.bootstrap))
    ok(run_moldau("produce", "full", input="".join(f"r{i}\n" for i in range(100)),
                  bootstrap=broker.bootstrap))
    result = ok(run_moldau("consume", "full", "--group", "G", "--from-beginning",
                           "--timeout-ms", "3000", bootstrap=broker.bootstrap))
    assert sorted(result.stdout.split()) == sorted(f"r{i}" for i in range(100))
    # The group committed where it stopped: describe shows no lag.
    described = json.loads(ok(run_moldau("group", "describe", "G", "--format", "json",
                                         bootstrap=broker.bootstrap)).stdout)
    assert sum(row["lag"] for row in described["offsets"]) == 0


def test_new_group_reading_from_latest_commits_its_start(make_broker: Any) -> None:
    """Like Kafka's consumer, a new group that read nothing still commits where it was, so
    ``reset-offsets --shift-by`` has something to shift."""
    broker: BrokerProcess = make_broker(KAFKA_INITIAL_REBALANCE_DELAY)
    ok(run_moldau("produce", "t", input="".join(f"r{i}\n" for i in range(20)),
                  bootstrap=broker.bootstrap))
    assert ok(run_moldau("consume", "t", "--group", "late", "--timeout-ms", "1000",
                         bootstrap=broker.bootstrap)).stdout == ""
    ok(run_moldau("group", "reset-offsets", "late", "--topic", "t", "--shift-by", "-5",
                  "--execute", bootstrap=broker.bootstrap))
    again = ok(run_moldau("consume", "t", "--group", "late", "--timeout-ms", "2000",
                          bootstrap=broker.bootstrap))
    assert again.stdout.split() == [f"r{i}" for i in range(15, 20)]


def test_group_waiting_for_an_assignment_is_bounded(make_broker: Any) -> None:
    broker: BrokerProcess = make_broker("group.initial.rebalance.delay.ms=60000")
    ok(run_moldau("produce", "t", input="x\n", bootstrap=broker.bootstrap))
    started = time.monotonic()
    result = run_moldau("consume", "t", "--group", "slow", "--timeout-ms", "500",
                        "--timeout", "2", bootstrap=broker.bootstrap)
    one_line_error(result, "no partitions assigned within 2.5 s")
    assert time.monotonic() - started < 40


def test_produce_lets_the_broker_auto_create_a_topic(make_broker: Any) -> None:
    broker: BrokerProcess = make_broker("num.partitions=3")
    result = ok(run_moldau("produce", "brand-new", input="a\nb\n",
                           bootstrap=broker.bootstrap))
    assert "Produced 2 records to brand-new" in result.stderr
    out = ok(run_moldau("consume", "brand-new", "--from-beginning", "--max-messages", "2",
                        bootstrap=broker.bootstrap)).stdout
    assert sorted(out.split()) == ["a", "b"]
    described = ok(run_moldau("topic", "describe", "brand-new", bootstrap=broker.bootstrap))
    assert "PartitionCount: 3" in described.stdout


def test_produce_to_a_missing_topic_without_auto_create_says_how(make_broker: Any) -> None:
    broker: BrokerProcess = make_broker("auto.create.topics.enable=false")
    one_line_error(run_moldau("produce", "nope", input="a\n", bootstrap=broker.bootstrap),
                   "does not exist", "auto.create.topics.enable=false",
                   "moldau topic create nope")


# -- Kafka tool habits -------------------------------------------------------------------


def test_kafka_console_consumer_flags(broker: Any, topic_name: str) -> None:
    b = broker.bootstrap
    ok(run_moldau("topic", "create", "--topic", topic_name, "--partitions", "1",
                  "--bootstrap-server", b))
    ok(run_moldau("produce", "--topic", topic_name, "--property", "parse.key=true",
                  "--bootstrap-server", b, input="k1\tv1\nk2\tv2\n"))
    ok(run_moldau("produce", "--topic", topic_name, "--property", "parse.key=true",
                  "--property", "key.separator=:", "--bootstrap-server", b, input="k3:v3\n"))
    out = ok(run_moldau(
        "consume", "--bootstrap-server", b, "--topic", topic_name, "--from-beginning",
        "--max-messages", "3", "--property", "print.key=true", "--property",
        "print.partition=true", "--property", "print.offset=true", "--property",
        "key.separator=|")).stdout
    assert out.splitlines() == ["Partition:0|Offset:0|k1|v1", "Partition:0|Offset:1|k2|v2",
                                "Partition:0|Offset:2|k3|v3"]
    stamped = ok(run_moldau("consume", "-b", b, "--topic", topic_name, "--from-beginning",
                            "--max-messages", "1", "--property", "print.timestamp=true")).stdout
    assert re.fullmatch(r"CreateTime:\d{13}\tv1\n", stamped), stamped


def test_unsupported_property_is_refused_in_one_line(broker: Any, topic_name: str) -> None:
    one_line_error(run_moldau("consume", topic_name, "--property", "print.foo=true",
                              bootstrap=broker.bootstrap), "print.foo", "print.key")


def test_version_flag() -> None:
    result = ok(run_moldau("--version"))
    assert result.stdout.startswith("moldau ")
    assert result.stdout == ok(run_moldau("version")).stdout


@pytest.mark.parametrize(("args", "hint"), [
    (("topic", "--list"), "moldau topic list"),
    (("topic", "--describe", "--topic", "x"), "moldau topic describe"),
    (("topic", "create", "x", "--zookeeper", "localhost:2181"), "--bootstrap-server"),
    (("consume", "x", "--consumer-property", "a=b"), "moldau consume --help"),
    (("--create",), "moldau topic create"),
])
def test_kafka_flags_moldau_spells_differently_get_the_moldau_form(
        args: tuple[str, ...], hint: str) -> None:
    result = run_moldau(*args)
    assert result.returncode == 2, result
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and hint in errors[0], result.stderr


def test_topic_describe_without_a_name_describes_all(broker: Any, topic_name: str) -> None:
    ok(run_moldau("topic", "create", f"{topic_name}-a", "--partitions", "2",
                  bootstrap=broker.bootstrap))
    ok(run_moldau("topic", "create", f"{topic_name}-b", bootstrap=broker.bootstrap))
    out = ok(run_moldau("topic", "describe", bootstrap=broker.bootstrap)).stdout
    assert f"Topic: {topic_name}-a  PartitionCount: 2" in out
    assert f"Topic: {topic_name}-b  PartitionCount: 1" in out
    assert "__consumer_offsets" not in out
    with_internal = ok(run_moldau("topic", "describe", "--internal",
                                  bootstrap=broker.bootstrap)).stdout
    assert "Topic: __consumer_offsets" in with_internal or "__consumer_offsets" not in ok(
        run_moldau("topic", "list", "--internal", bootstrap=broker.bootstrap)).stdout
