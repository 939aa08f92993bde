"""Replication figures of issue 11, as JSON lines: RF 3 against RF 1, p99 ack, failover.

    python -m bench.replication [--quick] [--rejoin-mb N]

Starts one broker alone (RF 1) and a local 3-broker cluster with its own ZooKeeper
(``moldau.cluster.local_cluster``, free ports, a temporary directory), then measures:
produce 1 KiB records with acks=all on RF 1 and on RF 3 with ``min.insync.replicas=2``
(and their ratio); produce-to-ack latency percentiles at 5,000 records/s on RF 3; failover
after SIGTERM of a partition leader (a controlled shutdown): the time to the first
acknowledged produce sent after it, the longest pause between two acks of an idempotent
producer, and the produce-error window seen by a producer that does not retry; the time from
kill -9 of a partition leader to the first acknowledged produce sent after it; the time a
follower killed -9 while ``--rejoin-mb`` MB were written takes, once restarted, to rejoin the
ISR (and that scaled to 1 GB). Every loop is bounded in count and time.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import signal
import socket
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaProducer

from moldau.cluster.local_cluster import ClusterSpec, LocalCluster

from .broker_proc import BenchBroker
from .throughput import ack_latency, produce

#: ZooKeeper session timeout of the cluster's brokers: bounds how long a kill -9 goes unseen.
SESSION_TIMEOUT_MS = 6000


def _free_ports(count: int) -> int:
    """A base port with ``count`` free ports after it (checked, not reserved)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = int(s.getsockname()[1])
        if base + count < 65000 and all(_free(base + i) for i in range(count)):
            return base
    raise RuntimeError("no run of free ports")


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _topic(bootstrap: str, partitions: int, rf: int, configs: dict[str, str]) -> str:
    name = f"bench-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, rf, config=configs)])[name].result(30)
    # Leaders are elected asynchronously: wait until every partition has one.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        md = admin.list_topics(timeout=10).topics.get(name)
        if md is not None and md.partitions and all(
                p.leader >= 0 and len(p.isrs) == rf for p in md.partitions.values()):
            break
        time.sleep(0.1)
    # One acknowledged record per partition: followers have started fetching, so the
    # measurement is of the steady state, not of a new topic's first second.
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for p in range(partitions):
        producer.produce(name, b"warm-up", partition=p)
    producer.flush(30)
    return name


def drop_topic(bootstrap: str, topic: str) -> None:
    """Delete a sample's topic once it is measured. On this machine every later sample got
    slower while earlier samples' topics stayed (a broker's CPU per MB went from 1.4 to 4.4 ms
    over eight 240 MB samples, most of it in the segment writes): writes into memory the VM has
    not touched lately cost about ten times more (``python -m bench.machine``). With each
    topic deleted the next sample writes into the memory it freed, and the samples stay
    level."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([topic], operation_timeout=30)[topic].result(60)


def _latency(bootstrap: str, topic: str, rate: int, seconds: float,
             idempotent: bool) -> dict[str, Any]:
    """Produce-to-ack percentiles at ``rate``. Without idempotence librdkafka sends every
    record as a request of its own (no in-flight limit) and the broker answers a connection's
    requests one at a time (as Kafka does): the queue grows once acks=all takes longer than
    1/rate. An idempotent producer (at most 5 in flight) batches what waits instead."""
    figures = ack_latency(bootstrap, topic, rate, seconds, idempotent=idempotent, warm_up=True)
    return {"workload": "produce_latency_rf3", "idempotent": idempotent, **figures}


def _failover(cluster: LocalCluster, bootstrap: str, topic: str) -> dict[str, Any]:
    """kill -9 the leader of partition 0 while producing to it; time to the next ack."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    leader = admin.list_topics(topic, timeout=10).topics[topic].partitions[0].leader
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                         "enable.idempotence": True, "message.timeout.ms": 60000})
    acked_after: list[float] = []
    killed_at = 0.0
    lock = threading.Lock()

    def on_delivery(err: Any, _msg: Any, sent: float) -> None:
        if err is None and killed_at and sent > killed_at:
            with lock:
                acked_after.append(time.monotonic())

    deadline = time.monotonic() + 60
    sent = 0
    while time.monotonic() < deadline and not acked_after:
        now = time.monotonic()
        producer.produce(topic, b"f%d" % sent, partition=0,
                         on_delivery=lambda e, m, t=now: on_delivery(e, m, t))
        sent += 1
        if sent == 200:
            producer.flush(30)
            proc = cluster.brokers[leader].proc
            assert proc is not None
            proc.kill()
            killed_at = time.monotonic()
        producer.poll(0.005)
    producer.flush(60)
    return {"workload": "failover_kill9", "zookeeper_session_timeout_ms": SESSION_TIMEOUT_MS,
            "seconds_to_first_ack": round(acked_after[0] - killed_at, 2) if acked_after
            else None}


def _failover_sigterm(cluster: LocalCluster, bootstrap: str, topic: str) -> dict[str, Any]:
    """SIGTERM the leader of partition 0 while two producers send to it every 5 ms: an
    idempotent acks=all librdkafka one (whose retries hide errors: its longest pause between
    two acks is the stall) and an acks=all kafka-python one with ``retries=0`` (every failed
    request is an error: first to last error is the produce-error window; librdkafka retries
    NOT_LEADER_OR_FOLLOWER even with ``retries=0``, so it cannot show them)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    leader = admin.list_topics(topic, timeout=10).topics[topic].partitions[0].leader
    common = {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0}
    steady = Producer({**common, "enable.idempotence": True, "message.timeout.ms": 60000})
    probe = KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=0, linger_ms=0,
                          max_in_flight_requests_per_connection=1)
    acks: list[tuple[float, float]] = []  # (sent, acked) of the idempotent producer
    errors: list[float] = []
    lock = threading.Lock()

    def on_steady(err: Any, _msg: Any, sent: float) -> None:
        if err is None:
            with lock:
                acks.append((sent, time.monotonic()))

    def on_probe_error(_exc: Exception) -> None:
        with lock:
            errors.append(time.monotonic())

    stopped_at = 0.0
    deadline = time.monotonic() + 60
    sent = 0
    while time.monotonic() < deadline:
        now = time.monotonic()
        steady.produce(topic, b"s%d" % sent, partition=0,
                       on_delivery=lambda e, m, t=now: on_steady(e, m, t))
        probe.send(topic, b"p%d" % sent, partition=0).add_errback(on_probe_error)
        sent += 1
        if sent == 200:
            proc = cluster.brokers[leader].proc
            assert proc is not None
            proc.send_signal(signal.SIGTERM)
            stopped_at = time.monotonic()
        if stopped_at and now > stopped_at + 5:
            break
        steady.poll(0.005)
    steady.flush(60)
    probe.flush(60)
    probe.close(10)
    proc = cluster.brokers[leader].proc
    assert proc is not None
    proc.wait(30)
    after = sorted(acked for sent_at, acked in acks if sent_at > stopped_at)
    times = sorted(acked for _, acked in acks if acked > stopped_at - 1)
    gap = max((b - a for a, b in itertools.pairwise(times)), default=None)
    cluster._start_broker(cluster.brokers[leader])  # back for the next measurements
    return {"workload": "failover_sigterm",
            "seconds_to_first_ack": round(after[0] - stopped_at, 3) if after else None,
            "longest_ack_pause_s": round(gap, 3) if gap is not None else None,
            "produce_errors": len(errors),
            "produce_error_window_s": round(errors[-1] - errors[0], 3) if errors else 0.0}


def _isr(admin: AdminClient, topic: str) -> list[int]:
    md = admin.list_topics(topic, timeout=10).topics[topic].partitions.get(0)
    return [] if md is None else sorted(md.isrs)


def _rejoin(cluster: LocalCluster, bootstrap: str, megabytes: int) -> dict[str, Any]:
    """kill -9 a follower, produce ``megabytes`` while it is down, restart it and time its
    way back into the ISR: restart to listening (start-up, log recovery), then listening to
    in sync (truncation check and catch-up). Per GB is a linear extrapolation of the catch-up
    measured here, plus the start-up as measured (it does not grow with the data)."""
    topic = _topic(bootstrap, 1, 3, {"min.insync.replicas": "2"})
    admin = AdminClient({"bootstrap.servers": bootstrap})
    leader = admin.list_topics(topic, timeout=10).topics[topic].partitions[0].leader
    follower = next(b for b in _isr(admin, topic) if b != leader)
    cluster.kill_broker(follower)
    deadline = time.monotonic() + 60
    while follower in _isr(admin, topic) and time.monotonic() < deadline:
        time.sleep(0.2)  # acks=all would wait for it until its session expires
    record = 16 * 1024
    behind = produce(bootstrap, topic, megabytes * 1_000_000 // record, record)
    started = time.monotonic()
    cluster.start_broker(follower)
    listening = time.monotonic()
    deadline = listening + 600
    while follower not in _isr(admin, topic) and time.monotonic() < deadline:
        time.sleep(0.05)
    rejoined = time.monotonic()
    in_sync = follower in _isr(admin, topic)
    mb = behind["records"] * record / 1e6
    start_s, catch_up_s = listening - started, rejoined - listening
    return {"workload": "follower_rejoin_isr", "mb_behind": round(mb),
            "rejoined": in_sync, "restart_to_listening_s": round(start_s, 2),
            "listening_to_isr_s": round(catch_up_s, 2),
            "catch_up_mb_per_s": round(mb / catch_up_s) if in_sync and catch_up_s else None,
            "seconds_per_gb_extrapolated": round(start_s + catch_up_s * 1000 / mb, 1)
            if in_sync else None,
            "note": f"measured {round(mb)} MB behind; per GB scales the catch-up linearly"}


def _three_live(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(admin.list_topics(timeout=10).brokers) < 3:
        time.sleep(0.2)


@contextlib.contextmanager
def local_cluster() -> Iterator[LocalCluster]:
    """A local 3-broker cluster with its own ZooKeeper (the brokers log warnings only),
    registered and past its controller election; stopped and removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="moldau-bench-cluster-") as tmp:
        spec = ClusterSpec(Path(tmp), brokers=3, base_port=_free_ports(3),
                           zookeeper_port=_free_ports(1), overrides=(
                               f"zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}",))
        cluster = LocalCluster(spec)
        env_level = os.environ.get("MOLDAU_LOG_LEVEL")
        os.environ["MOLDAU_LOG_LEVEL"] = "WARNING"
        try:
            cluster.start()
            time.sleep(2)  # registrations and the controller election
            yield cluster
        finally:
            cluster.stop()
            if env_level is None:
                os.environ.pop("MOLDAU_LOG_LEVEL", None)
            else:
                os.environ["MOLDAU_LOG_LEVEL"] = env_level


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="10x fewer records")
    parser.add_argument("--rejoin-mb", type=int, default=None,
                        help="how far a restarted follower is behind (default 300, quick 50)")
    args = parser.parse_args()
    if args.rejoin_mb is None:
        args.rejoin_mb = 50 if args.quick else 300
    count = 20_000 if args.quick else 200_000
    results: list[dict[str, Any]] = []
    alone = BenchBroker()
    try:
        topic = _topic(alone.bootstrap, 6, 1, {})
        rf1 = produce(alone.bootstrap, topic, count, 1024)
        rf1["workload"] = "produce_rf1_one_broker"
        results.append(rf1)
        print(json.dumps(rf1), flush=True)
    finally:
        alone.close()
    with local_cluster() as cluster:
        spec = cluster.spec
        topic = _topic(spec.bootstrap, 6, 3, {"min.insync.replicas": "2"})
        rf3 = produce(spec.bootstrap, topic, count, 1024)
        rf3["workload"] = "produce_rf3_min_isr2_three_brokers"
        print(json.dumps(rf3), flush=True)
        ratio = {"workload": "rf3_over_rf1",
                 "ratio": round(rf3["records_per_s"] / rf1["records_per_s"], 2)}
        print(json.dumps(ratio), flush=True)
        for idempotent in (True, False):
            topic = _topic(spec.bootstrap, 1, 3, {"min.insync.replicas": "2"})
            print(json.dumps(_latency(spec.bootstrap, topic, 5000,
                                      1 if args.quick else 5, idempotent)), flush=True)
        topic = _topic(spec.bootstrap, 1, 3, {"min.insync.replicas": "2"})
        print(json.dumps(_failover_sigterm(cluster, spec.bootstrap, topic)), flush=True)
        _three_live(spec.bootstrap)
        topic = _topic(spec.bootstrap, 1, 3, {"min.insync.replicas": "2"})
        print(json.dumps(_failover(cluster, spec.bootstrap, topic)), flush=True)
        for broker in cluster.brokers:  # the one killed above comes back
            cluster.start_broker(broker.broker_id)
        _three_live(spec.bootstrap)
        print(json.dumps(_rejoin(cluster, spec.bootstrap, args.rejoin_mb)), flush=True)


if __name__ == "__main__":
    main()
