"""One fuzz run against a real broker subprocess, with well-behaved clients alongside.

Many connections send mutated frames (:mod:`.mutate`) as fast as the broker takes them: one
frame, then its response (or the broker closing the connection: reconnect), a new connection
every few hundred frames. Meanwhile

- a confluent-kafka producer (idempotent, acks=all) writes numbered records at a steady rate
  and a consumer reads them back: nothing acknowledged may be lost or reordered; the
  producer's ack latencies are what a well-behaved client sees under the fuzz mix;
- a probe connection sends ApiVersions every 20 ms: its slowest answer bounds from below the
  longest event-loop pause of the broker;
- the broker's RSS is sampled from ``/proc/PID/status``.

The result is a :class:`FuzzReport`; the caller decides what to assert (tests) or print
(``make fuzz``). Everything derives from one seed: the corpus, and each connection's stream
of mutations (the interleaving of connections is up to the scheduler).
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import random
import re
import socket
import struct
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.helpers.sockets import read_exact

from .corpus import TOPICS, build_big_corpus, build_corpus
from .mutate import DEFAULT_WEIGHTS, After, Mutant, Mutator

HOST = "127.0.0.1"
RESPONSE_TIMEOUT = 3.0
#: Log lines that mean the broker met something it did not expect: a traceback, an ERROR, or
#: the one line a handler's unexpected exception gets (Broker._answer_failure: "... failed,
#: answered UNKNOWN_SERVER_ERROR: TypeError ...", or "failed (KeyError ...); acks=0 ..."; a
#: FrameError there is a refused acks=0 Produce, which is expected).
BAD_LOG_LINE = re.compile(r"Traceback|\bERROR\b|\bCRITICAL\b|failed, answered |"
                          r"could not be encoded|failed \((?!FrameError)")
#: The loop watchdog's line (moldau.broker.loop_watchdog).
STALL_LINE = re.compile(r"event loop stalled (\d+\.\d+) s (.*)")


class Broker(Protocol):
    """What the driver needs of a broker (tests.helpers.BrokerProcess has it)."""

    @property
    def bootstrap(self) -> str: ...
    @property
    def port(self) -> int: ...
    @property
    def pid(self) -> int | None: ...
    @property
    def stderr_path(self) -> Path: ...
    def is_running(self) -> bool: ...


@dataclass
class FuzzConfig:
    frames: int = 20_000
    seconds: float = 45.0
    seed: int = 1
    connections: int = 16
    weights: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_WEIGHTS))
    produce_rate: float = 200.0  # records per second from the well-behaved producer
    variants: int = 4  # seed requests per API version
    skip_apis: frozenset[int] = frozenset()  # API keys left out of the corpus


@dataclass
class FuzzReport:
    seed: int
    frames: int = 0
    seconds: float = 0.0
    kinds: dict[str, int] = field(default_factory=dict)
    answered: int = 0
    closed_by_broker: int = 0
    timeouts: int = 0
    crashes: int = 0
    exit_code: int | None = None
    bad_log_lines: list[str] = field(default_factory=list)
    tracebacks: int = 0
    max_rss_mb: float = 0.0
    acked: int = 0
    consumed: int = 0
    lost: int = 0
    out_of_order: int = 0
    produce_errors: int = 0
    ack_p50_ms: float = 0.0
    ack_p99_ms: float = 0.0
    ack_max_ms: float = 0.0
    probe_max_ms: float = 0.0
    stalls: list[str] = field(default_factory=list)
    longest_stall_s: float = 0.0
    recent_frames: list[str] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.frames / self.seconds if self.seconds else 0.0

    def summary(self) -> dict[str, Any]:
        return {
            "seed": self.seed, "frames": self.frames, "seconds": round(self.seconds, 1),
            "rate_frames_per_s": round(self.rate), "kinds": self.kinds,
            "answered": self.answered, "closed_by_broker": self.closed_by_broker,
            "timeouts": self.timeouts, "crashes": self.crashes, "exit_code": self.exit_code,
            "tracebacks": self.tracebacks, "bad_log_lines": len(self.bad_log_lines),
            "max_rss_mb": round(self.max_rss_mb, 1), "acked": self.acked,
            "consumed": self.consumed, "lost": self.lost, "out_of_order": self.out_of_order,
            "produce_errors": self.produce_errors, "ack_p50_ms": round(self.ack_p50_ms, 1),
            "ack_p99_ms": round(self.ack_p99_ms, 1), "ack_max_ms": round(self.ack_max_ms, 1),
            "probe_max_ms": round(self.probe_max_ms, 1), "loop_stalls": len(self.stalls),
            "longest_stall_s": round(self.longest_stall_s, 2),
        }


def rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def create_topics(bootstrap: str, names: list[tuple[str, int]]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(n, num_partitions=p, replication_factor=1) for n, p in names],
        operation_timeout=20, request_timeout=20)
    for future in futures.values():
        future.result(timeout=30)


class Verifier:
    """A steady idempotent producer and a consumer of its topic; both on their own threads."""

    def __init__(self, bootstrap: str, rate: float) -> None:
        self.topic = f"verify-{uuid.uuid4().hex[:8]}"
        self.bootstrap = bootstrap
        self.interval = 1.0 / rate if rate > 0 else 0.0
        self.acked: dict[int, bytes] = {}
        self.latencies: list[float] = []
        self.errors: list[str] = []
        self.consumed: dict[int, bytes] = {}
        self.consumed_order: list[int] = []
        self._stop_producing = threading.Event()
        self._stop_consuming = threading.Event()
        self._threads: list[threading.Thread] = []
        self.sent = 0

    def start(self) -> None:
        create_topics(self.bootstrap, [(self.topic, 1)])
        for target in (self._produce, self._consume):
            thread = threading.Thread(target=target, daemon=True)
            thread.start()
            self._threads.append(thread)

    def _on_delivery(self, sent_at: float) -> Callable[[KafkaError | None, Any], None]:
        def report(err: KafkaError | None, msg: Any) -> None:
            if err is not None:
                self.errors.append(str(err))
                return
            self.latencies.append(time.monotonic() - sent_at)
            self.acked[msg.offset()] = msg.value()
        return report

    def _produce(self) -> None:
        producer = Producer({"bootstrap.servers": self.bootstrap, "acks": "all",
                             "enable.idempotence": True, "linger.ms": 0,
                             "message.timeout.ms": 120_000})
        next_at = time.monotonic()
        while not self._stop_producing.is_set():
            now = time.monotonic()
            if now >= next_at:
                value = str(self.sent).encode()
                try:
                    producer.produce(self.topic, value=value, on_delivery=self._on_delivery(now))
                    self.sent += 1
                except BufferError:
                    pass
                next_at += self.interval
            producer.poll(max(0.0, min(0.01, next_at - time.monotonic())))
        remaining = producer.flush(30)
        if remaining:
            self.errors.append(f"{remaining} records still queued after flush")

    def _consume(self) -> None:
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "verify",
                             "enable.auto.commit": False, "fetch.wait.max.ms": 100})
        consumer.assign([TopicPartition(self.topic, 0, 0)])
        try:
            while not self._stop_consuming.is_set():
                msg = consumer.poll(0.2)
                if msg is None or msg.error():
                    continue
                self.consumed[msg.offset()] = msg.value()
                self.consumed_order.append(msg.offset())
        finally:
            consumer.close()

    def finish(self, timeout: float = 60.0) -> None:
        """Stop producing, flush, and wait until the consumer has every acknowledged record."""
        self._stop_producing.set()
        self._threads[0].join(40)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not set(self.acked) <= set(self.consumed):
            time.sleep(0.1)
        self._stop_consuming.set()
        self._threads[1].join(30)

    def check(self, report: FuzzReport) -> None:
        report.acked = len(self.acked)
        report.consumed = len(self.consumed)
        report.lost = sum(1 for off, value in self.acked.items()
                          if self.consumed.get(off) != value)
        values = [int(self.consumed[off]) for off in self.consumed_order]
        report.out_of_order = sum(1 for a, b in itertools.pairwise(values) if b <= a)
        report.produce_errors = len(self.errors)
        lat = [x * 1000 for x in self.latencies]
        report.ack_p50_ms = percentile(lat, 0.5)
        report.ack_p99_ms = percentile(lat, 0.99)
        report.ack_max_ms = max(lat, default=0.0)


class Probe(threading.Thread):
    """ApiVersions v0 every 20 ms on one connection; the slowest answer is recorded."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.port = port
        self.max_ms = 0.0
        self._stop_event = threading.Event()

    def run(self) -> None:
        request = struct.pack(">hhih", 18, 0, 1, 5) + b"probe"
        frame = struct.pack(">i", len(request)) + request
        while not self._stop_event.is_set():
            try:
                with socket.create_connection((HOST, self.port), timeout=120) as sock:
                    while not self._stop_event.wait(0.02):
                        start = time.monotonic()
                        sock.sendall(frame)
                        head = read_exact(sock, 4)
                        read_exact(sock, struct.unpack(">i", head)[0])
                        self.max_ms = max(self.max_ms, (time.monotonic() - start) * 1000)
            except OSError:
                self._stop_event.wait(0.1)

    def stop(self) -> None:
        self._stop_event.set()
        self.join(130)



class RssMonitor(threading.Thread):
    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.max_mb = 0.0
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.wait(0.2):
            self.max_mb = max(self.max_mb, rss_mb(self.pid))

    def stop(self) -> None:
        self._stop_event.set()
        self.join(5)


class Fuzzer:
    """The mutated-frame senders, on an asyncio loop in the calling thread."""

    def __init__(self, broker: Broker, config: FuzzConfig, report: FuzzReport) -> None:
        self.broker = broker
        self.config = config
        self.report = report
        self.corpus = build_corpus(config.seed, config.variants, config.skip_apis)
        self.big = (build_big_corpus(config.seed, skip=config.skip_apis)
                    if config.weights.get("big") else [])
        self.kinds: collections.Counter[str] = collections.Counter()
        self.recent: dict[int, collections.deque[Mutant]] = {}
        self._deadline = 0.0

    def _done(self) -> bool:
        return (self.report.frames >= self.config.frames
                or time.monotonic() >= self._deadline
                or not self.broker.is_running())

    async def _read_response(self, reader: asyncio.StreamReader) -> bool:
        try:
            head = await asyncio.wait_for(reader.readexactly(4), RESPONSE_TIMEOUT)
            (size,) = struct.unpack(">i", head)
            await asyncio.wait_for(reader.readexactly(size), RESPONSE_TIMEOUT)
        except TimeoutError:
            self.report.timeouts += 1
            return False
        except (asyncio.IncompleteReadError, ConnectionError):
            self.report.closed_by_broker += 1
            return False
        self.report.answered += 1
        return True

    async def _worker(self, index: int) -> None:
        rng = random.Random(self.config.seed * 1_000_003 + index)
        mutator = Mutator(self.corpus, rng, self.config.weights, self.big)
        recent: collections.deque[Mutant] = collections.deque(maxlen=8)
        self.recent[index] = recent
        while not self._done():
            try:
                reader, writer = await asyncio.open_connection(HOST, self.broker.port)
            except OSError:
                await asyncio.sleep(0.05)
                continue
            try:
                for _ in range(rng.randrange(1, 300)):
                    if self._done():
                        break
                    _seed, mutant = mutator.next()
                    recent.append(mutant)
                    writer.write(mutant.data)
                    self.report.frames += 1
                    self.kinds[mutant.kind] += 1
                    await asyncio.wait_for(writer.drain(), RESPONSE_TIMEOUT)
                    if mutant.after is After.CLOSE:
                        break
                    if mutant.after is After.READ and not await self._read_response(reader):
                        break
            except TimeoutError:
                self.report.timeouts += 1
            except ConnectionError:
                self.report.closed_by_broker += 1
            finally:
                writer.transport.abort()

    async def run(self) -> None:
        self._deadline = time.monotonic() + self.config.seconds
        await asyncio.gather(*(self._worker(i) for i in range(self.config.connections)))
        self.report.kinds = dict(self.kinds)


def scan_log(path: Path, report: FuzzReport) -> None:
    text = path.read_text(errors="replace") if path.exists() else ""
    report.tracebacks = text.count("Traceback")
    report.bad_log_lines = [line for line in text.splitlines() if BAD_LOG_LINE.search(line)]
    for line in text.splitlines():
        match = STALL_LINE.search(line)
        if match:
            report.stalls.append(line)
            report.longest_stall_s = max(report.longest_stall_s, float(match.group(1)))


def run_fuzz(broker: Broker, config: FuzzConfig) -> FuzzReport:
    """Fuzz ``broker`` (already started) until ``config.frames`` or ``config.seconds``."""
    report = FuzzReport(seed=config.seed)
    assert broker.pid is not None
    create_topics(broker.bootstrap, [(TOPICS[0], 1), (TOPICS[1], 3), (TOPICS[2], 2)])
    verifier = Verifier(broker.bootstrap, config.produce_rate)
    verifier.start()
    probe = Probe(broker.port)
    rss = RssMonitor(broker.pid)
    probe.start()
    rss.start()
    fuzzer = Fuzzer(broker, config, report)
    start = time.monotonic()
    try:
        asyncio.run(fuzzer.run())
    finally:
        report.seconds = time.monotonic() - start
        if broker.is_running():
            verifier.finish()
        probe.stop()
        rss.stop()
    report.max_rss_mb = rss.max_mb
    report.probe_max_ms = probe.max_ms
    verifier.check(report)
    if not broker.is_running():
        report.crashes = 1
        proc = getattr(broker, "_proc", None)
        report.exit_code = None if proc is None else proc.returncode
        report.recent_frames = [f"{m.kind} {m.data[:200].hex()}"
                                for frames in fuzzer.recent.values() for m in frames]
    scan_log(broker.stderr_path, report)
    return report
