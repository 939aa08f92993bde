"""The principal of a mutual-TLS client: its certificate's subject DN, mapped by
``ssl.principal.mapping.rules``, with real confluent-kafka, kafka-python and aiokafka clients.

The principal shows in the broker's DEBUG log (``moldau.broker.session``); a DN that no rule
maps fails the connection, and the broker keeps serving everyone else.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import trustme
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient

from tests.helpers.broker_process import BrokerProcess, free_port
from tests.helpers.round_trips import aiokafka_round_trip

RULES = r"RULE:^CN=([^,]+),OU=eng,.*$/$1/L"


@dataclass
class Certs:
    ca: Path
    alice: tuple[Path, Path]     # OU=eng: mapped to "alice" on MAPPED
    bob: tuple[Path, Path]       # OU=ops: no rule on MAPPED


@dataclass
class MtlsBroker:
    process: BrokerProcess
    plain: int
    mtls: int      # ssl.client.auth=required, default rules: the full DN
    mapped: int    # ssl.client.auth=required, RULES only
    certs: Certs

    def conf(self, port: int, who: tuple[Path, Path]) -> dict[str, str]:
        return {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SSL",
                "ssl.ca.location": str(self.certs.ca),
                "ssl.certificate.location": str(who[0]), "ssl.key.location": str(who[1])}

    def principal_logged(self, principal: str, listener: str) -> None:
        pattern = re.compile(rf"Authenticated /127\.0\.0\.1 on listener {listener} as "
                             rf"{re.escape(principal)}$", re.M)
        deadline = time.monotonic() + 10
        while not pattern.search(self.process.stderr_text()):
            assert time.monotonic() < deadline, f"{principal} not logged for {listener}"
            time.sleep(0.05)


def _issue(ca: trustme.CA, tmp: Path, name: str, unit: str) -> tuple[Path, Path]:
    cert = ca.issue_cert(f"{name}@example.com", common_name=name.capitalize(),
                         organization_name="Example", organization_unit_name=unit)
    cert.cert_chain_pems[0].write_to_path(str(tmp / f"{name}.crt"))
    cert.private_key_pem.write_to_path(str(tmp / f"{name}.key"))
    return tmp / f"{name}.crt", tmp / f"{name}.key"


@pytest.fixture(scope="module")
def mtls_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MtlsBroker]:
    tmp = tmp_path_factory.mktemp("mtls")
    ca = trustme.CA()
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(
        str(tmp / "server.pem"))
    ca.cert_pem.write_to_path(str(tmp / "ca.pem"))
    certs = Certs(tmp / "ca.pem", _issue(ca, tmp, "alice", "eng"), _issue(ca, tmp, "bob", "ops"))
    plain, mtls, mapped = free_port(), free_port(), free_port()
    process = BrokerProcess(tmp / "data", port=plain, overrides=(
        f"listeners=PLAINTEXT://127.0.0.1:{plain},MTLS://127.0.0.1:{mtls},"
        f"MAPPED://127.0.0.1:{mapped}",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,MTLS:SSL,MAPPED:SSL",
        "ssl.keystore.type=PEM", f"ssl.keystore.location={tmp / 'server.pem'}",
        "ssl.truststore.type=PEM", f"ssl.truststore.location={tmp / 'ca.pem'}",
        "ssl.client.auth=required",
        f"listener.name.mapped.ssl.principal.mapping.rules={RULES}",
    ), env={"MOLDAU_LOG_LEVEL": "DEBUG"}).start()
    try:
        yield MtlsBroker(process, plain, mtls, mapped, certs)
    finally:
        process.stop()


def _produce(conf: dict[str, str], topic: str) -> None:
    producer = Producer(conf)
    producer.produce(topic, b"x")
    assert producer.flush(15) == 0


def test_default_principal_is_the_full_dn(mtls_broker: MtlsBroker) -> None:
    _produce(mtls_broker.conf(mtls_broker.mtls, mtls_broker.certs.alice),
             f"dn-{uuid.uuid4().hex[:8]}")
    mtls_broker.principal_logged("User:CN=Alice,OU=eng,O=Example", "MTLS")


def test_mapping_rule_gives_the_short_name(mtls_broker: MtlsBroker) -> None:
    _produce(mtls_broker.conf(mtls_broker.mapped, mtls_broker.certs.alice),
             f"mapped-{uuid.uuid4().hex[:8]}")
    mtls_broker.principal_logged("User:alice", "MAPPED")


def test_dn_without_a_rule_is_refused_and_others_are_served(mtls_broker: MtlsBroker) -> None:
    topic = f"refused-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({**mtls_broker.conf(mtls_broker.mapped, mtls_broker.certs.bob)})
    with pytest.raises(KafkaException):
        admin.list_topics(topic=topic, timeout=3)
    deadline = time.monotonic() + 5
    while "No rules apply to CN=Bob,OU=ops,O=Example" not in mtls_broker.process.stderr_text():
        assert time.monotonic() < deadline, "no log line for the unmapped DN"
        time.sleep(0.05)
    # Bob is served where the default rule applies, and Alice still is on MAPPED.
    _produce(mtls_broker.conf(mtls_broker.mtls, mtls_broker.certs.bob), topic)
    _produce(mtls_broker.conf(mtls_broker.mapped, mtls_broker.certs.alice), topic)


def test_kafka_python_and_aiokafka_over_mtls(mtls_broker: MtlsBroker) -> None:
    from aiokafka.helpers import create_ssl_context
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    topic = f"py-mtls-{uuid.uuid4().hex[:8]}"
    cert, key = mtls_broker.certs.alice
    server = f"127.0.0.1:{mtls_broker.mapped}"
    tls = dict(security_protocol="SSL", ssl_cafile=str(mtls_broker.certs.ca),
               ssl_certfile=str(cert), ssl_keyfile=str(key))
    producer = KafkaProducer(bootstrap_servers=server, **tls)
    producer.send(topic, b"kafka-python").get(timeout=15)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=server, **tls, consumer_timeout_ms=5000,
                             auto_offset_reset="earliest")
    consumer.assign([TopicPartition(topic, 0)])
    assert [m.value for m in consumer] == [b"kafka-python"]
    consumer.close()

    context = create_ssl_context(cafile=str(mtls_broker.certs.ca), certfile=str(cert),
                                 keyfile=str(key))
    conf = dict(bootstrap_servers=server, security_protocol="SSL", ssl_context=context)
    assert aiokafka_round_trip(conf, topic, b"aiokafka") == [b"kafka-python", b"aiokafka"]
    mtls_broker.principal_logged("User:alice", "MAPPED")
