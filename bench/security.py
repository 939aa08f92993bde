"""Produce and consume 1 KiB records over SASL_SSL (SCRAM-SHA-512) against PLAINTEXT, in one
run on one broker, with the broker's CPU seconds per GB for each, as JSON lines.

    python -m bench.security [--quick]

The broker listens on a PLAINTEXT and a SASL_SSL listener (certificates made with trustme);
each workload runs on its own topic, plaintext first. Over TLS the broker cannot use sendfile
for fetches: record bytes are read into memory (at most 1 MiB at a time per connection) and
encrypted. Every loop is bounded in count and in time.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import trustme
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from .broker_proc import BenchBroker, free_port
from .clients import produce_with

TIME_LIMIT_S = 120.0
RECORD_BYTES = 1024
PARTITIONS = 6
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_admin="admin-pw";')


def _produce(conf: dict[str, Any], topic: str, count: int) -> dict[str, Any]:
    producer = Producer({**conf, "acks": "all", "linger.ms": 5, "batch.size": 1_000_000,
                         "queue.buffering.max.messages": 1_000_000,
                         "queue.buffering.max.kbytes": 1_048_576})
    start = time.monotonic()
    acked = produce_with(producer, topic, count, RECORD_BYTES, start + TIME_LIMIT_S)
    return {"records": acked, "seconds": time.monotonic() - start}


def _consume(conf: dict[str, Any], topic: str, count: int) -> dict[str, Any]:
    consumer = Consumer({**conf, "group.id": "unused", "enable.auto.commit": False,
                         "fetch.max.bytes": 52_428_800, "max.partition.fetch.bytes": 1_048_576})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    start = time.perf_counter()
    deadline = start + TIME_LIMIT_S
    received = 0
    while received < count and time.perf_counter() < deadline:
        for msg in consumer.consume(10_000, 1.0):
            if msg.error() is None:
                received += 1
    elapsed = time.perf_counter() - start
    consumer.close()
    return {"records": received, "seconds": elapsed}


def _report(workload: str, protocol: str, result: dict[str, Any], cpu_s: float
            ) -> dict[str, Any]:
    gigabytes = result["records"] * RECORD_BYTES / 1e9
    return {"workload": workload, "protocol": protocol, "records": result["records"],
            "record_bytes": RECORD_BYTES, "seconds": round(result["seconds"], 3),
            "mb_per_s": round(gigabytes * 1e3 / result["seconds"], 1),
            "broker_cpu_s": round(cpu_s, 2),
            "broker_cpu_s_per_gb": round(cpu_s / gigabytes, 1) if gigabytes else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="10x fewer records")
    parser.add_argument("--records", type=int, default=200_000, help="records per workload")
    args = parser.parse_args()
    count = args.records // (10 if args.quick else 1)
    with tempfile.TemporaryDirectory(prefix="moldau-bench-tls-") as tmp:
        ca = trustme.CA()
        ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(
            str(Path(tmp) / "server.pem"))
        ca.cert_pem.write_to_path(str(Path(tmp) / "ca.pem"))
        plain, secure = free_port(), free_port()
        broker = BenchBroker(
            f"listeners=PLAINTEXT://127.0.0.1:{plain},SASL_SSL://127.0.0.1:{secure}",
            "ssl.keystore.type=PEM", f"ssl.keystore.location={tmp}/server.pem",
            "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512",
            f"listener.name.sasl_ssl.plain.sasl.jaas.config={JAAS}", port=plain)
        try:
            confs = {
                "PLAINTEXT": {"bootstrap.servers": f"127.0.0.1:{plain}"},
                "SASL_SSL": {"bootstrap.servers": f"127.0.0.1:{secure}",
                             "security.protocol": "SASL_SSL",
                             "ssl.ca.location": f"{tmp}/ca.pem",
                             "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "bench",
                             "sasl.password": "bench-pw"},
            }
            admin = AdminClient(confs["PLAINTEXT"])
            admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
                "bench", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                b"bench-pw")])["bench"].result(30)
            results = {}
            for protocol, conf in confs.items():
                topic = f"bench-{uuid.uuid4().hex[:8]}"
                admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
                for workload, run in (("produce", _produce), ("consume", _consume)):
                    cpu0 = broker.cpu_seconds()
                    result = run(conf, topic, count)
                    line = _report(workload, protocol, result, broker.cpu_seconds() - cpu0)
                    results[(workload, protocol)] = line
                    print(json.dumps(line), flush=True)
            for workload in ("produce", "consume"):
                ratio = (results[(workload, "SASL_SSL")]["mb_per_s"]
                         / max(results[(workload, "PLAINTEXT")]["mb_per_s"], 0.001))
                print(json.dumps({"workload": f"{workload}_ratio",
                                  "sasl_ssl_over_plaintext": round(ratio, 2)}), flush=True)
        finally:
            broker.close()


if __name__ == "__main__":
    main()
