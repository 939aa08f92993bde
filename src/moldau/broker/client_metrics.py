"""Client metrics (KIP-714): subscriptions set as config resources, and what clients push.

An operator defines a subscription as a CLIENT_METRICS config resource (``kafka-client-
metrics.sh``, or IncrementalAlterConfigs with resource type 16): ``metrics`` (metric-name
prefixes, ``*`` for all), ``interval.ms`` (how often to push) and ``match`` (``selector=regex``
pairs over the client's instance id, client id, software name and version, source address and
port). A client asks GetTelemetrySubscriptions which metrics to push; the answer merges every
subscription that matches it, and its subscription id changes whenever that merge does, so a
client pushing under an old id gets UNKNOWN_SUBSCRIPTION_ID and asks again, as with Kafka.

PushTelemetry payloads are OTLP protobuf; moldau keeps the latest one per client instance
(bytes as received, with when and from whom) for the observability side to expose, and never
parses them on the request path. Only uncompressed pushes are accepted (the subscription
offers no compression type), so the kept bytes are plain OTLP.

Subscriptions live in this broker's memory: they are lost on restart and each broker of a
cluster has its own (Kafka keeps them in its KRaft metadata).
"""

from __future__ import annotations

import logging
import re
import uuid
import zlib
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from ..config.definitions import ConfigEntry, ConfigSource, ConfigType

log = logging.getLogger(__name__)

#: The config resource type of client-metrics subscriptions.
CLIENT_METRICS = 16
DEFAULT_INTERVAL_MS = 300_000
MIN_INTERVAL_MS, MAX_INTERVAL_MS = 100, 3_600_000
#: Kafka's ``telemetry.max.bytes`` default: larger pushes are TELEMETRY_TOO_LARGE.
TELEMETRY_MAX_BYTES = 1024 * 1024
#: Client instances kept at most; past it the longest-known one is forgotten (it asks again).
MAX_CLIENT_INSTANCES = 10_000
SELECTORS = ("client_instance_id", "client_id", "client_software_name",
             "client_software_version", "client_source_address", "client_source_port")
_KEYS = {
    "metrics": (ConfigType.LIST, "", "Telemetry metric name prefixes, comma separated; "
                "* for all."),
    "interval.ms": (ConfigType.INT, str(DEFAULT_INTERVAL_MS),
                    "How often (ms) matching clients push their metrics."),
    "match": (ConfigType.LIST, "", "selector=regex pairs choosing the clients; none: all."),
}
#: Compression type of a PushTelemetry payload that is not compressed.
NO_COMPRESSION = 0


class ClientMetricsError(ValueError):
    """A subscription config that Kafka would refuse (INVALID_CONFIG)."""


def _items(raw: str) -> list[str]:
    return [item.strip() for item in raw.split(",") if item.strip()]


@dataclass(frozen=True, slots=True)
class Subscription:
    name: str
    metrics: tuple[str, ...]
    interval_ms: int
    match: tuple[tuple[str, re.Pattern[str]], ...]

    def matches(self, selectors: dict[str, str]) -> bool:
        return all(pattern.fullmatch(selectors.get(key, "")) for key, pattern in self.match)


def parse_subscription(name: str, configs: dict[str, str]) -> Subscription:
    """Check a subscription's configs as Kafka's ClientMetricsConfigs does."""
    unknown = sorted(set(configs) - set(_KEYS))
    if unknown:
        raise ClientMetricsError(f"Unknown client metrics configs: {', '.join(unknown)}")
    try:
        interval = int(configs.get("interval.ms", DEFAULT_INTERVAL_MS))
    except ValueError:
        raise ClientMetricsError("interval.ms must be an integer") from None
    if not MIN_INTERVAL_MS <= interval <= MAX_INTERVAL_MS:
        raise ClientMetricsError(f"Invalid value {interval} for interval.ms, interval must be "
                                 f"between {MIN_INTERVAL_MS} and {MAX_INTERVAL_MS}")
    match = []
    for pair in _items(configs.get("match", "")):
        key, sep, regex = pair.partition("=")
        key = key.strip()
        if not sep or key not in SELECTORS:
            raise ClientMetricsError(f"Illegal client matching pattern: {pair}")
        try:
            match.append((key, re.compile(regex.strip())))
        except re.error as exc:
            raise ClientMetricsError(f"Illegal regex in {pair}: {exc}") from None
    metrics = _items(configs.get("metrics", ""))
    return Subscription(name, tuple(metrics), interval, tuple(match))


@dataclass(slots=True)
class Telemetry:
    """The latest push of one client instance."""

    client_id: str
    source: str
    received_ms: int
    payload: bytes


@dataclass(slots=True)
class ClientInstance:
    instance_id: uuid.UUID
    selectors: dict[str, str]
    subscription_id: int = 0
    metrics: tuple[str, ...] = ()
    interval_ms: int = DEFAULT_INTERVAL_MS
    last_push_ms: int = -1
    terminating: bool = False
    latest: Telemetry | None = field(default=None)


class ClientMetrics:
    """This broker's client-metrics subscriptions and the clients that push to it."""

    def __init__(self) -> None:
        self._configs: dict[str, dict[str, str]] = {}
        self._subscriptions: dict[str, Subscription] = {}
        self._instances: dict[uuid.UUID, ClientInstance] = {}

    # -- config resources --------------------------------------------------------------------

    def names(self) -> list[str]:
        return sorted(self._configs)

    def configs(self, name: str) -> dict[str, str]:
        return dict(self._configs.get(name, {}))

    def entries(self, name: str) -> list[ConfigEntry]:
        """DescribeConfigs of one subscription: its keys, set or default."""
        current = self._configs.get(name, {})
        return [
            ConfigEntry(name=key, value=current.get(key, default),
                        source=(ConfigSource.CLIENT_METRICS_CONFIG if key in current
                                else ConfigSource.DEFAULT_CONFIG),
                        read_only=False, is_sensitive=False, config_type=kind,
                        documentation=doc)
            for key, (kind, default, doc) in _KEYS.items()
        ]

    def set_configs(self, name: str, configs: dict[str, str], *, validate_only: bool) -> None:
        """Replace a subscription's configs (none left: it is removed)."""
        if not name:
            raise ClientMetricsError("Client metrics resource name must not be empty")
        subscription = parse_subscription(name, configs)
        if validate_only:
            return
        if configs:
            self._configs[name] = dict(configs)
            self._subscriptions[name] = subscription
        else:
            self._configs.pop(name, None)
            self._subscriptions.pop(name, None)
        for instance in self._instances.values():
            self._resolve(instance)

    # -- clients -----------------------------------------------------------------------------

    def _resolve(self, instance: ClientInstance) -> None:
        """Merge the subscriptions matching the client; the id names that merge."""
        matching = [s for s in self._subscriptions.values() if s.matches(instance.selectors)]
        metrics = sorted({m for s in matching for m in s.metrics})
        # "*" subscribes to everything: the protocol's single empty-string prefix.
        instance.metrics = ("",) if "*" in metrics else tuple(metrics)
        instance.interval_ms = min((s.interval_ms for s in matching),
                                   default=DEFAULT_INTERVAL_MS)
        key = f"{','.join(instance.metrics)}|{instance.interval_ms}|{instance.instance_id}"
        instance.subscription_id = zlib.crc32(key.encode()) - 2**31

    def subscribe(self, instance_id: uuid.UUID | None, client_id: str,
                  source: str) -> ClientInstance:
        """GetTelemetrySubscriptions: the client's instance (a new id for a zero one)."""
        if instance_id is None:
            instance_id = uuid.uuid4()
        instance = self._instances.get(instance_id)
        if instance is None:
            instance = ClientInstance(instance_id, {
                "client_instance_id": str(instance_id), "client_id": client_id,
                "client_source_address": source,
            })
            self._instances[instance_id] = instance
            if len(self._instances) > MAX_CLIENT_INSTANCES:
                del self._instances[next(iter(self._instances))]
        self._resolve(instance)
        return instance

    def push(self, instance_id: uuid.UUID | None, subscription_id: int, terminating: bool,
             compression_type: int, payload: bytes, client_id: str, source: str,
             now_ms: int) -> tuple[ErrorCode, str | None]:
        """PushTelemetry, checked as Kafka's ClientMetricsManager does; keeps the payload."""
        if instance_id is None:
            return ErrorCode.invalid_request, "Invalid client instance id"
        instance = self._instances.get(instance_id)
        if instance is None:
            instance = self.subscribe(instance_id, client_id, source)
        if instance.terminating:
            return ErrorCode.invalid_request, "Client has already sent a terminating request"
        if subscription_id != instance.subscription_id:
            return ErrorCode.unknown_subscription_id, "Unknown client subscription id"
        too_soon = (instance.last_push_ms >= 0
                    and now_ms - instance.last_push_ms < instance.interval_ms)
        if too_soon and not terminating:
            return (ErrorCode.throttling_quota_exceeded,
                    "Request received before the push interval elapsed")
        if compression_type != NO_COMPRESSION:
            return ErrorCode.unsupported_compression_type, "Unsupported compression type"
        if len(payload) > TELEMETRY_MAX_BYTES:
            return ErrorCode.telemetry_too_large, "Telemetry data is too large"
        instance.last_push_ms = now_ms
        instance.terminating = terminating
        if payload:
            if instance.latest is None:  # one line per client instance, not per push
                log.info("client %r (instance %s at %s) pushes its metrics, %d bytes",
                         client_id, instance_id, source, len(payload))
            instance.latest = Telemetry(client_id, source, now_ms, payload)
        return ErrorCode.none, None

    def latest(self) -> dict[uuid.UUID, Telemetry]:
        """The latest metrics each client instance pushed."""
        return {i.instance_id: i.latest for i in self._instances.values()
                if i.latest is not None}
