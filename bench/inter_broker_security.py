"""What securing the links between brokers costs: acks=all produce on RF 3 with a PLAINTEXT
inter-broker listener against a SASL_SSL (SCRAM-SHA-512) one, as JSON lines.

    python -m bench.inter_broker_security [--quick] [--records N]

One ZooKeeper (Debian's ``zookeeper``) and, per variant, three brokers on free loopback
ports. Clients always use a PLAINTEXT listener, so the only difference between the variants
is the followers' fetches (TLS with SASL instead of plain TCP; over TLS the leader cannot use
sendfile). The inter-broker user is written to ZooKeeper before the brokers start, as
``moldau user add --zookeeper`` does. Reports records/s, MB/s and the brokers' CPU seconds per
GB for each variant and the ratio. Every loop is bounded in count and time.
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
from confluent_kafka.admin import AdminClient, NewTopic

from moldau.cluster.scram_credential import store_in_zookeeper
from moldau.cluster.zk_server import ZooKeeperServer

from .broker_proc import BenchBroker, free_port
from .throughput import produce

RECORD_BYTES = 1024
PARTITIONS = 6
JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
        'username="broker" password="broker-pw";')


def _cluster(zk_connect: str, secure: bool, tmp: Path) -> list[BenchBroker]:
    brokers = []
    for node in (1, 2, 3):
        client, internal = free_port(), free_port()
        protocol = "SASL_SSL" if secure else "PLAINTEXT"
        overrides = [
            f"node.id={node}", f"zookeeper.connect={zk_connect}",
            f"listeners=PLAINTEXT://127.0.0.1:{client},INTERNAL://127.0.0.1:{internal}",
            f"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:{protocol}",
            "inter.broker.listener.name=INTERNAL", "min.insync.replicas=2",
        ]
        if secure:
            overrides += [
                "ssl.keystore.type=PEM", f"ssl.keystore.location={tmp / 'server.pem'}",
                "ssl.truststore.type=PEM", f"ssl.truststore.location={tmp / 'ca.pem'}",
                "sasl.enabled.mechanisms=SCRAM-SHA-512",
                "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512",
                f"listener.name.internal.scram-sha-512.sasl.jaas.config={JAAS}"]
        brokers.append(BenchBroker(*overrides, port=client))
    return brokers


def _topic(bootstrap: str) -> str:
    """An RF 3 topic whose every partition has an ISR of three."""
    name = f"bench-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + 60
    while len(admin.list_topics(timeout=10).brokers) < 3:
        if time.monotonic() > deadline:
            raise RuntimeError("the three brokers did not all register within 60 s")
        time.sleep(0.2)
    admin.create_topics([NewTopic(name, PARTITIONS, 3)])[name].result(30)
    while time.monotonic() < deadline:
        md = admin.list_topics(timeout=10).topics.get(name)
        if md is not None and md.partitions and all(
                p.leader >= 0 and len(p.isrs) == 3 for p in md.partitions.values()):
            return name
        time.sleep(0.2)
    raise RuntimeError("no ISR of three within 60 s")


def _variant(zk: ZooKeeperServer, secure: bool, tmp: Path, count: int) -> dict[str, Any]:
    chroot = f"/bench-{uuid.uuid4().hex[:8]}"
    zk_connect = zk.connect_string(chroot)
    if secure:
        store_in_zookeeper(zk_connect, "broker", "broker-pw", ("SCRAM-SHA-512",))
    brokers = _cluster(zk_connect, secure, tmp)
    try:
        bootstrap = ",".join(b.bootstrap for b in brokers)
        topic = _topic(bootstrap)
        cpu0 = sum(b.cpu_seconds() for b in brokers)
        result = produce(bootstrap, topic, count, RECORD_BYTES)
        cpu_s = sum(b.cpu_seconds() for b in brokers) - cpu0
    finally:
        for broker in brokers:
            broker.close()
    gigabytes = result["records"] * RECORD_BYTES / 1e9
    return {"workload": "produce_rf3_acks_all",
            "inter_broker": "SASL_SSL/SCRAM-SHA-512" if secure else "PLAINTEXT",
            "records": result["records"], "record_bytes": RECORD_BYTES,
            "seconds": result["seconds"], "records_per_s": result["records_per_s"],
            "mb_per_s": round(gigabytes * 1e3 / result["seconds"], 1),
            "brokers_cpu_s_per_gb": round(cpu_s / gigabytes, 1) if gigabytes else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="10x fewer records")
    parser.add_argument("--records", type=int, default=200_000, help="records per variant")
    args = parser.parse_args()
    count = args.records // (10 if args.quick else 1)
    with tempfile.TemporaryDirectory(prefix="moldau-bench-ibs-") as name:
        tmp = Path(name)
        ca = trustme.CA()
        ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(
            str(tmp / "server.pem"))
        ca.cert_pem.write_to_path(str(tmp / "ca.pem"))
        zk = ZooKeeperServer(tmp / "zookeeper", free_port(), fsync=False).start()
        try:
            lines = [_variant(zk, secure, tmp, count) for secure in (False, True)]
        finally:
            zk.stop()
    for line in lines:
        print(json.dumps(line), flush=True)
    print(json.dumps({"workload": "produce_rf3_ratio", "sasl_ssl_over_plaintext": round(
        lines[1]["mb_per_s"] / max(lines[0]["mb_per_s"], 0.001), 2)}), flush=True)


if __name__ == "__main__":
    main()
