"""Records/s produced through the REST Proxy against native produce, same run, as JSON.

    python -m bench.rest [--records N] [--clients C] [--batch B] [--seconds S] [--reps R]
                         [--lookups L] [--schemas K]

Starts a broker and a REST Proxy (``moldau rest``) on free loopback ports, creates a topic
with 6 partitions, then per round:

- ``rest``: C keep-alive HTTP/1.1 connections send one prebuilt v2 JSON produce request
  (``application/vnd.kafka.json.v2+json``, B records) again and again until N records are
  acknowledged (every answer's offsets are checked for errors);
- ``native``: one confluent-kafka producer with the proxy's settings (acks=all, idempotent,
  linger 5 ms) produces the same N record values and flushes;
- ``registry_lookup``: a Schema Registry (``moldau registry``, same broker) with
  ``--schemas`` Avro schemas registered answers ``--lookups`` schema lookups
  (``POST /subjects/{s}``, what a serializer with ``auto.register.schemas=false`` asks) over
  C keep-alive connections of the same light client; its CPU per lookup is printed too.

After each round the topic's end offsets, less the warm-up records, are printed
(``end_offsets_minus_warm_up``): they must equal the records acknowledged. The proxy's own
CPU time per record (``proxy_cpu_us_per_record``, from /proc) is printed too: on a shared
machine it says more than records/s, which depend on who else has the cores. The client is
a few lines over asyncio streams, not an HTTP library, so that it measures the proxy (its
CPU time is printed as ``client_cpu_s``); it still shares the machine's cores with the proxy
and the broker, as it would on one host. Each loop stops at N records or S seconds,
whichever comes first.
Prints one JSON line per measurement and a ``summary`` line with the medians and the ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from . import procs
from .broker_proc import BenchBroker, free_port
from .registry import _start_registry as start_registry

PARTITIONS = 6


def record_values(batch: int) -> list[dict[str, Any]]:
    return [{"id": i, "user": f"user-{i}", "amount": 12.5, "tags": ["a", "b"]}
            for i in range(batch)]


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (all its threads), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class BenchProxy:
    def __init__(self, bootstrap: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "moldau", "rest", "-b", bootstrap,
             "--listen", f"127.0.0.1:{self.port}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/v3/clusters", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.1)
        self.close()
        raise RuntimeError("the REST proxy did not answer within 30 s")

    def cpu_seconds(self) -> float:
        """User + system CPU time of the proxy process so far (all its threads)."""
        return process_cpu_seconds(self.proc.pid)

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def create_topic(bootstrap: str, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    (future,) = admin.create_topics([NewTopic(name, PARTITIONS, 1)]).values()
    future.result(timeout=30)


def produce_request(port: int, topic: str, batch: int) -> bytes:
    """One whole HTTP/1.1 keep-alive request producing ``batch`` JSON records, built once."""
    body = orjson.dumps({"records": [{"value": v} for v in record_values(batch)]})
    head = (f"POST /topics/{topic} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            f"Content-Type: application/vnd.kafka.json.v2+json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n")
    return head.encode("ascii") + body


async def read_answer(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    """Status and body of one HTTP/1.1 answer with a Content-Length (as the proxy sends)."""
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head[9:12])
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    return status, await reader.readexactly(length)


async def through_proxy(port: int, topic: str, records: int, clients: int, batch: int,
                        seconds: float) -> dict[str, Any]:
    """C keep-alive connections, each sending the same prebuilt request again and again.

    The client is a few lines over asyncio streams rather than an HTTP library, so its CPU
    time per request (a write, a read, one JSON parse of the answer) stays far below the
    proxy's and the measurement is of the proxy, not of the client.
    """
    request = produce_request(port, topic, batch)
    requests = records // batch
    issued = 0
    acked = 0
    errors = 0
    latencies: list[float] = []
    deadline = time.monotonic() + seconds

    async def client() -> None:
        nonlocal issued, acked, errors
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            while issued < requests and time.monotonic() < deadline:
                issued += 1
                sent = time.perf_counter()
                writer.write(request)
                status, answer = await read_answer(reader)
                latencies.append(time.perf_counter() - sent)
                offsets = orjson.loads(answer)["offsets"] if status == 200 else []
                good = sum(1 for o in offsets if o["error_code"] is None)
                acked += good
                errors += batch - good
        finally:
            writer.close()

    # Warm-up: metadata and the producer's id before the clock starts (not counted).
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    warm_status, _ = await read_answer(reader)
    writer.close()
    if warm_status != 200:
        raise RuntimeError(f"the warm-up produce request was answered {warm_status}")
    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    elapsed = time.perf_counter() - started
    latencies.sort()
    return {"mode": "rest", "records": acked, "errors": errors, "seconds": round(elapsed, 3),
            "records_per_s": round(acked / elapsed),
            "request_p50_ms": round(latencies[len(latencies) // 2] * 1000, 1),
            "request_p99_ms": round(latencies[int(len(latencies) * 0.99)] * 1000, 1)}


def lookup_requests(port: int, schemas: int) -> list[bytes]:
    """One prebuilt ``POST /subjects/bench-{i}`` (look the schema up) per registered schema."""
    built = []
    for index in range(schemas):
        body = orjson.dumps({"schema": lookup_schema(index)})
        head = (f"POST /subjects/bench-{index} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                f"Content-Type: application/vnd.schemaregistry.v1+json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n")
        built.append(head.encode("ascii") + body)
    return built


async def registry_lookups(port: int, requests: list[bytes], count: int, clients: int,
                           seconds: float) -> dict[str, Any]:
    """Schema lookups (what a serializer with auto.register.schemas=false asks) over C
    keep-alive connections, the same light client as the produce requests."""
    issued = 0
    found = 0
    failed = 0
    deadline = time.monotonic() + seconds

    async def client() -> None:
        nonlocal issued, found, failed
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            while issued < count and time.monotonic() < deadline:
                request = requests[issued % len(requests)]
                issued += 1
                writer.write(request)
                status, answer = await read_answer(reader)
                if status == 200 and b'"id"' in answer:
                    found += 1
                else:
                    failed += 1
        finally:
            writer.close()

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    elapsed = time.perf_counter() - started
    return {"mode": "registry_lookup", "lookups": found, "errors": failed,
            "seconds": round(elapsed, 3), "lookups_per_s": round(found / elapsed)}


def lookup_schema(index: int) -> str:
    return json.dumps({"type": "record", "name": f"Bench{index}", "namespace": "bench",
                       "fields": [{"name": "id", "type": "long"},
                                  {"name": "payload", "type": "string"}]})


def register_schemas(url: str, schemas: int) -> None:
    with httpx.Client(base_url=url, timeout=30) as http:
        for index in range(schemas):
            http.post(f"/subjects/bench-{index}/versions",
                      json={"schema": lookup_schema(index)}).raise_for_status()


def end_offsets(bootstrap: str, topic: str) -> int:
    """Sum of the topic's high watermarks: what was really written and acknowledged."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-rest-check",
                         "log_level": 5})
    try:
        total = 0
        for partition in range(PARTITIONS):
            _low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition),
                                                        timeout=10)
            total += high
        return total
    finally:
        consumer.close()


def native(bootstrap: str, topic: str, records: int, batch: int,
           seconds: float) -> dict[str, Any]:
    values = [orjson.dumps(v) for v in record_values(batch)]
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 5,
                         "queue.buffering.max.messages": 1_000_000, "log_level": 5})
    producer.produce(topic, values[0])
    producer.flush(30)
    failed = 0

    def on_delivery(err: Any, _msg: Any) -> None:
        nonlocal failed
        if err is not None:
            failed += 1

    started = time.perf_counter()
    deadline = time.monotonic() + seconds
    sent = 0
    while sent < records and time.monotonic() < deadline:
        for value in values:
            try:
                producer.produce(topic, value, on_delivery=on_delivery)
            except BufferError:
                producer.poll(0.01)
                producer.produce(topic, value, on_delivery=on_delivery)
            sent += 1
        producer.poll(0)
    left = producer.flush(max(1.0, deadline - time.monotonic() + 30))
    elapsed = time.perf_counter() - started
    acked = sent - left - failed
    return {"mode": "native", "records": acked, "errors": failed + left,
            "seconds": round(elapsed, 3), "records_per_s": round(acked / elapsed)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=60.0, help="bound of each loop")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--lookups", type=int, default=20_000,
                        help="schema lookups from the registry per round")
    parser.add_argument("--schemas", type=int, default=50)
    args = parser.parse_args()
    broker = BenchBroker("group.initial.rebalance.delay.ms=0")
    proxy = None
    registry = None
    registry_logs = tempfile.TemporaryDirectory(prefix="moldau-bench-rest-")
    try:
        proxy = BenchProxy(broker.bootstrap)
        registry, registry_url = start_registry(broker.bootstrap, Path(registry_logs.name))
        register_schemas(registry_url, args.schemas)
        registry_port = int(registry_url.rsplit(":", 1)[1])
        lookups = lookup_requests(registry_port, args.schemas)
        results: dict[str, list[int]] = {"rest": [], "native": [], "registry_lookup": []}
        for rep in range(args.reps):
            for mode in ("rest", "native", "registry_lookup"):
                if mode == "registry_lookup":
                    cpu_before = process_cpu_seconds(registry.pid)
                    line = asyncio.run(registry_lookups(registry_port, lookups, args.lookups,
                                                        args.clients, args.seconds))
                    line["registry_cpu_us_per_lookup"] = round(
                        (process_cpu_seconds(registry.pid) - cpu_before)
                        / max(1, line["lookups"]) * 1e6, 1)
                    line.update(rep=rep, clients=args.clients,
                                load_average=[round(x, 2) for x in os.getloadavg()])
                    results[mode].append(line["lookups_per_s"])
                    print(json.dumps(line), flush=True)
                    continue
                topic = f"bench-rest-{mode}-{rep}"
                create_topic(broker.bootstrap, topic)
                if mode == "rest":
                    cpu_before, client_before = proxy.cpu_seconds(), time.process_time()
                    line = asyncio.run(through_proxy(proxy.port, topic, args.records,
                                                     args.clients, args.batch, args.seconds))
                    cpu = proxy.cpu_seconds() - cpu_before
                    line["client_cpu_s"] = round(time.process_time() - client_before, 2)
                    line["proxy_cpu_s"] = round(cpu, 2)
                    line["proxy_cpu_us_per_record"] = round(cpu / max(1, line["records"]) * 1e6,
                                                            1)
                else:
                    line = native(broker.bootstrap, topic, args.records, args.batch,
                                  args.seconds)
                # Warm-up records (one request / one record) are on the topic too.
                warm_up = args.batch if mode == "rest" else 1
                line["end_offsets_minus_warm_up"] = end_offsets(broker.bootstrap, topic) - warm_up
                line.update(rep=rep, batch=args.batch, clients=args.clients,
                            load_average=[round(x, 2) for x in os.getloadavg()])
                results[mode].append(line["records_per_s"])
                print(json.dumps(line), flush=True)
        rest, nat, looked_up = (statistics.median(results[m])
                                for m in ("rest", "native", "registry_lookup"))
        print(json.dumps({"summary": True, "rest_records_per_s": rest,
                          "native_records_per_s": nat, "rest_over_native": round(rest / nat, 3),
                          "registry_lookups_per_s": looked_up,
                          "target_records_per_s": 50_000, "cpus": os.cpu_count(),
                          "load_average": [round(x, 2) for x in os.getloadavg()]}), flush=True)
    finally:
        if proxy is not None:
            proxy.close()
        if registry is not None:
            procs.stop(registry, 20)
        registry_logs.cleanup()
        broker.close()


if __name__ == "__main__":
    main()
