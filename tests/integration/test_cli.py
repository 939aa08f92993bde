"""End-to-end tests of the ``moldau`` command against a real broker.

Each test runs the installed console script as a subprocess, the way a person would,
and checks both what it prints and what the broker then holds (read back with
confluent-kafka where the CLI's own output would be circular).
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from tests.helpers import (
    BrokerProcess,
    ExternalBroker,
    Result,
    free_port,
    moldau_executable,
    ok,
    one_line_error,
    run_moldau,
)


@pytest.fixture
def moldau(broker: BrokerProcess | ExternalBroker) -> Any:
    """``moldau(*args, input=...)`` bound to the shared broker."""

    def run(*args: str, **kwargs: Any) -> Result:
        return run_moldau(*args, bootstrap=broker.bootstrap, **kwargs)

    return run


def create_topic(moldau: Any, name: str, *args: str) -> None:
    ok(moldau("topic", "create", name, *args))


def topic_names(moldau: Any, *args: str) -> list[str]:
    return ok(moldau("topic", "list", *args)).stdout.split()


def broker_id(bootstrap: str) -> int:
    brokers = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).brokers
    return min(brokers)


def describe_rows(output: str) -> dict[int, list[str]]:
    """Rows of ``topic describe``: {partition: [leader, replicas, isr, earliest, latest]}."""
    rows = {}
    for line in output.splitlines():
        cells = line.split()
        if len(cells) == 6 and cells[0].isdigit():
            rows[int(cells[0])] = cells[1:]
    return rows


def config_rows(output: str) -> dict[str, str]:
    """Name -> value from a config table (name and value never contain spaces here)."""
    rows = {}
    for line in output.splitlines():
        cells = line.split()
        if len(cells) >= 3 and "." in cells[0]:
            rows[cells[0]] = cells[1]
    return rows


# -- topics ------------------------------------------------------------------------------


def test_version() -> None:
    result = ok(run_moldau("version"))
    assert result.stdout.startswith("moldau ")
    assert "librdkafka" in result.stdout


def test_python_dash_m_runs_the_same_command() -> None:
    import sys

    result = subprocess.run(
        [sys.executable, "-m", "moldau", "version"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("moldau ")


def test_topic_create_list_describe_delete(moldau: Any, topic_name: str) -> None:
    result = ok(moldau("topic", "create", topic_name, "--partitions", "3",
                       "--config", "retention.ms=123456789"))
    assert f"Created topic {topic_name}" in result.stdout
    assert topic_name in topic_names(moldau)

    described = ok(moldau("topic", "describe", topic_name)).stdout
    assert f"Topic: {topic_name}" in described
    assert "PartitionCount: 3" in described
    rows = describe_rows(described)
    assert sorted(rows) == [0, 1, 2]
    for leader, replicas, isr, earliest, latest in rows.values():
        assert leader != "none"
        assert replicas == leader and isr == leader
        assert (earliest, latest) == ("0", "0")
    assert config_rows(described).get("retention.ms") == "123456789"

    assert f"Deleted topic {topic_name}" in ok(moldau("topic", "delete", topic_name)).stdout
    assert topic_name not in topic_names(moldau)
    one_line_error(moldau("topic", "describe", topic_name), "does not exist")


def test_topic_list_hides_internal_topics_unless_asked(moldau: Any, topic_name: str) -> None:
    create_topic(moldau, topic_name)
    plain = topic_names(moldau)
    assert topic_name in plain
    assert not [n for n in plain if n in ("__consumer_offsets", "__transaction_state")]
    assert topic_name in topic_names(moldau, "--internal")


def test_topic_create_validate_only_creates_nothing(moldau: Any, topic_name: str) -> None:
    result = ok(moldau("topic", "create", topic_name, "--partitions", "2", "--validate-only"))
    assert "would be created" in result.stdout
    assert topic_name not in topic_names(moldau)


def test_topic_create_existing(moldau: Any, topic_name: str) -> None:
    create_topic(moldau, topic_name)
    one_line_error(moldau("topic", "create", topic_name), "already exists")
    assert "already exists" in ok(moldau("topic", "create", topic_name, "--if-not-exists")).stdout


def test_topic_delete_missing(moldau: Any, topic_name: str) -> None:
    one_line_error(moldau("topic", "delete", topic_name), "does not exist")
    ok(moldau("topic", "delete", topic_name, "--if-exists"))


def test_topic_alter_partitions(moldau: Any, topic_name: str) -> None:
    create_topic(moldau, topic_name, "--partitions", "1")
    ok(moldau("topic", "alter", topic_name, "--partitions", "4"))
    rows = describe_rows(ok(moldau("topic", "describe", topic_name)).stdout)
    assert sorted(rows) == [0, 1, 2, 3]
    # Kafka never removes partitions: the broker's refusal is shown as one line.
    one_line_error(moldau("topic", "alter", topic_name, "--partitions", "2"))


def test_topic_alter_config_and_delete_config(moldau: Any, topic_name: str) -> None:
    create_topic(moldau, topic_name)
    ok(moldau("topic", "alter", topic_name, "--config", "retention.ms=3600000",
              "--config", "cleanup.policy=compact"))
    configs = config_rows(ok(moldau("topic", "describe", topic_name)).stdout)
    assert configs.get("retention.ms") == "3600000"
    assert configs.get("cleanup.policy") == "compact"

    ok(moldau("topic", "alter", topic_name, "--delete-config", "cleanup.policy"))
    configs = config_rows(ok(moldau("topic", "describe", topic_name)).stdout)
    assert "cleanup.policy" not in configs
    assert configs.get("retention.ms") == "3600000"  # incremental: the other key survives


def test_topic_alter_unknown_topic(moldau: Any, topic_name: str) -> None:
    one_line_error(moldau("topic", "alter", topic_name, "--partitions", "3"), "does not exist")


def test_topic_alter_needs_a_change(moldau: Any, topic_name: str) -> None:
    create_topic(moldau, topic_name)
    one_line_error(moldau("topic", "alter", topic_name), "nothing to alter")


# -- configs -----------------------------------------------------------------------------


def test_config_describe_and_alter_topic(moldau: Any, topic_name: str) -> None:
    create_topic(moldau, topic_name)
    before = ok(moldau("config", "describe", "--topic", topic_name)).stdout
    assert "retention.ms" not in config_rows(before)

    ok(moldau("config", "alter", "--topic", topic_name, "--set", "retention.ms=7200000",
              "--set", "max.message.bytes=65536"))
    after = config_rows(ok(moldau("config", "describe", "--topic", topic_name)).stdout)
    assert after.get("retention.ms") == "7200000"
    assert after.get("max.message.bytes") == "65536"

    every = config_rows(ok(moldau("config", "describe", "--topic", topic_name, "--all")).stdout)
    assert every.get("retention.ms") == "7200000"
    assert "cleanup.policy" in every  # a default entry, only shown with --all
    assert "segment.bytes" in every

    ok(moldau("config", "alter", "--topic", topic_name, "--delete", "retention.ms"))
    reverted = config_rows(ok(moldau("config", "describe", "--topic", topic_name)).stdout)
    assert "retention.ms" not in reverted
    assert reverted.get("max.message.bytes") == "65536"


def test_config_describe_and_alter_broker(moldau: Any, broker: Any) -> None:
    node = str(broker_id(broker.bootstrap))
    static = config_rows(ok(moldau("config", "describe", "--broker", node)).stdout)
    if isinstance(broker, BrokerProcess):
        assert "log.dirs" in static  # set by --override: not a default
    every = config_rows(ok(moldau("config", "describe", "--broker", node, "--all")).stdout)
    assert "num.partitions" in every

    ok(moldau("config", "alter", "--broker", node, "--set", "log.cleaner.threads=2"))
    try:
        dynamic = config_rows(ok(moldau("config", "describe", "--broker", node)).stdout)
        assert dynamic.get("log.cleaner.threads") == "2"
    finally:
        ok(moldau("config", "alter", "--broker", node, "--delete", "log.cleaner.threads"))
    reverted = config_rows(ok(moldau("config", "describe", "--broker", node)).stdout)
    assert "log.cleaner.threads" not in reverted


def test_config_needs_exactly_one_resource(moldau: Any) -> None:
    one_line_error(moldau("config", "describe"), "--topic")
    one_line_error(moldau("config", "describe", "--topic", "a", "--broker", "0"), "--topic")


# -- produce and consume -----------------------------------------------------------------


def test_produce_stdin_with_keys_and_headers_then_consume_text(
    moldau: Any, topic_name: str
) -> None:
    create_topic(moldau, topic_name, "--partitions", "1")
    lines = "k1:v1\nk2:value:with:colons\n:no-key-text\n"
    result = ok(moldau("produce", topic_name, "--key-separator", ":",
                       "--header", "source=test", "--header", "n=1", input=lines))
    assert f"Produced 3 records to {topic_name}" in result.stderr

    out = ok(moldau("consume", topic_name, "--from-beginning", "--max-messages", "3",
                    "--print-key", "--print-timestamp", "--print-headers",
                    "--print-partition-offset", "--key-separator", "|")).stdout
    records = out.splitlines()
    assert len(records) == 3
    expected = [("k1", "v1"), ("k2", "value:with:colons"), ("", "no-key-text")]
    for offset, (line, (key, value)) in enumerate(zip(records, expected, strict=True)):
        timestamp, partition, off, headers, got_key, got_value = line.split("|", 5)
        assert timestamp.startswith("CreateTime:")
        assert int(timestamp.split(":")[1]) > 1_600_000_000_000
        assert partition == "Partition:0"
        assert off == f"Offset:{offset}"
        assert headers == "source:test,n:1"
        assert (got_key, got_value) == (key, value)


def test_consume_plain_prints_values_only(moldau: Any, topic_name: str) -> None:
    create_topic(moldau, topic_name, "--partitions", "1")
    ok(moldau("produce", topic_name, input="a\nb\n\nc\n"))
    out = ok(moldau("consume", topic_name, "--from-beginning", "--max-messages", "4")).stdout
    assert out.splitlines() == ["a", "b", "", "c"]


def test_produce_file_with_keys_then_consume_json(
    moldau: Any, topic_name: str, tmp_path: Path
) -> None:
    create_topic(moldau, topic_name, "--partitions", "1")
    data = tmp_path / "records.txt"
    data.write_text("".join(f"key-{i}\tvalue-{i} ünïcode\n" for i in range(50)))
    result = ok(moldau("produce", topic_name, "--file", str(data), "--key-separator", "\t",
                       "--header", "origin=file"))
    assert f"Produced 50 records to {topic_name}" in result.stderr

    out = ok(moldau("consume", topic_name, "--from-beginning", "--max-messages", "50",
                    "--format", "json")).stdout
    records = [json.loads(line) for line in out.splitlines()]
    assert len(records) == 50
    for i, record in enumerate(records):
        assert record["topic"] == topic_name
        assert record["partition"] == 0
        assert record["offset"] == i
        assert record["key"] == f"key-{i}"
        assert record["value"] == f"value-{i} ünïcode"
        assert record["timestampType"] == "CreateTime"
        assert isinstance(record["timestamp"], int)
        assert record["headers"] == [{"key": "origin", "value": "file"}]


def test_json_null_key_and_no_headers(moldau: Any, topic_name: str) -> None:
    create_topic(moldau, topic_name, "--partitions", "1")
    ok(moldau("produce", topic_name, input="plain\n"))
    out = ok(moldau("consume", topic_name, "--from-beginning", "--max-messages", "1",
                    "--format", "json")).stdout
    record = json.loads(out)
    assert record["key"] is None
    assert record["value"] == "plain"
    assert record["headers"] == []


@pytest.mark.parametrize("compression", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_produce_compression_and_acks(moldau: Any, topic_name: str, compression: str) -> None:
    create_topic(moldau, topic_name, "--partitions", "1")
    lines = "".join(f"record {i} {'x' * 200}\n" for i in range(100))
    for acks in ("1", "all"):
        ok(moldau("produce", topic_name, "--compression", compression, "--acks", acks,
                  "--linger-ms", "20", input=lines))
    out = ok(moldau("consume", topic_name, "--from-beginning", "--max-messages", "200")).stdout
    assert out.splitlines() == lines.splitlines() * 2


def test_produce_to_partition_and_consume_from_offset(moldau: Any, topic_name: str) -> None:
    create_topic(moldau, topic_name, "--partitions", "3")
    ok(moldau("produce", topic_name, "--partition", "2", input="p0\np1\np2\np3\n"))
    rows = describe_rows(ok(moldau("topic", "describe", topic_name)).stdout)
    assert rows[2][3:] == ["0", "4"]
    assert rows[0][3:] == ["0", "0"]

    out = ok(moldau("consume", topic_name, "--partition", "2", "--offset", "2",
                    "--max-messages", "2", "--print-partition-offset")).stdout
    assert out.splitlines() == ["Partition:2\tOffset:2\tp2", "Partition:2\tOffset:3\tp3"]
    empty = ok(moldau("consume", topic_name, "--partition", "0", "--offset", "earliest",
                      "--timeout-ms", "1500"))
    assert empty.stdout == ""
    assert "Consumed 0 records" in empty.stderr


def test_consume_latest_waits_for_new_records(moldau: Any, topic_name: str) -> None:
    create_topic(moldau, topic_name, "--partitions", "1")
    ok(moldau("produce", topic_name, input="old\n"))
    out = ok(moldau("consume", topic_name, "--timeout-ms", "1500")).stdout
    assert out == ""


def test_produce_acks_zero(moldau: Any, topic_name: str) -> None:
    create_topic(moldau, topic_name, "--partitions", "1")
    ok(moldau("produce", topic_name, "--acks", "0", input="fire\nand\nforget\n"))
    out = ok(moldau("consume", topic_name, "--from-beginning", "--max-messages", "3")).stdout
    assert out.splitlines() == ["fire", "and", "forget"]


def test_consume_with_group_commits_progress(moldau: Any, topic_name: str) -> None:
    create_topic(moldau, topic_name, "--partitions", "2")
    ok(moldau("produce", topic_name, "--key-separator", "=",
              input="".join(f"k{i % 4}=v{i}\n" for i in range(10))))
    group = f"{topic_name}-group"
    first = ok(moldau("consume", topic_name, "--group", group, "--from-beginning",
                      "--max-messages", "6", "--timeout-ms", "45000", "--format", "json",
                      timeout=90)).stdout
    second = ok(moldau("consume", topic_name, "--group", group, "--from-beginning",
                       "--max-messages", "4", "--timeout-ms", "45000", "--format", "json",
                       timeout=90)).stdout
    seen = [json.loads(line) for line in first.splitlines() + second.splitlines()]
    assert sorted(r["value"] for r in seen) == sorted(f"v{i}" for i in range(10))
    # The second run starts at the group's committed offsets: nothing is read twice.
    assert len({(r["partition"], r["offset"]) for r in seen}) == 10


def test_consume_stops_cleanly_on_ctrl_c(broker: Any, topic_name: str, moldau: Any) -> None:
    create_topic(moldau, topic_name, "--partitions", "1")
    ok(moldau("produce", topic_name, input="one\ntwo\n"))
    proc = subprocess.Popen(
        [moldau_executable(), "consume", topic_name, "--from-beginning", "-b", broker.bootstrap],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        # A shell's background job starts with SIGINT ignored; a terminal user's does not.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"one\n"
        assert proc.stdout.readline() == b"two\n"
        proc.send_signal(signal.SIGINT)
        rest, stderr = proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert proc.returncode == 0
    assert rest == b""
    assert stderr.decode().strip() == f"Consumed 2 records from {topic_name}"


def test_group_rejects_partition_and_offset(moldau: Any, topic_name: str) -> None:
    one_line_error(moldau("consume", topic_name, "--group", "g", "--partition", "0"), "--group")


def test_record_too_large_fails_the_produce(moldau: Any, topic_name: str) -> None:
    create_topic(moldau, topic_name, "--partitions", "1", "--config", "max.message.bytes=1024")
    result = moldau("produce", topic_name, input="x" * 5000 + "\n")
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    report, error = result.stderr.strip().splitlines()
    assert report.startswith("record from line 1 not delivered")
    assert error.startswith("Error: 1 of 1 records were not delivered")
    ok(moldau("produce", topic_name, input="small\n"))  # the topic itself is fine


# -- user mistakes -----------------------------------------------------------------------


def test_unreachable_bootstrap_fails_fast() -> None:
    port = free_port()  # nobody listens here
    started = time.monotonic()
    result = run_moldau("topic", "list", "-b", f"127.0.0.1:{port}", timeout=30)
    assert time.monotonic() - started < 10
    one_line_error(result, "cannot reach", f"127.0.0.1:{port}")


@pytest.fixture
def silent_listener() -> Iterator[int]:
    """A port that accepts connections and never answers: a hung broker."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        yield server.getsockname()[1]


@pytest.mark.parametrize(
    "args",
    [
        ("topic", "list"),
        ("topic", "describe", "t"),
        ("config", "describe", "--topic", "t"),
        ("produce", "t"),
        ("consume", "t"),
    ],
)
def test_silent_broker_times_out_with_one_line(silent_listener: int, args: tuple[str, ...]) -> None:
    started = time.monotonic()
    result = run_moldau(*args, "-b", f"127.0.0.1:{silent_listener}", "--timeout", "2",
                        input="x\n", timeout=60)
    assert time.monotonic() - started < 20
    one_line_error(result)


def test_bad_bootstrap_syntax() -> None:
    one_line_error(run_moldau("topic", "list", "-b", "no-port-here"), "HOST:PORT")


def test_describe_unknown_topic(moldau: Any, topic_name: str) -> None:
    one_line_error(moldau("topic", "describe", topic_name), topic_name, "does not exist")


def test_consume_unknown_topic(moldau: Any, topic_name: str) -> None:
    # (produce lets the broker auto-create it: test_cli_newcomer.py)
    one_line_error(moldau("consume", topic_name, "--timeout-ms", "1000"), "does not exist")


def test_invalid_config_value_shows_broker_message(moldau: Any, topic_name: str) -> None:
    line = one_line_error(
        moldau("topic", "create", topic_name, "--config", "retention.ms=soon"), "retention.ms"
    )
    assert "INVALID_CONFIG" in line or "Invalid value" in line
    assert topic_name not in topic_names(moldau)

    create_topic(moldau, topic_name)
    one_line_error(
        moldau("config", "alter", "--topic", topic_name, "--set", "cleanup.policy=sometimes"),
        "cleanup.policy",
    )


@pytest.mark.parametrize(
    "args",
    [
        ("topic", "create", "{t}", "--config", "retention.ms"),
        ("topic", "create", "{t}", "--config", "=5"),
        ("topic", "alter", "{t}", "--config", "novalue"),
        ("config", "alter", "--topic", "{t}", "--set", "oops"),
        ("produce", "{t}", "--header", "noequals"),
    ],
)
def test_bad_key_value_syntax(moldau: Any, topic_name: str, args: tuple[str, ...]) -> None:
    argv = [a.replace("{t}", topic_name) for a in args]
    one_line_error(moldau(*argv, input="x\n"), "KEY=VALUE")


def test_missing_key_separator_is_reported_with_line_number(moldau: Any, topic_name: str) -> None:
    create_topic(moldau, topic_name, "--partitions", "1")
    result = moldau("produce", topic_name, "--key-separator", ":", input="a:1\nb:2\nbroken\n")
    one_line_error(result, "line 3", "2 records produced")
    out = ok(moldau("consume", topic_name, "--from-beginning", "--max-messages", "2")).stdout
    assert out.splitlines() == ["1", "2"]


def test_offset_needs_partition(moldau: Any, topic_name: str) -> None:
    one_line_error(moldau("consume", topic_name, "--offset", "5"), "--partition")
    one_line_error(moldau("consume", topic_name, "--offset", "soon", "--partition", "0"), "soon")


# -- moldau broker -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "fragment"),
    [
        (("num.partitions=many",), "num.partitions"),
        (("no-equals-sign",), "key=value"),
    ],
)
def test_broker_rejects_bad_config_with_one_line(
    tmp_path: Path, overrides: tuple[str, ...], fragment: str
) -> None:
    args = ["broker", "--override", f"log.dirs={tmp_path / 'data'}"]
    for override in overrides:
        args += ["--override", override]
    one_line_error(run_moldau(*args, timeout=30), fragment)


def test_broker_missing_config_file(tmp_path: Path) -> None:
    one_line_error(run_moldau("broker", "--config", str(tmp_path / "nope.properties")),
                   "nope.properties")


def test_broker_port_in_use(tmp_path: Path, silent_listener: int) -> None:
    result = run_moldau(
        "broker", "--override", f"listeners=PLAINTEXT://127.0.0.1:{silent_listener}",
        "--override", f"log.dirs={tmp_path / 'data'}", timeout=30,
    )
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("Error: ")
    assert str(silent_listener) in result.stderr
