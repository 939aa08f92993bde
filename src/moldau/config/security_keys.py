"""Kafka's TLS and SASL broker keys, and the rules for changing them at run time.

moldau's SSL, SASL_PLAINTEXT and SASL_SSL listeners read the keys in :data:`USED_KEYS`
(PEM key stores only, PLAIN and SCRAM mechanisms); the others are defined with Kafka's types
and defaults so that a Kafka ``server.properties`` loads, stored like any dynamic key and
reported back. Kafka's rules (its DynamicBrokerConfig) apply:

* keystore and truststore keys (:data:`LISTENER_ONLY_KEYS`) change only per listener,
  ``listener.name.<listener>.<key>``;
* the other listener keys may also be set without the prefix; SASL keys a mechanism owns
  are set as ``listener.name.<listener>.<mechanism>.<key>``;
* all of them are per broker: refused on the cluster default resource (""), except the
  connection limits Kafka keeps cluster-wide (:data:`CLUSTER_LEVEL_LISTENER_KEYS`).

PASSWORD keys are sensitive: DescribeConfigs never returns their values.
"""

from __future__ import annotations

import re

from .definitions import ConfigKey, ConfigType, ConfigValue, Importance, OneOf, Validator
from .principal_mapping import MappingRules

STR, INT, SHORT, LONG, DOUBLE, LIST, CLASS, PASSWORD = (
    ConfigType.STRING, ConfigType.INT, ConfigType.SHORT, ConfigType.LONG, ConfigType.DOUBLE,
    ConfigType.LIST, ConfigType.CLASS, ConfigType.PASSWORD,
)
_UNUSED = "; stored, not used by moldau."

#: The keys moldau's TLS and SASL listeners read (the others are stored only).
USED_KEYS: frozenset[str] = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.key.password", "ssl.keystore.key",
    "ssl.keystore.certificate.chain", "ssl.truststore.type", "ssl.truststore.location",
    "ssl.truststore.certificates", "ssl.client.auth", "sasl.jaas.config",
    "sasl.enabled.mechanisms", "connections.max.reauth.ms", "ssl.principal.mapping.rules",
    "ssl.endpoint.identification.algorithm", "sasl.mechanism.inter.broker.protocol",
})


def _key(name: str, type_: ConfigType, default: ConfigValue, doc: str,
         validator: Validator | None = None) -> ConfigKey:
    used = name in USED_KEYS
    return ConfigKey(name, type_, default, doc + ("." if used else _UNUSED), Importance.MEDIUM,
                     validator, used=used, dynamic=True, sensitive=type_ is PASSWORD)


#: Kafka's SslConfigs.RECONFIGURABLE_CONFIGS: dynamic only with a listener prefix.
LISTENER_ONLY_KEYS: frozenset[str] = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.keystore.key", "ssl.keystore.certificate.chain", "ssl.truststore.type",
    "ssl.truststore.location", "ssl.truststore.password", "ssl.truststore.certificates",
})

SECURITY_KEYS: list[ConfigKey] = [
    _key("ssl.keystore.type", STR, "JKS", "File format of the key store"),
    _key("ssl.keystore.location", STR, None, "Path of the key store"),
    _key("ssl.keystore.password", PASSWORD, None, "Password of the key store"),
    _key("ssl.key.password", PASSWORD, None, "Password of the private key"),
    _key("ssl.keystore.key", PASSWORD, None, "Private key in PEM"),
    _key("ssl.keystore.certificate.chain", PASSWORD, None, "Certificate chain in PEM"),
    _key("ssl.truststore.type", STR, "JKS", "File format of the trust store"),
    _key("ssl.truststore.location", STR, None, "Path of the trust store"),
    _key("ssl.truststore.password", PASSWORD, None, "Password of the trust store"),
    _key("ssl.truststore.certificates", PASSWORD, None, "Trusted certificates in PEM"),
    _key("ssl.protocol", STR, "TLSv1.3", "TLS protocol of the SSLContext"),
    _key("ssl.provider", STR, None, "Security provider of TLS connections"),
    _key("ssl.cipher.suites", LIST, (), "Allowed cipher suites"),
    _key("ssl.enabled.protocols", LIST, ("TLSv1.2", "TLSv1.3"), "Allowed TLS protocols"),
    _key("ssl.keymanager.algorithm", STR, "SunX509", "Key manager factory algorithm"),
    _key("ssl.trustmanager.algorithm", STR, "PKIX", "Trust manager factory algorithm"),
    _key("ssl.endpoint.identification.algorithm", STR, "https", "Host name verification"),
    _key("ssl.secure.random.implementation", STR, None, "SecureRandom implementation"),
    _key("ssl.client.auth", STR, "none", "Whether clients must present a certificate",
         OneOf(("required", "requested", "none"))),
    _key("ssl.principal.mapping.rules", STR, "DEFAULT", "Rules mapping a client "
         "certificate's subject to a principal name", MappingRules()),
    _key("ssl.engine.factory.class", CLASS, None, "Custom SslEngineFactory"),
    _key("sasl.mechanism.inter.broker.protocol", STR, "GSSAPI", "SASL mechanism between brokers"),
    _key("sasl.jaas.config", PASSWORD, None, "JAAS login context of SASL connections"),
    _key("sasl.enabled.mechanisms", LIST, ("GSSAPI",), "SASL mechanisms offered"),
    _key("sasl.kerberos.service.name", STR, None, "Kerberos principal name of the broker"),
    _key("sasl.kerberos.kinit.cmd", STR, "/usr/bin/kinit", "Kerberos kinit command"),
    _key("sasl.kerberos.ticket.renew.window.factor", DOUBLE, 0.8, "Kerberos ticket renewal "
         "point"),
    _key("sasl.kerberos.ticket.renew.jitter", DOUBLE, 0.05, "Kerberos renewal jitter"),
    _key("sasl.kerberos.min.time.before.relogin", LONG, 60_000, "Kerberos relogin pause"),
    _key("sasl.kerberos.principal.to.local.rules", LIST, ("DEFAULT",), "Principal mapping "
         "rules"),
    _key("sasl.login.refresh.window.factor", DOUBLE, 0.8, "Login refresh point"),
    _key("sasl.login.refresh.window.jitter", DOUBLE, 0.05, "Login refresh jitter"),
    _key("sasl.login.refresh.min.period.seconds", SHORT, 60, "Least time between refreshes"),
    _key("sasl.login.refresh.buffer.seconds", SHORT, 300, "Refresh margin before expiry"),
    _key("connections.max.reauth.ms", LONG, 0, "Longest SASL session before the client must "
         "re-authenticate (KIP-368); 0: sessions do not expire"),
]

#: Listener keys Kafka keeps cluster-wide (they may be set on "" with a listener prefix).
CLUSTER_LEVEL_LISTENER_KEYS: frozenset[str] = frozenset({
    "max.connections", "max.connection.creation.rate", "num.network.threads",
})

#: Base names that may follow ``listener.name.<listener>.``.
LISTENER_KEYS: frozenset[str] = (
    frozenset(k.name for k in SECURITY_KEYS) | CLUSTER_LEVEL_LISTENER_KEYS
)

#: Keys a SASL mechanism owns: ``listener.name.<listener>.<mechanism>.<key>``, and their types.
MECHANISM_KEYS: dict[str, ConfigKey] = {
    k.name: k for k in (
        _key("sasl.jaas.config", PASSWORD, None, "JAAS login context of one mechanism"),
        _key("sasl.login.callback.handler.class", CLASS, None, "Login callback handler"),
        _key("sasl.login.class", CLASS, None, "Login class"),
        _key("sasl.server.callback.handler.class", CLASS, None, "Server callback handler"),
        _key("connections.max.reauth.ms", LONG, 0, "Re-authentication interval"),
    )
}

#: Per-broker keys without a prefix: refused on the cluster default resource.
PER_BROKER_KEYS: frozenset[str] = frozenset(k.name for k in SECURITY_KEYS)

# Kafka's ListenerConfigRegex: the listener name has no dot, the rest is the base name.
_LISTENER_PREFIX = re.compile(r"listener\.name\.([^.]*)\.(.+)")
_MECHANISM = re.compile(r"[^.]+\.(.+)")

def listener_base(name: str) -> str | None:
    """The base name of ``listener.name.<listener>.<base>``, or None for another key."""
    match = _LISTENER_PREFIX.fullmatch(name)
    return match.group(2) if match else None


def listener_key_definition(name: str, known: dict[str, ConfigKey]) -> ConfigKey | None:
    """The definition that types a listener-prefixed key: its base key when that may be set
    per listener, else the mechanism key it ends with; None when it is neither."""
    base = listener_base(name)
    if base is None:
        return None
    if base in LISTENER_KEYS:
        return known.get(base)
    mechanism = _MECHANISM.fullmatch(base)
    if mechanism and mechanism.group(1) in MECHANISM_KEYS:
        return MECHANISM_KEYS[mechanism.group(1)]
    return None


def kafka_set(names: list[str]) -> str:
    """A list of key names as Kafka's messages print a Scala Set."""
    return "Set(" + ", ".join(names) + ")"


def per_broker_only(names: list[str]) -> list[str]:
    """Those of ``names`` Kafka refuses on the cluster default resource."""
    refused = []
    for name in names:
        base = listener_base(name)
        if name in PER_BROKER_KEYS or (base is not None
                                       and base not in CLUSTER_LEVEL_LISTENER_KEYS):
            refused.append(name)
    return refused

