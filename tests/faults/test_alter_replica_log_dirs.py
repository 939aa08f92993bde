"""AlterReplicaLogDirs on a real broker with two log dirs, as Kafka does it.

A partition moves to the other dir while an idempotent producer writes and a consumer reads
(nothing acknowledged lost, order kept, the old directory gone, DescribeLogDirs showing the
future replica while it copies); a kill -9 in the middle of a move resumes it at the restart;
and the error codes: LOG_DIR_NOT_FOUND, UNKNOWN_TOPIC_OR_PARTITION, a no-op move to the
current dir, KAFKA_STORAGE_ERROR for an offline dir. Moves are slowed with Kafka's
``replica.alter.log.dirs.io.max.bytes.per.second`` so a test can see (and kill) them midway.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from kafka.admin import KafkaAdminClient
from kafka.errors import NoError
from kio.schema.alter_replica_log_dirs.v2.request import (
    AlterReplicaLogDir,
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirTopic,
)
from kio.schema.describe_log_dirs.v4.request import DescribeLogDirsRequest
from kio.schema.errors import ErrorCode

from tests.faults.small_disk import remount_read_only, tmpfs
from tests.helpers.cli import run_moldau
from tests.integration.clients import (
    DeliveryLog,
    consumer,
    create_topic,
    produce_all,
    producer,
    read_partition,
    unique,
)
from tests.integration.wire import WireClient

pytestmark = pytest.mark.timeout(120)

RECORD = 1000
PRELOAD = 2000  # about 2 MB: a move at 1 MB/s takes about two seconds
RATE = "replica.alter.log.dirs.io.max.bytes.per.second"


def _dirs(tmp_path: Path) -> tuple[Path, Path]:
    return tmp_path / "d1", tmp_path / "d2"


def _placement(dirs: tuple[Path, Path], topic: str) -> tuple[Path, Path]:
    """(dir holding partition 0, the other dir)."""
    first, second = dirs
    return (first, second) if (first / f"{topic}-0").is_dir() else (second, first)


def describe(bootstrap: str, topic: str) -> dict[Path, list[tuple[int, bool, int, int]]]:
    """Per log dir (with its error code folded in as an entry of partition -1 when set):
    (partition, is_future, size, offset lag) of ``topic``."""
    with WireClient.to(bootstrap) as c:
        resp = c.request(DescribeLogDirsRequest(topics=None))
    out: dict[Path, list[tuple[int, bool, int, int]]] = {}
    for result in resp.results:
        rows = out.setdefault(Path(result.log_dir), [])
        if result.error_code != ErrorCode.none:
            rows.append((-1, False, int(result.error_code), 0))
        for t in result.topics:
            if t.name == topic:
                rows.extend((p.partition_index, p.is_future_key, p.partition_size, p.offset_lag)
                            for p in t.partitions)
    return out


def alter(bootstrap: str, path: str, topic: str, *partitions: int) -> list[ErrorCode]:
    with WireClient.to(bootstrap) as c:
        resp = c.request(AlterReplicaLogDirsRequest(dirs=(AlterReplicaLogDir(
            path=path, topics=(AlterReplicaLogDirTopic(name=topic, partitions=partitions),)),)))
    return [ErrorCode(p.error_code) for t in resp.results for p in t.partitions]


def wait_moved(bootstrap: str, topic: str, target: Path, timeout: float = 40.0
               ) -> set[tuple[Path, bool]]:
    """Wait until partition 0 is current in ``target`` with no future replica left; every
    (dir, is_future) state seen on the way."""
    seen: set[tuple[Path, bool]] = set()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = {(d, fut) for d, parts in describe(bootstrap, topic).items()
                for p, fut, _size, _lag in parts if p == 0}
        seen |= rows
        if rows == {(target.resolve(), False)}:
            return seen
        time.sleep(0.05)
    raise AssertionError(f"not moved to {target} in {timeout} s: {rows}")


def leftovers(dirs: tuple[Path, Path], timeout: float = 10.0) -> list[Path]:
    """``-future`` and ``-delete`` directories still there after ``timeout`` (the old
    directory of a move is removed on a worker thread after the swap)."""
    deadline = time.monotonic() + timeout
    while True:
        found = [p for d in dirs for p in d.iterdir() if p.name.endswith(("-future", "-delete"))]
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def preload(bootstrap: str, topic: str, count: int = PRELOAD) -> None:
    p = producer(bootstrap, acks="all", enable_idempotence=True, linger_ms=20)
    produce_all(p, topic, ({"value": b"%08d" % i + b"x" * (RECORD - 8), "partition": 0}
                           for i in range(count)))


def check_in_order(values: list[bytes], count: int) -> None:
    numbers = [int(v[:8]) for v in values]
    assert numbers == list(range(count)), (len(numbers), count)


def test_move_while_producing_and_consuming(make_broker, tmp_path: Path) -> None:
    dirs = _dirs(tmp_path)
    broker = make_broker(f"log.dirs={dirs[0]},{dirs[1]}", "log.segment.bytes=1048576",
                         f"{RATE}=1000000")
    topic = unique("move")
    create_topic(broker.bootstrap, topic)
    source, target = _placement(dirs, topic)
    preload(broker.bootstrap, topic)

    more = 1500
    deliveries = DeliveryLog()
    stop = threading.Event()

    def produce() -> None:
        p = producer(broker.bootstrap, acks="all", enable_idempotence=True, linger_ms=5)
        for i in range(PRELOAD, PRELOAD + more):
            p.produce(topic, b"%08d" % i + b"y" * (RECORD - 8), partition=0,
                      on_delivery=deliveries)
            p.poll(0)
            time.sleep(0.002)
            if stop.is_set():
                break
        p.flush(30)

    got: list[bytes] = []
    errors: list[Any] = []

    def consume() -> None:
        from confluent_kafka import TopicPartition
        c = consumer(broker.bootstrap)
        c.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 60
        try:
            while len(got) < PRELOAD + more and time.monotonic() < deadline:
                msg = c.poll(0.2)
                if msg is None:
                    continue
                if msg.error():
                    errors.append(msg.error())
                    continue
                got.append(msg.value())
        finally:
            c.close()

    threads = [threading.Thread(target=produce), threading.Thread(target=consume)]
    for t in threads:
        t.start()
    try:
        time.sleep(0.3)
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        try:
            result = admin.alter_replica_log_dirs({(topic, 0, 0): str(target.resolve())})
            assert list(result.values()) == [NoError], result
            seen = wait_moved(broker.bootstrap, topic, target)
            # kafka-python's describe_log_dirs reads the same answer.
            assert admin.describe_log_dirs() is not None
        finally:
            admin.close()
    finally:
        for t in threads:
            t.join(90)
        stop.set()
    assert (target.resolve(), True) in seen, seen  # the future replica was visible
    assert (source.resolve(), False) in seen, seen
    assert not deliveries.failed, deliveries.failed[:3]
    assert len(deliveries.acked) == more
    assert not errors, errors[:3]
    check_in_order(got, PRELOAD + more)
    assert not (source / f"{topic}-0").exists()
    assert (target / f"{topic}-0").is_dir()
    assert not leftovers(dirs)

    # A move back to where it is now is a no-op success; the data survives a restart there.
    assert alter(broker.bootstrap, str(target.resolve()), topic, 0) == [ErrorCode.none]
    assert describe(broker.bootstrap, topic)[target.resolve()] == [
        (0, False, describe(broker.bootstrap, topic)[target.resolve()][0][2], 0)]
    broker.restart()
    values = [m.value() for m in read_partition(broker.bootstrap, topic, 0, 0, PRELOAD + more)]
    check_in_order(values, PRELOAD + more)
    produce_all(producer(broker.bootstrap), topic, [{"value": b"%08d" % (PRELOAD + more),
                                                     "partition": 0}])
    assert (target / f"{topic}-0").is_dir() and not (source / f"{topic}-0").exists()


def test_kill9_mid_move_resumes_at_restart(make_broker, tmp_path: Path) -> None:
    dirs = _dirs(tmp_path)
    broker = make_broker(f"log.dirs={dirs[0]},{dirs[1]}", "log.segment.bytes=1048576",
                         f"{RATE}=500000")
    topic = unique("kill")
    create_topic(broker.bootstrap, topic)
    source, target = _placement(dirs, topic)
    preload(broker.bootstrap, topic)

    assert alter(broker.bootstrap, str(target), topic, 0) == [ErrorCode.none]
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:  # until the copy is well under way
        futures = [row for row in describe(broker.bootstrap, topic).get(target.resolve(), [])
                   if row[1]]
        if futures and futures[0][2] > 300_000:
            break
        time.sleep(0.05)
    else:
        raise AssertionError("the future replica never grew")
    assert futures[0][3] > 0  # it lags the current log
    broker.kill9()
    assert [p.name for p in target.iterdir() if p.name.endswith("-future")]

    broker.restart()
    # Readable at once from the old dir while the move goes on from where it was.
    check_in_order([m.value() for m in read_partition(broker.bootstrap, topic, 0, 0, PRELOAD)],
                   PRELOAD)
    wait_moved(broker.bootstrap, topic, target)
    assert "resuming its move" in broker.stderr_text()
    check_in_order([m.value() for m in read_partition(broker.bootstrap, topic, 0, 0, PRELOAD)],
                   PRELOAD)
    assert not (source / f"{topic}-0").exists()
    assert not leftovers(dirs)


def test_errors_and_no_op(make_broker, tmp_path: Path) -> None:
    dirs = _dirs(tmp_path)
    broker = make_broker(f"log.dirs={dirs[0]},{dirs[1]}")
    topic = unique("errs")
    create_topic(broker.bootstrap, topic, partitions=2)
    source, _target = _placement(dirs, topic)
    before = describe(broker.bootstrap, topic)

    assert alter(broker.bootstrap, str(tmp_path / "elsewhere"), topic, 0) == [
        ErrorCode.log_dir_not_found]
    assert alter(broker.bootstrap, str(source), unique("nosuch"), 0) == [
        ErrorCode.unknown_topic_or_partition]
    assert alter(broker.bootstrap, str(source), topic, 7) == [
        ErrorCode.unknown_topic_or_partition]
    assert alter(broker.bootstrap, str(source.resolve()), topic, 0) == [ErrorCode.none]
    assert describe(broker.bootstrap, topic) == before
    assert not [p for d in dirs for p in d.iterdir() if p.name.endswith("-future")]

    # The CLI: one-line errors, a move, and the table that shows where each replica is.
    bad = run_moldau("cluster", "log-dirs", "--move", "--topic", topic, "--partition", "0",
                     "--dir", str(tmp_path / "elsewhere"), bootstrap=broker.bootstrap)
    assert bad.returncode == 1 and "LOG_DIR_NOT_FOUND" in bad.stderr, bad
    assert len(bad.stderr.strip().splitlines()) == 1, bad.stderr
    target = dirs[1] if source == dirs[0] else dirs[0]
    moved = run_moldau("cluster", "log-dirs", "--move", "--topic", topic, "--partition", "0",
                       "--broker", "0", "--dir", str(target.resolve()), bootstrap=broker.bootstrap)
    assert moved.returncode == 0, moved
    wait_moved(broker.bootstrap, topic, target)
    shown = run_moldau("cluster", "log-dirs", "--topic", topic, bootstrap=broker.bootstrap,
                       env={"COLUMNS": "200"})
    assert shown.returncode == 0, shown
    lines = [ln.split() for ln in shown.stdout.splitlines() if topic in ln]
    assert sorted((ln[1], ln[3], ln[-1]) for ln in lines) == sorted(
        [(str(target.resolve()), "0", "current"), (str(source.resolve()), "1", "current")]
        if (source / f"{topic}-1").is_dir() else
        [(str(target.resolve()), "0", "current"), (str(target.resolve()), "1", "current")])


def test_offline_dir_is_a_storage_error(make_broker, tmp_path: Path) -> None:
    healthy = tmp_path / "healthy"
    with tmpfs(tmp_path / "failing", "16m") as failing:
        broker = make_broker(f"log.dirs={healthy},{failing}")
        topic = unique("offline")
        create_topic(broker.bootstrap, topic, partitions=2)
        on_healthy = next(p for p in range(2) if (healthy / f"{topic}-{p}").is_dir())
        on_failing = 1 - on_healthy
        broker.restart()
        remount_read_only(failing)
        # The first write there takes the dir offline.
        p = producer(broker.bootstrap, message_timeout_ms=3000)
        p.produce(topic, b"x", partition=on_failing)
        p.flush(10)
        deadline = time.monotonic() + 10
        while describe(broker.bootstrap, topic)[failing.resolve()] != [
                (-1, False, int(ErrorCode.kafka_storage_error), 0)]:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        # Into the offline dir, out of it, and any new move while a dir is offline: refused.
        assert alter(broker.bootstrap, str(failing), topic, on_healthy) == [
            ErrorCode.kafka_storage_error]
        assert alter(broker.bootstrap, str(healthy), topic, on_failing) == [
            ErrorCode.kafka_storage_error]
        # The healthy partition keeps serving.
        produce_all(producer(broker.bootstrap), topic, [{"value": b"ok", "partition": on_healthy}])
        assert read_partition(broker.bootstrap, topic, on_healthy, 0, 1)[0].value() == b"ok"
