"""How this broker authenticates to its peers: the inter-broker listener's client side.

As in Kafka, brokers reach each other on the inter-broker listener
(``inter.broker.listener.name``, or the listener named after ``security.inter.broker.protocol``)
and speak its security protocol, configured from that listener's own keys:

* SSL / SASL_SSL: the listener's trust store verifies the peer, its key store is this broker's
  client certificate (see :func:`.tls.client_context`);
* SASL_PLAINTEXT / SASL_SSL: ``sasl.mechanism.inter.broker.protocol`` (one the listener
  enables), with the credentials of the listener's JAAS entry for that mechanism
  (``listener.name.<l>.<mechanism>.sasl.jaas.config``): ``username``/``password`` for PLAIN
  and SCRAM (a SCRAM user must exist in the metadata store before the brokers start), the
  unsecured login options (``unsecuredLoginStringClaim_sub``) for OAUTHBEARER.

A configuration that cannot authenticate stops the broker at start-up with a message naming
the key, rather than leaving followers retrying forever.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .definitions import ConfigError
from .jaas import parse_jaas_options
from .listeners import SASL_MECHANISMS

if TYPE_CHECKING:
    from .broker import BrokerConfig

MECHANISM_KEY = "sasl.mechanism.inter.broker.protocol"


@dataclass(frozen=True, slots=True)
class InterBrokerSecurity:
    """The inter-broker listener and what this broker presents there."""

    listener: str
    protocol: str
    #: SASL mechanism; None on PLAINTEXT and SSL.
    mechanism: str | None = None
    #: The JAAS options of that mechanism's login module (username, password, ...).
    jaas: tuple[tuple[str, str], ...] = ()

    @property
    def uses_tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    def option(self, name: str, default: str = "") -> str:
        return dict(self.jaas).get(name, default)


def inter_broker_security(config: BrokerConfig) -> InterBrokerSecurity:
    """The inter-broker security of ``config``; ConfigError when it cannot authenticate."""
    name = config.inter_broker_listener_name
    listener = next((lst for lst in config.listeners if lst.name == name), None)
    protocol = listener.security_protocol if listener is not None else "PLAINTEXT"
    if not protocol.startswith("SASL_"):
        return InterBrokerSecurity(name, protocol)
    mechanism = str(config.listener_setting(name, MECHANISM_KEY) or "GSSAPI").upper()
    enabled = config.listener_setting(name, "sasl.enabled.mechanisms") or ()
    assert isinstance(enabled, tuple)
    if mechanism not in SASL_MECHANISMS or mechanism not in {m.upper() for m in enabled}:
        raise ConfigError(MECHANISM_KEY, mechanism, message=f"inter-broker listener {name} "
                          f"uses {protocol}: {MECHANISM_KEY} must be a mechanism the listener "
                          f"enables ({', '.join(m.upper() for m in enabled)}) that moldau "
                          f"has ({', '.join(SASL_MECHANISMS)})")
    jaas_key = f"listener.name.{name.lower()}.{mechanism.lower()}.sasl.jaas.config"
    text = config.listener_setting(name, "sasl.jaas.config", mechanism)
    options = parse_jaas_options(jaas_key, str(text)) if text else {}
    needed = ("unsecuredLoginStringClaim_sub",) if mechanism == "OAUTHBEARER" \
        else ("username", "password")
    missing = [k for k in needed if not options.get(k)]
    if missing:
        raise ConfigError(jaas_key, "[hidden]", message=f"inter-broker listener {name} "
                          f"authenticates with {mechanism}: its JAAS entry ({jaas_key}) needs "
                          f"{' and '.join(missing)} for this broker's own connections")
    return InterBrokerSecurity(name, protocol, mechanism, tuple(sorted(options.items())))
