"""What idempotence costs the broker, with the client's behaviour held fixed, as JSON lines.

    python -m bench.idempotence_cost [--quick] [--batches N] [--in-flight N] [--reps N]
                                     [--no-cluster]

``bench.transactions`` compares librdkafka producers with and without ``enable.idempotence``,
and librdkafka changes more than the batches' header when idempotence is on: it sends a
partition's next batch only once the previous one is answered (one in flight per partition,
whatever ``max.in.flight`` says), and its broker threads keep waking while they wait. On a
cluster, where an ``acks=all`` answer takes a replication round trip, that client behaviour
decides the figure. This benchmark takes the client out: one raw connection per partition to
its leader sends pre-built 1 MB Produce requests (acks=all, ``--in-flight`` of them
outstanding, 5 by default, as an idempotent producer may have), either without a producer id
(``plain``) or with one and consecutive sequence numbers (``idempotent``: the same bytes but
for the header's producer id, epoch, sequence and CRC), on one broker (RF 1) and on a local
3-broker cluster (RF 3, ``min.insync.replicas=2``). The ratio idempotent/plain of records/s
is then the broker's own cost of the sequence check, and so is the ratio of the brokers' CPU
per megabyte (every thread of every broker, from /proc), which a shared machine disturbs less
than records/s. After one unrecorded warm-up sample of each mode
(the first sample on fresh brokers is slower whatever its mode), the modes alternate for
``--reps`` rounds (which one goes first swaps every round), each on a new topic of 6
partitions, deleted once measured (samples drift slower while old topics stay); every loop is
bounded in count and in time.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import json
import os
import statistics
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import crc32c
from confluent_kafka.admin import AdminClient
from kio.schema.errors import ErrorCode
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.serial import entity_reader
from tests.unit.batchgen import Record, build_batch

from moldau.protocol.apis import PRODUCE
from moldau.protocol.codec import build, encode_request, response_body_offset
from moldau.protocol.schemas import response_schema
from moldau.replica.broker_connection import BrokerConnection

from . import procs
from .broker_proc import BenchBroker
from .machine import load_average
from .replication import _topic, drop_topic, local_cluster

PARTITIONS = 6
RECORDS_PER_BATCH = 970  # 1 KiB values: just under librdkafka's default batch.size of 1 MB
RECORD_BYTES = 1024
TIME_LIMIT_S = 120.0
#: Offsets of the batch header fields rewritten per batch (Kafka's v2 layout).
_CRC_AT, _ATTRIBUTES_AT, _SEQUENCE_AT = 17, 21, 53
_SEQUENCE = struct.Struct(">i")
_CRC = struct.Struct(">I")
_SIZE = struct.Struct(">i")
BODY_AT = response_body_offset(ProduceRequest)


def _batch_maker(idempotent: bool, producer_id: int, epoch: int) -> Callable[[int], bytes]:
    """A function giving the n-th batch of a partition: the same records every time; with a
    producer id, base sequence n * RECORDS_PER_BATCH and the CRC over the changed header."""
    now = int(time.time() * 1000)
    value = os.urandom(RECORD_BYTES)
    template = bytearray(build_batch(
        [Record(None, value, now)] * RECORDS_PER_BATCH,
        producer_id=producer_id if idempotent else -1,
        producer_epoch=epoch if idempotent else -1, base_sequence=0 if idempotent else -1))

    def make(n: int) -> bytes:
        if idempotent:
            _SEQUENCE.pack_into(template, _SEQUENCE_AT, n * RECORDS_PER_BATCH)
            _CRC.pack_into(template, _CRC_AT, crc32c.crc32c(memoryview(template)[_ATTRIBUTES_AT:]))
        return bytes(template)
    return make


def _request(topic: str, partition: int, batch: bytes) -> ProduceRequest:
    return build(
        ProduceRequest, transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=30),
        topic_data=(build(TopicProduceData, name=topic, partition_data=(
            build(PartitionProduceData, index=partition, records=batch),)),))


@dataclass
class _Progress:
    """One connection's requests: sent, answered, and the first refusal or failure."""

    sent: int = 0
    answered: int = 0
    sending_done: bool = False
    error: str | None = None


async def _pipelined(host: str, port: int, in_flight: int, topic: str, partition: int,
                     batches: int, make: Callable[[int], bytes], deadline: float) -> int:
    """Produce requests on one connection with up to ``in_flight`` unanswered (answers come
    in order: one reader task counts them); the number answered."""
    reader, writer = await asyncio.open_connection(host, port)
    slots = asyncio.Semaphore(in_flight)
    progress = _Progress()
    finished = asyncio.Event()
    read = entity_reader(response_schema(PRODUCE, 9))

    async def read_answers() -> None:
        try:
            while not (progress.sending_done and progress.answered == progress.sent):
                (size,) = _SIZE.unpack(await reader.readexactly(4))
                frame = await reader.readexactly(size)
                value, _ = read(frame, BODY_AT)
                code = value.responses[0].partition_responses[0].error_code
                if code != ErrorCode.none:
                    progress.error = code.name
                    return
                progress.answered += 1
                slots.release()
        except (OSError, asyncio.IncompleteReadError) as exc:
            progress.error = f"connection lost: {exc}"
        finally:
            finished.set()

    reading = asyncio.create_task(read_answers())
    try:
        for n in range(batches):
            if time.perf_counter() > deadline or progress.error:
                break
            await slots.acquire()
            writer.write(encode_request(_request(topic, partition, make(n)), n + 1, b"bench"))
            progress.sent += 1
            await writer.drain()
        progress.sending_done = True
        if progress.answered == progress.sent:
            finished.set()
        with contextlib.suppress(TimeoutError):  # a time limit: reported as incomplete
            await asyncio.wait_for(finished.wait(), max(0.1, deadline - time.perf_counter()))
    finally:
        reading.cancel()
        writer.close()
    if progress.error:
        raise RuntimeError(f"partition {partition}: {progress.error}")
    return progress.answered


async def _producer_id(host: str, port: int) -> tuple[int, int]:
    conn = await BrokerConnection.open(host, port)
    try:
        answer = await conn.request(build(
            InitProducerIdRequest, transactional_id=None,
            transaction_timeout=datetime.timedelta(seconds=60), producer_id=-1,
            producer_epoch=-1))
    finally:
        conn.close()
    if answer.error_code != ErrorCode.none:
        raise RuntimeError(f"InitProducerId: {answer.error_code.name}")
    return int(answer.producer_id), int(answer.producer_epoch)


def produce(bootstrap: str, topic: str, idempotent: bool, batches: int,
            in_flight: int) -> dict[str, Any]:
    """``batches`` 1 MB batches to every partition of ``topic``, each partition over its own
    connection to its leader; records/s from the first send to the last answer."""
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    leaders = {p: (str(metadata.brokers[m.leader].host), int(metadata.brokers[m.leader].port))
               for p, m in metadata.topics[topic].partitions.items()}

    async def run() -> tuple[int, float]:
        first = next(iter(leaders.values()))
        pid, epoch = await _producer_id(*first) if idempotent else (-1, -1)
        makers = {p: _batch_maker(idempotent, pid, epoch) for p in leaders}
        start = time.perf_counter()
        deadline = start + TIME_LIMIT_S
        counts = await asyncio.gather(*(
            _pipelined(*address, in_flight, topic, p, batches, makers[p], deadline)
            for p, address in leaders.items()))
        return sum(counts), time.perf_counter() - start

    answered, elapsed = asyncio.run(run())
    records = answered * RECORDS_PER_BATCH
    return {"workload": "raw_produce", "mode": "idempotent" if idempotent else "plain",
            "batches": answered, "records": records, "record_bytes": RECORD_BYTES,
            "in_flight_per_partition": in_flight, "seconds": round(elapsed, 3),
            "records_per_s": round(records / elapsed),
            "mb_per_s": round(records * RECORD_BYTES / elapsed / 1e6, 1),
            **({} if answered == batches * len(leaders) else {"incomplete": "time limit"})}


def _sample(bootstrap: str, topic: str, idempotent: bool, batches: int, in_flight: int,
            broker_pids: list[int]) -> dict[str, Any]:
    """One :func:`produce` sample with the brokers' CPU per megabyte it cost them (every
    thread of every broker, from /proc)."""
    before = [procs.thread_cpu_ns(pid) for pid in broker_pids]
    result = produce(bootstrap, topic, idempotent, batches, in_flight)
    spent = sum(procs.cpu_ns_between(b, procs.thread_cpu_ns(pid))
                for b, pid in zip(before, broker_pids, strict=True))
    if result["batches"]:
        result["broker_cpu_ms_per_mb"] = round(spent / 1e6 / result["batches"], 3)
    return result


def measure(bootstrap: str, broker_pids: list[int], setup: dict[str, Any], batches: int,
            reps: int, in_flight: int, replication_factor: int,
            configs: dict[str, str]) -> dict[str, Any]:
    rates: dict[str, list[int]] = {"plain": [], "idempotent": []}
    cpu: dict[str, list[float]] = {"plain": [], "idempotent": []}
    # A first sample on fresh brokers is slower whatever its mode (new connections, files,
    # page cache): one unrecorded sample of each mode goes first.
    for mode in rates:
        topic = _topic(bootstrap, PARTITIONS, replication_factor, configs)
        warm_up = produce(bootstrap, topic, mode == "idempotent", max(3, batches // 4),
                          in_flight)
        print(json.dumps({**setup, **warm_up, "warm_up": True}), flush=True)
        drop_topic(bootstrap, topic)
    for round_number in range(reps):
        # Which mode goes first swaps every round, so that neither always runs right after
        # the other.
        for mode in ("plain", "idempotent") if round_number % 2 == 0 else ("idempotent", "plain"):
            topic = _topic(bootstrap, PARTITIONS, replication_factor, configs)
            sample = {**setup, **_sample(bootstrap, topic, mode == "idempotent", batches,
                                         in_flight, broker_pids), "round": round_number}
            print(json.dumps(sample), flush=True)
            drop_topic(bootstrap, topic)
            if "incomplete" not in sample:
                rates[mode].append(sample["records_per_s"])
                cpu[mode].append(sample["broker_cpu_ms_per_mb"])
    medians = {m: round(statistics.median(r)) if r else None for m, r in rates.items()}
    cpu_medians = {m: round(statistics.median(c), 3) if c else None for m, c in cpu.items()}
    plain, idem = medians["plain"], medians["idempotent"]
    plain_cpu, idem_cpu = cpu_medians["plain"], cpu_medians["idempotent"]
    return {"workload": "summary", **setup, "batches_per_partition": batches, "reps": reps,
            "in_flight_per_partition": in_flight, "median_records_per_s": medians,
            "min_max_records_per_s": {m: [min(r), max(r)] if r else None
                                      for m, r in rates.items()},
            "idempotent_over_plain": round(idem / plain, 2) if plain and idem else None,
            "target_idempotent_over_plain": 0.95,
            # Steadier than records/s on a shared machine: what a megabyte costs the brokers.
            "median_broker_cpu_ms_per_mb": cpu_medians,
            "broker_cpu_idempotent_over_plain": round(idem_cpu / plain_cpu, 2)
            if plain_cpu and idem_cpu else None,
            "load_average": load_average()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer batches, 1 round")
    parser.add_argument("--batches", type=int, default=None,
                        help="1 MB batches per partition and sample (default 40, quick 15)")
    parser.add_argument("--in-flight", type=int, default=5,
                        help="unanswered requests per partition (default 5)")
    parser.add_argument("--reps", type=int, default=None, help="rounds (default 3, quick 1)")
    parser.add_argument("--no-cluster", action="store_true",
                        help="one broker only (no ZooKeeper needed)")
    args = parser.parse_args()
    if args.in_flight < 1:
        parser.error("--in-flight wants a positive number")
    batches = args.batches or (15 if args.quick else 40)
    reps = args.reps or (1 if args.quick else 3)
    alone = BenchBroker()
    try:
        print(json.dumps(measure(alone.bootstrap, [alone.proc.pid],
                                 {"brokers": 1, "replication_factor": 1},
                                 batches, reps, args.in_flight, 1, {})), flush=True)
    finally:
        alone.close()
    if args.no_cluster:
        return
    with local_cluster() as cluster:
        pids = [b.proc.pid for b in cluster.brokers if b.proc is not None]
        print(json.dumps(measure(
            cluster.spec.bootstrap, pids, {"brokers": 3, "replication_factor": 3,
                                           "min_insync_replicas": 2},
            batches, reps, args.in_flight, 3, {"min.insync.replicas": "2"})), flush=True)


if __name__ == "__main__":
    main()
