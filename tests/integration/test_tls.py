"""SSL and SASL_SSL listeners with certificates made by trustme: confluent-kafka, kafka-python,
aiokafka and kcat over TLS, mutual TLS, and the bad input that must cost one connection only
(TLS on a plaintext port and the reverse, a truncated record, missing or untrusted client
certificates) while a plaintext client keeps being served."""

from __future__ import annotations

import datetime
import socket
import ssl
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import trustme
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from tests.helpers.broker_process import BrokerProcess, free_port
from tests.helpers.round_trips import aiokafka_round_trip, librdkafka_round_trip
from tests.integration.unauthenticated_writes import refused_then_nothing_written
from tests.integration.wire import WireClient

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'username="admin" password="admin-pw" user_admin="admin-pw";')


@dataclass
class TlsBroker:
    process: BrokerProcess
    plain: int
    ssl_port: int
    sasl_ssl: int
    mtls: int
    ca_file: Path
    client_cert: Path
    client_key: Path
    other_ca_file: Path
    stranger_cert: Path
    stranger_key: Path

    def ssl_conf(self, port: int | None = None) -> dict[str, str]:
        return {"bootstrap.servers": f"127.0.0.1:{port or self.ssl_port}",
                "security.protocol": "SSL", "ssl.ca.location": str(self.ca_file)}

    def scram_conf(self) -> dict[str, str]:
        return {"bootstrap.servers": f"127.0.0.1:{self.sasl_ssl}",
                "security.protocol": "SASL_SSL", "ssl.ca.location": str(self.ca_file),
                "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "tls-user",
                "sasl.password": "tls-pw"}

    def plaintext_still_serves(self) -> None:
        md = AdminClient({"bootstrap.servers": f"127.0.0.1:{self.plain}"}).list_topics(
            timeout=10)
        assert md.brokers


@pytest.fixture(scope="module")
def tls_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsBroker]:
    tmp = tmp_path_factory.mktemp("tls")
    ca, other_ca = trustme.CA(), trustme.CA()
    server = ca.issue_cert("127.0.0.1", "localhost")
    server.private_key_and_cert_chain_pem.write_to_path(str(tmp / "server.pem"))
    ca.cert_pem.write_to_path(str(tmp / "ca.pem"))
    other_ca.cert_pem.write_to_path(str(tmp / "other-ca.pem"))
    client = ca.issue_cert("alice@example.com", common_name="alice")
    client.cert_chain_pems[0].write_to_path(str(tmp / "client.crt"))
    client.private_key_pem.write_to_path(str(tmp / "client.key"))
    stranger = other_ca.issue_cert("mallory@example.com", common_name="mallory")
    stranger.cert_chain_pems[0].write_to_path(str(tmp / "stranger.crt"))
    stranger.private_key_pem.write_to_path(str(tmp / "stranger.key"))
    expired = ca.issue_cert("old@example.com", common_name="old",
                            not_before=datetime.datetime(2020, 1, 1),
                            not_after=datetime.datetime(2021, 1, 1))
    expired.cert_chain_pems[0].write_to_path(str(tmp / "expired.crt"))
    expired.private_key_pem.write_to_path(str(tmp / "expired.key"))
    plain, tls, sasl_ssl, mtls = free_port(), free_port(), free_port(), free_port()
    server_key = server.private_key_pem.bytes().decode()
    server_chain = "".join(p.bytes().decode() for p in server.cert_chain_pems)
    process = BrokerProcess(tmp / "data", port=plain, overrides=(
        f"listeners=PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{tls},"
        f"SASL_SSL://127.0.0.1:{sasl_ssl},MTLS://127.0.0.1:{mtls}",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL,"
        "MTLS:SSL",
        "ssl.keystore.type=PEM",
        f"ssl.keystore.location={tmp / 'server.pem'}",
        # The MTLS listener has its key store inline, and trusts ca.pem for clients.
        f"listener.name.mtls.ssl.keystore.key={server_key}",
        f"listener.name.mtls.ssl.keystore.certificate.chain={server_chain}",
        "listener.name.mtls.ssl.keystore.location=",
        "listener.name.mtls.ssl.truststore.type=PEM",
        f"listener.name.mtls.ssl.truststore.location={tmp / 'ca.pem'}",
        "listener.name.mtls.ssl.client.auth=required",
        "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512",
        f"listener.name.sasl_ssl.plain.sasl.jaas.config={JAAS}",
    )).start()
    broker = TlsBroker(process, plain, tls, sasl_ssl, mtls, tmp / "ca.pem", tmp / "client.crt",
                       tmp / "client.key", tmp / "other-ca.pem", tmp / "stranger.crt",
                       tmp / "stranger.key")
    admin = AdminClient({**broker.scram_conf(), "sasl.mechanism": "PLAIN",
                         "sasl.username": "admin", "sasl.password": "admin-pw"})
    admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        "tls-user", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"tls-pw")]
    )["tls-user"].result(timeout=15)
    try:
        yield broker
    finally:
        process.stop()


def _round_trip(conf: dict[str, str], size: int = 10) -> list[bytes]:
    values = [bytes([65 + i]) * size for i in range(3)]
    got = librdkafka_round_trip(conf, f"tls-{uuid.uuid4().hex[:8]}", values)
    assert got == values
    return got


def test_confluent_kafka_over_ssl_with_large_fetches(tls_broker: TlsBroker) -> None:
    # 300 KiB records: above the sendfile threshold, so the copy path over TLS is used.
    _round_trip(tls_broker.ssl_conf(), size=300 * 1024)


def test_confluent_kafka_over_sasl_ssl_scram_sha_512(tls_broker: TlsBroker) -> None:
    _round_trip(tls_broker.scram_conf())


def test_mtls_with_a_client_certificate(tls_broker: TlsBroker) -> None:
    _round_trip({**tls_broker.ssl_conf(tls_broker.mtls),
                 "ssl.certificate.location": str(tls_broker.client_cert),
                 "ssl.key.location": str(tls_broker.client_key)})


def _tls_socket(port: int, ca: Path, cert: Path | None = None,
                key: Path | None = None) -> ssl.SSLSocket:
    context = ssl.create_default_context(cafile=str(ca))
    if cert is not None:
        context.load_cert_chain(str(cert), str(key))
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    tls = context.wrap_socket(raw, server_hostname="127.0.0.1")
    return tls


def _refused(sock: ssl.SSLSocket) -> bool:
    """TLS 1.3 reports a refused client certificate on the first read."""
    try:
        sock.sendall(b"\0\0\0\0")
        return sock.recv(1) == b""
    except (ssl.SSLError, OSError):
        return True
    finally:
        sock.close()


def test_mtls_required_refuses_a_client_without_certificate(tls_broker: TlsBroker) -> None:
    try:
        sock = _tls_socket(tls_broker.mtls, tls_broker.ca_file)
    except (ssl.SSLError, OSError):
        pass
    else:
        assert _refused(sock)
    admin = AdminClient({**tls_broker.ssl_conf(tls_broker.mtls)})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=3)
    deadline = time.monotonic() + 5
    while "TLS handshake failed with /127.0.0.1 (listener MTLS)" not in \
            tls_broker.process.stderr_text():
        assert time.monotonic() < deadline, "no log line for the refused handshake"
        time.sleep(0.05)
    tls_broker.plaintext_still_serves()


def test_mtls_refuses_a_certificate_of_another_ca(tls_broker: TlsBroker) -> None:
    try:
        sock = _tls_socket(tls_broker.mtls, tls_broker.ca_file, tls_broker.stranger_cert,
                           tls_broker.stranger_key)
    except (ssl.SSLError, OSError):
        pass
    else:
        assert _refused(sock)
    tls_broker.plaintext_still_serves()


def test_mtls_refuses_an_expired_client_certificate(tls_broker: TlsBroker) -> None:
    cert = tls_broker.client_cert.with_name("expired.crt")
    key = tls_broker.client_cert.with_name("expired.key")
    before = tls_broker.process.stderr_text().count("certificate has expired")
    try:
        sock = _tls_socket(tls_broker.mtls, tls_broker.ca_file, cert, key)
    except (ssl.SSLError, OSError):
        pass
    else:
        assert _refused(sock)
    deadline = time.monotonic() + 5  # the broker logs as it closes: allow for the race
    while tls_broker.process.stderr_text().count("certificate has expired") <= before:
        assert time.monotonic() < deadline, "no log line for the expired certificate"
        time.sleep(0.05)
    tls_broker.plaintext_still_serves()


def test_client_refuses_an_untrusted_server_certificate(tls_broker: TlsBroker) -> None:
    with pytest.raises(ssl.SSLCertVerificationError):
        _tls_socket(tls_broker.ssl_port, tls_broker.other_ca_file)
    admin = AdminClient({**tls_broker.ssl_conf(), "ssl.ca.location":
                         str(tls_broker.other_ca_file)})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=3)
    tls_broker.plaintext_still_serves()


def test_tls_hello_on_plaintext_port_closes_that_connection(tls_broker: TlsBroker) -> None:
    with pytest.raises((ssl.SSLError, OSError)):
        _tls_socket(tls_broker.plain, tls_broker.ca_file)
    tls_broker.plaintext_still_serves()


def test_plaintext_request_on_tls_port_closes_that_connection(tls_broker: TlsBroker) -> None:
    from kio.schema.api_versions.v3.request import ApiVersionsRequest

    with WireClient("127.0.0.1", tls_broker.ssl_port) as client:
        client.send_request(ApiVersionsRequest(client_software_name="x",
                                               client_software_version="1"))
        assert client.wait_closed()
    assert "TLS handshake failed with /127.0.0.1 (listener SSL)" in \
        tls_broker.process.stderr_text()
    tls_broker.plaintext_still_serves()


def test_plaintext_produce_on_tls_port_writes_nothing(tls_broker: TlsBroker) -> None:
    with WireClient("127.0.0.1", tls_broker.ssl_port) as client:
        refused_then_nothing_written(client, lambda _client: None, tls_broker.ssl_conf())
    tls_broker.plaintext_still_serves()


def test_truncated_tls_record_closes_that_connection(tls_broker: TlsBroker) -> None:
    # The first bytes of a ClientHello record that announces more than is ever sent.
    sock = socket.create_connection(("127.0.0.1", tls_broker.ssl_port), timeout=10)
    sock.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")
    sock.shutdown(socket.SHUT_WR)
    assert sock.recv(100) == b""
    sock.close()
    tls_broker.plaintext_still_serves()
    _round_trip(tls_broker.ssl_conf())


@pytest.mark.parametrize("protocol", ["SSL", "SASL_SSL"])
def test_kcat_over_ssl(tls_broker: TlsBroker, kcat: str, protocol: str) -> None:
    # Debian's kcat has librdkafka 2.0.2, whose SCRAM final message repeats the client nonce.
    topic = f"kcat-tls-{uuid.uuid4().hex[:8]}"
    port = tls_broker.ssl_port if protocol == "SSL" else tls_broker.sasl_ssl
    args = [kcat, "-b", f"127.0.0.1:{port}", "-X", f"security.protocol={protocol}",
            "-X", f"ssl.ca.location={tls_broker.ca_file}"]
    if protocol == "SASL_SSL":
        args += ["-X", "sasl.mechanism=SCRAM-SHA-512", "-X", "sasl.username=tls-user",
                 "-X", "sasl.password=tls-pw"]
    produced = subprocess.run([*args, "-P", "-t", topic], input="one\ntwo\n", text=True,
                              capture_output=True, timeout=30)
    assert produced.returncode == 0, produced.stderr
    consumed = subprocess.run([*args, "-C", "-t", topic, "-o", "beginning", "-e", "-q"],
                              text=True, capture_output=True, timeout=30)
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.split() == ["one", "two"]


def test_kafka_python_and_aiokafka_over_sasl_ssl(tls_broker: TlsBroker) -> None:
    from aiokafka.helpers import create_ssl_context
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    topic = f"py-tls-{uuid.uuid4().hex[:8]}"
    conf = dict(bootstrap_servers=f"127.0.0.1:{tls_broker.sasl_ssl}",
                security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512",
                sasl_plain_username="tls-user", sasl_plain_password="tls-pw")
    producer = KafkaProducer(**conf, ssl_cafile=str(tls_broker.ca_file))
    producer.send(topic, b"kafka-python").get(timeout=15)
    producer.close()
    consumer = KafkaConsumer(**conf, ssl_cafile=str(tls_broker.ca_file),
                             consumer_timeout_ms=5000, auto_offset_reset="earliest")
    consumer.assign([TopicPartition(topic, 0)])
    assert [m.value for m in consumer] == [b"kafka-python"]
    consumer.close()

    context = create_ssl_context(cafile=str(tls_broker.ca_file))
    assert aiokafka_round_trip(dict(conf, ssl_context=context), topic, b"aiokafka") == [
        b"kafka-python", b"aiokafka"]


def test_cli_quota_over_sasl_ssl_and_mtls(tls_broker: TlsBroker) -> None:
    """``moldau quota``'s raw requests over TLS: SCRAM on SASL_SSL, a client certificate on
    the mTLS listener, and an untrusted server certificate refused in one line."""
    from tests.helpers.cli import run_moldau

    def settings(conf: dict[str, str]) -> list[str]:
        return [part for key, value in conf.items() if key != "bootstrap.servers"
                for part in ("-X", f"{key}={value}")]

    client = f"tls-quota-{uuid.uuid4().hex[:8]}"
    done = run_moldau("quota", "set", "--client-id", client, "--add-config",
                      "consumer_byte_rate=4096", "-b", f"127.0.0.1:{tls_broker.sasl_ssl}",
                      *settings(tls_broker.scram_conf()))
    assert done.returncode == 0, done.stderr
    mtls = {**tls_broker.ssl_conf(tls_broker.mtls),
            "ssl.certificate.location": str(tls_broker.client_cert),
            "ssl.key.location": str(tls_broker.client_key)}
    shown = run_moldau("quota", "describe", "--client-id", client, "-b",
                       f"127.0.0.1:{tls_broker.mtls}", *settings(mtls))
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.strip() == f"client-id={client}  consumer_byte_rate=4096"
    untrusted = {**tls_broker.ssl_conf(), "ssl.ca.location": str(tls_broker.other_ca_file)}
    refused = run_moldau("quota", "describe", "-b", f"127.0.0.1:{tls_broker.ssl_port}",
                         *settings(untrusted), "--timeout", "5")
    assert refused.returncode != 0 and "CERTIFICATE_VERIFY_FAILED" in refused.stderr, \
        refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
