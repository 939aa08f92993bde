"""How the CLI's raw requests (:mod:`.raw_requests`) reach a secured listener.

confluent-kafka's AdminClient has no call for some admin APIs (client quotas among them), so
those commands send kio-encoded requests on a socket of their own. The settings are the
librdkafka keys the other commands take (``security.protocol``, ``sasl.mechanism``,
``sasl.username``, ``sasl.password``, ``ssl.ca.location``, ``ssl.certificate.location``,
``ssl.key.location``, ``ssl.key.password``, ``ssl.endpoint.identification.algorithm``), so
one ``--command-config`` file serves every command. The SCRAM arithmetic is the brokers' own
client side (:class:`moldau.broker.scram.ScramClient`).
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .errors import CliError

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


@dataclass(frozen=True)
class ClientSecurity:
    """TLS and/or SASL for one raw connection; None of it on a PLAINTEXT listener."""

    tls: ssl.SSLContext | None
    mechanism: str | None
    username: str = ""
    password: str = ""

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> ClientSecurity | None:
        """The security the settings ask for (None for PLAINTEXT); one CLI line when they
        name what this client cannot do or leave out what it needs."""
        protocol = str(settings.get("security.protocol", "PLAINTEXT")).upper()
        if protocol not in PROTOCOLS:
            raise CliError(f"unknown security.protocol {protocol!r}: expected one of "
                           f"{', '.join(PROTOCOLS)}")
        if protocol == "PLAINTEXT":
            return None
        tls = _tls_context(settings) if protocol.endswith("SSL") else None
        if not protocol.startswith("SASL"):
            return cls(tls, None)
        mechanism = str(settings.get("sasl.mechanism") or settings.get("sasl.mechanisms")
                        or "GSSAPI").upper()
        if mechanism not in MECHANISMS:
            raise CliError(f"sasl.mechanism {mechanism} is not supported by this command: "
                           f"use one of {', '.join(MECHANISMS)}")
        username, password = settings.get("sasl.username"), settings.get("sasl.password")
        if not username or password is None:
            raise CliError(f"{protocol} needs sasl.username and sasl.password")
        return cls(tls, mechanism, str(username), str(password))


def _tls_context(settings: Mapping[str, Any]) -> ssl.SSLContext:
    ca = settings.get("ssl.ca.location")
    try:
        context = ssl.create_default_context(cafile=str(ca) if ca else None)
        if str(settings.get("ssl.endpoint.identification.algorithm", "https")).lower() == "none":
            context.check_hostname = False
        certificate = settings.get("ssl.certificate.location")
        if certificate:
            key = settings.get("ssl.key.location")
            password = settings.get("ssl.key.password")
            context.load_cert_chain(str(certificate), str(key) if key else None,
                                    str(password) if password is not None else None)
    except (OSError, ssl.SSLError) as exc:
        raise CliError(f"cannot load the TLS settings: {exc}") from None
    return context
