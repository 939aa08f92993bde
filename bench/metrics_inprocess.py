"""The broker's own cost of counting and timing a request, in process: microseconds per
Produce request through ``Broker.handle_frame`` with and without the metrics' bookkeeping,
as JSON lines.

    python -m bench.metrics_inprocess [--repeat 7] [--number 3000]

A throughput run on a shared machine cannot resolve a few percent (see bench/README.md), so
this times the code itself: one broker in a temporary dir, a Produce v9 request with acks=1
and one batch of 1 record of 100 B (the smallest request, where a fixed per-request cost
weighs most), handled ``--number`` times per timing, the best of ``--repeat`` timings,
alternating off and on. "on" adds what the connection does per request with metrics on:
a ``RequestTiming``, four more clock reads and ``BrokerCounters.request_done``, plus the
produce handler's per-partition counters (``broker.metrics`` set).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import io
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.serial import entity_writer

from moldau.broker.broker import Broker
from moldau.broker.handlers import register_all
from moldau.config import BrokerConfig
from moldau.log.records_writer import encode_batch
from moldau.metrics.counters import BrokerCounters, RequestTiming

TOPIC = "bench-metrics"


def produce_frame(records: bytes) -> bytes:
    body = io.BytesIO()
    entity_writer(ProduceRequest)(body, ProduceRequest(
        transactional_id=None, acks=1, timeout=datetime.timedelta(seconds=30),
        topic_data=(TopicProduceData(name=TOPIC, partition_data=(
            PartitionProduceData(index=0, records=records),)),)))
    client = b"bench"
    # Request header v2 (Produce v9 is flexible): key, version, correlation id, client id, tags.
    header = (0).to_bytes(2, "big") + (9).to_bytes(2, "big") + (1).to_bytes(4, "big") + \
        len(client).to_bytes(2, "big") + client + b"\x00"
    return header + body.getvalue()


async def handle_many(broker: Broker, frame: bytes, number: int, metrics: bool) -> float:
    """Seconds for ``number`` requests."""
    counters = broker.metrics
    start = time.perf_counter()
    for _ in range(number):
        if metrics:
            assert counters is not None
            arrived = time.perf_counter_ns()
            timing = RequestTiming(0, 9, arrived, time.perf_counter_ns())
            await broker.handle_frame(frame, timing=timing)
            timing.handled = time.perf_counter_ns()
            timing.send_start = time.perf_counter_ns()
            counters.request_done(timing, time.perf_counter_ns())
        else:
            await broker.handle_frame(frame)
    return time.perf_counter() - start


async def run(repeat: int, number: int) -> None:
    with tempfile.TemporaryDirectory(prefix="moldau-bench-") as tmp:
        broker = Broker(BrokerConfig({"log.dirs": str(Path(tmp) / "data"),
                                      "listeners": "PLAINTEXT://127.0.0.1:0"}))
        try:
            register_all(broker)
            broker.create_topic(TOPIC, 1, {})
            frame = produce_frame(encode_batch([(None, b"x" * 100)], 1_000))
            await handle_many(broker, frame, number, False)  # warm up
            best: dict[str, list[float]] = {"off": [], "on": []}
            for _ in range(repeat):
                for mode in ("off", "on"):
                    broker.metrics = BrokerCounters(["PLAINTEXT"]) if mode == "on" else None
                    seconds = await handle_many(broker, frame, number, mode == "on")
                    best[mode].append(seconds / number * 1e6)
            off, on = min(best["off"]), min(best["on"])
            result: dict[str, Any] = {
                "workload": "produce_v9_1_record_acks1", "number": number, "repeat": repeat,
                "off_us_per_request_best": round(off, 2), "on_us_per_request_best": round(on, 2),
                "on_minus_off_us": round(on - off, 2), "on_over_off": round(on / off, 3),
                "off_us_median": round(statistics.median(best["off"]), 2),
                "on_us_median": round(statistics.median(best["on"]), 2)}
            print(json.dumps(result), flush=True)
        finally:
            broker.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--number", type=int, default=3000)
    args = parser.parse_args()
    asyncio.run(run(args.repeat, args.number))


if __name__ == "__main__":
    main()
