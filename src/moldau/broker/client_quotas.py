"""Client quotas (Kafka's ClientQuotaManager family): who is limited to what, and for how long
a request that went over its quota holds its client back.

The quota values come from the metadata store (AlterClientQuotas writes them; in a cluster
every broker hears of a change through /config/changes). For each quota key and each client
(its user, the principal's name, and its client id) the value is found in Kafka's order of
precedence (the default quota callback)::

    user + client id, user + default client id, user,
    default user + client id, default user + default client id, default user,
    client id, default client id

and the client shares the measured rate with every client of the same matched entity: a
quota set on ``user=alice`` is shared by all of alice's client ids, one on ``user=<default>``
is per user, one on ``user=alice, client-id=<default>`` per client id of alice (Kafka's
metric tags). Resolutions are cached per (user, client id) until the quotas change.

Nothing is looked at while no quota is configured for anyone: ``active`` is the one test
made per request. Recording is per request (bytes of a Produce request, bytes of a Fetch
response, handler time), never per record.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..config.client_quotas import (
    CLIENT_ID,
    CONSUMER_BYTE_RATE,
    CONTROLLER_MUTATION_RATE,
    PRODUCER_BYTE_RATE,
    QUOTA_KEYS,
    REQUEST_PERCENTAGE,
    USER,
    QuotaEntity,
    describe_entity,
    entity,
)
from .quota_rate import SampledRate, TokenBucket

log = logging.getLogger(__name__)

#: (user tag, client id tag) of a shared measurement; "" where the entity has no such part.
SensorKey = tuple[str, str]


def principal_user(principal: str) -> str:
    """The user a quota knows a principal by: its name (``User:alice`` -> ``alice``)."""
    return principal.partition(":")[2] or principal


def _candidates(user: str, client: str) -> tuple[QuotaEntity, ...]:
    """The entities to try for (user, client id), in Kafka's order of precedence."""
    return (
        entity(user=user, client_id=client),
        entity(user=user, client_id=None),
        entity(user=user),
        entity(user=None, client_id=client),
        entity(user=None, client_id=None),
        entity(user=None),
        entity(client_id=client),
        entity(client_id=None),
    )


@dataclass(slots=True)
class _Limit:
    """A client's limit for one key: the bound and the measurement it shares."""

    bound: float
    rate: SampledRate
    bucket: TokenBucket | None = None


@dataclass(slots=True)
class _QuotaKind:
    """One quota key's configured values, shared measurements and resolution cache."""

    key: str
    values: dict[QuotaEntity, float] = field(default_factory=dict)
    rates: dict[SensorKey, SampledRate] = field(default_factory=dict)
    buckets: dict[SensorKey, TokenBucket] = field(default_factory=dict)
    resolved: dict[tuple[str, str], _Limit | None] = field(default_factory=dict)


#: A measurement no request has added to for this long is dropped, as Kafka expires a quota
#: sensor after an hour without use: otherwise a default client-id quota keeps one rate per
#: client id the broker ever saw.
IDLE_MEASUREMENT_MS = 3_600_000
#: How often recording looks for idle measurements (a walk over every measurement).
SWEEP_EVERY_MS = 60_000


class ClientQuotas:
    """Every client quota of this broker and the rates measured against them."""

    def __init__(self, samples: int, window_s: int,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.samples = samples
        self.window_ms = window_s * 1000
        #: The longest a request-time violation holds a client back (Kafka's
        #: ClientRequestQuotaManager: one window); byte rates are not bounded (as Kafka).
        self.max_request_throttle_ms = self.window_ms
        self._clock = clock
        self._kinds = {key: _QuotaKind(key) for key in QUOTA_KEYS}
        #: True while some quota is configured: the only test made per request otherwise.
        self.active = False
        #: Per key: whether any entity sets it (cheaper than resolving for nothing).
        self.enabled: dict[str, bool] = dict.fromkeys(QUOTA_KEYS, False)
        self._next_sweep_ms = self.now_ms() + SWEEP_EVERY_MS

    def now_ms(self) -> float:
        return self._clock() * 1000.0

    # -- configuration ----------------------------------------------------------------------

    def load(self, quotas: dict[QuotaEntity, dict[str, float]]) -> None:
        """Replace every quota (start-up)."""
        for kind in self._kinds.values():
            kind.values.clear()
        for quota_entity, values in quotas.items():
            for key, value in values.items():
                if key in self._kinds:
                    self._kinds[key].values[quota_entity] = value
        self._changed()

    def set(self, quota_entity: QuotaEntity, values: dict[str, float]) -> None:
        """An entity's quotas changed (AlterClientQuotas here or on another broker)."""
        for key, kind in self._kinds.items():
            old = kind.values.get(quota_entity)
            if key in values:
                kind.values[quota_entity] = values[key]
            else:
                kind.values.pop(quota_entity, None)
            if old != kind.values.get(quota_entity):
                log.info("client quota %s of %s: %s", key, describe_entity(quota_entity),
                         kind.values.get(quota_entity, "removed"))
        self._changed()

    def _changed(self) -> None:
        for key, kind in self._kinds.items():
            kind.resolved.clear()
            self.enabled[key] = bool(kind.values)
        self.active = any(self.enabled.values())

    def configured(self) -> dict[QuotaEntity, dict[str, float]]:
        found: dict[QuotaEntity, dict[str, float]] = {}
        for key, kind in self._kinds.items():
            for quota_entity, value in kind.values.items():
                found.setdefault(quota_entity, {})[key] = value
        return found

    # -- resolution ---------------------------------------------------------------------------

    def resolve(self, key: str, user: str, client: str) -> tuple[QuotaEntity, float] | None:
        """The entity whose ``key`` quota applies to (user, client id), and its value."""
        values = self._kinds[key].values
        for candidate in _candidates(user, client):
            value = values.get(candidate)
            if value is not None:
                return candidate, value
        return None

    def _limit(self, key: str, user: str, client: str) -> _Limit | None:
        kind = self._kinds[key]
        cached = kind.resolved.get((user, client), False)
        if cached is not False:
            return cached  # type: ignore[return-value]
        found = self.resolve(key, user, client)
        limit = None
        if found is not None:
            matched, bound = found
            parts = dict(matched)
            sensor = (user if USER in parts else "", client if CLIENT_ID in parts else "")
            rate = kind.rates.get(sensor)
            if rate is None:
                rate = kind.rates[sensor] = SampledRate(self.samples, self.window_ms,
                                                        self.now_ms())
            bucket = None
            if key == CONTROLLER_MUTATION_RATE:
                bucket = kind.buckets.get(sensor)
                if bucket is None:
                    bucket = kind.buckets[sensor] = TokenBucket(self.now_ms())
            limit = _Limit(bound, rate, bucket)
        if len(kind.resolved) > 100_000:  # many short-lived client ids: start over
            kind.resolved.clear()
        kind.resolved[(user, client)] = limit
        return limit

    # -- recording ----------------------------------------------------------------------------

    def _record(self, key: str, user: str, client: str, value: float,
                max_ms: int = 2**31 - 1) -> int:
        if not self.enabled[key]:
            return 0
        limit = self._limit(key, user, client)
        if limit is None:
            return 0
        now = self.now_ms()
        if now >= self._next_sweep_ms:
            self._drop_idle(now)
            limit = self._limit(key, user, client)
            assert limit is not None  # the quotas did not change, only measurements went
        limit.rate.record(value, now)
        return limit.rate.throttle_ms(limit.bound, now, max_ms)

    def _drop_idle(self, now_ms: float) -> None:
        """Forget the measurements of clients idle for IDLE_MEASUREMENT_MS; a client that
        comes back starts a fresh one, as a new client would. Controller-mutation buckets
        stay: their rates record nothing, so idleness cannot be seen there (and few clients
        create topics)."""
        self._next_sweep_ms = now_ms + SWEEP_EVERY_MS
        for key, kind in self._kinds.items():
            if key == CONTROLLER_MUTATION_RATE:
                continue
            idle = [sensor for sensor, rate in kind.rates.items()
                    if now_ms - rate.last_window_ms >= IDLE_MEASUREMENT_MS]
            for sensor in idle:
                del kind.rates[sensor]
            if idle:
                kind.resolved.clear()  # it holds the dropped measurements

    def measurements(self) -> int:
        """How many rates are being measured (all keys), for tests and metrics."""
        return sum(len(kind.rates) for kind in self._kinds.values())

    def record_produce(self, user: str, client: str, request_bytes: int) -> int:
        """A Produce request of ``request_bytes``: the throttle time in ms (0: none)."""
        return self._record(PRODUCER_BYTE_RATE, user, client, request_bytes)

    def record_fetch(self, user: str, client: str, response_bytes: int) -> int:
        """A Fetch response of ``response_bytes``: the throttle time in ms (0: none)."""
        return self._record(CONSUMER_BYTE_RATE, user, client, response_bytes)

    def fetch_window_bytes(self, user: str, client: str) -> int | None:
        """The most a Fetch may return: one quota window's worth (None: no quota)."""
        limit = self._limit(CONSUMER_BYTE_RATE, user, client)
        if limit is None:
            return None
        return max(int(limit.bound * self.window_ms / 1000), 1)

    def unrecord_fetch(self, user: str, client: str, response_bytes: int) -> None:
        """A throttled Fetch is answered empty: its bytes were not sent after all."""
        limit = self._limit(CONSUMER_BYTE_RATE, user, client)
        if limit is not None:
            limit.rate.record(-response_bytes, self.now_ms())

    def record_request_time(self, user: str, client: str, seconds: float) -> int:
        """Handler time of a request, as a percentage of one second (Kafka's request
        thread time in percent): the throttle time in ms (0: none)."""
        return self._record(REQUEST_PERCENTAGE, user, client, seconds * 100.0,
                            self.max_request_throttle_ms)

    # -- controller mutations (KIP-599) --------------------------------------------------------

    def _mutation_limit(self, user: str, client: str) -> _Limit | None:
        if not self.enabled[CONTROLLER_MUTATION_RATE]:
            return None
        return self._limit(CONTROLLER_MUTATION_RATE, user, client)

    def _burst(self, limit: _Limit) -> float:
        return limit.bound * self.samples * self.window_ms / 1000.0

    def mutation_exceeded(self, user: str, client: str) -> bool:
        """Strict mode (CreateTopics v6+, CreatePartitions v3+, DeleteTopics v5+): whether
        the next mutation must be refused with THROTTLING_QUOTA_EXCEEDED."""
        limit = self._mutation_limit(user, client)
        if limit is None or limit.bucket is None:
            return False
        return limit.bucket.refill(limit.bound, self._burst(limit), self.now_ms()) < 0

    def record_mutation(self, user: str, client: str, partitions: int) -> None:
        limit = self._mutation_limit(user, client)
        if limit is not None and limit.bucket is not None:
            limit.bucket.take(partitions, limit.bound, self._burst(limit), self.now_ms())

    def mutation_throttle_ms(self, user: str, client: str) -> int:
        limit = self._mutation_limit(user, client)
        if limit is None or limit.bucket is None:
            return 0
        return limit.bucket.throttle_ms(limit.bound, self._burst(limit), self.now_ms())
