"""SASL_PLAINTEXT listeners: PLAIN (JAAS users) and SCRAM-SHA-256/512 (salted credentials made
with AlterUserScramCredentials), with confluent-kafka, kafka-python and aiokafka, and the bad
input Kafka refuses: wrong passwords, unknown mechanisms, garbage tokens, requests before
authentication. The broker's PLAINTEXT listener keeps serving throughout."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from tests.conftest import MakeBroker
from tests.helpers.broker_process import BrokerProcess, free_port
from tests.helpers.names import unique_topic_name
from tests.integration.unauthenticated_writes import refused_then_nothing_written
from tests.integration.wire import ConnectionClosed, WireClient

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'username="admin" password="admin-pw" user_admin="admin-pw" user_alice="alice-pw";')


class SaslBroker:
    def __init__(self, process: BrokerProcess, plain: int, sasl: int) -> None:
        self.process, self.plain, self.sasl = process, plain, sasl

    def conf(self, mechanism: str, user: str, password: str) -> dict[str, str]:
        return {"bootstrap.servers": f"127.0.0.1:{self.sasl}",
                "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
                "sasl.username": user, "sasl.password": password}


@pytest.fixture(scope="module")
def sasl_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SaslBroker]:
    plain, sasl = free_port(), free_port()
    process = BrokerProcess(tmp_path_factory.mktemp("sasl"), port=sasl, overrides=(
        f"listeners=PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        f"listener.name.sasl_plaintext.plain.sasl.jaas.config={JAAS}",
        "offsets.topic.replication.factor=1",
    )).start()
    broker = SaslBroker(process, plain, sasl)
    admin = AdminClient(broker.conf("PLAIN", "admin", "admin-pw"))
    futures = admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion("scram-user", ScramCredentialInfo(
            ScramMechanism.SCRAM_SHA_512, 4096), b"scram-pw", b"salt-of-scram-user"),
        UserScramCredentialUpsertion("scram-user", ScramCredentialInfo(
            ScramMechanism.SCRAM_SHA_256, 8192), b"scram-pw"),
    ])
    for future in futures.values():
        future.result(timeout=15)
    try:
        yield broker
    finally:
        process.stop()


def _round_trip(conf: dict[str, str]) -> list[bytes]:
    topic = f"sasl-{uuid.uuid4().hex[:8]}"
    producer = Producer(conf)
    for i in range(3):
        producer.produce(topic, value=f"v{i}".encode())
    assert producer.flush(15) == 0
    consumer = Consumer({**conf, "group.id": topic, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    values: list[bytes] = []
    try:
        for _ in range(60):
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                values.append(msg.value())
            if len(values) == 3:
                break
    finally:
        consumer.close()
    return values


@pytest.mark.parametrize(("mechanism", "user", "password"), [
    ("PLAIN", "alice", "alice-pw"),
    ("SCRAM-SHA-256", "scram-user", "scram-pw"),
    ("SCRAM-SHA-512", "scram-user", "scram-pw"),
])
def test_confluent_kafka_round_trip(sasl_broker: SaslBroker, mechanism: str, user: str,
                                    password: str) -> None:
    values = _round_trip(sasl_broker.conf(mechanism, user, password))
    assert values == [b"v0", b"v1", b"v2"]


@pytest.mark.parametrize(("mechanism", "user", "password"), [
    ("PLAIN", "alice", "wrong"),
    ("PLAIN", "nobody", "alice-pw"),
    ("SCRAM-SHA-512", "scram-user", "wrong"),
    ("SCRAM-SHA-512", "nobody", "scram-pw"),
])
def test_wrong_credentials_fail_without_a_hint(sasl_broker: SaslBroker, mechanism: str,
                                               user: str, password: str) -> None:
    admin = AdminClient({**sasl_broker.conf(mechanism, user, password)})
    with pytest.raises(KafkaException) as info:
        admin.list_topics(timeout=5)
    text = str(info.value)
    assert "Authentication failed" in text or "_AUTHENTICATION" in text or \
        "_TRANSPORT" in text or "timed out" in text.lower()
    assert "SASL mechanism" not in text or "invalid credentials" in text
    stderr = sasl_broker.process.stderr_text()
    assert f"Failed authentication with /127.0.0.1 (listener SASL_PLAINTEXT, {mechanism})" \
        in stderr
    # The plaintext listener kept serving.
    md = AdminClient({"bootstrap.servers": f"127.0.0.1:{sasl_broker.plain}"}).list_topics(
        timeout=10)
    assert md.brokers


def _wire(sasl_broker: SaslBroker) -> WireClient:
    return WireClient("127.0.0.1", sasl_broker.sasl)


def test_wrong_scram_password_on_the_wire(sasl_broker: SaslBroker) -> None:
    with _wire(sasl_broker) as client:
        assert client.request(SaslHandshakeRequest(mechanism="SCRAM-SHA-512")).error_code == 0
        first = client.request(SaslAuthenticateRequest(auth_bytes=b"n,,n=scram-user,r=abc"))
        assert first.error_code == 0 and first.auth_bytes.startswith(b"r=abc")
        nonce = first.auth_bytes.split(b",")[0][2:]
        final = b"c=biws,r=" + nonce + b",p=" + b"A" * 88
        answer = client.request(SaslAuthenticateRequest(auth_bytes=final))
        assert answer.error_code == 58  # SASL_AUTHENTICATION_FAILED
        assert answer.error_message == ("Authentication failed during authentication due to "
                                        "invalid credentials with SASL mechanism SCRAM-SHA-512")
        assert client.wait_closed()


def test_garbage_token_fails_and_closes(sasl_broker: SaslBroker) -> None:
    with _wire(sasl_broker) as client:
        client.request(SaslHandshakeRequest(mechanism="SCRAM-SHA-256"))
        answer = client.request(SaslAuthenticateRequest(auth_bytes=b"\xff\x00garbage"))
        assert answer.error_code == 58
        assert client.wait_closed()


def test_unknown_mechanism_is_refused_and_closes(sasl_broker: SaslBroker) -> None:
    with _wire(sasl_broker) as client:
        answer = client.request(SaslHandshakeRequest(mechanism="GSSAPI"))
        assert answer.error_code == 33  # UNSUPPORTED_SASL_MECHANISM
        assert set(answer.mechanisms) == {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}
        assert client.wait_closed()


def test_request_before_authentication_closes(sasl_broker: SaslBroker) -> None:
    with _wire(sasl_broker) as client, pytest.raises(ConnectionClosed):
        client.request(MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                       include_topic_authorized_operations=False))
    assert "during SASL handshake" in sasl_broker.process.stderr_text()


def test_authenticate_before_handshake_is_refused(sasl_broker: SaslBroker) -> None:
    with _wire(sasl_broker) as client:
        answer = client.request(SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-pw"))
        assert answer.error_code == 34  # ILLEGAL_SASL_STATE
        assert client.wait_closed()


def test_handshake_on_plaintext_listener_is_illegal(sasl_broker: SaslBroker) -> None:
    with WireClient("127.0.0.1", sasl_broker.plain) as client:
        answer = client.request(SaslHandshakeRequest(mechanism="PLAIN"))
        assert answer.error_code == 34
        answer = client.request(SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-pw"))
        assert answer.error_code == 34
        # As in Kafka, the connection stays open for its other requests.
        md = client.request(MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                            include_topic_authorized_operations=False))
        assert [b.port for b in md.brokers] == [sasl_broker.plain]


def test_describe_and_delete_credentials(sasl_broker: SaslBroker) -> None:
    admin = AdminClient(sasl_broker.conf("PLAIN", "admin", "admin-pw"))
    described = admin.describe_user_scram_credentials(["scram-user"])["scram-user"].result(
        timeout=10)
    infos = {(i.mechanism, i.iterations) for i in described.scram_credential_infos}
    assert infos == {(ScramMechanism.SCRAM_SHA_512, 4096), (ScramMechanism.SCRAM_SHA_256, 8192)}
    admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        "temp", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"pw")])["temp"] \
        .result(timeout=10)
    admin.alter_user_scram_credentials([UserScramCredentialDeletion(
        "temp", ScramMechanism.SCRAM_SHA_256)])["temp"].result(timeout=10)
    with pytest.raises(KafkaException, match=r"RESOURCE_NOT_FOUND|does not exist"):
        admin.describe_user_scram_credentials(["temp"])["temp"].result(timeout=10)
    with pytest.raises(KafkaException, match="does not exist"):
        admin.alter_user_scram_credentials([UserScramCredentialDeletion(
            "temp", ScramMechanism.SCRAM_SHA_256)])["temp"].result(timeout=10)
    with pytest.raises(KafkaException, match="Too few iterations"):
        admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
            "x", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 100), b"pw")])["x"] \
            .result(timeout=10)


def test_credentials_are_stored_salted(sasl_broker: SaslBroker) -> None:
    text = (Path(sasl_broker.process.data_dir) / "moldau-metadata.json").read_text()
    assert "scram-pw" not in text
    assert "stored_key=" in text and "server_key=" in text


def test_kafka_python_scram(sasl_broker: SaslBroker) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    topic = f"kp-{uuid.uuid4().hex[:8]}"
    conf = dict(bootstrap_servers=f"127.0.0.1:{sasl_broker.sasl}",
                security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-256",
                sasl_plain_username="scram-user", sasl_plain_password="scram-pw")
    producer = KafkaProducer(**conf)
    producer.send(topic, b"hello").get(timeout=15)
    producer.close()
    consumer = KafkaConsumer(**conf, consumer_timeout_ms=5000, auto_offset_reset="earliest")
    consumer.assign([TopicPartition(topic, 0)])
    values = [msg.value for msg in consumer]
    consumer.close()
    assert values == [b"hello"]


def test_aiokafka_scram_and_plain(sasl_broker: SaslBroker) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    async def run(mechanism: str, user: str, password: str) -> list[bytes]:
        topic = f"aio-{uuid.uuid4().hex[:8]}"
        conf = dict(bootstrap_servers=f"127.0.0.1:{sasl_broker.sasl}",
                    security_protocol="SASL_PLAINTEXT", sasl_mechanism=mechanism,
                    sasl_plain_username=user, sasl_plain_password=password)
        producer = AIOKafkaProducer(**conf)
        await producer.start()
        try:
            await producer.send_and_wait(topic, b"aio")
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(**conf, auto_offset_reset="earliest")
        await consumer.start()
        try:
            consumer.assign([TopicPartition(topic, 0)])
            batch = await consumer.getmany(timeout_ms=5000)
        finally:
            await consumer.stop()
        return [m.value for msgs in batch.values() for m in msgs if m.value is not None]

    assert asyncio.run(run("SCRAM-SHA-512", "scram-user", "scram-pw")) == [b"aio"]
    assert asyncio.run(run("PLAIN", "alice", "alice-pw")) == [b"aio"]


def test_handshake_v0_then_raw_plain_token(sasl_broker: SaslBroker) -> None:
    """SaslHandshake v0: the token follows as a bare length-prefixed frame, answered alike."""
    from kio.schema.sasl_handshake.v0.request import SaslHandshakeRequest as HandshakeV0

    from tests.integration.wire import frame

    with _wire(sasl_broker) as client:
        assert client.request(HandshakeV0(mechanism="PLAIN")).error_code == 0
        client.send_raw(frame(b"\0alice\0alice-pw"))
        assert client.read_frame() == b""  # PLAIN answers an empty token
        md = client.request(MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                            include_topic_authorized_operations=False))
        assert [b.port for b in md.brokers] == [sasl_broker.sasl]
    with _wire(sasl_broker) as client:
        client.request(HandshakeV0(mechanism="PLAIN"))
        client.send_raw(frame(b"\0alice\0wrong"))
        assert client.wait_closed()


def test_cli_user_add_list_delete(sasl_broker: SaslBroker, tmp_path: Path) -> None:
    from tests.helpers.cli import run_moldau

    # Through the SASL listener, authenticated as the PLAIN admin with a command config.
    config = tmp_path / "admin.properties"
    config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                      "sasl.username=admin\nsasl.password=admin-pw\n")
    sasl = ["-b", f"127.0.0.1:{sasl_broker.sasl}", "--command-config", str(config)]
    added = run_moldau("user", "add", "bob", "--password", "bob-pw", "--mechanism",
                       "SCRAM-SHA-256", *sasl)
    assert added.returncode == 0, added.stderr
    assert added.stdout.strip() == "User bob: SCRAM-SHA-256 credentials set (4096 iterations)"
    listed = run_moldau("user", "list", "-b", f"127.0.0.1:{sasl_broker.plain}")
    assert "bob  SCRAM-SHA-256 (4096 iterations)" in listed.stdout, listed.stderr
    values = _round_trip(sasl_broker.conf("SCRAM-SHA-256", "bob", "bob-pw"))
    assert values == [b"v0", b"v1", b"v2"]
    deleted = run_moldau("user", "delete", "bob", *sasl)
    assert deleted.returncode == 0, deleted.stderr
    again = run_moldau("user", "delete", "bob", *sasl)
    assert again.returncode != 0
    assert len(again.stderr.strip().splitlines()) == 1 and "bob" in again.stderr
    assert "Traceback" not in again.stderr
    # The CLI itself with wrong credentials: one clear line, no traceback.
    wrong = run_moldau("user", "list", "-b", f"127.0.0.1:{sasl_broker.sasl}",
                       "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanism=PLAIN",
                       "-X", "sasl.username=admin", "-X", "sasl.password=nope",
                       "--timeout", "3")
    assert wrong.returncode != 0 and "Traceback" not in wrong.stderr


def test_session_lifetime_and_reauthentication(make_broker: MakeBroker) -> None:
    """KIP-368: SaslAuthenticate v1+ says how long the session lasts; a client that does not
    re-authenticate in time is disconnected at its next request, one that does carries on."""
    port = free_port()
    make_broker(f"listeners=SASL_PLAINTEXT://127.0.0.1:{port}", "sasl.enabled.mechanisms=PLAIN",
                f"listener.name.sasl_plaintext.plain.sasl.jaas.config={JAAS}",
                "connections.max.reauth.ms=1500", port=port)
    metadata = MetadataRequest(topics=None, allow_auto_topic_creation=False,
                               include_topic_authorized_operations=False)

    def authenticate(client: WireClient) -> Any:
        assert client.request(SaslHandshakeRequest(mechanism="PLAIN")).error_code == 0
        return client.request(SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-pw"))

    with WireClient("127.0.0.1", port) as client:
        answer = authenticate(client)
        assert answer.error_code == 0
        assert answer.session_lifetime.total_seconds() == 1.5
        client.request(metadata)
        time.sleep(1.0)
        assert authenticate(client).error_code == 0  # re-authenticated in time
        time.sleep(1.0)
        client.request(metadata)  # 2 s after the first authentication: still served
    with WireClient("127.0.0.1", port) as client:
        authenticate(client)
        time.sleep(1.7)
        with pytest.raises(ConnectionClosed):
            client.request(metadata)


def _bad_handshake(mechanism: str) -> Callable[[WireClient], None]:
    def send(client: WireClient) -> None:
        assert client.request(SaslHandshakeRequest(mechanism=mechanism)).error_code == 33
    return send


def _bad_token(mechanism: str, token: bytes) -> Callable[[WireClient], None]:
    def send(client: WireClient) -> None:
        assert client.request(SaslHandshakeRequest(mechanism=mechanism)).error_code == 0
        assert client.request(SaslAuthenticateRequest(auth_bytes=token)).error_code == 58
    return send


@pytest.mark.parametrize("bad_input", [
    _bad_token("SCRAM-SHA-512", b"\xff\x00garbage"),
    _bad_token("PLAIN", b"\0alice\0wrong-pw"),
    _bad_handshake("GSSAPI"),
], ids=["garbage-scram-token", "wrong-plain-password", "unknown-mechanism"])
def test_refused_client_writes_nothing_and_others_are_served(
        sasl_broker: SaslBroker, bad_input: Callable[[WireClient], None]) -> None:
    good = sasl_broker.conf("PLAIN", "alice", "alice-pw")
    with _wire(sasl_broker) as client:
        refused_then_nothing_written(client, bad_input, good)
    assert AdminClient({"bootstrap.servers": f"127.0.0.1:{sasl_broker.plain}"}).list_topics(
        timeout=10).brokers


def test_cli_quota_over_sasl_plain_and_scram(sasl_broker: SaslBroker, tmp_path: Path) -> None:
    """``moldau quota`` sends raw requests; over a SASL listener it authenticates itself."""
    from tests.helpers.cli import run_moldau

    config = tmp_path / "scram.properties"
    config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
                      "sasl.username=scram-user\nsasl.password=scram-pw\n")
    sasl = ["-b", f"127.0.0.1:{sasl_broker.sasl}"]
    client = unique_topic_name("sasl-quota")
    done = run_moldau("quota", "set", "--client-id", client, "--add-config",
                      "producer_byte_rate=2048", *sasl, "--command-config", str(config))
    assert done.returncode == 0, done.stderr
    def settings(mechanism: str, password: str) -> list[str]:
        return ["-X", "security.protocol=SASL_PLAINTEXT", "-X", f"sasl.mechanism={mechanism}",
                "-X", "sasl.username=admin", "-X", f"sasl.password={password}"]

    shown = run_moldau("quota", "describe", "--client-id", client, *sasl,
                       *settings("PLAIN", "admin-pw"))
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.strip() == f"client-id={client}  producer_byte_rate=2048", shown.stdout
    # The change went to the broker: the plaintext listener shows it too.
    assert client in run_moldau("quota", "describe", "-b",
                                f"127.0.0.1:{sasl_broker.plain}").stdout
    # Refusals are one line each, and change nothing.
    for wrong, wanted in ((settings("PLAIN", "nope"), "refused"),
                          (settings("SCRAM-SHA-256", "nope"), "refused"),
                          (settings("GSSAPI", "admin-pw"), "GSSAPI")):
        result = run_moldau("quota", "set", "--client-id", client, "--add-config",
                            "producer_byte_rate=1", *sasl, *wrong, "--timeout", "5")
        assert result.returncode != 0 and wanted in result.stderr, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    # Without SASL settings the SASL listener closes the connection: one line as well.
    bare = run_moldau("quota", "describe", *sasl, "--timeout", "5")
    assert bare.returncode != 0 and len(bare.stderr.strip().splitlines()) == 1, bare.stderr
    assert "producer_byte_rate=2048" in run_moldau(
        "quota", "describe", "--client-id", client, "-b",
        f"127.0.0.1:{sasl_broker.plain}").stdout


def test_cli_transaction_over_sasl_scram(sasl_broker: SaslBroker, tmp_path: Path) -> None:
    """``moldau transaction list|describe|abort`` and ``moldau cluster log-dirs`` on a SASL
    listener: the metadata and the raw requests (ListTransactions, FindCoordinator,
    DescribeTransactions, DescribeProducers, WriteTxnMarkers, DescribeLogDirs) all
    authenticate with the command config."""
    from tests.helpers.cli import run_moldau

    config = tmp_path / "scram.properties"
    config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
                      "sasl.username=scram-user\nsasl.password=scram-pw\n")
    secured = ["-b", f"127.0.0.1:{sasl_broker.sasl}", "--command-config", str(config)]
    topic = unique_topic_name("sasl-txn")
    transactional_id = f"hanging-{uuid.uuid4().hex[:8]}"
    producer = Producer(sasl_broker.conf("SCRAM-SHA-512", "scram-user", "scram-pw")
                        | {"transactional.id": transactional_id})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, b"left open", partition=0)
    assert producer.flush(30) == 0  # written, never committed: the transaction hangs
    listed = run_moldau("transaction", "list", *secured)
    assert listed.returncode == 0, listed.stderr
    assert transactional_id in listed.stdout and "Ongoing" in listed.stdout, listed.stdout
    described = run_moldau("transaction", "describe", transactional_id, *secured)
    assert described.returncode == 0, described.stderr
    assert "Ongoing" in described.stdout and topic in described.stdout, described.stdout
    # A wrong password is one line and aborts nothing.
    wrong = run_moldau("transaction", "abort", "--topic", topic, "--partition", "0",
                       "--start-offset", "0", "-b", f"127.0.0.1:{sasl_broker.sasl}",
                       "-X", "security.protocol=SASL_PLAINTEXT",
                       "-X", "sasl.mechanism=SCRAM-SHA-512", "-X", "sasl.username=scram-user",
                       "-X", "sasl.password=nope", "--timeout", "5")
    assert wrong.returncode != 0 and len(wrong.stderr.strip().splitlines()) == 1, wrong.stderr
    aborted = run_moldau("transaction", "abort", "--topic", topic, "--partition", "0",
                         "--start-offset", "0", *secured)
    assert aborted.returncode == 0, aborted.stderr
    assert "Aborted the transaction" in aborted.stdout, aborted.stdout
    # The partition is stable again: a read_committed consumer reaches its end.
    consumer = Consumer({"bootstrap.servers": f"127.0.0.1:{sasl_broker.plain}",
                         "group.id": topic, "isolation.level": "read_committed"})
    try:
        _, end = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        assert end == 2, f"last stable offset {end}: the ABORT marker closes the transaction"
    finally:
        consumer.close()
    # The cluster tool's raw requests (DescribeLogDirs here) authenticate the same way.
    dirs = run_moldau("cluster", "log-dirs", "--topic", topic, *secured)
    assert dirs.returncode == 0, dirs.stderr
    assert f"{topic}" in dirs.stdout, dirs.stdout
