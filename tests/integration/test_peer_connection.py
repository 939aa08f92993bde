"""The inter-broker connector against a real broker, one mechanism at a time: PLAIN, SCRAM and
OAUTHBEARER logins, re-authentication before the broker's ``connections.max.reauth.ms`` ends
the session, refused credentials, and TLS whose host name check or trust fails."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trustme
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from kio.schema.metadata.v12.request import MetadataRequest

from moldau.broker.peer_connection import PeerAuthenticationError, PeerConnector
from moldau.config import BrokerConfig
from tests.helpers.broker_process import BrokerProcess, free_port

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="peer" password="peer-pw" user_peer="peer-pw";')
METADATA = MetadataRequest(topics=None, allow_auto_topic_creation=False,
                           include_topic_authorized_operations=False)
REAUTH_MS = 1500


@dataclass
class Target:
    process: BrokerProcess
    plain: int
    sasl: int
    tls: int
    ca: Path
    other_ca: Path


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    tmp = tmp_path_factory.mktemp("peer")
    ca, other = trustme.CA(), trustme.CA()
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(
        str(tmp / "server.pem"))
    ca.cert_pem.write_to_path(str(tmp / "ca.pem"))
    other.cert_pem.write_to_path(str(tmp / "other.pem"))
    plain, sasl, tls = free_port(), free_port(), free_port()
    process = BrokerProcess(tmp / "data", port=plain, overrides=(
        f"listeners=PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl},"
        f"SSL://127.0.0.1:{tls}",
        "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512,OAUTHBEARER",
        f"listener.name.sasl_plaintext.plain.sasl.jaas.config={PLAIN_JAAS}",
        f"connections.max.reauth.ms={REAUTH_MS}",
        "ssl.keystore.type=PEM", f"ssl.keystore.location={tmp / 'server.pem'}",
    )).start()
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{plain}"})
    admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion("peer", ScramCredentialInfo(
            ScramMechanism.SCRAM_SHA_512, 4096), b"peer-pw")])["peer"].result(timeout=15)
    try:
        yield Target(process, plain, sasl, tls, tmp / "ca.pem", tmp / "other.pem")
    finally:
        process.stop()


def _connector(port: int, protocol: str, **settings: str) -> PeerConnector:
    return PeerConnector(BrokerConfig({
        "listeners": f"PEER://127.0.0.1:{port}",
        "listener.security.protocol.map": f"PEER:{protocol}",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512,OAUTHBEARER", **settings}))


def _sasl(target: Target, mechanism: str, jaas: str) -> PeerConnector:
    return _connector(target.sasl, "SASL_PLAINTEXT", **{
        "sasl.mechanism.inter.broker.protocol": mechanism,
        f"listener.name.peer.{mechanism.lower()}.sasl.jaas.config": jaas})


async def _two_requests(connector: PeerConnector, port: int, pause_s: float) -> list[Any]:
    conn = await connector.connect(("127.0.0.1", port), 10)
    try:
        first = await conn.request(METADATA)
        await asyncio.sleep(pause_s)
        return [first, await conn.request(METADATA)]
    finally:
        conn.close()


@pytest.mark.parametrize(("mechanism", "jaas"), [
    ("PLAIN", 'x required username="peer" password="peer-pw";'),
    ("SCRAM-SHA-512", 'x required username="peer" password="peer-pw";'),
    ("OAUTHBEARER", 'x required unsecuredLoginStringClaim_sub="peer" '
                    'unsecuredLoginLifetimeSeconds="60";'),
])
def test_login_and_reauthentication(target: Target, mechanism: str, jaas: str) -> None:
    # The pause outlasts the broker's session: the second request is served only because the
    # connector re-authenticated on the same connection first.
    answers = asyncio.run(_two_requests(_sasl(target, mechanism, jaas), target.sasl,
                                        REAUTH_MS / 1000 + 0.3))
    assert all(a.brokers for a in answers)
    log = target.process.stderr_text()
    assert "did not re-authenticate" not in log


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_wrong_password_is_refused(target: Target, mechanism: str) -> None:
    connector = _sasl(target, mechanism, 'x required username="peer" password="nope";')
    with pytest.raises(PeerAuthenticationError, match=f"refused this broker's {mechanism}"):
        asyncio.run(_two_requests(connector, target.sasl, 0))


def test_tls_peer_verified_by_the_listener_trust_store(target: Target) -> None:
    connector = _connector(target.tls, "SSL", **{
        "listener.name.peer.ssl.truststore.location": str(target.ca)})
    assert all(a.brokers for a in asyncio.run(_two_requests(connector, target.tls, 0)))


def test_tls_peer_with_an_untrusted_certificate_is_refused(target: Target) -> None:
    connector = _connector(target.tls, "SSL", **{
        "listener.name.peer.ssl.truststore.location": str(target.other_ca)})
    with pytest.raises(ssl.SSLCertVerificationError):
        asyncio.run(_two_requests(connector, target.tls, 0))


def test_tls_host_name_is_checked_unless_identification_is_off(target: Target) -> None:
    # The certificate names 127.0.0.1 only; reached as "localhost" it does not match.
    trust = {"listener.name.peer.ssl.truststore.location": str(target.ca)}

    async def via_localhost(connector: PeerConnector) -> Any:
        conn = await connector.connect(("localhost", target.tls), 10)
        try:
            return await conn.request(METADATA)
        finally:
            conn.close()

    with pytest.raises(ssl.SSLCertVerificationError, match="match"):
        asyncio.run(via_localhost(_connector(target.tls, "SSL", **trust)))
    off = _connector(target.tls, "SSL", **trust,
                     **{"ssl.endpoint.identification.algorithm": ""})
    assert asyncio.run(via_localhost(off)).brokers


def test_refused_oauthbearer_token_is_an_authentication_error(target: Target) -> None:
    # An expired token: the broker answers the error JSON, then fails the exchange.
    connector = _sasl(target, "OAUTHBEARER", 'x required unsecuredLoginStringClaim_sub="peer" '
                      'unsecuredLoginLifetimeSeconds="-10";')
    with pytest.raises(PeerAuthenticationError, match='"status":"invalid_token"'):
        asyncio.run(_two_requests(connector, target.sasl, 0))
