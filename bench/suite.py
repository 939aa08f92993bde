"""The workloads of the side-by-side run, each measured on moldau and on the peer in turn.

Within a repetition both brokers run the same workload with the same client settings, one after
the other; the order flips every repetition (moldau first, then Tansu first, ...) so that a drift
of the machine's load during the run does not always favour the same broker. A workload a broker
cannot run is recorded as ``unsupported`` or ``n/a`` with the reason, never skipped silently, and
a failure is recorded as ``error`` without stopping the rest of the run.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import clients, machine, procs
from .brokers import Broker, MoldauBroker, TansuBroker
from .report import Recorder


@dataclass(frozen=True)
class Scale:
    """How big each workload is; ``quick`` keeps every kind of workload but makes it smaller."""

    name: str
    small_records: int  # 100 B records per produce/consume run
    large_records: int  # 1 KiB records per produce/consume run
    latency_seconds: float
    scaling_records: int  # 1 KiB records per scaling point
    startup_bytes: int
    iperf_seconds: float
    time_limit: float  # per measurement
    partitions: tuple[int, ...] = (1, 6, 100, 1000)
    producers: tuple[int, ...] = (1, 4, 16)
    many_partitions: int = 1000


FULL = Scale("full", 1_000_000, 200_000, 20.0, 200_000, 5 * 10**9, 5.0, 180.0)
QUICK = Scale("quick", 200_000, 50_000, 4.0, 50_000, 500 * 10**6, 2.0, 60.0)

LATENCY_RATE = 5_000
STARTUP_RECORD_BYTES = 16 * 1024  # big records: the point is the data on disk, not the client


@dataclass(frozen=True)
class Spec:
    """What a workload is called and which of its metrics the table shows."""

    workload: str
    label: str
    show: tuple[str, ...]
    #: Which machine limits its MB/s is compared with: "net" (loopback TCP) for consumers,
    #: "net+disk" for producers (a durable broker also has to write to disk).
    limit: str | None = None


class CpuMeter:
    """Broker CPU over the part of a workload that moves data: ``with meter: ...``.

    Creating or deleting a topic of 1,000 partitions costs a broker far more CPU than moving a
    few MB through it, so topic set-up stays outside the window.
    """

    def __init__(self, broker: Broker) -> None:
        self._broker = broker
        self._start: dict[tuple[int, int], int] = {}
        self.seconds: float | None = None

    def __enter__(self) -> CpuMeter:
        self._start = self._broker.thread_cpu()
        return self

    def __exit__(self, *_exc: object) -> None:
        if self._broker.alive():
            end = self._broker.thread_cpu()
            self.seconds = procs.cpu_ns_between(self._start, end) / 1e9


Workload = Callable[[Broker, CpuMeter], dict[str, Any]]


class Unsupported(Exception):
    """The broker lacks an API the workload needs."""


class NotApplicable(Exception):
    """The workload makes no sense for this broker (e.g. restart of a memory-only broker)."""


TRANSFER = ("records_per_s", "mb_per_s")
TRANSFER_CPU = ("records_per_s", "mb_per_s", "cpu_s_per_gb")


def _size_name(size: int) -> str:
    return "1KiB" if size == 1024 else f"{size}B"


def _count_name(n: int) -> str:
    """1_000_000 -> "1M", 200_000 -> "200k": labels short enough for a table cell."""
    for unit, div in (("M", 1_000_000), ("k", 1_000)):
        if n >= div and n % (div // 10) == 0:
            return f"{n / div:g}{unit}"
    return f"{n:,}"


class Suite:
    """Runs the sections; owns every broker it starts and stops them in :meth:`close`."""

    def __init__(self, scale: Scale, reps: int, recorder: Recorder, tmp: Path,
                 tansu: Path | None, peer_reason: str, librdkafka: Path | None) -> None:
        self.scale = scale
        self.reps = reps
        self.rec = recorder
        self.tmp = tmp
        self.tansu = tansu
        self.peer_reason = peer_reason
        self.librdkafka = librdkafka
        self._running: list[Broker] = []
        self.notes: list[str] = []  # printed under the table

    # -- plumbing --------------------------------------------------------------------
    def _start(self, broker: Broker) -> Broker:
        self._running.append(broker)
        broker.start()
        return broker

    def _stop(self, broker: Broker | None) -> None:
        if broker is not None:
            broker.stop()
            if broker in self._running:
                self._running.remove(broker)

    def close(self) -> None:
        """Stop every broker still running (also after Ctrl-C or an error)."""
        for broker in list(self._running):
            try:
                broker.stop()
            except Exception:
                broker.kill()
        self._running.clear()

    def _pair(self, tag: str) -> list[Broker | None]:
        """A fresh moldau and a fresh peer (None when the peer is unavailable)."""
        moldau = self._start(MoldauBroker(self.tmp / f"moldau-{tag}"))
        if self.tansu is None:
            return [moldau, None]
        try:
            return [moldau, self._start(TansuBroker(self.tmp / f"tansu-{tag}", self.tansu))]
        except Exception:
            self._stop(moldau)
            raise

    def _ordered(self, pair: list[Broker | None], rep: int) -> Iterator[tuple[str, Broker | None]]:
        names = ("moldau", "tansu")
        items = list(zip(names, pair, strict=True))
        yield from (items if rep % 2 == 0 else reversed(items))

    def measure(self, spec: Spec, name: str, broker: Broker | None, rep: int,
                fn: Workload) -> dict[str, Any] | None:
        """Run ``fn`` on ``broker`` and record one sample; returns its metrics when ok.

        When ``fn`` measured broker CPU with the meter it is given, the sample says what the
        broker spent (``cpu_s``) and ``cpu_s_per_gb`` relates it to the payload bytes moved.
        """
        base = {"workload": spec.workload, "label": spec.label, "show": list(spec.show),
                "limit": spec.limit, "broker": name, "rep": rep}
        if broker is None:
            self.rec.sample({**base, "status": "n/a", "reason": self.peer_reason})
            return None
        metrics: dict[str, Any] = {}
        status, reason = "ok", ""
        try:
            if not broker.alive():
                broker.stop()
                broker.start()
                reason = "broker had died and was restarted before this sample; "
            meter = CpuMeter(broker)
            metrics = fn(broker, meter)
            if meter.seconds is not None:
                cpu = meter.seconds
                metrics["cpu_s"] = round(cpu, 4)
                moved = metrics.get("records", 0) * metrics.get("record_bytes", 0)
                if moved:
                    metrics["cpu_s_per_gb"] = round(cpu / (moved / 1e9), 3)
            if metrics.get("expected") and metrics.get("records", 0) < metrics["expected"]:
                status = "incomplete"
                reason += (f"{metrics['records']:,} of {metrics['expected']:,} records within "
                           f"{self.scale.time_limit:.0f} s")
        except Unsupported as e:
            status, reason = "unsupported", str(e)
        except NotApplicable as e:
            status, reason = "n/a", str(e)
        except Exception as e:
            status, reason = "error", f"{type(e).__name__}: {e}"[:400]
            if not broker.alive():
                reason += f" (broker died: {broker.log_tail()[:400]})"
        self.rec.sample({**base, "status": status, "reason": reason, **metrics})
        return metrics if status == "ok" else None

    # -- sections --------------------------------------------------------------------
    def machine_limits(self) -> dict[str, float]:
        """Loopback and disk, median of ``reps`` runs each, recorded as one ``limits`` line."""
        net: list[float] = []
        disk: list[float] = []
        notes = {}
        for _ in range(self.reps):
            try:
                net.append(machine.loopback_mb_per_s(self.scale.iperf_seconds))
            except Exception as e:  # a missing limit must not cost the broker figures
                notes["net"] = f"{type(e).__name__}: {e}"[:300]
                break
        for _ in range(self.reps):
            try:
                disk.append(machine.disk_write_mb_per_s(self.tmp))
            except Exception as e:
                notes["disk"] = f"{type(e).__name__}: {e}"[:300]
                break
        limits: dict[str, float] = {}
        if net:
            limits["net"] = round(sorted(net)[len(net) // 2], 1)
        if disk:
            limits["disk"] = round(sorted(disk)[len(disk) // 2], 1)
        self.rec.write({"kind": "limits", **limits, "net_runs": [round(x) for x in net],
                        "disk_runs": [round(x) for x in disk], "notes": notes})
        self.rec.limits = limits
        return limits

    def throughput(self) -> None:
        """Produce, then consume the same records four ways; kcat produce as the client limit."""
        sc = self.scale
        pair = self._pair("throughput")
        try:
            self._system_kcat_check(pair)
            for size, count in ((100, sc.small_records), (1024, sc.large_records)):
                self._throughput_size(pair, size, count)
        finally:
            for b in pair:
                self._stop(b)

    def _system_kcat_check(self, pair: list[Broker | None]) -> None:
        """Can Debian's own kcat (its older librdkafka) talk to each broker at all?

        The kcat workloads run with confluent-kafka's librdkafka for both brokers; this says
        what a user with the distribution's kcat would see.
        """
        for name, broker in zip(("moldau", "tansu"), pair, strict=True):
            if broker is None:
                continue
            ok, why = clients.kcat_metadata_ok(broker.bootstrap, None)
            self.rec.write({"kind": "compat", "broker": name, "client": "system kcat",
                            "ok": ok, "error": why[:300]})
            self.notes.append(f"Debian's kcat (system librdkafka) against {name}: "
                              + ("works" if ok else f"fails: {why[-160:]}"))

    def _throughput_size(self, pair: list[Broker | None], size: int, count: int) -> None:
        sz = _size_name(size)
        data = clients.kcat_input(self.tmp / f"kcat-{count}x{size}.txt", count, size)
        n = f"{_count_name(count)} x {sz}"
        group = (*TRANSFER, "first_record_s")
        specs = {
            "produce": Spec(f"produce.confluent.{sz}", f"produce {n}, confluent", TRANSFER_CPU,
                            "net+disk"),
            "kcat_produce": Spec(f"produce.kcat.{sz}", f"produce {n}, kcat", TRANSFER,
                                 "net+disk"),
            "consume": Spec(f"consume.confluent.{sz}", f"consume {n}, confluent", TRANSFER_CPU,
                            "net"),
            "kcat_consume": Spec(f"consume.kcat.{sz}", f"consume {n}, kcat", TRANSFER, "net"),
            "group": Spec(f"consume.confluent.group.{sz}", f"consume {n}, confluent, new group",
                          group, "net"),
            "kcat_group": Spec(f"consume.kcat.group.{sz}", f"consume {n}, kcat -G new group",
                               group, "net"),
        }
        for rep in range(self.reps):
            for name, broker in self._ordered(pair, rep):
                self._throughput_once(specs, name, broker, rep, size, count, data)

    def _throughput_once(self, specs: dict[str, Spec], name: str, broker: Broker | None,
                         rep: int, size: int, count: int, data: Path) -> None:
        """One repetition on one broker: the consumers read what the first producer wrote."""
        sc, lib = self.scale, self.librdkafka
        topics: list[str] = []

        def new_topic(b: Broker) -> str:
            topics.append(clients.create_topic(b.bootstrap, 6))
            return topics[-1]

        def produce(b: Broker, cpu: CpuMeter) -> dict[str, Any]:
            topic = new_topic(b)
            with cpu:
                return clients.produce(b.bootstrap, topic, count, size, sc.time_limit).metrics()

        produced = self.measure(specs["produce"], name, broker, rep, produce)
        n = produced["records"] if produced else 0

        def source() -> str:
            if not produced:
                raise RuntimeError("nothing to consume: the produce run failed")
            return topics[0]

        def consume(b: Broker, cpu: CpuMeter) -> dict[str, Any]:
            with cpu:
                return clients.consume(b.bootstrap, source(), 6, n, size,
                                       sc.time_limit).metrics()

        def kcat_consume(b: Broker, cpu: CpuMeter) -> dict[str, Any]:
            with cpu:
                return clients.kcat_consume(b.bootstrap, source(), n, size, sc.time_limit,
                                            lib).metrics()

        def group(b: Broker, cpu: CpuMeter) -> dict[str, Any]:
            self._need_groups(b)
            with cpu:
                return clients.consume(b.bootstrap, source(), 6, n, size, sc.time_limit,
                                       group=f"bench-{time.monotonic_ns()}").metrics()

        def kcat_group(b: Broker, cpu: CpuMeter) -> dict[str, Any]:
            self._need_groups(b)
            with cpu:
                return clients.kcat_consume(b.bootstrap, source(), n, size, sc.time_limit,
                                            lib, group=f"bench-{time.monotonic_ns()}").metrics()

        def kcat_produce(b: Broker, cpu: CpuMeter) -> dict[str, Any]:
            topic = new_topic(b)
            with cpu:
                return clients.kcat_produce(b.bootstrap, topic, data, count, size,
                                            sc.time_limit, lib).metrics()

        self.measure(specs["consume"], name, broker, rep, consume)
        self.measure(specs["kcat_consume"], name, broker, rep, kcat_consume)
        self.measure(specs["group"], name, broker, rep, group)
        self.measure(specs["kcat_group"], name, broker, rep, kcat_group)
        self.measure(specs["kcat_produce"], name, broker, rep, kcat_produce)
        if broker is not None and broker.alive():
            clients.delete_topics(broker.bootstrap, topics)

    @staticmethod
    def _need_groups(b: Broker) -> None:
        if not b.groups_supported:
            raise Unsupported("broker does not answer FindCoordinator/JoinGroup (ApiVersions)")

    def latency(self) -> None:
        """Produce-to-ack and produce-to-consume latency at a fixed rate, linger 0 and 5 ms.

        Linger 0 (the issue's workload) sends every record in its own request; linger 5 batches
        a few dozen, which is what a peer that cannot take 5,000 requests/s needs to keep up.
        """
        sc = self.scale
        metrics = ("ack_p50_ms", "ack_p99_ms", "ack_p999_ms",
                   "e2e_p50_ms", "e2e_p99_ms", "e2e_p999_ms")
        specs = [(0, Spec("latency.5k", f"latency at {LATENCY_RATE:,} rec/s, linger 0, 100 B",
                          metrics)),
                 (5, Spec("latency.5k.linger5",
                          f"latency at {LATENCY_RATE:,} rec/s, linger 5 ms, 100 B", metrics))]
        pair = self._pair("latency")
        try:
            for linger_ms, spec in specs:
                for rep in range(self.reps):
                    for name, broker in self._ordered(pair, rep):

                        def run(b: Broker, cpu: CpuMeter, linger_ms: int = linger_ms
                                ) -> dict[str, Any]:
                            t = clients.create_topic(b.bootstrap, 6)
                            try:
                                with cpu:
                                    return clients.latency(b.bootstrap, t, 6, LATENCY_RATE,
                                                           sc.latency_seconds, linger_ms)
                            finally:
                                clients.delete_topics(b.bootstrap, [t])

                        self.measure(spec, name, broker, rep, run)
        finally:
            for b in pair:
                self._stop(b)

    def memory(self) -> None:
        """RSS of a fresh, idle broker, then with many partitions that each hold a record."""
        parts = self.scale.many_partitions
        idle = Spec("memory.idle", "RSS idle (fresh broker)", ("rss_mb",))
        many = Spec("memory.partitions", f"RSS with {parts:,} partitions", ("rss_mb",))
        for rep in range(self.reps):
            pair = self._pair(f"memory-{rep}")
            try:
                for name, broker in self._ordered(pair, rep):
                    time.sleep(1.0)  # let start-up garbage settle before the idle reading

                    def rss_idle(b: Broker, _cpu: CpuMeter) -> dict[str, Any]:
                        return {"rss_mb": round(b.rss_bytes() / 1e6, 1)}

                    def rss_many(b: Broker, _cpu: CpuMeter) -> dict[str, Any]:
                        t = clients.create_topic(b.bootstrap, parts)
                        # One record per partition: every partition has an open segment.
                        clients.produce(b.bootstrap, t, parts, 100, self.scale.time_limit,
                                        partitions=parts)
                        time.sleep(1.0)
                        return {"rss_mb": round(b.rss_bytes() / 1e6, 1), "partitions": parts}

                    self.measure(idle, name, broker, rep, rss_idle)
                    self.measure(many, name, broker, rep, rss_many)
            finally:
                for b in pair:
                    self._stop(b)

    def scaling(self) -> None:
        """Produce throughput over partition counts and over concurrent producer processes."""
        sc = self.scale
        pair = self._pair("scaling")
        try:
            for parts in sc.partitions:
                spec = Spec(f"scale.partitions.{parts}",
                            f"produce {_count_name(sc.scaling_records)} x 1KiB, "
                            f"{parts} partition(s)",
                            TRANSFER_CPU, "net+disk")
                for rep in range(self.reps):
                    for name, broker in self._ordered(pair, rep):

                        def run(b: Broker, cpu: CpuMeter, parts: int = parts) -> dict[str, Any]:
                            t = clients.create_topic(b.bootstrap, parts)
                            try:
                                with cpu:
                                    return clients.produce(b.bootstrap, t, sc.scaling_records,
                                                           1024, sc.time_limit).metrics()
                            finally:
                                clients.delete_topics(b.bootstrap, [t])

                        self.measure(spec, name, broker, rep, run)
            for n in sc.producers:
                spec = Spec(f"scale.producers.{n}",
                            f"produce {_count_name(sc.scaling_records)} x 1KiB, "
                            f"{n} producer process(es)",
                            TRANSFER_CPU, "net+disk")
                for rep in range(self.reps):
                    for name, broker in self._ordered(pair, rep):

                        def run_n(b: Broker, cpu: CpuMeter, n: int = n) -> dict[str, Any]:
                            t = clients.create_topic(b.bootstrap, 6)
                            try:
                                return clients.produce_parallel(
                                    b.bootstrap, t, n, sc.scaling_records, 1024, sc.time_limit,
                                    cpu).metrics()
                            finally:
                                clients.delete_topics(b.bootstrap, [t])

                        self.measure(spec, name, broker, rep, run_n)
        finally:
            for b in pair:
                self._stop(b)

    def startup(self) -> None:
        """Start-up time of moldau with many partitions and a lot of data, after both stops.

        The unclean start is measured once: it recovers everything written since the broker
        started, and only fresh unflushed data makes a second one comparable. The clean start is
        measured ``reps`` times. The data is in the page cache, so this is the broker's own
        cost of opening and (after the unclean stop) checking its logs, not the disk's.
        """
        sc = self.scale
        parts = sc.many_partitions
        gb = sc.startup_bytes / 1e9
        write = Spec("startup.write", f"write {gb:g} GB to {parts:,} partitions (16 KiB records)",
                     ("mb_per_s", "cpu_s_per_gb"), "net+disk")
        unclean = Spec("startup.unclean", f"start-up, {parts:,} partitions, {gb:g} GB, "
                       "after kill -9", ("startup_s",))
        clean = Spec("startup.clean", f"start-up, {parts:,} partitions, {gb:g} GB, after SIGTERM",
                     ("startup_s", "shutdown_s"))
        why = "Tansu keeps data in memory only: nothing to start up from"
        for spec in (write, unclean, clean):
            self.rec.sample({"workload": spec.workload, "label": spec.label,
                             "show": list(spec.show), "limit": spec.limit, "broker": "tansu",
                             "rep": 0, "status": "n/a", "reason": why})
        broker = self._start(MoldauBroker(self.tmp / "moldau-startup"))
        try:
            count = sc.startup_bytes // STARTUP_RECORD_BYTES

            def fill(b: Broker, cpu: CpuMeter) -> dict[str, Any]:
                t = clients.create_topic(b.bootstrap, parts)
                with cpu:
                    return clients.produce(b.bootstrap, t, count, STARTUP_RECORD_BYTES,
                                           max(600.0, sc.time_limit), partitions=parts).metrics()

            if self.measure(write, "moldau", broker, 0, fill) is None:
                return

            def restart_unclean(b: Broker, _cpu: CpuMeter) -> dict[str, Any]:
                b.kill()
                return {"startup_s": round(b.start(), 3)}

            self.measure(unclean, "moldau", broker, 0, restart_unclean)
            for rep in range(self.reps):

                def restart_clean(b: Broker, _cpu: CpuMeter) -> dict[str, Any]:
                    t0 = time.monotonic()
                    assert b.proc is not None
                    proc = b.proc
                    b.stop()
                    stopped = time.monotonic() - t0
                    if proc.returncode != 0:
                        raise RuntimeError(f"clean stop exited {proc.returncode}")
                    return {"startup_s": round(b.start(), 3), "shutdown_s": round(stopped, 3)}

                self.measure(clean, "moldau", broker, rep, restart_clean)
        finally:
            self._stop(broker)

    SECTIONS = ("throughput", "latency", "memory", "scaling", "startup")
