"""Three real brokers whose only listener is secured, so that everything between them goes
through the inter-broker connector: SASL_SSL with SCRAM-SHA-512 (the inter-broker user made in
ZooKeeper before the brokers start, with ``moldau user add --zookeeper``) and SSL with mutual
TLS. Replication with acks=all, a leader's kill -9, and transactions (markers to leaders on
other brokers, KIP-890 verification of partitions with the coordinator) all work; a broker
with the wrong inter-broker password is refused by its peers and says so in its log."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trustme
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.conftest import MakeBroker
from tests.helpers.broker_process import BrokerProcess, free_port
from tests.helpers.cli import run_moldau

from .helpers import eventually
from .test_cluster_brokers import SESSION_TIMEOUT_MS

PARTITIONS = 3
SCRAM_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
              'username="{user}" password="{password}";')


@dataclass
class Pki:
    ca: Path
    keystore: Path         # the brokers' certificate (server and inter-broker client side)
    client_cert: Path
    client_key: Path


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    tmp = tmp_path_factory.mktemp("pki")
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(tmp / "ca.pem"))
    ca.issue_cert("127.0.0.1", "localhost", common_name="broker").\
        private_key_and_cert_chain_pem.write_to_path(str(tmp / "broker.pem"))
    client = ca.issue_cert("client@example.com", common_name="client")
    client.cert_chain_pems[0].write_to_path(str(tmp / "client.crt"))
    client.private_key_pem.write_to_path(str(tmp / "client.key"))
    return Pki(tmp / "ca.pem", tmp / "broker.pem", tmp / "client.crt", tmp / "client.key")


@dataclass
class SecureCluster:
    brokers: list[BrokerProcess]
    client: dict[str, Any]

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers)

    def conf(self, broker: BrokerProcess | None = None, **extra: Any) -> dict[str, Any]:
        servers = broker.bootstrap if broker is not None else self.bootstrap
        return {**self.client, "bootstrap.servers": servers, **extra}

    def partitions(self, broker: BrokerProcess, topic: str) -> dict[int, tuple[int, tuple]]:
        """{partition: (leader, isr)} as ``broker`` alone sees them."""
        md = AdminClient(self.conf(broker)).list_topics(timeout=10)
        if topic not in md.topics:
            return {}
        return {p.id: (p.leader, tuple(p.isrs)) for p in md.topics[topic].partitions.values()}

    def brokers_seen(self, broker: BrokerProcess) -> list[int]:
        return sorted(AdminClient(self.conf(broker)).list_topics(timeout=10).brokers)


def _common(zk_connect: str, pki: Pki) -> tuple[str, ...]:
    return ("listener.security.protocol.map=SASL_SSL:SASL_SSL,MTLS:SSL",
            f"zookeeper.connect={zk_connect}",
            f"zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}",
            "ssl.keystore.type=PEM", f"ssl.keystore.location={pki.keystore}",
            "ssl.truststore.type=PEM", f"ssl.truststore.location={pki.ca}",
            "min.insync.replicas=2", "offsets.topic.replication.factor=3",
            "transaction.state.log.replication.factor=3", "transaction.state.log.min.isr=2",
            "transaction.state.log.num.partitions=1")


def _start(make_broker: MakeBroker, zk_connect: str, pki: Pki,
           listener: Callable[[int], list[str]], client: dict[str, Any],
           *extra: str) -> SecureCluster:
    common = _common(zk_connect, pki)
    brokers = []
    for node in (1, 2, 3):
        port = free_port()
        brokers.append(make_broker(f"node.id={node}", *common, *listener(port), *extra,
                                   port=port))
    cluster = SecureCluster(brokers, client)
    eventually(lambda: all(cluster.brokers_seen(b) == [1, 2, 3] for b in brokers),
               what="every broker listing all three")
    return cluster


def _sasl_ssl(broker_password: str) -> Callable[[int], list[str]]:
    return lambda port: [
        f"listeners=SASL_SSL://127.0.0.1:{port}", "security.inter.broker.protocol=SASL_SSL",
        "sasl.enabled.mechanisms=SCRAM-SHA-512",
        "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512",
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=" +
        SCRAM_JAAS.format(user="broker", password=broker_password)]


def _mtls(port: int) -> list[str]:
    return [f"listeners=MTLS://127.0.0.1:{port}", "inter.broker.listener.name=MTLS",
            "ssl.client.auth=required"]


def _add_users(zk_connect: str) -> None:
    for user, password in (("broker", "broker-pw"), ("alice", "alice-pw")):
        result = run_moldau("user", "add", user, "--password", password, "--mechanism",
                            "SCRAM-SHA-512", "--zookeeper", zk_connect)
        assert result.returncode == 0, result.stderr
        assert "credentials set in ZooKeeper" in result.stdout


def _exercise(cluster: SecureCluster) -> None:
    """Replication to an ISR of three, a transaction across leaders on every broker, and a
    leader's kill -9 under acks=all: nothing acknowledged is lost."""
    topic = f"secure-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(cluster.conf())
    admin.create_topics([NewTopic(topic, PARTITIONS, 3)])[topic].result(timeout=30)
    first = cluster.brokers[0]
    eventually(lambda: len(cluster.partitions(first, topic)) == PARTITIONS and all(
        len(isr) == 3 for _, isr in cluster.partitions(first, topic).values()),
        what="every partition with an ISR of three (fetchers authenticated)")

    producer = Producer(cluster.conf(**{"transactional.id": f"txn-{topic}"}))
    producer.init_transactions(30)
    producer.begin_transaction()
    for p in range(PARTITIONS):
        producer.produce(topic, value=b"txn-%d" % p, partition=p)
    producer.commit_transaction(30)
    assert sorted(_read_committed(cluster, topic, PARTITIONS)) == \
        [b"txn-%d" % p for p in range(PARTITIONS)]
    for broker in cluster.brokers:  # markers and KIP-890 checks reached their peers
        log = broker.stderr_text()
        assert "unreachable" not in log and "peer refused" not in log, log[-2000:]

    leader = cluster.partitions(first, topic)[0][0]
    acked: list[bytes] = []

    def report(err: KafkaError | None, msg: Any) -> None:
        if err is None:
            acked.append(msg.value())

    plain = Producer(cluster.conf(acks="all", **{"enable.idempotence": True,
                                                 "message.timeout.ms": 60000}))
    for i in range(200):
        plain.produce(topic, value=b"v%03d" % i, partition=0, on_delivery=report)
        if i == 100:
            plain.flush(30)
            cluster.brokers[leader - 1].kill9()
        plain.poll(0)
    assert plain.flush(90) == 0
    survivor = next(b for i, b in enumerate(cluster.brokers, 1) if i != leader)
    new_leader = cluster.partitions(survivor, topic)[0][0]
    assert new_leader not in (leader, -1)
    got = _read_committed(cluster, topic, PARTITIONS + len(acked), brokers=[survivor])
    assert set(acked) <= set(got) and len(acked) == 200


def _read_committed(cluster: SecureCluster, topic: str, expected: int,
                    brokers: list[BrokerProcess] | None = None) -> list[bytes]:
    servers = ",".join(b.bootstrap for b in brokers) if brokers else cluster.bootstrap
    consumer = Consumer({**cluster.client, "bootstrap.servers": servers,
                         "group.id": f"g-{uuid.uuid4().hex[:6]}",
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while len(got) < expected and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
    finally:
        consumer.close()
    return got


def test_sasl_ssl_scram_cluster(make_broker: MakeBroker, zk_connect: str, pki: Pki) -> None:
    _add_users(zk_connect)
    client = {"security.protocol": "SASL_SSL", "ssl.ca.location": str(pki.ca),
              "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "alice",
              "sasl.password": "alice-pw"}
    # Sessions of 3 s: the brokers' own long-lived connections must re-authenticate.
    cluster = _start(make_broker, zk_connect, pki, _sasl_ssl("broker-pw"), client,
                     "connections.max.reauth.ms=3000")
    _exercise(cluster)
    for broker in cluster.brokers:
        log = broker.stderr_text()
        assert "did not re-authenticate" not in log and "Failed authentication" not in log


def test_wrong_inter_broker_password_is_refused(make_broker: MakeBroker, zk_connect: str,
                                                pki: Pki) -> None:
    _add_users(zk_connect)
    client = {"security.protocol": "SASL_SSL", "ssl.ca.location": str(pki.ca),
              "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "alice",
              "sasl.password": "alice-pw"}
    cluster = _start(make_broker, zk_connect, pki, _sasl_ssl("broker-pw"), client,
                     "replica.lag.time.max.ms=2000")
    wrong_port = free_port()
    wrong = make_broker("node.id=4", *_common(zk_connect, pki), *_sasl_ssl("nope")(wrong_port),
                        port=wrong_port)
    topic = f"wrong-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(cluster.conf())
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[[1, 4]])])[topic].result(
        timeout=30)
    eventually(lambda: "peer refused this broker's SCRAM-SHA-512 credentials" in
               wrong.stderr_text(), what="broker 4 logging its refusal")
    eventually(lambda: "Failed authentication with /127.0.0.1 (listener SASL_SSL, "
               "SCRAM-SHA-512)" in cluster.brokers[0].stderr_text(),
               what="broker 1 logging the failed authentication")
    # The refused follower never fetches, so the leader drops it from the ISR.
    eventually(lambda: cluster.partitions(cluster.brokers[0], topic)[0][1] == (1,),
               what="the ISR without broker 4")


def test_ssl_mtls_cluster(make_broker: MakeBroker, zk_connect: str, pki: Pki) -> None:
    client = {"security.protocol": "SSL", "ssl.ca.location": str(pki.ca),
              "ssl.certificate.location": str(pki.client_cert),
              "ssl.key.location": str(pki.client_key)}
    cluster = _start(make_broker, zk_connect, pki, _mtls, client)
    _exercise(cluster)


def test_user_add_with_unreachable_zookeeper_is_one_line() -> None:
    result = run_moldau("user", "add", "x", "--password", "pw", "--zookeeper",
                        f"127.0.0.1:{free_port()}", "--timeout", "2")
    assert result.returncode != 0
    assert "cannot write user 'x' to ZooKeeper at 127.0.0.1:" in result.stderr
    assert "Traceback" not in result.stderr
