"""Topics with many partitions or long names, through kill -9 and restarts.

- Partitions far beyond a lowered RLIMIT_NOFILE work, because idle segments hold no
  descriptor (the old broker held four per partition and failed with EMFILE).
- A kill -9 in the middle of creating or deleting thousands of partitions leaves a broker
  that starts, with the topic either complete or gone (the metadata is written only after
  the files exist, and forgotten only after they were renamed for deletion).
- Every legal topic name, 249 characters included, survives create, delete and restart
  (the ``-delete`` rename used to hit ENAMETOOLONG after the metadata had forgotten the
  topic, and the broker could not start again).
"""

from __future__ import annotations

import os
import socket
import struct
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.helpers import BrokerProcess
from tests.integration.clients import consume, consumer, create_topic, produce_all, producer

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]


class LowFdBroker(BrokerProcess):
    """A broker started with RLIMIT_NOFILE lowered to ``nofile`` (soft and hard)."""

    nofile = 512

    def command(self) -> list[str]:
        return ["prlimit", f"--nofile={self.nofile}:{self.nofile}", "--", *super().command()]


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def topic_partitions(bootstrap: str, name: str) -> int | None:
    """Partition count the broker reports for ``name`` (None if it does not know it)."""
    topics = admin(bootstrap).list_topics(timeout=30).topics
    meta = topics.get(name)
    if meta is None or meta.error is not None:
        return None
    return len(meta.partitions)


def dirs_of(data_dir: Path, topic: str) -> list[str]:
    """Live partition directories of ``topic`` (not ``-delete`` ones)."""
    prefix = topic + "-"
    return [n for n in os.listdir(data_dir)
            if n.startswith(prefix) and n[len(prefix):].isdigit()]


class Probe:
    """ApiVersions v0 round trips on a connection of its own, 10 ms apart, from a thread.

    :meth:`worst` is the longest wait seen so far, the one still in flight included: how
    long the broker went without answering anybody (a blocked event loop).
    """

    _FRAME = (lambda body: struct.pack(">i", len(body)) + body)(
        struct.pack(">hhih", 18, 0, 1, 5) + b"probe")

    def __init__(self, port: int) -> None:
        self._sock = socket.create_connection(("127.0.0.1", port), timeout=300)
        self._stop = threading.Event()
        self._longest = 0.0
        self._sent_at: float | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self._sent_at = time.monotonic()
                self._sock.sendall(self._FRAME)
                size = struct.unpack(">i", self._read(4))[0]
                self._read(size)
                self._longest = max(self._longest, time.monotonic() - self._sent_at)
                self._sent_at = None
                time.sleep(0.01)
        except OSError:
            pass

    def _read(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self._sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed")
            buf += chunk
        return buf

    def worst(self) -> float:
        sent = self._sent_at
        return max(self._longest, 0.0 if sent is None else time.monotonic() - sent)

    def close(self) -> None:
        self._stop.set()
        self._sock.close()
        self._thread.join(5)


#: Longest tolerated silence while thousands of partitions are created or deleted: far above
#: what the broker shows (tens of ms), far below what the old broker did (the whole operation).
MAX_SILENCE_S = 2.0


def wait_for(condition: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def test_partitions_beyond_a_low_fd_limit_survive_kill9(tmp_path: Path) -> None:
    broker = LowFdBroker(tmp_path / "b", overrides=("group.initial.rebalance.delay.ms=0",),
                         startup_timeout=120)
    broker.start()
    try:
        create_topic(broker.bootstrap, "wide", 1500, timeout=120)
        written = list(range(0, 1500, 5))  # 300 partitions, far more than 512 / 4 fds
        reports = produce_all(producer(broker.bootstrap, acks="all"), "wide", (
            {"partition": p, "key": b"%d" % p, "value": b"v%d" % p} for p in written),
            timeout=120)
        assert not reports.failed, reports.failed[:3]
        assert broker.pid is not None
        assert len(os.listdir(f"/proc/{broker.pid}/fd")) < LowFdBroker.nofile
        broker.kill9()
        broker.start()
        assert "Too many open files" not in broker.stderr_text()
        assert topic_partitions(broker.bootstrap, "wide") == 1500
        c = consumer(broker.bootstrap)
        try:
            c.assign([TopicPartition("wide", p, 0) for p in written])
            got = consume(c, len(written), timeout=120)
        finally:
            c.close()
        assert sorted((m.partition(), m.value()) for m in got) == [
            (p, b"v%d" % p) for p in written]
        broker.restart()
        assert topic_partitions(broker.bootstrap, "wide") == 1500
    finally:
        broker.stop()
    assert "Too many open files" not in broker.stderr_text()


def test_kill9_during_a_big_creation(make_broker: Any) -> None:
    broker = make_broker()
    client = admin(broker.bootstrap)
    probe = Probe(broker.port)
    futures = client.create_topics(
        [NewTopic("big", 10_000)], request_timeout=300, operation_timeout=300)
    wait_for(lambda: len(dirs_of(broker.data_dir, "big")) >= 2000, 120, "2000 partition dirs")
    silence = probe.worst()
    probe.close()
    assert silence < MAX_SILENCE_S, f"the broker answered nobody for {silence:.1f} s"
    broker.kill9()
    del futures
    # Recovering about 2,000 partitions after the kill takes longer than a normal start on a
    # busy machine (15-20 ms each); what matters here is what the broker serves afterwards.
    broker.startup_timeout = 120
    broker.start()
    count = topic_partitions(broker.bootstrap, "big")
    assert count in (None, 10_000)
    if count is None:  # the creation had not committed: nothing of it may remain
        assert dirs_of(broker.data_dir, "big") == []
        assert "deleting" in broker.stderr_text() + broker.stdout_text()
        create_topic(broker.bootstrap, "big", 3)
    reports = produce_all(producer(broker.bootstrap), "big",
                          [{"partition": 2, "value": b"after the crash"}])
    assert not reports.failed
    broker.restart()
    assert topic_partitions(broker.bootstrap, "big") in (3, 10_000)


def test_kill9_during_a_big_deletion(make_broker: Any) -> None:
    broker = make_broker()
    create_topic(broker.bootstrap, "first", 3000, timeout=120)
    probe = Probe(broker.port)
    client = admin(broker.bootstrap)
    client.delete_topics(["first"], operation_timeout=120)["first"].result(120)
    silence = probe.worst()
    probe.close()
    assert silence < MAX_SILENCE_S, f"the broker answered nobody for {silence:.1f} s"
    create_topic(broker.bootstrap, "doomed", 2000, timeout=120)
    client = admin(broker.bootstrap)
    futures = client.delete_topics(["doomed"], request_timeout=300, operation_timeout=300)
    wait_for(lambda: len(dirs_of(broker.data_dir, "doomed")) < 1900, 120, "renames")
    broker.kill9()
    del futures
    # Recovering about 2,000 partitions after the kill takes longer than a normal start on a
    # busy machine (15-20 ms each); what matters here is what the broker serves afterwards.
    broker.startup_timeout = 120
    broker.start()
    count = topic_partitions(broker.bootstrap, "doomed")
    assert count in (None, 2000)
    if count is None:
        assert dirs_of(broker.data_dir, "doomed") == []
    else:  # forgotten only after every rename: the partitions come back, empty
        assert len(dirs_of(broker.data_dir, "doomed")) == 2000
        client = admin(broker.bootstrap)
        client.delete_topics(["doomed"])["doomed"].result(120)
    # Start-up removes what the crash left; a new deletion removes in the background.
    wait_for(lambda: not [n for n in os.listdir(broker.data_dir) if n.endswith("-delete")],
             60, "-delete directories to go")


LEGAL_NAMES = [
    "a" * 249,
    ("x.y_z-" * 42)[:249],
    "Q" * 240 + ".12345678",
    "with.dots.and_underscore",
    "__double__under",
    "-leading-dash",
    "trailing.dot.",
    "9-digits-and-1",
]


def test_every_legal_name_survives_create_delete_restart(make_broker: Any) -> None:
    broker = make_broker()
    for name in LEGAL_NAMES:
        create_topic(broker.bootstrap, name, 2)
        reports = produce_all(producer(broker.bootstrap), name,
                              [{"partition": 1, "value": name.encode()}])
        assert not reports.failed, reports.failed
    broker.restart()
    c = consumer(broker.bootstrap)
    try:
        c.assign([TopicPartition(name, 1, 0) for name in LEGAL_NAMES])
        got = consume(c, len(LEGAL_NAMES))
    finally:
        c.close()
    assert sorted(m.value() for m in got) == sorted(n.encode() for n in LEGAL_NAMES)
    client = admin(broker.bootstrap)
    futures = client.delete_topics(LEGAL_NAMES, operation_timeout=60)
    for name, future in futures.items():
        future.result(60)
        assert topic_partitions(broker.bootstrap, name) is None, name
    broker.restart()
    known = admin(broker.bootstrap).list_topics(timeout=30).topics
    assert not set(LEGAL_NAMES) & set(known)
    leftovers = [n for n in os.listdir(broker.data_dir)
                 if any(n.startswith(name[:50]) for name in LEGAL_NAMES)]
    assert leftovers == []
    for name in LEGAL_NAMES:
        create_topic(broker.bootstrap, name, 1)
    broker.restart()
    for name in LEGAL_NAMES:
        assert topic_partitions(broker.bootstrap, name) == 1, name
