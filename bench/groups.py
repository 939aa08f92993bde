"""Consumer-group join and rebalance times of a moldau broker, as JSON lines.

    python -m bench.groups [--runs 5] [--records 600]

For ``group.initial.rebalance.delay.ms`` at Kafka's default (3000) and at 0 a broker is
started on a free loopback port, a 6-partition topic is filled, and two things are timed
with real confluent-kafka consumers (librdkafka defaults, eager "range" assignor):

- ``first_record``: from ``subscribe()`` with a new group id to the first record returned
  (FindCoordinator, JoinGroup, the initial delay, SyncGroup, OffsetFetch, Fetch);
- ``second_member``: a member already owns all 6 partitions; from the second member's
  ``subscribe()`` until both own partitions covering the topic. The first member only
  learns of the rebalance from its next heartbeat, so most of this is the client's
  ``heartbeat.interval.ms``, not the broker: the second member joins at a different
  phase of the first one's heartbeat cycle in each run (spread evenly over one interval,
  as a member arriving at a random moment would), and the figure is taken once with
  librdkafka's default interval (3000 ms) and once with 100 ms, which leaves mostly the
  broker's own JoinGroup/SyncGroup round.

Each figure is the median of ``--runs`` fresh groups. Every wait is bounded.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import uuid
from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from .broker_proc import BenchBroker

PARTITIONS = 6
DELAYS_MS = (3000, 0)  # Kafka's default first
WAIT_LIMIT_S = 60.0  # any single wait; a run that exceeds it is reported as failed
POLL_S = 0.01
DEFAULT_HEARTBEAT_MS = 3000  # librdkafka's default, set explicitly so the report is true
FAST_HEARTBEAT_MS = 100


def _fill_topic(bootstrap: str, records: int) -> str:
    name = f"bench-groups-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, PARTITIONS, 1)])[name].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(records):
        producer.produce(name, f"record-{i}".encode(), partition=i % PARTITIONS)
    if producer.flush(30):
        raise RuntimeError("records were not delivered within 30 s")
    return name


def _consumer(bootstrap: str, group: str, heartbeat_ms: int = DEFAULT_HEARTBEAT_MS) -> Consumer:
    return Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "heartbeat.interval.ms": heartbeat_ms,
        "fetch.wait.max.ms": 100,
    })


def first_record_s(bootstrap: str, topic: str) -> float:
    """Seconds from subscribe() with a brand-new group to the first record."""
    consumer = _consumer(bootstrap, f"bench-first-{uuid.uuid4().hex[:8]}")
    try:
        start = time.perf_counter()
        consumer.subscribe([topic])
        while time.perf_counter() - start < WAIT_LIMIT_S:
            message = consumer.poll(POLL_S)
            if message is not None and message.error() is None:
                return time.perf_counter() - start
        raise TimeoutError(f"no record within {WAIT_LIMIT_S:g} s")
    finally:
        consumer.close()


def _owned(consumer: Consumer) -> set[int]:
    return {tp.partition for tp in consumer.assignment()}


def second_member_s(bootstrap: str, topic: str, heartbeat_ms: int, phase: float) -> float:
    """Seconds from the second member's subscribe() until both members share the topic.

    The second member subscribes ``phase`` heartbeat intervals after the first one got
    its partitions (its heartbeat timer starts then), so runs cover the whole cycle
    instead of always hitting the same point of it.
    """
    group = f"bench-rebalance-{uuid.uuid4().hex[:8]}"
    first = _consumer(bootstrap, group, heartbeat_ms)
    second = _consumer(bootstrap, group, heartbeat_ms)
    try:
        first.subscribe([topic])
        deadline = time.perf_counter() + WAIT_LIMIT_S
        while len(_owned(first)) < PARTITIONS:
            if time.perf_counter() > deadline:
                raise TimeoutError(f"first member not assigned within {WAIT_LIMIT_S:g} s")
            first.poll(POLL_S)
        join_at = time.perf_counter() + phase * heartbeat_ms / 1000
        while time.perf_counter() < join_at:
            first.poll(POLL_S)
        start = time.perf_counter()
        second.subscribe([topic])
        while time.perf_counter() - start < WAIT_LIMIT_S:
            # One thread serves both: each poll drives that member's join/sync/heartbeat.
            first.poll(POLL_S)
            second.poll(POLL_S)
            a, b = _owned(first), _owned(second)
            if a and b and not a & b and len(a | b) == PARTITIONS:
                return time.perf_counter() - start
        raise TimeoutError(f"second member not assigned within {WAIT_LIMIT_S:g} s")
    finally:
        second.close()
        first.close()


def _measure(name: str, runs: int, probe: Any, *args: Any, phased: bool = False
             ) -> dict[str, Any]:
    """Median and spread of ``runs`` probes; ``phased`` passes each run its cycle phase."""
    samples: list[float] = []
    failures: list[str] = []
    for run in range(runs):
        extra = ((run + 0.5) / runs,) if phased else ()
        try:
            samples.append(probe(*args, *extra))
        except (TimeoutError, RuntimeError) as exc:
            failures.append(str(exc))
    return {
        "metric": name,
        "runs": runs,
        "median_s": round(statistics.median(samples), 3) if samples else None,
        "min_s": round(min(samples), 3) if samples else None,
        "max_s": round(max(samples), 3) if samples else None,
        "samples_s": [round(s, 3) for s in samples],
        "failures": failures,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="fresh groups per figure")
    parser.add_argument("--records", type=int, default=600, help="records in the topic")
    args = parser.parse_args()
    for delay_ms in DELAYS_MS:
        broker = BenchBroker(f"group.initial.rebalance.delay.ms={delay_ms}")
        try:
            topic = _fill_topic(broker.bootstrap, args.records)
            common = {"workload": "groups", "initial_rebalance_delay_ms": delay_ms,
                      "partitions": PARTITIONS}
            result = _measure("first_record", args.runs, first_record_s, broker.bootstrap, topic)
            print(json.dumps({**common, **result}), flush=True)
            for heartbeat_ms in (DEFAULT_HEARTBEAT_MS, FAST_HEARTBEAT_MS):
                result = _measure("second_member", args.runs, second_member_s,
                                  broker.bootstrap, topic, heartbeat_ms, phased=True)
                print(json.dumps({**common, "heartbeat_interval_ms": heartbeat_ms, **result}),
                      flush=True)
        finally:
            broker.close()


if __name__ == "__main__":
    main()
