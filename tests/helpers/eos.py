"""Driving and checking transactions from the outside: the EOS loop process, reads, offsets.

Used by the transaction tests on one broker (tests/integration/test_txn_*.py) and on three
(tests/cluster/test_txn_cluster.py). Everything goes through real clients (confluent-kafka)
and real processes: the loop of tests/helpers/eos_loop.py is a subprocess the tests kill -9.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from confluent_kafka import (
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, OffsetSpec

ROOT = Path(__file__).resolve().parents[2]


def input_value(partition: int, index: int) -> bytes:
    return f"{partition}-{index}".encode()


def produce_input(bootstrap: str, topic: str, partitions: int, per_partition: int,
                  start: int = 0, pause_every: int = 0, pause_s: float = 0.0) -> None:
    """``partition-index`` values, ``start <= index < start + per_partition``, in every
    partition, with an idempotent acks=all producer (written once each, in order)."""
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                  "linger.ms": 5, "message.timeout.ms": 120_000})
    for i in range(start, start + per_partition):
        for part in range(partitions):
            while True:
                try:
                    p.produce(topic, value=input_value(part, i), partition=part)
                    break
                except BufferError:
                    p.poll(0.05)
        p.poll(0)
        if pause_every and i % pause_every == 0:
            time.sleep(pause_s)
    assert p.flush(150) == 0, "input not acknowledged"


def end_offsets(bootstrap: str, topic: str, partitions: int, committed: bool,
                timeout: float = 20.0, admin: AdminClient | None = None) -> list[int]:
    """ListOffsets LATEST per partition: the last stable offset with ``committed`` (the
    read_committed isolation level), else the high watermark."""
    if admin is None:  # (not `admin or ...`: a client with an empty queue is falsy)
        admin = AdminClient({"bootstrap.servers": bootstrap})
    level = IsolationLevel.READ_COMMITTED if committed else IsolationLevel.READ_UNCOMMITTED
    futures = admin.list_offsets({TopicPartition(topic, p): OffsetSpec.latest()
                                  for p in range(partitions)},
                                 isolation_level=level, request_timeout=timeout)
    return [futures[TopicPartition(topic, p)].result(timeout=timeout).offset  # type: ignore[index]
            for p in range(partitions)]


def wait_stable(bootstrap: str, topic: str, partitions: int, timeout: float) -> float:
    """Seconds until no transaction is open on ``topic`` (LSO == high watermark everywhere);
    fails after ``timeout``."""
    started = time.monotonic()
    admin = AdminClient({"bootstrap.servers": bootstrap})  # one client: polls stay cheap
    last: tuple[list[int], list[int]] = ([], [])
    while time.monotonic() - started < timeout:
        try:
            last = (end_offsets(bootstrap, topic, partitions, True, admin=admin),
                    end_offsets(bootstrap, topic, partitions, False, admin=admin))
        except KafkaException:
            time.sleep(0.2)
            continue
        if last[0] == last[1]:
            return time.monotonic() - started
        time.sleep(0.1)
    raise AssertionError(f"{topic}: LSO {last[0]} still behind the high watermark {last[1]} "
                         f"after {timeout:.0f} s")


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int,
                      timeout: float = 20.0) -> list[int]:
    """The group's committed offsets (-1001 when none), read without joining it."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "enable.auto.commit": False, "isolation.level": "read_committed"})
    try:
        got = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=timeout)
        return [tp.offset for tp in sorted(got, key=lambda tp: tp.partition)]
    finally:
        c.close()


def read_all(bootstrap: str, topic: str, partitions: int, *, committed: bool,
             timeout: float = 60.0) -> dict[int, list[tuple[int, bytes]]]:
    """Every record an application sees in each partition, from offset 0 to the end (the
    LSO with ``committed``): ``{partition: [(offset, value), ...]}``. The end is where the
    consumer reports end-of-partition, so control batches at the end are passed."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused-txn-reader",
                  "enable.auto.commit": False, "enable.partition.eof": True,
                  "isolation.level": "read_committed" if committed else "read_uncommitted",
                  "fetch.wait.max.ms": 100})
    ends = end_offsets(bootstrap, topic, partitions, committed)
    got: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(partitions)}
    at_end = {p for p in range(partitions) if ends[p] == 0}
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions) if p not in at_end])
        deadline = time.monotonic() + timeout
        while len(at_end) < partitions:
            assert time.monotonic() < deadline, (
                f"{topic}: end of partitions {sorted(set(range(partitions)) - at_end)} not "
                f"reached in {timeout:.0f} s (ends {ends}, read "
                f"{ {p: len(v) for p, v in got.items()} })")
            for msg in c.consume(num_messages=1000, timeout=0.2):
                err = msg.error()
                if err is None:
                    got[msg.partition()].append((msg.offset(), msg.value()))
                elif err.code() == KafkaError._PARTITION_EOF:
                    if msg.offset() >= ends[msg.partition()]:
                        at_end.add(msg.partition())
                else:
                    raise KafkaException(err)
    finally:
        c.close()
    return got


def duplicates_and_gaps(values: Sequence[bytes], expected: Sequence[bytes]) -> str:
    """A short description of how ``values`` differ from ``expected`` (for messages)."""
    seen: dict[bytes, int] = {}
    for v in values:
        seen[v] = seen.get(v, 0) + 1
    dups = [v for v, n in seen.items() if n > 1]
    missing = [v for v in expected if v not in seen]
    extra = [v for v in seen if v not in set(expected)]
    return (f"{len(values)} records for {len(expected)} expected; {len(dups)} duplicated "
            f"(e.g. {dups[:3]}), {len(missing)} missing (e.g. {missing[:3]}), "
            f"{len(extra)} unexpected (e.g. {extra[:3]})")


def assert_output_exactly_once(bootstrap: str, topic: str, partitions: int,
                               per_partition: int, timeout: float = 90.0) -> None:
    """``out`` read with read_committed holds ``out:p-i`` for every input, once, in order."""
    got = read_all(bootstrap, topic, partitions, committed=True, timeout=timeout)
    for part in range(partitions):
        values = [v for _, v in got[part]]
        expected = [b"out:" + input_value(part, i) for i in range(per_partition)]
        assert values == expected, (f"{topic}[{part}]: "
                                    f"{duplicates_and_gaps(values, expected)}")


# -- the loop process ---------------------------------------------------------------------


@dataclass
class LoopSpec:
    bootstrap: str
    input: str
    output: str
    group: str
    transactional_id: str
    batch: int = 30
    pause_ms: int = 50
    transaction_timeout_ms: int = 10_000
    max_seconds: float = 240.0

    def argv(self) -> list[str]:
        return [sys.executable, "-m", "tests.helpers.eos_loop", "--bootstrap", self.bootstrap,
                "--input", self.input, "--output", self.output, "--group", self.group,
                "--transactional-id", self.transactional_id, "--batch", str(self.batch),
                "--pause-ms", str(self.pause_ms),
                "--transaction-timeout-ms", str(self.transaction_timeout_ms),
                "--max-seconds", str(self.max_seconds)]


@dataclass
class LoopProcess:
    """One incarnation of the loop; its stdout lines are collected with their times."""

    spec: LoopSpec
    log_path: Path
    lines: list[tuple[float, str]] = field(default_factory=list)
    proc: subprocess.Popen[str] | None = None
    _stderr: IO[str] | None = None

    def start(self) -> LoopProcess:
        self._stderr = self.log_path.open("a")
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
        self.proc = subprocess.Popen(self.spec.argv(), cwd=ROOT, env=env, text=True,
                                     stdout=subprocess.PIPE, stderr=self._stderr,
                                     stdin=subprocess.DEVNULL)
        threading.Thread(target=self._read, daemon=True).start()
        return self

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        with self.log_path.open("a") as log:
            for line in self.proc.stdout:
                self.lines.append((time.monotonic(), line.rstrip("\n")))
                log.write(f"{time.time():.3f} {line}")
                log.flush()

    def wait_line(self, prefix: str, timeout: float, after: int = 0) -> int:
        """Index of the first stdout line at or after ``after`` starting with ``prefix``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for i in range(after, len(self.lines)):
                if self.lines[i][1].startswith(prefix):
                    return i
            if self.proc is not None and self.proc.poll() is not None and not any(
                    line.startswith(prefix) for _, line in self.lines[after:]):
                time.sleep(0.2)  # the reader thread may still hold the last lines
                if not any(line.startswith(prefix) for _, line in self.lines[after:]):
                    raise AssertionError(f"the loop exited ({self.proc.returncode}) before "
                                         f"{prefix!r}; last lines {self.tail()}")
            time.sleep(0.02)
        raise AssertionError(f"no {prefix!r} from the loop in {timeout:.0f} s; last lines "
                             f"{self.tail()}")

    def tail(self, n: int = 8) -> list[str]:
        return [line for _, line in self.lines[-n:]]

    def committed_count(self) -> int:
        return sum(1 for _, line in self.lines if line.startswith("committed "))

    def kill9(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self, timeout: float = 30.0) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._stderr is not None:
            self._stderr.close()
        return self.proc.returncode

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class LoopRunner:
    """Starts, kills and restarts incarnations of the loop; remembers every one of them."""

    def __init__(self, spec: LoopSpec, workdir: Path) -> None:
        self.spec = spec
        self.workdir = workdir
        self.incarnations: list[LoopProcess] = []
        self.kills_mid_transaction = 0

    @property
    def current(self) -> LoopProcess:
        return self.incarnations[-1]

    def start(self, ready_timeout: float = 60.0) -> LoopProcess:
        loop = LoopProcess(self.spec, self.workdir / f"eos-loop-{len(self.incarnations)}.log")
        self.incarnations.append(loop.start())
        loop.wait_line("ready", ready_timeout)
        return loop

    def wait_open(self, timeout: float = 60.0) -> LoopProcess:
        """Wait for the next ``open`` line (a transaction with records not yet committed),
        restarting the loop whenever it exits meanwhile; return the incarnation."""
        deadline = time.monotonic() + timeout
        self.ensure_running()
        loop, after = self.current, len(self.current.lines)
        while time.monotonic() < deadline:
            if any(line.startswith("open ") for _, line in loop.lines[after:]):
                return loop
            if not loop.running():
                time.sleep(0.1)  # the reader thread may still hold its last lines
                if any(line.startswith("open ") for _, line in loop.lines[after:]):
                    return loop
                self.ensure_running()
                loop, after = self.current, len(self.current.lines)
            time.sleep(0.02)
        raise AssertionError(f"no transaction opened in {timeout:.0f} s; last lines "
                             f"{self.current.tail()}")

    def kill_mid_transaction(self, timeout: float = 60.0) -> None:
        """kill -9 right after the loop wrote records it has not committed yet."""
        self.wait_open(timeout).kill9()
        self.kills_mid_transaction += 1

    def ensure_running(self) -> None:
        """Restart the loop when it exited by itself (a fatal error after a broker fault)."""
        if not self.current.running():
            self.start()

    def fatal_exits(self) -> list[list[str]]:
        """The last lines of incarnations that gave up by themselves (not hung, not killed)."""
        return [loop.tail(3) for loop in self.incarnations
                if loop.proc is not None and loop.proc.returncode not in (None, 0, -9, 4)]

    def hung_exits(self) -> list[str]:
        """The calls of incarnations that ended on their watchdog (a client hang: exit 4)."""
        return [loop.tail(1)[0] for loop in self.incarnations
                if loop.proc is not None and loop.proc.returncode == 4]

    def finish(self, partitions: int, per_partition: int, timeout: float = 120.0) -> float:
        """Wait until the group committed the end of every input partition, restarting the
        loop if it dies; then stop it. Returns the seconds it took."""
        started = time.monotonic()
        want = [per_partition] * partitions
        got: list[int] = []
        while time.monotonic() - started < timeout:
            self.ensure_running()
            try:
                got = committed_offsets(self.spec.bootstrap, self.spec.group, self.spec.input,
                                        partitions)
            except KafkaException:
                got = []
            if got == want:
                self.current.stop()
                return time.monotonic() - started
            time.sleep(0.3)
        raise AssertionError(f"the loop committed input offsets {got}, not {want}, within "
                             f"{timeout:.0f} s; last lines {self.current.tail()}")

    def stop(self) -> None:
        for loop in self.incarnations:
            loop.stop(timeout=10)


def timed(action: Callable[[], Any]) -> float:
    started = time.monotonic()
    action()
    return time.monotonic() - started
