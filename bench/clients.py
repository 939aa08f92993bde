"""The client side of every workload: confluent-kafka in this process or in worker processes,
and kcat as a subprocess.

Each function drives one broker and returns plain numbers; the caller decides what to record.
The client settings are module constants so that both brokers get exactly the same ones. Every
loop stops at a record count or at a deadline, whichever comes first, so a broker that stalls
costs a bounded amount of time and shows up as a short count rather than a hung run.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import select
import struct
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from . import procs

#: Producer settings of the throughput workloads (issue 6: acks=all, linger 5 ms). The queue
#: limits are raised so that the client is never the one waiting for buffer space.
PRODUCER_CONF: dict[str, Any] = {
    "acks": "all",
    "linger.ms": 5,
    "batch.size": 1_000_000,
    "queue.buffering.max.messages": 1_000_000,
    "queue.buffering.max.kbytes": 1_048_576,
    "compression.type": "none",
}
#: Consumer settings. Fetch sizes stay at librdkafka's defaults (fetch.max.bytes 50 MiB,
#: max.partition.fetch.bytes 1 MiB): with 10 MiB per partition one response overfills the client's
#: own queue (queued.min.messages 100k records per partition) and librdkafka then stops fetching
#: those partitions for up to a second ("Fetch backoff: Local: Queue full"), which measured the
#: client's back-off, not the broker (kcat 100 B: 0.5-0.9M rec/s against 3.1M with the defaults).
#: For the same reason queued.min.messages is raised from 100k to 1M: a group consumer has one
#: queue for all partitions, and a broker that fills it past 100k small records in a few fetches
#: made librdkafka pause every partition for fetch.queue.backoff.ms (1 s): kcat -G read 1M x
#: 100 B at 0.4-0.7M rec/s from moldau instead of 2.4M. The key exists in every librdkafka.
#: The session timeout is Kafka's minimum (group.min.session.timeout.ms): Tansu holds the first
#: JoinGroup of a new group for half the session timeout, 22.5 s with the default 45 s, which
#: would make the group workloads measure that wait (it is still visible as first_record_s).
CONSUMER_CONF: dict[str, Any] = {
    "fetch.max.bytes": 52_428_800,
    "max.partition.fetch.bytes": 1_048_576,
    "queued.min.messages": 1_000_000,
    "enable.auto.commit": False,
    "session.timeout.ms": 6000,
}
LATENCY_RECORD_BYTES = 100


@dataclass
class Transfer:
    """What a produce or consume run achieved.

    For a producer the rate is over the whole run. For a consumer it is over the steady phase,
    from the first delivery to the last (``rate_records`` then excludes the first delivery's
    records), and ``first_s`` is the time to that first delivery: a group consumer spends that
    time joining its group, which would otherwise hide the fetch throughput (Tansu takes ~23 s
    to answer a first JoinGroup).
    """

    records: int
    record_bytes: int
    seconds: float
    failed: int = 0
    expected: int = 0
    first_s: float | None = None
    rate_records: int | None = None

    def metrics(self) -> dict[str, Any]:
        secs = max(self.seconds, 1e-9)
        counted = self.records if self.rate_records is None else self.rate_records
        out = {
            "records": self.records, "expected": self.expected, "record_bytes": self.record_bytes,
            "seconds": round(self.seconds, 3), "failed": self.failed,
            "records_per_s": round(counted / secs),
            "mb_per_s": round(counted * self.record_bytes / secs / 1e6, 2),
        }
        if self.first_s is not None:
            out["first_record_s"] = round(self.first_s, 3)
        return out


# -- admin -----------------------------------------------------------------------------

def create_topic(bootstrap: str, partitions: int, prefix: str = "bench") -> str:
    """Create a topic with CreateTopics and wait until metadata shows a leader for each partition.

    CreateTopics rather than auto-creation plus CreatePartitions: Tansu has no CreatePartitions.
    """
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=30)[name].result(60)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        meta = admin.list_topics(name, timeout=10).topics.get(name)
        if (meta is not None and meta.error is None and len(meta.partitions) == partitions
                and all(p.leader >= 0 for p in meta.partitions.values())):
            return name
        time.sleep(0.1)
    raise RuntimeError(f"topic {name} has no leader for all {partitions} partitions after 30 s")


def delete_topics(bootstrap: str, names: list[str]) -> None:
    """Best effort: frees the peer's memory between repetitions; a failure changes no figure."""
    if not names:
        return
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.delete_topics(names, operation_timeout=30).values():
        with contextlib.suppress(KafkaException):
            fut.result(60)


# -- confluent-kafka -------------------------------------------------------------------

def produce(bootstrap: str, topic: str, count: int, size: int, time_limit: float,
            conf: dict[str, Any] | None = None, partitions: int = 0) -> Transfer:
    """Produce ``count`` records of ``size`` random bytes and wait for every acknowledgement."""
    producer = Producer({"bootstrap.servers": bootstrap, **(conf or PRODUCER_CONF)})
    producer.list_topics(topic, timeout=10)  # connect and learn leaders outside the timing
    start = time.monotonic()
    acked = produce_with(producer, topic, count, size, start + time_limit, partitions)
    return Transfer(acked, size, time.monotonic() - start, count - acked, count)


def produce_with(producer: Producer, topic: str, count: int, size: int, deadline: float,
                 partitions: int = 0) -> int:
    """Produce until ``count`` or ``deadline``, wait for the acks; return the acked records.

    ``partitions`` > 0 sends round-robin by explicit partition (an even spread, used to lay out
    data for the start-up workload); 0 leaves it to the client's default partitioner.
    """
    payload = os.urandom(size)
    acked = 0

    def on_delivery(err: Any, _msg: Any) -> None:
        nonlocal acked
        if err is None:
            acked += 1

    sent = 0
    while sent < count and time.monotonic() < deadline:
        try:
            if partitions:
                producer.produce(topic, payload, partition=sent % partitions,
                                 on_delivery=on_delivery)
            else:
                producer.produce(topic, payload, on_delivery=on_delivery)
            sent += 1
        except BufferError:
            producer.poll(0.005)
    producer.flush(max(1.0, deadline - time.monotonic()))
    return acked


def consume(bootstrap: str, topic: str, partitions: int, count: int, size: int,
            time_limit: float, group: str | None = None) -> Transfer:
    """Read ``count`` records from the start, by assignment (no group) or as a new group member.

    Without a group the partitions are assigned at offset 0 (the topic is new), which needs no
    ListOffsets. With a group the time includes joining it, as it does for a real application.
    """
    conf = {"bootstrap.servers": bootstrap, **CONSUMER_CONF}
    conf["group.id"] = group or f"bench-unused-{uuid.uuid4().hex[:6]}"
    conf["auto.offset.reset"] = "earliest"
    start = time.perf_counter()
    consumer = Consumer(conf)
    if group is None:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    else:
        consumer.subscribe([topic])
    deadline = start + time_limit
    received = errors = 0
    first_at = last_at = start
    first_batch = 0
    try:
        while received < count and time.perf_counter() < deadline:
            batch = consumer.consume(10_000, 0.5)
            good = sum(1 for msg in batch if msg.error() is None)
            errors += len(batch) - good
            if good:
                last_at = time.perf_counter()
                if not received:
                    first_at, first_batch = last_at, good
                received += good
    finally:
        consumer.close()
    if received == first_batch:  # all in one delivery: no steady phase to time
        return Transfer(received, size, last_at - start, errors, count, first_s=first_at - start)
    return Transfer(received, size, last_at - first_at, errors, count,
                    first_s=first_at - start, rate_records=received - first_batch)


# -- kcat -------------------------------------------------------------------------------

def kcat_env(librdkafka_dir: Path | None) -> dict[str, str]:
    env = dict(os.environ)
    if librdkafka_dir is not None:
        env["LD_LIBRARY_PATH"] = str(librdkafka_dir)
    return env


def kcat_version(librdkafka_dir: Path | None) -> str:
    out = subprocess.run(["kcat", "-V"], capture_output=True, text=True, timeout=10,
                         env=kcat_env(librdkafka_dir))
    return next((ln.strip() for ln in out.stdout.splitlines() if "librdkafka" in ln), "")


def kcat_input(path: Path, count: int, size: int) -> Path:
    """A file of ``count`` lines of ``size`` printable bytes: kcat sends one record per line."""
    if path.exists() and path.stat().st_size == count * (size + 1):
        return path
    alphabet = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    line = bytes(alphabet[b % len(alphabet)] for b in os.urandom(size)) + b"\n"
    per_chunk = max(1, (4 << 20) // len(line))
    with path.open("wb") as f:
        left = count
        while left:
            n = min(left, per_chunk)
            f.write(line * n)
            left -= n
    return path


def _x_args(conf: dict[str, Any]) -> list[str]:
    args = []
    for key, value in conf.items():
        args += ["-X", f"{key}={str(value).lower() if isinstance(value, bool) else value}"]
    return args


@dataclass
class KcatRun:
    """A finished kcat: exit code, stderr tail, and (when counted) its stdout line arrivals."""

    returncode: int
    stderr: str
    seconds: float
    lines: int = 0
    first_s: float | None = None  # when the first chunk of output arrived
    first_lines: int = 0  # lines in that first chunk
    last_s: float = 0.0  # when the last chunk arrived


def _run_kcat(args: list[str], time_limit: float, librdkafka_dir: Path | None) -> KcatRun:
    """Run kcat, counting the newlines it prints and when they arrive.

    kcat's stdout is block-buffered into the pipe, so the first chunk arrives a few thousand
    records after the first record: close enough for a time-to-first-record that is either a
    few ms or, with a slow group join, many seconds.
    """
    start = time.perf_counter()
    proc = procs.popen(["kcat", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       stdin=subprocess.DEVNULL, env=kcat_env(librdkafka_dir))
    assert proc.stdout is not None and proc.stderr is not None
    run = KcatRun(0, "", 0.0)
    err = bytearray()
    streams = {proc.stdout.fileno(): "out", proc.stderr.fileno(): "err"}
    deadline = start + time_limit
    while streams and (left := deadline - time.perf_counter()) > 0:
        ready, _, _ = select.select(list(streams), [], [], left)
        for fd in ready:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                del streams[fd]
            elif streams[fd] == "err":
                err += chunk[-4096:]
            else:
                now = time.perf_counter() - start
                n = chunk.count(b"\n")
                if run.first_s is None:
                    run.first_s, run.first_lines = now, n
                run.lines += n
                run.last_s = now
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    run.seconds = time.perf_counter() - start
    procs.stop(proc)
    run.returncode = proc.returncode
    run.stderr = " | ".join(err.decode(errors="replace").strip().splitlines()[-3:])
    return run


def kcat_produce(bootstrap: str, topic: str, data: Path, count: int, size: int,
                 time_limit: float, librdkafka_dir: Path | None) -> Transfer:
    """``kcat -P -l file`` with the same producer settings as the confluent-kafka workload."""
    args = ["-P", "-b", bootstrap, "-t", topic, *_x_args(PRODUCER_CONF), "-l", str(data)]
    run = _run_kcat(args, time_limit, librdkafka_dir)
    if run.returncode != 0:
        raise RuntimeError(f"kcat -P exited {run.returncode}: {run.stderr}")
    return Transfer(count, size, run.seconds, 0, count)


def kcat_consume(bootstrap: str, topic: str, count: int, size: int, time_limit: float,
                 librdkafka_dir: Path | None, group: str | None = None) -> Transfer:
    """``kcat -C -e -o beginning`` (or ``-G group``), printing one newline per record to count.

    As for the Python consumer, the rate is from the first output chunk to the last.
    """
    conf = {k: v for k, v in CONSUMER_CONF.items() if k != "enable.auto.commit"}
    if group is None:
        args = ["-C", "-b", bootstrap, "-t", topic, "-o", "beginning"]
    else:
        conf["auto.offset.reset"] = "earliest"
        conf["enable.auto.commit"] = False
        args = ["-b", bootstrap, "-G", group, topic]
    args += ["-e", "-q", "-c", str(count), "-f", "\\n", *_x_args(conf)]
    run = _run_kcat(args, time_limit, librdkafka_dir)
    if run.returncode != 0 and run.lines == 0:
        raise RuntimeError(f"kcat -C exited {run.returncode}: {run.stderr}")
    if run.first_s is None or run.lines == run.first_lines:  # no steady phase to time
        return Transfer(run.lines, size, run.seconds, 0, count, first_s=run.first_s)
    return Transfer(run.lines, size, run.last_s - run.first_s, 0, count, first_s=run.first_s,
                    rate_records=run.lines - run.first_lines)


def kcat_metadata_ok(bootstrap: str, librdkafka_dir: Path | None) -> tuple[bool, str]:
    """Whether this kcat build can talk to the broker at all (``kcat -L``)."""
    try:
        out = subprocess.run(["kcat", "-L", "-b", bootstrap, "-m", "5"], capture_output=True,
                             text=True, timeout=20, env=kcat_env(librdkafka_dir))
    except subprocess.TimeoutExpired:
        return False, "kcat -L timed out"
    if out.returncode == 0:
        return True, ""
    return False, " | ".join(out.stderr.strip().splitlines()[-2:])


# -- latency ---------------------------------------------------------------------------

def percentiles_ms(samples: list[float]) -> dict[str, float | None]:
    """p50/p99/p99.9 in ms of samples given in seconds (nearest rank)."""
    if not samples:
        return {"p50_ms": None, "p99_ms": None, "p999_ms": None}
    s = sorted(samples)

    def rank(p: float) -> float:
        return round(s[min(len(s) - 1, int(p * len(s)))] * 1000, 3)

    return {"p50_ms": rank(0.50), "p99_ms": rank(0.99), "p999_ms": rank(0.999)}


_HEADER = struct.Struct(">cq")  # b"W"arm-up or b"M"easured, then CLOCK_MONOTONIC in ns


def _latency_consumer(bootstrap: str, topic: str, partitions: int, expected: int,
                      time_limit: float, ready: Any, results: Any) -> None:
    """Child process: long-poll the topic and time each measured record from its timestamp.

    A separate process so that the consumer's Python work never delays the paced producer;
    CLOCK_MONOTONIC is shared by all processes of the machine.
    """
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-latency",
                         "enable.auto.commit": False, "fetch.min.bytes": 1})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    samples: list[float] = []
    deadline = time.monotonic() + time_limit
    while len(samples) < expected and time.monotonic() < deadline:
        msg = consumer.poll(0.1)
        if msg is None or msg.error() is not None:
            continue
        now = time.monotonic_ns()
        kind, sent = _HEADER.unpack_from(msg.value() or b"", 0)
        if kind == b"W":
            ready.set()
        else:
            samples.append((now - sent) / 1e9)
    consumer.close()
    results.put(samples)


def latency(bootstrap: str, topic: str, partitions: int, rate: int, seconds: float,
            linger_ms: int = 0) -> dict[str, Any]:
    """Produce-to-ack and produce-to-consume latency at a fixed rate (linger 0 by default).

    Warm-up records are sent until the consumer has seen one, so connection set-up is not in
    the figures. Ack latency is librdkafka's own measure (``Message.latency()``: from produce()
    to the acknowledgement arriving), which does not depend on how often Python polls.
    """
    total = int(rate * seconds)
    ctx = mp.get_context("spawn")
    ready, results = ctx.Event(), ctx.Queue()
    child = ctx.Process(target=_latency_consumer, daemon=True,
                        args=(bootstrap, topic, partitions, total, seconds + 60, ready, results))
    child.start()
    conf = {**PRODUCER_CONF, "linger.ms": linger_ms}
    producer = Producer({"bootstrap.servers": bootstrap, **conf})
    pad = b"\0" * (LATENCY_RECORD_BYTES - _HEADER.size)
    warm_deadline = time.monotonic() + 60
    while not ready.is_set():
        if time.monotonic() > warm_deadline or not child.is_alive():
            child.kill()
            raise RuntimeError("latency consumer saw no warm-up record within 60 s")
        producer.produce(topic, _HEADER.pack(b"W", time.monotonic_ns()) + pad)
        producer.flush(1)
        ready.wait(0.2)
    acks: list[float] = []
    failed = 0

    def on_delivery(err: Any, msg: Any) -> None:
        nonlocal failed
        lat = msg.latency()
        if err is None and lat is not None:
            acks.append(lat)
        else:
            failed += 1

    start = time.perf_counter()
    for i in range(total):
        target = start + i / rate
        while (now := time.perf_counter()) < target:
            producer.poll(min(target - now, 0.001))
        producer.produce(topic, _HEADER.pack(b"M", time.monotonic_ns()) + pad,
                         on_delivery=on_delivery)
        producer.poll(0)
    achieved = total / max(time.perf_counter() - start, 1e-9)
    producer.flush(30)
    try:
        e2e: list[float] = results.get(timeout=seconds + 90)
    finally:
        child.join(10)
        if child.is_alive():
            child.kill()
    ack = percentiles_ms(acks)
    end = percentiles_ms(e2e)
    return {
        "rate": rate, "achieved_rate": round(achieved), "records": total, "failed": failed,
        "acked": len(acks), "consumed": len(e2e),
        **{f"ack_{k}": v for k, v in ack.items()}, **{f"e2e_{k}": v for k, v in end.items()},
    }


# -- several producers -----------------------------------------------------------------

def _producer_worker(bootstrap: str, topic: str, count: int, size: int, time_limit: float,
                     barrier: Any, results: Any) -> None:
    """Child process: one Producer, started together with the others by a barrier."""
    producer = Producer({"bootstrap.servers": bootstrap, **PRODUCER_CONF})
    producer.list_topics(topic, timeout=10)
    barrier.wait(120)
    t0 = time.monotonic()
    done = produce_with(producer, topic, count, size, t0 + time_limit)
    results.put((done, count - done, t0, time.monotonic()))


def produce_parallel(bootstrap: str, topic: str, producers: int, count: int, size: int,
                     time_limit: float,
                     window: contextlib.AbstractContextManager[Any] | None = None) -> Transfer:
    """``producers`` processes, each with its own Producer, share ``count`` records.

    The clock runs from the earliest start to the latest finish: the aggregate throughput a
    broker gives to that many clients at once. ``window`` (e.g. a broker CPU meter) is entered
    when all workers are connected and left when the last one is done.
    """
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(producers + 1), ctx.Queue()
    share = [count // producers + (1 if i < count % producers else 0) for i in range(producers)]
    workers = [ctx.Process(target=_producer_worker, daemon=True,
                           args=(bootstrap, topic, n, size, time_limit, barrier, results))
               for n in share]
    for w in workers:
        w.start()
    try:
        barrier.wait(180)
        with window or contextlib.nullcontext():
            rows = [results.get(timeout=time_limit + 60) for _ in workers]
    finally:
        for w in workers:
            w.join(10)
            if w.is_alive():
                w.kill()
    acked = sum(r[0] for r in rows)
    failed = sum(r[1] for r in rows)
    elapsed = max(r[3] for r in rows) - min(r[2] for r in rows)
    return Transfer(acked, size, elapsed, failed, count)
