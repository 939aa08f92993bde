"""``moldau transaction list|describe|abort`` against a real broker and a real hanging
transaction: a confluent-kafka transactional producer process is killed -9 in the middle of
its transaction, which then holds the partition's last stable offset (read_committed
consumers see nothing behind it) until its timeout. The CLI finds it and aborts it at the
partition's leader, after which a read_committed consumer gets past it at once."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any

from confluent_kafka import TopicPartition

from tests.helpers.cli import ok, one_line_error, run_moldau

from .clients import assert_no_more, consumer, create_topic, producer, unique
from .kip890_wire import read_committed

_HANGING = textwrap.dedent("""
    import sys, time
    from confluent_kafka import Producer
    bootstrap, topic, tid = sys.argv[1:4]
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid,
                  "transaction.timeout.ms": 300000})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, value=b"hanging-%d" % i, partition=0)
    assert p.flush(30) == 0
    print("ready", flush=True)
    time.sleep(120)
""")


def _start_hanging(bootstrap: str, topic: str, tid: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", _HANGING, bootstrap, topic, tid],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.strip() == "ready", line
    return proc


def _commit(bootstrap: str, topic: str, tid: str, *values: bytes) -> None:
    p = producer(bootstrap, **{"transactional.id": tid})
    p.init_transactions(30)
    p.begin_transaction()
    for v in values:
        p.produce(topic, value=v, partition=0)
    p.commit_transaction(30)


def test_list_describe_and_abort_a_hanging_transaction(broker: Any) -> None:
    topic = unique("cli-txn")
    create_topic(broker.bootstrap, topic, 1)
    tid = unique("cli-txn-hanging")
    proc = _start_hanging(broker.bootstrap, topic, tid)
    proc.kill()  # SIGKILL: the transaction stays open, no abort is ever sent
    proc.wait(10)
    _commit(broker.bootstrap, topic, unique("cli-txn-ok"), b"after-1", b"after-2")

    stuck = consumer(broker.bootstrap, **{"isolation.level": "read_committed"})
    try:
        stuck.assign([TopicPartition(topic, 0, 0)])
        assert_no_more(stuck, wait=1.0)  # the hanging transaction holds everything back
    finally:
        stuck.close()

    listed = ok(run_moldau("transaction", "list", bootstrap=broker.bootstrap)).stdout
    (row,) = [line for line in listed.splitlines() if tid in line]
    assert "Ongoing" in row
    described = ok(run_moldau("transaction", "describe", tid, bootstrap=broker.bootstrap)).stdout
    assert "Ongoing" in described
    (partition_row,) = [line.split() for line in described.splitlines() if topic in line]
    assert (partition_row[1], partition_row[3]) == ("0", "0"), described  # open at offset 0

    one_line_error(run_moldau("transaction", "abort", "--topic", topic, "--partition", "0",
                              "--start-offset", "2", bootstrap=broker.bootstrap),
                   "no transaction starts at offset 2", "open transactions start at: 0")
    aborted = ok(run_moldau("transaction", "abort", "--topic", topic, "--partition", "0",
                            "--start-offset", "0", bootstrap=broker.bootstrap)).stdout
    assert f"in {topic}-0 starting at offset 0" in aborted
    assert read_committed(broker.bootstrap, topic, 0, 2) == [b"after-1", b"after-2"]


def test_failures_are_one_line(broker: Any) -> None:
    topic = unique("cli-txn-errors")
    create_topic(broker.bootstrap, topic, 1)
    one_line_error(run_moldau("transaction", "abort", "--topic", topic, "--partition", "0",
                              bootstrap=broker.bootstrap), "--start-offset")
    one_line_error(run_moldau("transaction", "abort", "--topic", topic, "--partition", "3",
                              "--start-offset", "0", bootstrap=broker.bootstrap),
                   "has no partition 3")
    one_line_error(run_moldau("transaction", "abort", "--topic", unique("nope"), "--partition",
                              "0", "--start-offset", "0", bootstrap=broker.bootstrap),
                   "does not exist")
    one_line_error(run_moldau("transaction", "abort", "--topic", topic, "--partition", "0",
                              "--start-offset", "0", bootstrap=broker.bootstrap),
                   "open transactions start at: none")
    one_line_error(run_moldau("transaction", "describe", unique("unknown-txn"),
                              bootstrap=broker.bootstrap), "TRANSACTIONAL_ID_NOT_FOUND")
    one_line_error(run_moldau("transaction", "list", "-b", "127.0.0.1:1", "--timeout", "1"),
                   "cannot reach a broker")
