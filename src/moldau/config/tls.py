"""The server-side ``ssl.SSLContext`` of an SSL or SASL_SSL listener, from Kafka's PEM keys.

moldau reads PEM key stores only (``ssl.keystore.type=PEM``, as Kafka supports since
KIP-651): either a file with the private key and the certificate chain
(``ssl.keystore.location``, the key encrypted with ``ssl.key.password`` if at all) or both
inline (``ssl.keystore.key`` and ``ssl.keystore.certificate.chain``); the trusted CAs for
client certificates come from ``ssl.truststore.location`` or ``ssl.truststore.certificates``.
``ssl.client.auth`` is none, requested or required. Every key may carry the listener prefix
``listener.name.<listener>.``, which wins. A bad key store stops the broker at start-up with
a message naming the key.
"""

from __future__ import annotations

import os
import ssl
import tempfile
from typing import TYPE_CHECKING

from .definitions import ConfigError

if TYPE_CHECKING:
    from .broker import BrokerConfig

_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL,
                "required": ssl.CERT_REQUIRED}


def _setting(config: BrokerConfig, listener: str, key: str) -> str | None:
    value = config.listener_setting(listener, key)
    return None if value is None or value == "" else str(value)


def _load_inline_chain(context: ssl.SSLContext, key_pem: str, chain_pem: str,
                       password: str | None) -> None:
    """``load_cert_chain`` reads files only: hand it a private file that is gone at once."""
    fd, path = tempfile.mkstemp(prefix="moldau-key-", suffix=".pem")
    try:
        with os.fdopen(fd, "w") as fh:  # mkstemp creates it 0600
            fh.write(key_pem.strip() + "\n" + chain_pem.strip() + "\n")
        context.load_cert_chain(path, password=password)
    finally:
        os.unlink(path)


def _load_key_store(context: ssl.SSLContext, config: BrokerConfig, listener: str) -> bool:
    """Load the listener's key store into ``context``; False when it has none."""
    password = _setting(config, listener, "ssl.key.password")
    location = _setting(config, listener, "ssl.keystore.location")
    key_pem = _setting(config, listener, "ssl.keystore.key")
    chain_pem = _setting(config, listener, "ssl.keystore.certificate.chain")
    try:
        if location is not None:
            context.load_cert_chain(location, password=password)
        elif key_pem is not None and chain_pem is not None:
            _load_inline_chain(context, key_pem, chain_pem, password)
        else:
            return False
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError("ssl.keystore.location", location or "[inline]",
                          message=f"listener {listener}: cannot load the key store: "
                          f"{exc}") from None
    return True


def _load_trust_store(context: ssl.SSLContext, config: BrokerConfig, listener: str) -> bool:
    """Load the listener's trusted CAs into ``context``; False when it has none."""
    trust_location = _setting(config, listener, "ssl.truststore.location")
    trust_pem = _setting(config, listener, "ssl.truststore.certificates")
    try:
        if trust_location is not None:
            context.load_verify_locations(cafile=trust_location)
        elif trust_pem is not None:
            context.load_verify_locations(cadata=trust_pem)
        else:
            return False
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError("ssl.truststore.location", trust_location or "[inline]",
                          message=f"listener {listener}: cannot load the trust store: "
                          f"{exc}") from None
    return True


def server_context(config: BrokerConfig, listener: str) -> ssl.SSLContext:
    """The TLS context of ``listener``; ConfigError when its keys cannot make one."""
    for key in ("ssl.keystore.type", "ssl.truststore.type"):
        store_type = (_setting(config, listener, key) or "PEM").upper()
        configured = _setting(config, listener, key.replace(".type", ".location")) or (
            _setting(config, listener, "ssl.truststore.certificates")
            if key.startswith("ssl.truststore") else None)
        if store_type != "PEM" and (key == "ssl.keystore.type" or configured):
            raise ConfigError(key, store_type, message=f"listener {listener}: moldau reads "
                              f"PEM stores only; set {key}=PEM")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if not _load_key_store(context, config, listener):
        raise ConfigError("ssl.keystore.location", None, message=f"listener {listener} "
                          "needs a key store: ssl.keystore.location, or ssl.keystore.key "
                          "with ssl.keystore.certificate.chain")
    has_trust_store = _load_trust_store(context, config, listener)
    client_auth = (_setting(config, listener, "ssl.client.auth") or "none").lower()
    context.verify_mode = _CLIENT_AUTH.get(client_auth, ssl.CERT_NONE)
    if context.verify_mode != ssl.CERT_NONE and not has_trust_store:
        raise ConfigError("ssl.client.auth", client_auth, message=f"listener {listener}: "
                          "client certificates need a trust store (ssl.truststore.location "
                          "or ssl.truststore.certificates)")
    return context


def client_context(config: BrokerConfig, listener: str) -> ssl.SSLContext:
    """The TLS context a broker uses to reach its peers' ``listener`` (the inter-broker
    one), built from that listener's keys as Kafka's broker builds its own client side: the
    trust store verifies the peers (the system's CAs without one), the key store is the
    broker's client certificate for peers that ask for one (``ssl.client.auth``), and
    ``ssl.endpoint.identification.algorithm`` (``https``, Kafka's default; empty: off)
    checks the peer's certificate against the host name it was reached at."""
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=None)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    identification = config.listener_setting(listener, "ssl.endpoint.identification.algorithm")
    context.check_hostname = bool(identification)
    _load_trust_store(context, config, listener)
    _load_key_store(context, config, listener)
    return context
