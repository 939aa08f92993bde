"""Debian's kcat (librdkafka 2.0.2, older than confluent-kafka's) against the real broker."""

from __future__ import annotations

import json
import subprocess

import pytest

from .clients import create_topic, produce_all, producer, read_partition, watermarks

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def run_kcat(kcat, broker):
    def run(*args: str, stdin: str | None = None,
            timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [kcat, "-b", broker.bootstrap, "-X", "socket.timeout.ms=10000", *args],
            input=stdin, capture_output=True, text=True, timeout=timeout, check=False,
        )
        assert proc.returncode == 0, f"kcat {args} exited {proc.returncode}: {proc.stderr}"
        return proc

    return run


def test_metadata_listing(broker, run_kcat, topic_name):
    create_topic(broker.bootstrap, topic_name, partitions=3)
    text = run_kcat("-L", "-t", topic_name).stdout
    assert f'topic "{topic_name}" with 3 partitions:' in text
    for p in range(3):
        assert f"partition {p}, leader " in text
    assert f":{broker.port}" in text
    meta = json.loads(run_kcat("-L", "-J").stdout)
    assert len(meta["brokers"]) == 1
    assert meta["brokers"][0]["name"].endswith(f":{broker.port}")
    (topic,) = [t for t in meta["topics"] if t["topic"] == topic_name]
    assert sorted(p["partition"] for p in topic["partitions"]) == [0, 1, 2]
    leader = meta["brokers"][0]["id"]
    assert all(p["leader"] == leader for p in topic["partitions"])


def test_produce_with_keys_and_consume_formatted(broker, run_kcat, topic_name):
    create_topic(broker.bootstrap, topic_name, partitions=2)
    lines = [f"key{i}:value {i}" for i in range(50)]
    run_kcat("-P", "-t", topic_name, "-p", "1", "-K:",
         stdin="\n".join(lines) + "\n")
    assert watermarks(broker.bootstrap, topic_name, 1) == (0, 50)
    assert watermarks(broker.bootstrap, topic_name, 0) == (0, 0)
    out = run_kcat("-C", "-t", topic_name, "-p", "1", "-o", "beginning", "-e",
               "-f", "%k %s %p %o\n").stdout
    assert out.splitlines() == [f"key{i} value {i} 1 {i}" for i in range(50)]
    # -c stops after N messages, from an absolute offset.
    out = run_kcat("-C", "-t", topic_name, "-p", "1", "-o", "10", "-c", "5",
               "-f", "%o:%s\n").stdout
    assert out.splitlines() == [f"{i}:value {i}" for i in range(10, 15)]


def test_kcat_to_confluent_kafka(broker, run_kcat, topic_name):
    create_topic(broker.bootstrap, topic_name)
    payload = [f"k{i}:{'x' * (i % 40)}-{i}" for i in range(200)]
    run_kcat("-P", "-t", topic_name, "-K:", "-z", "snappy",
         stdin="\n".join(payload) + "\n")
    got = read_partition(broker.bootstrap, topic_name, 0, 0, 200)
    assert [(m.key(), m.value()) for m in got] == [
        tuple(line.split(":", 1)[i].encode() for i in (0, 1)) for line in payload
    ]


def test_confluent_kafka_to_kcat(broker, run_kcat, topic_name):
    create_topic(broker.bootstrap, topic_name)
    p = producer(broker.bootstrap, compression_type="zstd")
    sent = [{"key": f"ck{i}".encode(), "value": f"payload {i}".encode(),
             "headers": [("h", f"{i}".encode())]} for i in range(100)]
    reports = produce_all(p, topic_name, sent)
    assert not reports.failed
    out = run_kcat("-C", "-t", topic_name, "-o", "beginning", "-e",
               "-f", "%k|%s|%o|%h\n").stdout
    assert out.splitlines() == [f"ck{i}|payload {i}|{i}|h={i}" for i in range(100)]
