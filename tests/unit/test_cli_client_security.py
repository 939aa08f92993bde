"""The CLI's raw-request security settings: what is accepted, and one line for the rest."""

from __future__ import annotations

from pathlib import Path

import pytest

from moldau.cli.client_security import ClientSecurity
from moldau.cli.errors import CliError


def test_plaintext_needs_nothing() -> None:
    assert ClientSecurity.from_settings({}) is None
    assert ClientSecurity.from_settings({"security.protocol": "plaintext"}) is None


def test_sasl_settings_are_read() -> None:
    security = ClientSecurity.from_settings({
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "scram-sha-256",
        "sasl.username": "u", "sasl.password": ""})
    assert security is not None and security.tls is None
    assert (security.mechanism, security.username, security.password) == (
        "SCRAM-SHA-256", "u", "")


def test_ssl_without_sasl() -> None:
    security = ClientSecurity.from_settings({"security.protocol": "SSL",
                                             "ssl.endpoint.identification.algorithm": "none"})
    assert security is not None and security.mechanism is None
    assert security.tls is not None and not security.tls.check_hostname


@pytest.mark.parametrize(("settings", "wanted"), [
    ({"security.protocol": "SASL_TLS"}, "unknown security.protocol 'SASL_TLS'"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.username": "u", "sasl.password": "p"},
     "sasl.mechanism GSSAPI is not supported"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"},
     "SASL_SSL needs sasl.username and sasl.password"),
    ({"security.protocol": "SSL", "ssl.ca.location": "/nonexistent/ca.pem"},
     "cannot load the TLS settings"),
])
def test_bad_settings_are_one_line(settings: dict[str, str], wanted: str) -> None:
    with pytest.raises(CliError) as caught:
        ClientSecurity.from_settings(settings)
    assert wanted in str(caught.value) and "\n" not in str(caught.value)


def test_a_key_file_that_does_not_match_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "c.pem").write_text("not a certificate")
    with pytest.raises(CliError, match="cannot load the TLS settings"):
        ClientSecurity.from_settings({"security.protocol": "SSL",
                                      "ssl.certificate.location": str(tmp_path / "c.pem")})
