"""The broker's configuration: static file + overrides, plus the dynamic layers.

Values come from up to four places, highest priority first, and DescribeConfigs reports which
one a value came from:

1. DYNAMIC_BROKER_CONFIG: IncrementalAlterConfigs on this broker's resource;
2. DYNAMIC_DEFAULT_BROKER_CONFIG: IncrementalAlterConfigs on the cluster default resource;
3. STATIC_BROKER_CONFIG: ``server.properties`` with ``--override`` values on top;
4. DEFAULT_CONFIG: the key's definition.

Like Kafka, the layers are merged key by key first and synonyms are resolved afterwards, so a
static ``log.retention.ms`` still beats a dynamic ``log.retention.hours``.

A :class:`BrokerConfig` is immutable: a dynamic change builds a new one
(:meth:`BrokerConfig.with_dynamic`), fully validated before the broker swaps it in, so a bad
change can never leave the broker half-reconfigured.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from .broker_keys import BROKER_KEYS, DYNAMIC_KEYS, is_known_unused
from .definitions import (
    INT_MAX,
    ConfigEntry,
    ConfigError,
    ConfigKey,
    ConfigSource,
    ConfigSynonym,
    ConfigType,
    ConfigValue,
    UnknownConfigError,
)
from .inter_broker import inter_broker_security
from .listeners import (
    SASL_MECHANISMS,
    SERVED_PROTOCOLS,
    Listener,
    canonical_hostname,
    parse_listeners,
    parse_metrics_listener,
    parse_protocol_map,
)
from .properties import load_properties, parse_overrides
from .security_keys import (
    LISTENER_ONLY_KEYS,
    MECHANISM_KEYS,
    kafka_set,
    listener_key_definition,
    per_broker_only,
)
from .topic_keys import HOURS, MINUTES, BrokerSynonym

log = logging.getLogger(__name__)

#: Layers in priority order; DEFAULT_CONFIG is implicit (the key's definition).
_LAYERS = (
    ConfigSource.DYNAMIC_BROKER_CONFIG,
    ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
    ConfigSource.STATIC_BROKER_CONFIG,
)

#: Broker keys that stand for one setting in different units, highest priority first. Kafka
#: reports all members of a chain as synonyms of each other in DescribeConfigs.
_BROKER_CHAINS: tuple[tuple[BrokerSynonym, ...], ...] = (
    (
        BrokerSynonym("log.retention.ms"),
        BrokerSynonym("log.retention.minutes", MINUTES),
        BrokerSynonym("log.retention.hours", HOURS),
    ),
    (BrokerSynonym("log.roll.ms"), BrokerSynonym("log.roll.hours", HOURS)),
    (BrokerSynonym("log.roll.jitter.ms"), BrokerSynonym("log.roll.jitter.hours", HOURS)),
    (BrokerSynonym("log.flush.interval.ms"), BrokerSynonym("log.flush.scheduler.interval.ms")),
)
_CHAIN_OF: dict[str, tuple[BrokerSynonym, ...]] = {
    s.name: chain for chain in _BROKER_CHAINS for s in chain
}

_WILDCARD_HOSTS = ("", "0.0.0.0", "::")
_SECRET_PREFIXES = ("ssl.", "sasl.", "listener.name.", "zookeeper.ssl.", "delegation.token.")


def key_definition(name: str) -> ConfigKey | None:
    """The definition of a broker key, or of the base key of ``listener.name.<l>.<key>``."""
    return BROKER_KEYS.get(name) or listener_key_definition(name, BROKER_KEYS)


class BrokerConfig:
    """Typed, validated broker configuration; build it with :meth:`load`.

    The constructor parses every layer and computes the derived values (node id, listeners,
    data directories) so that any invalid value raises :class:`ConfigError` at start-up, not
    when the broker first reads the key.
    """

    def __init__(
        self,
        static: Mapping[str, str] | None = None,
        *,
        dynamic_default: Mapping[str, str] | None = None,
        dynamic_broker: Mapping[str, str] | None = None,
    ) -> None:
        self._raw: dict[ConfigSource, dict[str, str]] = {
            ConfigSource.DYNAMIC_BROKER_CONFIG: dict(dynamic_broker or {}),
            ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG: dict(dynamic_default or {}),
            ConfigSource.STATIC_BROKER_CONFIG: dict(static or {}),
        }
        self._parsed: dict[ConfigSource, dict[str, ConfigValue]] = {
            layer: {
                name: BROKER_KEYS[name].parse(value)
                for name, value in raw.items()
                if name in BROKER_KEYS
            }
            for layer, raw in self._raw.items()
        }
        # Listener-prefixed keys are typed by their base key, as Kafka validates them.
        for raw in self._raw.values():
            for name, value in raw.items():
                definition = None if name in BROKER_KEYS else key_definition(name)
                if definition is not None:
                    definition.parse(value)
        self._node_id = self._resolve_node_id()
        protocol_map = parse_protocol_map(self._str("listener.security.protocol.map"))
        self._listeners = parse_listeners("listeners", self._list("listeners"), protocol_map)
        if not self._listeners:
            raise ConfigError("listeners", "", "At least one listener is required")
        for listener in self._listeners:
            if listener.security_protocol not in SERVED_PROTOCOLS:
                raise ConfigError(
                    "listeners",
                    ",".join(self._list("listeners")),
                    f"listener {listener.name} uses {listener.security_protocol}; "
                    f"moldau serves {', '.join(SERVED_PROTOCOLS)} listeners",
                )
        inter_broker = self._opt_str("inter.broker.listener.name")
        if inter_broker and inter_broker.upper() not in {lst.name for lst in self._listeners}:
            raise ConfigError("inter.broker.listener.name", inter_broker,
                              message="inter.broker.listener.name must be a listener name "
                              "defined in advertised.listeners. The valid options based on "
                              "currently configured listeners are "
                              + ",".join(lst.name for lst in self._listeners))
        self._check_sasl_mechanisms()
        self._check_inter_broker_protocol()
        advertised = self.get("advertised.listeners")
        self._advertised: list[Listener] | None = None
        if advertised is not None:
            assert isinstance(advertised, tuple)
            self._advertised = self._check_advertised(
                parse_listeners("advertised.listeners", advertised, protocol_map)
            )
        self._log_dirs = self._resolve_log_dirs()
        self._per_ip_overrides = self._check_connection_limits()

    # -- construction ------------------------------------------------------------------------

    @classmethod
    def load(
        cls,
        path: str | Path | None = None,
        overrides: Iterable[str] = (),
        *,
        dynamic_default: Mapping[str, str] | None = None,
        dynamic_broker: Mapping[str, str] | None = None,
    ) -> BrokerConfig:
        """Read ``server.properties`` (optional) and apply ``--override key=value`` strings.

        Overrides win over the file. Keys moldau ignores are logged here, once per start-up.
        """
        props = load_properties(path) if path is not None else {}
        props.update(parse_overrides(overrides))
        cfg = cls(props, dynamic_default=dynamic_default, dynamic_broker=dynamic_broker)
        cfg.log_ignored_keys()
        return cfg

    def log_ignored_keys(self) -> None:
        """INFO for Kafka keys moldau does not use, WARNING for keys nobody knows."""
        for name in self._raw[ConfigSource.STATIC_BROKER_CONFIG]:
            key = BROKER_KEYS.get(name)
            if (key is not None and not key.used) or (key is None and is_known_unused(name)):
                log.info("config %s is a Kafka setting moldau does not use; ignored", name)
            elif key is None:
                log.warning("The configuration '%s' was supplied but isn't a known config; "
                            "ignored", name)

    def with_dynamic(
        self, changes: Mapping[str, str | None], *, cluster_default: bool = False
    ) -> BrokerConfig:
        """A new config with dynamic changes applied; this one is left untouched.

        ``changes`` maps keys to new values, None removing the dynamic value (the
        IncrementalAlterConfigs DELETE operation). ``cluster_default`` selects the
        cluster-wide default layer (resource name "") instead of this broker's own layer.
        Only :data:`~moldau.config.broker_keys.DYNAMIC_KEYS` and listener-prefixed TLS/SASL
        keys may change, under Kafka's rules and with its messages (see
        :mod:`.security_keys`); unlike Kafka, unknown keys are refused too, so a typo is
        reported instead of stored.
        """
        names = sorted(changes)
        refused = [n for n in names
                   if n not in DYNAMIC_KEYS and listener_key_definition(n, BROKER_KEYS) is None]
        if refused:
            raise ConfigError(
                refused[0], changes[refused[0]],
                message=f"Cannot update these configs dynamically: {', '.join(refused)}",
            )
        bare = [n for n in names if n in LISTENER_ONLY_KEYS]
        if bare:
            raise ConfigError(
                bare[0], changes[bare[0]],
                message="These security configs can be dynamically updated only per-listener "
                        f"using the listener prefix: {kafka_set(bare)}",
            )
        per_broker = per_broker_only(names) if cluster_default else []
        if per_broker:
            raise ConfigError(
                per_broker[0], changes[per_broker[0]],
                message="Cannot update these configs at default cluster level, broker id must "
                        f"be specified: {kafka_set(per_broker)}",
            )
        layer = (
            ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
            if cluster_default
            else ConfigSource.DYNAMIC_BROKER_CONFIG
        )
        updated = dict(self._raw[layer])
        for name, value in changes.items():
            if value is None:
                updated.pop(name, None)
            else:
                updated[name] = value
        layers = {k: v for k, v in self._raw.items() if k is not layer}
        layers[layer] = updated
        return BrokerConfig(
            layers[ConfigSource.STATIC_BROKER_CONFIG],
            dynamic_default=layers[ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG],
            dynamic_broker=layers[ConfigSource.DYNAMIC_BROKER_CONFIG],
        )

    @property
    def static_configs(self) -> dict[str, str]:
        """The file + override values as given (for logging and tests)."""
        return dict(self._raw[ConfigSource.STATIC_BROKER_CONFIG])

    @property
    def dynamic_broker_configs(self) -> dict[str, str]:
        """This broker's dynamic values, as strings: what the broker persists and restores."""
        return dict(self._raw[ConfigSource.DYNAMIC_BROKER_CONFIG])

    @property
    def dynamic_default_configs(self) -> dict[str, str]:
        """The cluster-wide dynamic defaults, as strings: what the broker persists."""
        return dict(self._raw[ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG])

    # -- generic access ----------------------------------------------------------------------

    def definition(self, name: str) -> ConfigKey:
        key = BROKER_KEYS.get(name)
        if key is None:
            raise UnknownConfigError(name, f"Unknown broker config name: {name}")
        return key

    def is_set(self, name: str) -> bool:
        """True when some layer (not the default) gives ``name`` a value."""
        return any(name in self._raw[layer] for layer in _LAYERS)

    def source(self, name: str) -> ConfigSource:
        """Where ``name``'s value comes from, for DescribeConfigs."""
        for layer in _LAYERS:
            if name in self._raw[layer]:
                return layer
        return ConfigSource.DEFAULT_CONFIG

    def get(self, name: str) -> ConfigValue:
        """The typed value of one key (no synonym resolution: that is what properties do).

        A known-but-unused key without a definition yields its raw string; an unknown key
        raises :class:`UnknownConfigError`.
        """
        key = BROKER_KEYS.get(name)
        if key is None:
            if not is_known_unused(name):
                raise UnknownConfigError(name, f"Unknown broker config name: {name}")
            return next((self._raw[lyr][name] for lyr in _LAYERS if name in self._raw[lyr]), None)
        for layer in _LAYERS:
            if name in self._parsed[layer]:
                return self._parsed[layer][name]
        return key.default

    def resolve(self, chain: Sequence[BrokerSynonym]) -> tuple[ConfigValue, str, ConfigSource]:
        """First set key of ``chain`` (else the first with a default), in the chain's unit.

        Returns (value, key name, source); value is None when no key has a value at all.
        """
        for synonym in chain:
            if self.is_set(synonym.name):
                return self._scaled(synonym), synonym.name, self.source(synonym.name)
        for synonym in chain:
            if BROKER_KEYS[synonym.name].default is not None:
                return self._scaled(synonym), synonym.name, ConfigSource.DEFAULT_CONFIG
        return None, chain[0].name, ConfigSource.DEFAULT_CONFIG

    def _scaled(self, synonym: BrokerSynonym) -> ConfigValue:
        value = self.get(synonym.name)
        if synonym.factor != 1 and isinstance(value, int) and not isinstance(value, bool):
            return value * synonym.factor
        return value

    def synonyms(self, name: str, chain: Sequence[str] | None = None) -> list[ConfigSynonym]:
        """Kafka's synonym list for a broker key: every set value along its chain.

        Ordered by layer (dynamic broker, dynamic default, static, default), then by chain
        priority. With ``chain`` given (topic keys) the whole chain is reported; otherwise,
        as Kafka does, entries before the first one named ``name`` are dropped, so
        ``log.retention.hours`` does not list ``log.retention.ms`` as its synonym.
        """
        names = (
            list(chain)
            if chain is not None
            else [s.name for s in _CHAIN_OF.get(name, (BrokerSynonym(name),))]
        )
        found: list[ConfigSynonym] = []
        for layer in _LAYERS:
            for n in names:
                if n in self._raw[layer]:
                    key = BROKER_KEYS.get(n)
                    shown = (
                        key.format(self._parsed[layer][n])
                        if key is not None
                        else self._raw[layer][n]
                    )
                    found.append(ConfigSynonym(n, shown, layer))
        for n in names:
            key = BROKER_KEYS.get(n)
            if key is not None and key.default is not None:
                found.append(ConfigSynonym(n, key.format(key.default),
                                           ConfigSource.DEFAULT_CONFIG))
        if chain is None:
            while found and found[0].name != name:
                found.pop(0)
        return found

    def set_names(self) -> set[str]:
        """Every key some layer sets, known or not."""
        return {name for layer in _LAYERS for name in self._raw[layer]}

    # -- typed helpers -----------------------------------------------------------------------

    def _int(self, name: str) -> int:
        value = self.get(name)
        assert isinstance(value, int) and not isinstance(value, bool), name
        return value

    def _opt_int(self, name: str) -> int | None:
        value = self.get(name)
        assert value is None or isinstance(value, int), name
        return value

    def _bool(self, name: str) -> bool:
        value = self.get(name)
        assert isinstance(value, bool), name
        return value

    def _float(self, name: str) -> float:
        value = self.get(name)
        assert isinstance(value, float), name
        return value

    def _str(self, name: str) -> str:
        value = self.get(name)
        assert isinstance(value, str), name
        return value

    def _opt_str(self, name: str) -> str | None:
        value = self.get(name)
        assert value is None or isinstance(value, str), name
        return value

    def _list(self, name: str) -> tuple[str, ...]:
        value = self.get(name)
        assert isinstance(value, tuple), name
        return value

    def _resolved_int(self, *chain: BrokerSynonym) -> int:
        value = self.resolve(chain)[0]
        assert isinstance(value, int), chain
        return value

    # -- derived values ----------------------------------------------------------------------

    def _resolve_node_id(self) -> int:
        node_set, broker_set = self.is_set("node.id"), self.is_set("broker.id")
        node_id, broker_id = self._int("node.id"), self._int("broker.id")
        if node_set and broker_set and node_id != broker_id:
            raise ConfigError(
                "node.id", node_id,
                message=f"If both node.id and broker.id are defined, they must be the same: "
                f"node.id={node_id}, broker.id={broker_id}",
            )
        return broker_id if broker_set and not node_set else node_id

    def _check_inter_broker_protocol(self) -> None:
        """In a cluster, this broker must be able to authenticate to its peers' inter-broker
        listener (see :mod:`.inter_broker`); Kafka's rule that only one of the two keys
        naming that listener is set."""
        if self._opt_str("inter.broker.listener.name") and \
                self._opt_str("security.inter.broker.protocol"):
            raise ConfigError("security.inter.broker.protocol",
                              self._opt_str("security.inter.broker.protocol"),
                              message="Only one of inter.broker.listener.name and "
                              "security.inter.broker.protocol should be set.")
        name = self.inter_broker_listener_name
        if name not in {lst.name for lst in self._listeners}:
            raise ConfigError("security.inter.broker.protocol", name, message=f"no listener "
                              f"named {name}: with security.inter.broker.protocol={name} one "
                              "listener must carry that name")
        if self._opt_str("zookeeper.connect") is not None:
            inter_broker_security(self)

    def _check_sasl_mechanisms(self) -> None:
        """A SASL listener must offer a mechanism moldau has (Kafka's default, GSSAPI, is not
        one of them)."""
        for listener in self._listeners:
            if not listener.security_protocol.startswith("SASL_"):
                continue
            enabled = self.listener_setting(listener.name, "sasl.enabled.mechanisms") or ()
            assert isinstance(enabled, tuple)
            if not any(m.upper() in SASL_MECHANISMS for m in enabled):
                raise ConfigError(
                    "sasl.enabled.mechanisms", ",".join(enabled),
                    message=f"listener {listener.name} offers none of the SASL mechanisms "
                    f"moldau supports ({', '.join(SASL_MECHANISMS)}); set "
                    f"sasl.enabled.mechanisms or listener.name.{listener.name.lower()}."
                    "sasl.enabled.mechanisms")

    def _check_advertised(self, advertised: list[Listener]) -> list[Listener]:
        raw = ",".join(self._list("advertised.listeners"))
        names = {listener.name for listener in self._listeners}
        for listener in advertised:
            if listener.host in ("0.0.0.0", "::"):
                raise ConfigError(
                    "advertised.listeners", raw,
                    f"cannot use the nonroutable meta-address {listener.host}; "
                    "use a routable address",
                )
            if listener.name not in names:
                raise ConfigError(
                    "advertised.listeners", raw,
                    f"listener {listener.name} is not among the names in listeners",
                )
        return advertised

    def _check_connection_limits(self) -> dict[str, int]:
        """Kafka's start-up checks of the socket server keys; returns the parsed overrides."""
        queued = self._int("queued.max.request.bytes")
        if 0 < queued < self.socket_request_max_bytes:
            raise ConfigError(
                "queued.max.request.bytes", queued,
                message="queued.max.request.bytes must be larger or equal to "
                "socket.request.max.bytes",
            )
        overrides = parse_connection_overrides(self._str("max.connections.per.ip.overrides"))
        if self._int("max.connections.per.ip") == 0 and not overrides:
            raise ConfigError(
                "max.connections.per.ip", 0,
                message="max.connections.per.ip can be set to zero only if "
                "max.connections.per.ip.overrides property is set.",
            )
        return overrides

    def _resolve_log_dirs(self) -> list[Path]:
        dirs = self.get("log.dirs")
        if dirs is None:
            dirs = (self._str("log.dir"),)
        assert isinstance(dirs, tuple)
        paths = [Path(d) for d in dirs if d]
        if not paths:
            raise ConfigError("log.dirs", ",".join(dirs),
                              "At least one log directory must be defined via log.dirs or "
                              "log.dir")
        return paths

    # -- what the broker reads ---------------------------------------------------------------

    @property
    def node_id(self) -> int:
        """``node.id``, else ``broker.id``, else 0 (moldau's default; Kafka has none)."""
        return self._node_id

    @property
    def broker_rack(self) -> str | None:
        return self._opt_str("broker.rack")

    @property
    def listeners(self) -> list[Listener]:
        """Where to accept connections; host "" means all interfaces."""
        return list(self._listeners)

    @property
    def advertised_listeners(self) -> list[Listener]:
        """What clients are told to connect to, in listener order.

        ``advertised.listeners`` when set. Otherwise the listeners themselves, where a
        wildcard host (empty, like Kafka, and also 0.0.0.0 or ::, where Kafka would refuse to
        start) is replaced by this machine's canonical hostname, as Kafka does. Set
        ``advertised.listeners`` when clients cannot resolve that name.
        """
        if self._advertised is not None:
            return list(self._advertised)
        return [
            Listener(lst.name, canonical_hostname(), lst.port, lst.security_protocol)
            if lst.host in _WILDCARD_HOSTS
            else lst
            for lst in self._listeners
        ]

    def listener_setting(self, listener: str, key: str,
                         mechanism: str | None = None) -> ConfigValue:
        """A TLS/SASL key as one listener sees it, in Kafka's order of precedence:
        ``listener.name.<l>.<mechanism>.<key>``, ``listener.name.<l>.<key>``, ``<key>``."""
        prefix = f"listener.name.{listener.lower()}."
        names = [f"{prefix}{key}", key]
        if mechanism is not None:
            names.insert(0, f"{prefix}{mechanism.lower()}.{key}")
        for name in names:
            for layer in _LAYERS:
                if name in self._raw[layer]:
                    definition = key_definition(name) or MECHANISM_KEYS.get(key)
                    raw = self._raw[layer][name]
                    return definition.parse(raw) if definition is not None else raw
        definition = BROKER_KEYS.get(key) or MECHANISM_KEYS.get(key)
        return definition.default if definition is not None else None

    def advertised_listener(self, name: str) -> Listener:
        """The advertised endpoint of listener ``name`` (the first one if there is none)."""
        advertised = self.advertised_listeners
        return next((lst for lst in advertised if lst.name == name), advertised[0])

    @property
    def inter_broker_listener_name(self) -> str:
        """``inter.broker.listener.name``; else the listener named after
        ``security.inter.broker.protocol`` (as Kafka names it); else the first listener."""
        name = self._opt_str("inter.broker.listener.name") or \
            self._opt_str("security.inter.broker.protocol")
        return name.upper() if name else self._listeners[0].name

    @property
    def log_dirs(self) -> list[Path]:
        """``log.dirs`` when set, else ``log.dir`` (moldau default ``./data``)."""
        return list(self._log_dirs)

    @property
    def zookeeper_connect(self) -> str | None:
        return self._opt_str("zookeeper.connect")

    @property
    def zookeeper_session_timeout_ms(self) -> int:
        return self._int("zookeeper.session.timeout.ms")

    @property
    def zookeeper_connection_timeout_ms(self) -> int:
        """Falls back to the session timeout, as in Kafka."""
        value = self._opt_int("zookeeper.connection.timeout.ms")
        return self.zookeeper_session_timeout_ms if value is None else value

    @property
    def schema_registry_urls(self) -> list[str]:
        """``confluent.schema.registry.url``, split on commas; empty when unset."""
        value = self._opt_str("confluent.schema.registry.url") or ""
        return [url.strip().rstrip("/") for url in value.split(",") if url.strip()]

    @property
    def num_partitions(self) -> int:
        return self._int("num.partitions")

    @property
    def default_replication_factor(self) -> int:
        return self._int("default.replication.factor")

    @property
    def auto_create_topics_enable(self) -> bool:
        return self._bool("auto.create.topics.enable")

    @property
    def delete_topic_enable(self) -> bool:
        return self._bool("delete.topic.enable")

    @property
    def min_insync_replicas(self) -> int:
        return self._int("min.insync.replicas")

    @property
    def unclean_leader_election_enable(self) -> bool:
        return self._bool("unclean.leader.election.enable")

    @property
    def compression_type(self) -> str:
        return self._str("compression.type")

    @property
    def message_max_bytes(self) -> int:
        return self._int("message.max.bytes")

    @property
    def socket_request_max_bytes(self) -> int:
        return self._int("socket.request.max.bytes")

    @property
    def metrics_listener(self) -> tuple[str, int] | None:
        """(host, port) of the metrics endpoint, None when ``metrics.listener`` is unset."""
        raw = self.get("metrics.listener")
        return None if raw is None else parse_metrics_listener("metrics.listener", str(raw))

    @property
    def console_enable(self) -> bool:
        return self._bool("console.enable")

    @property
    def loop_stall_warn_ms(self) -> int:
        return self._int("moldau.loop.stall.warn.ms")

    @property
    def test_drop_produce_response_after_append(self) -> int:
        return self._int("moldau.test.drop.produce.response.after.append")

    @property
    def test_stop_after_dropped_response(self) -> bool:
        return self._bool("moldau.test.stop.after.dropped.response")

    @property
    def test_startup_delay_ms(self) -> int:
        return self._int("moldau.test.startup.delay.ms")

    @property
    def test_hold_transaction_markers(self) -> bool:
        return self._bool("moldau.test.hold.transaction.markers")

    @property
    def connections_max_idle_ms(self) -> int:
        return self._int("connections.max.idle.ms")

    @property
    def queued_max_request_bytes(self) -> int:
        """Kafka's memory pool size; -1 (or any value <= 0) means no limit."""
        return self._int("queued.max.request.bytes")

    @property
    def quota_window_num(self) -> int:
        return self._int("quota.window.num")

    @property
    def quota_window_size_seconds(self) -> int:
        return self._int("quota.window.size.seconds")

    @property
    def max_connections(self) -> int:
        return self._int("max.connections")

    @property
    def max_connections_per_ip(self) -> int:
        return self._int("max.connections.per.ip")

    @property
    def max_connections_per_ip_overrides(self) -> dict[str, int]:
        """``max.connections.per.ip.overrides`` parsed: host name or address -> limit."""
        return dict(self._per_ip_overrides)

    @property
    def fetch_max_bytes(self) -> int:
        return self._int("fetch.max.bytes")

    @property
    def log_segment_bytes(self) -> int:
        return self._int("log.segment.bytes")

    @property
    def log_roll_ms(self) -> int:
        """``log.roll.ms``, else ``log.roll.hours`` in ms."""
        return self._resolved_int(*_CHAIN_OF["log.roll.ms"])

    @property
    def log_roll_jitter_ms(self) -> int:
        return self._resolved_int(*_CHAIN_OF["log.roll.jitter.ms"])

    @property
    def log_retention_ms(self) -> int:
        """``log.retention.ms`` > ``.minutes`` > ``.hours``; any negative value becomes -1."""
        value = self._resolved_int(*_CHAIN_OF["log.retention.ms"])
        return -1 if value < 0 else value

    @property
    def log_retention_bytes(self) -> int:
        return self._int("log.retention.bytes")

    @property
    def log_retention_check_interval_ms(self) -> int:
        return self._int("log.retention.check.interval.ms")

    @property
    def log_index_interval_bytes(self) -> int:
        return self._int("log.index.interval.bytes")

    @property
    def log_index_size_max_bytes(self) -> int:
        return self._int("log.index.size.max.bytes")

    @property
    def log_segment_delete_delay_ms(self) -> int:
        return self._int("log.segment.delete.delay.ms")

    @property
    def log_cleanup_policy(self) -> tuple[str, ...]:
        return self._list("log.cleanup.policy")

    @property
    def log_message_timestamp_type(self) -> str:
        return self._str("log.message.timestamp.type")

    @property
    def log_flush_interval_messages(self) -> int:
        return self._int("log.flush.interval.messages")

    @property
    def log_flush_interval_ms(self) -> int:
        """``log.flush.interval.ms``, else ``log.flush.scheduler.interval.ms`` (Long.MAX)."""
        return self._resolved_int(*_CHAIN_OF["log.flush.interval.ms"])

    @property
    def log_flush_scheduler_interval_ms(self) -> int:
        """How often to look for logs due an fsync; Long.MAX (never) by default."""
        return self._int("log.flush.scheduler.interval.ms")

    @property
    def log_flush_offset_checkpoint_interval_ms(self) -> int:
        return self._int("log.flush.offset.checkpoint.interval.ms")

    @property
    def log_flush_start_offset_checkpoint_interval_ms(self) -> int:
        return self._int("log.flush.start.offset.checkpoint.interval.ms")

    @property
    def log_cleaner_enable(self) -> bool:
        return self._bool("log.cleaner.enable")

    @property
    def log_cleaner_delete_retention_ms(self) -> int:
        return self._int("log.cleaner.delete.retention.ms")

    @property
    def log_cleaner_min_cleanable_ratio(self) -> float:
        return self._float("log.cleaner.min.cleanable.ratio")

    @property
    def log_cleaner_min_compaction_lag_ms(self) -> int:
        return self._int("log.cleaner.min.compaction.lag.ms")

    @property
    def log_cleaner_max_compaction_lag_ms(self) -> int:
        return self._int("log.cleaner.max.compaction.lag.ms")

    @property
    def log_cleaner_backoff_ms(self) -> int:
        return self._int("log.cleaner.backoff.ms")

    @property
    def log_scrubber_enable(self) -> bool:
        return self._bool("log.scrubber.enable")

    @property
    def log_scrubber_bytes_per_second(self) -> int:
        return self._int("log.scrubber.bytes.per.second")

    @property
    def log_scrubber_backoff_ms(self) -> int:
        return self._int("log.scrubber.backoff.ms")

    @property
    def replica_fetch_max_bytes(self) -> int:
        return self._int("replica.fetch.max.bytes")

    @property
    def replica_fetch_response_max_bytes(self) -> int:
        return self._int("replica.fetch.response.max.bytes")

    @property
    def replica_fetch_min_bytes(self) -> int:
        return self._int("replica.fetch.min.bytes")

    @property
    def replica_fetch_wait_max_ms(self) -> int:
        return self._int("replica.fetch.wait.max.ms")

    @property
    def replica_fetch_backoff_ms(self) -> int:
        return self._int("replica.fetch.backoff.ms")

    @property
    def auto_leader_rebalance_enable(self) -> bool:
        return self._bool("auto.leader.rebalance.enable")

    @property
    def leader_imbalance_check_interval_seconds(self) -> int:
        return self._int("leader.imbalance.check.interval.seconds")

    @property
    def leader_imbalance_per_broker_percentage(self) -> int:
        return self._int("leader.imbalance.per.broker.percentage")

    @property
    def replica_lag_time_max_ms(self) -> int:
        return self._int("replica.lag.time.max.ms")

    @property
    def controlled_shutdown_enable(self) -> bool:
        return self._bool("controlled.shutdown.enable")

    @property
    def controlled_shutdown_max_retries(self) -> int:
        return self._int("controlled.shutdown.max.retries")

    @property
    def controlled_shutdown_retry_backoff_ms(self) -> int:
        return self._int("controlled.shutdown.retry.backoff.ms")

    @property
    def replica_socket_timeout_ms(self) -> int:
        return self._int("replica.socket.timeout.ms")

    @property
    def replica_high_watermark_checkpoint_interval_ms(self) -> int:
        return self._int("replica.high.watermark.checkpoint.interval.ms")

    @property
    def group_initial_rebalance_delay_ms(self) -> int:
        return self._int("group.initial.rebalance.delay.ms")

    @property
    def group_consumer_heartbeat_interval_ms(self) -> int:
        return self._int("group.consumer.heartbeat.interval.ms")

    @property
    def group_consumer_session_timeout_ms(self) -> int:
        return self._int("group.consumer.session.timeout.ms")

    @property
    def group_min_session_timeout_ms(self) -> int:
        return self._int("group.min.session.timeout.ms")

    @property
    def group_max_session_timeout_ms(self) -> int:
        return self._int("group.max.session.timeout.ms")

    @property
    def group_max_size(self) -> int:
        return self._int("group.max.size")

    @property
    def offset_metadata_max_bytes(self) -> int:
        return self._int("offset.metadata.max.bytes")

    @property
    def offsets_topic_num_partitions(self) -> int:
        return self._int("offsets.topic.num.partitions")

    @property
    def offsets_topic_replication_factor(self) -> int:
        return self._int("offsets.topic.replication.factor")

    @property
    def offsets_topic_segment_bytes(self) -> int:
        return self._int("offsets.topic.segment.bytes")

    @property
    def offsets_retention_ms(self) -> int:
        """``offsets.retention.minutes`` in milliseconds."""
        return self._int("offsets.retention.minutes") * MINUTES

    @property
    def offsets_retention_check_interval_ms(self) -> int:
        return self._int("offsets.retention.check.interval.ms")

    @property
    def offsets_commit_timeout_ms(self) -> int:
        return self._int("offsets.commit.timeout.ms")

    @property
    def transaction_state_log_num_partitions(self) -> int:
        return self._int("transaction.state.log.num.partitions")

    @property
    def transaction_state_log_replication_factor(self) -> int:
        return self._int("transaction.state.log.replication.factor")

    @property
    def transaction_state_log_min_isr(self) -> int:
        return self._int("transaction.state.log.min.isr")

    @property
    def transaction_state_log_segment_bytes(self) -> int:
        return self._int("transaction.state.log.segment.bytes")

    @property
    def transactional_id_expiration_ms(self) -> int:
        return self._int("transactional.id.expiration.ms")

    @property
    def transaction_max_timeout_ms(self) -> int:
        return self._int("transaction.max.timeout.ms")

    @property
    def transaction_abort_timed_out_transaction_cleanup_interval_ms(self) -> int:
        return self._int("transaction.abort.timed.out.transaction.cleanup.interval.ms")

    @property
    def transaction_remove_expired_transaction_cleanup_interval_ms(self) -> int:
        return self._int("transaction.remove.expired.transaction.cleanup.interval.ms")

    @property
    def producer_id_expiration_ms(self) -> int:
        return self._int("producer.id.expiration.ms")

    @property
    def producer_id_expiration_check_interval_ms(self) -> int:
        return self._int("producer.id.expiration.check.interval.ms")


#: Characters Kafka accepts in a host of max.connections.per.ip.overrides (Utils.validHostPattern).
_HOST_PATTERN = re.compile(r"[0-9a-zA-Z\-%._:]*")


def parse_connection_overrides(raw: str) -> dict[str, int]:
    """Parse ``host:count,host:count`` as Kafka does (the last ``:`` splits, for IPv6)."""
    key = "max.connections.per.ip.overrides"
    overrides: dict[str, int] = {}
    if not raw.strip():
        return overrides
    bad_hosts: list[str] = []
    for entry in re.split(r"\s*,\s*", raw.strip()):
        host, colon, count = entry.rpartition(":")
        host, count = host.strip(), count.strip()
        if not colon or not host:
            raise ConfigError(key, raw, f"entry '{entry}' is not of the form host:count")
        if not re.fullmatch(r"[+-]?\d+", count) or not 0 <= int(count) <= INT_MAX:
            raise ConfigError(key, raw, f"'{count}' in entry '{entry}' is not a connection count")
        if not _HOST_PATTERN.fullmatch(host):
            bad_hosts.append(host)
        overrides[host] = int(count)
    if bad_hosts:
        raise ConfigError(key, raw, message=f"{key} contains invalid addresses : "
                          f"{','.join(bad_hosts)}")
    return overrides


def describe_broker_configs(cfg: BrokerConfig) -> list[ConfigEntry]:
    """DescribeConfigs rows for a BROKER resource: every defined key, plus any set key that
    moldau accepts without defining it (reported as a read-only STRING)."""
    entries: list[ConfigEntry] = []
    for name in sorted(BROKER_KEYS):
        key = BROKER_KEYS[name]
        synonyms = cfg.synonyms(name)
        if key.sensitive:  # a PASSWORD: Kafka never sends its value, nor its synonyms'
            synonyms = [ConfigSynonym(s.name, None, s.source) for s in synonyms]
        entries.append(ConfigEntry(
            name=name,
            value=None if key.sensitive else key.format(cfg.get(name)),
            source=cfg.source(name),
            read_only=not key.dynamic,
            is_sensitive=key.sensitive,
            config_type=key.type,
            documentation=key.doc,
            synonyms=tuple(synonyms),
        ))
    extra = sorted(n for n in cfg.set_names() if n not in BROKER_KEYS and is_known_unused(n))
    for name in extra:
        raw = cfg.get(name)
        assert raw is None or isinstance(raw, str)
        # A listener-prefixed key has its base key's type; Kafka never echoes a PASSWORD,
        # nor any value whose type it cannot tell (TLS/SASL families hold secrets).
        definition = key_definition(name)
        if definition is not None:
            sensitive, config_type = definition.sensitive, definition.type
        else:
            sensitive = name.startswith(_SECRET_PREFIXES) or "password" in name
            config_type = ConfigType.STRING
        value = None if sensitive else raw
        entries.append(ConfigEntry(
            name=name,
            value=value,
            source=cfg.source(name),
            read_only=True,
            is_sensitive=sensitive,
            config_type=config_type,
            documentation="Kafka setting accepted and ignored by moldau.",
            synonyms=(ConfigSynonym(name, value, cfg.source(name)),),
        ))
    return entries
