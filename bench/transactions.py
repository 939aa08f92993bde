"""Transactional produce against idempotent and plain produce (issue 12), as JSON lines.

    python -m bench.transactions [--quick] [--records N] [--reps N] [--producers 1,4]
                                 [--no-cluster]

On one broker (RF 1) and on a local 3-broker cluster with its own ZooKeeper (RF 3,
``min.insync.replicas=2``, as ``bench.replication`` starts it), the same run measures four
producers of 1 KiB records with acks=all, linger 5 ms, 6 partitions:

- ``plain``: no idempotence (today's produce path; librdkafka then keeps up to 1,000,000
  requests in flight per connection);
- ``plain_inflight5``: no idempotence, at most 5 requests in flight, as an idempotent
  producer has: the same pipelining without sequence numbers;
- ``idempotent``: ``enable.idempotence`` (the broker checks sequence numbers);
- ``txn100`` / ``txn1000``: a transactional producer committing every 100 / 1,000 records
  (``commit_transaction`` drains the producer's queue, so each commit is a pipeline stall:
  AddPartitionsToTxn, the last acks, EndTxn, the markers on every partition).

Each producer is new and warmed up before its clock starts (one record sent and flushed;
the transactional ones init_transactions and commit a one-record transaction), so producer
ids, coordinator look-ups and connections are not timed. The modes alternate for ``--reps``
rounds, each on a new topic (deleted once measured: samples drift slower while old topics
stay); a ``summary`` line per setup gives the medians and the ratios
idempotent/plain and txnN/idempotent (issue target: txn1000/idempotent >= 0.8), with the load
average, since the figures mean little on a busy machine. Each setup runs once per producer
count in ``--producers`` (default 1 and 4): with N, every mode runs N producers at once, each
in its own thread with its share of the records, so one producer's commit overlaps the
others' sending (an application with several transactional producers, as Kafka Streams has
one per task). Every loop is bounded in count and in time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaException, Producer

from .broker_proc import BenchBroker
from .machine import load_average
from .replication import _topic, drop_topic, local_cluster

TIME_LIMIT_S = 120.0
PARTITIONS = 6
MODES = ("plain", "plain_inflight5", "idempotent", "txn100", "txn1000")


#: librdkafka's default ``batch.size``: a 1,000-record transaction of 1 KiB records is then one
#: batch, sent only when it is full, so the client's producing and the broker's appending of
#: one transaction never overlap (``--batch-bytes`` measures smaller batches).
DEFAULT_BATCH_BYTES = 1_000_000


def _producer(bootstrap: str, mode: str, batch_bytes: int = DEFAULT_BATCH_BYTES) -> Producer:
    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
        "batch.size": batch_bytes, "queue.buffering.max.messages": 1_000_000,
        "queue.buffering.max.kbytes": 1_048_576,
        "enable.idempotence": not mode.startswith("plain"),
    }
    if mode == "plain_inflight5":
        # What an idempotent producer allows (librdkafka's default is 1,000,000): the same
        # pipelining without the sequence numbers, so idempotent/plain_inflight5 is the
        # broker's own cost of checking them, and plain/plain_inflight5 the client's.
        config["max.in.flight.requests.per.connection"] = 5
    if mode.startswith("txn"):
        config["transactional.id"] = f"bench-{uuid.uuid4().hex[:8]}"
    return Producer(config)


def _warm_up(producer: Producer, topic: str, transactional: bool) -> None:
    if transactional:
        producer.init_transactions(60)
        producer.begin_transaction()
    producer.produce(topic, b"warm-up")
    if transactional:
        producer.commit_transaction(60)
    else:
        producer.flush(60)


@dataclass
class _Tally:
    """One producer's share of a sample."""

    sent: int = 0
    committed: int = 0
    failed: int = 0
    in_flush: float = 0.0
    in_commit: float = 0.0
    error: str | None = None


def _run(producer: Producer, topic: str, txn_records: int, count: int, payload: bytes,
         deadline: float, tally: _Tally) -> None:
    """``count`` records from one producer (a transaction per ``txn_records`` if set)."""

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            tally.failed += 1

    try:
        while tally.sent < count and time.perf_counter() < deadline:
            batch = min(txn_records or count, count - tally.sent)
            if txn_records:
                producer.begin_transaction()
            done = 0
            while done < batch and time.perf_counter() < deadline:
                try:
                    producer.produce(topic, payload, on_delivery=on_delivery)
                    done += 1
                except BufferError:
                    producer.poll(0.01)
            tally.sent += done
            if txn_records:
                # commit_transaction flushes first; flushing explicitly before it is the same
                # sequence, and splits the last acks from the EndTxn round trip.
                began = time.perf_counter()
                producer.flush(max(1.0, deadline - time.perf_counter()))
                flushed = time.perf_counter()
                producer.commit_transaction(max(1.0, deadline - time.perf_counter()))
                tally.in_flush += flushed - began
                tally.in_commit += time.perf_counter() - flushed
                tally.committed += 1
        producer.flush(max(1.0, deadline - time.perf_counter()))
    except KafkaException as exc:  # a failed commit ends the sample; it is reported
        tally.error = str(exc)


def produce(bootstrap: str, topic: str, mode: str, count: int, size: int,
            batch_bytes: int = DEFAULT_BATCH_BYTES, producers: int = 1) -> dict[str, Any]:
    """``count`` records of ``size`` bytes in ``mode`` from ``producers`` producers at once
    (one thread each, ``count / producers`` records each); records/s from the first send to
    the last ack (for transactions: to the last commit)."""
    txn_records = int(mode[3:]) if mode.startswith("txn") else 0
    clients = [_producer(bootstrap, mode, batch_bytes) for _ in range(producers)]
    try:
        for client in clients:
            _warm_up(client, topic, bool(txn_records))
    except KafkaException as exc:  # e.g. a broker without a transaction coordinator
        return {"workload": "produce", "mode": mode, "records": 0, "record_bytes": size,
                "incomplete": f"warm-up: {exc}"}
    payload = os.urandom(size)
    tallies = [_Tally() for _ in clients]
    share = count // producers
    start = time.perf_counter()
    deadline = start + TIME_LIMIT_S
    threads = [threading.Thread(target=_run, args=(client, topic, txn_records, share, payload,
                                                   deadline, tally))
               for client, tally in zip(clients, tallies, strict=True)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - start
    sent = sum(t.sent for t in tallies)
    committed = sum(t.committed for t in tallies)
    result = {"workload": "produce", "mode": mode, "records": sent, "record_bytes": size,
              "acks": "all", "batch_bytes": batch_bytes, "producers": producers,
              "seconds": round(elapsed, 3), "records_per_s": round(sent / elapsed),
              "mb_per_s": round(sent * size / elapsed / 1e6, 1),
              "failed": sum(t.failed for t in tallies)}
    if txn_records:
        # flush_seconds: waiting for the transactions' last acks (AddPartitionsToTxn comes
        # before the first send to each partition, so it is in there too); commit_seconds:
        # commit_transaction after that (EndTxn: the coordinator's Prepare write, acks=all).
        # Both are summed over the producers.
        result.update(transaction_records=txn_records, transactions=committed,
                      flush_seconds=round(sum(t.in_flush for t in tallies), 3),
                      commit_seconds=round(sum(t.in_commit for t in tallies), 3),
                      ms_per_transaction=round(elapsed * 1000 * producers / committed, 2)
                      if committed else None)
    errors = [t.error for t in tallies if t.error is not None]
    if errors or sent < share * producers:
        result["incomplete"] = errors[0] if errors else "time limit"
    return result


def measure(bootstrap: str, setup: dict[str, Any], count: int, size: int, reps: int,
            replication_factor: int, configs: dict[str, str],
            modes: tuple[str, ...] = MODES,
            batch_bytes: int = DEFAULT_BATCH_BYTES, producers: int = 1) -> dict[str, Any]:
    """``reps`` rounds of every mode, alternating, each on a new topic; the summary line."""
    rates: dict[str, list[int]] = {mode: [] for mode in modes}
    for round_number in range(reps):
        for mode in modes:
            topic = _topic(bootstrap, PARTITIONS, replication_factor, configs)
            sample = {**setup, **produce(bootstrap, topic, mode, count, size, batch_bytes,
                                         producers), "round": round_number}
            print(json.dumps(sample), flush=True)
            drop_topic(bootstrap, topic)
            if "incomplete" not in sample:
                rates[mode].append(sample["records_per_s"])
    medians = {mode: round(statistics.median(r)) if r else None for mode, r in rates.items()}

    def ratio(a: str, b: str) -> float | None:
        top, bottom = medians.get(a), medians.get(b)
        return round(top / bottom, 2) if top and bottom else None

    return {"workload": "summary", **setup, "records": count, "record_bytes": size,
            "batch_bytes": batch_bytes, "producers": producers, "reps": reps,
            "median_records_per_s": medians,
            "min_max_records_per_s": {m: [min(r), max(r)] if r else None
                                      for m, r in rates.items()},
            "idempotent_over_plain": ratio("idempotent", "plain"),
            "idempotent_over_plain_inflight5": ratio("idempotent", "plain_inflight5"),
            "txn100_over_idempotent": ratio("txn100", "idempotent"),
            "txn1000_over_idempotent": ratio("txn1000", "idempotent"),
            "target_txn1000_over_idempotent": 0.8,
            "load_average": load_average()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="4x fewer records, 1 round")
    parser.add_argument("--records", type=int, default=None,
                        help="records per sample (default 200000, quick 50000)")
    parser.add_argument("--record-bytes", type=int, default=1024)
    parser.add_argument("--reps", type=int, default=None, help="rounds (default 3, quick 1)")
    parser.add_argument("--batch-bytes", type=int, default=DEFAULT_BATCH_BYTES,
                        help="the producers' batch.size (librdkafka's default 1000000; the "
                             "Java client's is 16384)")
    parser.add_argument("--producers", default="1,4",
                        help="comma-separated producer counts, a summary for each: every mode "
                             "runs that many producers at once, each in its own thread with "
                             "its share of the records (default 1,4)")
    parser.add_argument("--no-cluster", action="store_true",
                        help="one broker only (no ZooKeeper needed)")
    parser.add_argument("--modes", default=",".join(MODES),
                        help=f"comma-separated subset of {','.join(MODES)}")
    args = parser.parse_args()
    modes = tuple(m for m in args.modes.split(",") if m)
    unknown = set(modes) - set(MODES)
    if unknown or not modes:
        parser.error(f"unknown modes {sorted(unknown)}: choose from {', '.join(MODES)}")
    try:
        counts = [int(n) for n in args.producers.split(",") if n]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        parser.error(f"--producers wants positive numbers, not {args.producers!r}")
    count = args.records or (50_000 if args.quick else 200_000)
    reps = args.reps or (1 if args.quick else 3)
    alone = BenchBroker()
    try:
        for producers in counts:
            print(json.dumps(measure(alone.bootstrap, {"brokers": 1, "replication_factor": 1},
                                     count, args.record_bytes, reps, 1, {}, modes,
                                     args.batch_bytes, producers)), flush=True)
    finally:
        alone.close()
    if args.no_cluster:
        return
    with local_cluster() as cluster:
        setup = {"brokers": 3, "replication_factor": 3, "min_insync_replicas": 2}
        for producers in counts:
            print(json.dumps(measure(cluster.spec.bootstrap, setup, count, args.record_bytes,
                                     reps, 3, {"min.insync.replicas": "2"}, modes,
                                     args.batch_bytes, producers)), flush=True)


if __name__ == "__main__":
    main()
