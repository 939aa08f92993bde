"""SASL/OAUTHBEARER with unsecured JWS tokens (Kafka's development-only validator):
confluent-kafka (librdkafka's unsecured JWT builder), kafka-python and aiokafka (token
providers); bad tokens answered with RFC 7628's error JSON, then SASL_AUTHENTICATION_FAILED,
the connection closed, one log line with the client address, and everyone else served; the
token's expiry bounds the session (KIP-368)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from tests.conftest import MakeBroker
from tests.helpers.broker_process import BrokerProcess, free_port
from tests.helpers.round_trips import aiokafka_round_trip, librdkafka_round_trip
from tests.helpers.unsecured_jwt import client_first_message, encode_part, unsecured_token
from tests.integration.unauthenticated_writes import refused_then_nothing_written
from tests.integration.wire import ConnectionClosed, WireClient

JAAS = ('org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required '
        'unsecuredValidatorRequiredScope="kafka" unsecuredValidatorAllowableClockSkewMs="1000";')
METADATA = MetadataRequest(topics=None, allow_auto_topic_creation=False,
                           include_topic_authorized_operations=False)


class OAuthBroker:
    def __init__(self, process: BrokerProcess, plain: int, sasl: int) -> None:
        self.process, self.plain, self.sasl = process, plain, sasl

    def librdkafka(self, principal: str = "alice", scope: str = "kafka") -> dict[str, Any]:
        return {"bootstrap.servers": f"127.0.0.1:{self.sasl}",
                "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
                "enable.sasl.oauthbearer.unsecure.jwt": True,
                "sasl.oauthbearer.config": f"principal={principal} scope={scope}"}

    def others_served(self) -> None:
        """The plaintext listener and a good OAUTHBEARER client are still served."""
        assert AdminClient({"bootstrap.servers": f"127.0.0.1:{self.plain}"}).list_topics(
            timeout=10).brokers
        assert AdminClient(self.librdkafka()).list_topics(timeout=10).brokers


@pytest.fixture(scope="module")
def oauth_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OAuthBroker]:
    plain, sasl = free_port(), free_port()
    process = BrokerProcess(tmp_path_factory.mktemp("oauth"), port=plain, overrides=(
        f"listeners=PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "sasl.enabled.mechanisms=OAUTHBEARER",
        f"listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config={JAAS}",
        "offsets.topic.replication.factor=1",
    ), env={"MOLDAU_LOG_LEVEL": "DEBUG"}).start()
    try:
        yield OAuthBroker(process, plain, sasl)
    finally:
        process.stop()


def test_confluent_kafka_round_trip(oauth_broker: OAuthBroker) -> None:
    conf = oauth_broker.librdkafka("alice")
    values = [b"v0", b"v1", b"v2"]
    assert librdkafka_round_trip(conf, f"oauth-{uuid.uuid4().hex[:8]}", values) == values
    assert "on listener SASL_PLAINTEXT as User:alice (OAUTHBEARER)" in \
        oauth_broker.process.stderr_text()


def test_librdkafka_without_the_required_scope_fails(oauth_broker: OAuthBroker) -> None:
    admin = AdminClient(oauth_broker.librdkafka("mallory", scope="other"))
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=3)
    oauth_broker.others_served()


def test_kafka_python_and_aiokafka(oauth_broker: OAuthBroker) -> None:
    from aiokafka.abc import AbstractTokenProvider
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.net.sasl.oauth import AbstractTokenProvider as KafkaPythonTokenProvider

    class Tokens(KafkaPythonTokenProvider):
        def token(self) -> str:
            return unsecured_token("bob", scope=["kafka"])

    topic = f"oauth-py-{uuid.uuid4().hex[:8]}"
    server = f"127.0.0.1:{oauth_broker.sasl}"
    conf = dict(bootstrap_servers=server, security_protocol="SASL_PLAINTEXT",
                sasl_mechanism="OAUTHBEARER", sasl_oauth_token_provider=Tokens())
    producer = KafkaProducer(**conf)
    producer.send(topic, b"kafka-python").get(timeout=15)
    producer.close()
    consumer = KafkaConsumer(**conf, consumer_timeout_ms=5000, auto_offset_reset="earliest")
    consumer.assign([TopicPartition(topic, 0)])
    assert [m.value for m in consumer] == [b"kafka-python"]
    consumer.close()

    class AioTokens(AbstractTokenProvider):
        async def token(self) -> str:
            return unsecured_token("carol", scope="kafka")

    aio_conf = dict(conf, sasl_oauth_token_provider=AioTokens())
    assert aiokafka_round_trip(aio_conf, topic, b"aiokafka") == [b"kafka-python", b"aiokafka"]
    log = oauth_broker.process.stderr_text()
    assert "as User:bob (OAUTHBEARER)" in log and "as User:carol (OAUTHBEARER)" in log


# Tokens are made when the test runs (they carry iat/exp), not when it is collected.
@pytest.mark.parametrize(("make_token", "reason", "status"), [
    (lambda: f"{encode_part(b'{not json')}.{encode_part({'sub': 'x'})}.", "malformed",
     '{"status":"invalid_token"}'),
    (lambda: unsecured_token(header={"alg": "HS256"}, scope="kafka"), "'none' for an algorithm",
     '{"status":"invalid_token"}'),
    (lambda: unsecured_token(lifetime_s=-60, iat=int(time.time()) - 120, scope="kafka"),
     "on or after the Expiration Time", '{"status":"invalid_token"}'),
    (lambda: unsecured_token(sub=None, scope="kafka"), "Required claim missing: sub",
     '{"status":"invalid_token"}'),
    (lambda: unsecured_token(scope="read"), "missing a required scope",
     '{"status":"insufficient_scope", "scope":"[kafka]"}'),
])
def test_bad_token_gets_the_error_json_then_fails(oauth_broker: OAuthBroker,
                                                  make_token: Callable[[], str],
                                                  reason: str, status: str) -> None:
    token = make_token()
    with WireClient("127.0.0.1", oauth_broker.sasl) as client:
        assert client.request(SaslHandshakeRequest(mechanism="OAUTHBEARER")).error_code == 0
        challenge = client.request(SaslAuthenticateRequest(
            auth_bytes=client_first_message(token)))
        assert challenge.error_code == 0 and challenge.auth_bytes == status.encode()
        answer = client.request(SaslAuthenticateRequest(auth_bytes=b"\x01"))
        assert answer.error_code == 58  # SASL_AUTHENTICATION_FAILED
        assert answer.error_message == status
        assert client.wait_closed()
    deadline = time.monotonic() + 5
    while not any("Failed authentication with /127.0.0.1" in line and reason in line
                  for line in oauth_broker.process.stderr_text().splitlines()):
        assert time.monotonic() < deadline, f"no log line for {reason!r}"
        time.sleep(0.05)
    oauth_broker.others_served()


def test_refused_token_writes_nothing(oauth_broker: OAuthBroker) -> None:
    def bad_input(client: WireClient) -> None:
        client.request(SaslHandshakeRequest(mechanism="OAUTHBEARER"))
        token = unsecured_token(header={"alg": "HS256"}, scope="kafka")
        client.request(SaslAuthenticateRequest(auth_bytes=client_first_message(token)))
        assert client.request(SaslAuthenticateRequest(auth_bytes=b"\x01")).error_code == 58

    with WireClient("127.0.0.1", oauth_broker.sasl) as client:
        refused_then_nothing_written(client, bad_input, oauth_broker.librdkafka())


def test_garbage_client_message_fails_with_kafkas_words(oauth_broker: OAuthBroker) -> None:
    with WireClient("127.0.0.1", oauth_broker.sasl) as client:
        client.request(SaslHandshakeRequest(mechanism="OAUTHBEARER"))
        answer = client.request(SaslAuthenticateRequest(auth_bytes=b"\xff\x00garbage"))
        assert answer.error_code == 58
        assert answer.error_message == ("Authentication failed during authentication due to "
                                        "invalid credentials with SASL mechanism OAUTHBEARER")
        assert client.wait_closed()
    oauth_broker.others_served()


def test_token_expiry_bounds_the_session(make_broker: MakeBroker) -> None:
    """With connections.max.reauth.ms unset (0) the token's exp alone bounds the session, as
    Kafka's authenticator does; a client that does not re-authenticate is disconnected."""
    port = free_port()
    make_broker(f"listeners=SASL_PLAINTEXT://127.0.0.1:{port}",
                "sasl.enabled.mechanisms=OAUTHBEARER", port=port)

    def authenticate(client: WireClient, lifetime_s: float) -> Any:
        assert client.request(SaslHandshakeRequest(mechanism="OAUTHBEARER")).error_code == 0
        return client.request(SaslAuthenticateRequest(auth_bytes=client_first_message(
            unsecured_token("dave", lifetime_s=lifetime_s))))

    with WireClient("127.0.0.1", port) as client:
        answer = authenticate(client, 2)
        assert answer.error_code == 0
        assert 0 < answer.session_lifetime.total_seconds() <= 2
        client.request(METADATA)
        time.sleep(1.0)
        assert authenticate(client, 60).error_code == 0  # re-authenticated with a new token
        time.sleep(1.5)
        client.request(METADATA)  # past the first token's expiry: still served
        assert client.request(METADATA).brokers
    with WireClient("127.0.0.1", port) as client:
        assert authenticate(client, 2).error_code == 0
        time.sleep(2.3)
        with pytest.raises(ConnectionClosed):
            client.request(METADATA)
