"""Listener endpoints (``NAME://host:port``) and the listener -> security protocol map.

Parsed and checked the way Kafka does (unique names, unique ports, every name mapped to a
protocol) so that a ``server.properties`` written for Kafka either means the same thing here
or fails at start-up with a message naming the problem.
"""

from __future__ import annotations

import functools
import re
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .definitions import ConfigError, ConfigValue, Validator

# NAME://host:port, with IPv6 hosts in brackets; an empty host means "all interfaces".
#: The security protocols moldau's listeners speak (Kafka's four, in its order).
SERVED_PROTOCOLS: tuple[str, ...] = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")

#: The SASL mechanisms moldau's SASL listeners offer.
SASL_MECHANISMS: tuple[str, ...] = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")

_LISTENER = re.compile(r"([A-Za-z0-9_]+)://(\[[0-9A-Fa-f:.%a-zA-Z]*\]|[^:/\[\]]*):(-?[0-9]+)")


@dataclass(frozen=True, slots=True)
class Listener:
    """One ``NAME://host:port`` endpoint; ``host`` is "" for all interfaces."""

    name: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


@functools.cache
def canonical_hostname() -> str:
    """This machine's canonical name, which Kafka advertises for a wildcard listener."""
    return socket.getfqdn()


def parse_protocol_map(raw: str) -> dict[str, str]:
    """Parse ``listener.security.protocol.map`` (``NAME:PROTOCOL,...``), names upper-cased."""
    key = "listener.security.protocol.map"
    mapping: dict[str, str] = {}
    for item in (p.strip() for p in raw.split(",")):
        if not item:
            continue
        name, sep, protocol = item.partition(":")
        if not sep or not name.strip() or not protocol.strip():
            raise ConfigError(key, raw, f"Map entry '{item}' is not of the form NAME:PROTOCOL")
        mapping[name.strip().upper()] = protocol.strip().upper()
    return mapping


def parse_listeners(
    key: str, values: Sequence[str], protocol_map: Mapping[str, str]
) -> list[Listener]:
    """Parse listener strings, checking names and ports are unique as Kafka does."""
    raw = ",".join(values)
    listeners: list[Listener] = []
    for value in values:
        match = _LISTENER.fullmatch(value.strip())
        if match is None:
            raise ConfigError(key, raw, f"Unable to parse {value} to a broker endpoint")
        name = match.group(1).upper()
        host = match.group(2).strip("[]")
        port = int(match.group(3))
        if not 0 <= port <= 65535:
            raise ConfigError(key, raw, f"Port {port} of listener {name} is out of range")
        protocol = protocol_map.get(name)
        if protocol is None:
            raise ConfigError(key, raw, f"No security protocol defined for listener {name}")
        listeners.append(Listener(name, host, port, protocol))
    names = [listener.name for listener in listeners]
    if len(set(names)) != len(names):
        raise ConfigError(key, raw, "Each listener must have a different name")
    ports = [listener.port for listener in listeners if listener.port != 0]
    if len(set(ports)) != len(ports):
        raise ConfigError(key, raw, "Each listener must have a different port")
    return listeners


#: ``http://host:port`` of the metrics endpoint (IPv6 hosts in brackets; empty: all interfaces).
_METRICS_LISTENER = re.compile(r"http://(\[[0-9A-Fa-f:.%a-zA-Z]*\]|[^:/\[\]]*):([0-9]+)/?")


def parse_metrics_listener(key: str, raw: str) -> tuple[str, int]:
    """(host, port) of ``metrics.listener``; :class:`ConfigError` names what is wrong."""
    match = _METRICS_LISTENER.fullmatch(raw.strip())
    if match is None:
        raise ConfigError(key, raw, "Expected http://host:port (e.g. http://127.0.0.1:9644)")
    port = int(match.group(2))
    if not 0 <= port <= 65535:
        raise ConfigError(key, raw, f"Port {port} is out of range")
    return match.group(1).strip("[]"), port


@dataclass(frozen=True, slots=True)
class MetricsListenerFormat(Validator):
    """Validates ``metrics.listener``."""

    def check(self, key: str, value: ConfigValue) -> None:
        parse_metrics_listener(key, str(value))

    def describe(self) -> str:
        return "http://host:port"
