"""Listener TLS contexts from Kafka's PEM keys."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
import trustme

from moldau.config import BrokerConfig, ConfigError
from moldau.config.tls import server_context

LISTENERS = {"listeners": "SSL://127.0.0.1:9093"}


def test_keystore_file_and_client_auth(tmp_path: Path) -> None:
    ca = trustme.CA()
    ca.issue_cert("localhost").private_key_and_cert_chain_pem.write_to_path(
        str(tmp_path / "server.pem"))
    config = BrokerConfig({**LISTENERS, "ssl.keystore.type": "PEM",
                           "ssl.keystore.location": str(tmp_path / "server.pem"),
                           "ssl.truststore.type": "PEM",
                           "ssl.truststore.certificates": ca.cert_pem.bytes().decode(),
                           "listener.name.ssl.ssl.client.auth": "requested"})
    assert server_context(config, "SSL").verify_mode == ssl.CERT_OPTIONAL


@pytest.mark.parametrize(("props", "message"), [
    ({"ssl.keystore.type": "JKS", "ssl.keystore.location": "/x.jks"}, "PEM stores only"),
    ({"ssl.keystore.type": "PEM"}, "needs a key store"),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.location": "/nonexistent.pem"},
     "cannot load the key store"),
])
def test_bad_key_stores_are_refused(props: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        server_context(BrokerConfig({**LISTENERS, **props}), "SSL")


def test_client_auth_without_trust_store_is_refused(tmp_path: Path) -> None:
    trustme.CA().issue_cert("localhost").private_key_and_cert_chain_pem.write_to_path(
        str(tmp_path / "s.pem"))
    config = BrokerConfig({**LISTENERS, "ssl.keystore.type": "PEM",
                           "ssl.keystore.location": str(tmp_path / "s.pem"),
                           "ssl.client.auth": "required"})
    with pytest.raises(ConfigError, match="need a trust store"):
        server_context(config, "SSL")

