"""Client quotas without a server: Kafka's order of precedence, shared measurements, the
sampled rate and throttle-time arithmetic, the KIP-599 bucket, entity paths and values."""

from __future__ import annotations

import pytest

from moldau.broker.client_quotas import ClientQuotas, principal_user
from moldau.broker.quota_rate import SampledRate, TokenBucket
from moldau.config.client_quotas import (
    QuotaEntity,
    QuotaValueError,
    encode_value,
    entity,
    entity_path,
    parse_entity_path,
    parse_value,
)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# Kafka's order, most specific first, with the value each entity gets in the test below.
ORDER = [
    (entity(user="alice", client_id="app"), 1.0),
    (entity(user="alice", client_id=None), 2.0),
    (entity(user="alice"), 3.0),
    (entity(user=None, client_id="app"), 4.0),
    (entity(user=None, client_id=None), 5.0),
    (entity(user=None), 6.0),
    (entity(client_id="app"), 7.0),
    (entity(client_id=None), 8.0),
]


def test_resolution_follows_kafkas_order_of_precedence() -> None:
    quotas = ClientQuotas(11, 1)
    configured = {e: {"producer_byte_rate": v} for e, v in ORDER}
    for matched, value in ORDER:
        quotas.load(configured)
        assert quotas.resolve("producer_byte_rate", "alice", "app") == (matched, value)
        del configured[matched]  # the next one down applies once this one is gone
    quotas.load(configured)
    assert quotas.resolve("producer_byte_rate", "alice", "app") is None
    assert not quotas.active


def test_each_key_resolves_on_its_own() -> None:
    quotas = ClientQuotas(11, 1)
    quotas.load({entity(user="alice"): {"producer_byte_rate": 100.0},
                 entity(client_id=None): {"consumer_byte_rate": 50.0}})
    assert quotas.resolve("producer_byte_rate", "alice", "x") == (entity(user="alice"), 100.0)
    assert quotas.resolve("consumer_byte_rate", "alice", "x") == (entity(client_id=None), 50.0)
    assert quotas.resolve("producer_byte_rate", "bob", "x") is None
    assert quotas.enabled["producer_byte_rate"] and not quotas.enabled["request_percentage"]


def test_no_quota_means_no_throttle_and_no_measurement() -> None:
    quotas = ClientQuotas(11, 1)
    assert not quotas.active
    assert quotas.record_produce("alice", "app", 10**9) == 0
    quotas.set(entity(user="bob"), {"producer_byte_rate": 1.0})
    assert quotas.active
    assert quotas.record_produce("alice", "app", 10**9) == 0  # alice has none


def test_a_user_quota_is_shared_by_its_client_ids_and_a_default_is_per_user() -> None:
    clock = Clock()
    quotas = ClientQuotas(11, 1, clock)
    quotas.load({entity(user="alice"): {"producer_byte_rate": 1000.0},
                 entity(user=None): {"producer_byte_rate": 1000.0}})
    # 10 windows x 1000 B/s = 10 000 bytes before the rate exceeds the quota.
    assert quotas.record_produce("alice", "a", 6000) == 0
    assert quotas.record_produce("alice", "b", 6000) > 0  # same user: same measurement
    assert quotas.record_produce("bob", "a", 6000) == 0  # the default is per user
    assert quotas.record_produce("carol", "a", 6000) == 0


def test_sampled_rate_spans_at_least_samples_minus_one_windows() -> None:
    rate = SampledRate(11, 1000, 0.0)
    rate.record(10_000, 0.0)
    assert rate.span_ms(0.0) == 10_000
    assert rate.rate(0.0) == pytest.approx(1000.0)
    # Past the minimum span the real elapsed time counts.
    for t in range(1, 15):
        rate.record(1000, t * 1000.0)
    assert rate.span_ms(14_500.0) == pytest.approx(10_500.0)
    assert rate.rate(14_500.0) == pytest.approx(11 * 1000 / 10.5)


def test_old_windows_are_forgotten() -> None:
    rate = SampledRate(11, 1000, 0.0)
    rate.record(50_000, 0.0)
    assert rate.rate(5_000.0) > 0
    assert rate.rate(11_000.0) == 0.0


def test_throttle_time_is_kafkas_formula_with_an_optional_bound() -> None:
    rate = SampledRate(11, 1000, 0.0)
    rate.record(12_000, 0.0)  # 1200 B/s over the 10 s minimum span
    # (1200 - 1000) / 1000 * 10 000 ms = 2000 ms, bounded to one window.
    assert rate.throttle_ms(1000.0, 0.0, 10_000) == 2000
    assert rate.throttle_ms(1000.0, 0.0, 1000) == 1000
    assert rate.throttle_ms(1200.0, 0.0, 1000) == 0
    assert rate.throttle_ms(1100.0, 0.0, 10_000) == round(100 / 1100 * 10_000)


def test_throttling_converges_on_the_quota() -> None:
    """A client that sends 100 KB at a time and waits out each throttle gets the quota, up to
    Kafka's imprecision: a rate over ``samples`` windows lets through at most one window in
    ``samples - 1`` more (the oldest window drops out whole)."""
    clock = Clock()
    quotas = ClientQuotas(11, 1, clock)
    quotas.set(entity(client_id="app"), {"producer_byte_rate": 1_000_000.0})
    start, sent = clock.now, 0
    steady_from, steady_sent = start + 20, 0
    while clock.now - start < 80:
        throttle = quotas.record_produce("ANONYMOUS", "app", 100_000)
        sent += 100_000
        if clock.now < steady_from:
            steady_sent = sent
        clock.now += max(throttle / 1000, 0.001)
    rate = (sent - steady_sent) / (clock.now - steady_from)
    assert 1_000_000 <= rate <= 1_000_000 * (1 + 1 / 10 + 0.01)


def test_fetch_cap_and_unrecord() -> None:
    clock = Clock()
    quotas = ClientQuotas(11, 2, clock)
    quotas.set(entity(user="alice"), {"consumer_byte_rate": 500.0})
    assert quotas.fetch_window_bytes("alice", "c") == 1000
    assert quotas.fetch_window_bytes("bob", "c") is None
    assert quotas.record_fetch("alice", "c", 20_000) > 0
    quotas.unrecord_fetch("alice", "c", 20_000)
    assert quotas.record_fetch("alice", "c", 100) == 0


def test_request_percentage_counts_handler_time() -> None:
    clock = Clock()
    quotas = ClientQuotas(11, 1, clock)
    quotas.set(entity(user=None), {"request_percentage": 10.0})
    # 10 % of a thread over a 10 s span is 1 s of handler time.
    assert quotas.record_request_time("u", "c", 0.9) == 0
    assert quotas.record_request_time("u", "c", 0.5) == 1000  # bounded to one window


def test_controller_mutations_use_a_token_bucket() -> None:
    clock = Clock()
    quotas = ClientQuotas(2, 1, clock)
    quotas.set(entity(user="alice"), {"controller_mutation_rate": 5.0})
    # Burst: 5 partitions/s x 2 windows x 1 s = 10 partitions.
    assert not quotas.mutation_exceeded("alice", "c")
    quotas.record_mutation("alice", "c", 12)
    assert quotas.mutation_exceeded("alice", "c")
    assert quotas.mutation_throttle_ms("alice", "c") == 400  # 2 tokens at 5/s
    clock.now += 0.5
    assert not quotas.mutation_exceeded("alice", "c")
    assert not quotas.mutation_exceeded("bob", "c")


def test_token_bucket_starts_full_and_refills() -> None:
    bucket = TokenBucket(0.0)
    assert bucket.refill(1.0, 10.0, 0.0) == 10.0
    bucket.take(15, 1.0, 10.0, 0.0)
    assert bucket.throttle_ms(1.0, 10.0, 0.0) == 5000
    assert bucket.throttle_ms(1.0, 10.0, 5000.0) == 0


@pytest.mark.parametrize(("quota_entity", "path"), [
    (entity(user="alice"), "users/alice"),
    (entity(user=None), "users/<default>"),
    (entity(client_id="app 1"), "clients/app%201"),
    (entity(user="<default>"), "users/%3Cdefault%3E"),
    (entity(user="CN=a,O=b", client_id=None), "users/CN%3Da%2CO%3Db/clients/<default>"),
    (entity(user=None, client_id="c*~"), "users/<default>/clients/c%2A%7E"),
])
def test_entity_paths_are_kafkas_sanitized_znode_paths(quota_entity: QuotaEntity,
                                                       path: str) -> None:
    assert entity_path(quota_entity) == path
    assert parse_entity_path(path) == quota_entity


def test_values_are_checked_and_stored_as_kafka_does() -> None:
    assert parse_value("producer_byte_rate", 1048576.0) == 1048576.0
    assert encode_value("producer_byte_rate", 1048576.0) == "1048576"
    assert encode_value("request_percentage", 200.0) == "200.0"
    with pytest.raises(QuotaValueError, match="Invalid configuration key bogus"):
        parse_value("bogus", 1.0)
    with pytest.raises(QuotaValueError, match="must be a Long"):
        parse_value("consumer_byte_rate", 1.5)
    with pytest.raises(QuotaValueError, match="must be a Long"):
        parse_value("producer_byte_rate", 1e300)
    assert parse_value("request_percentage", 1.5) == 1.5
    assert parse_entity_path("topics/t") is None
    assert principal_user("User:alice") == "alice"
    assert principal_user("User:ANONYMOUS") == "ANONYMOUS"


def test_measurements_of_idle_clients_are_dropped_after_an_hour() -> None:
    clock = Clock()
    quotas = ClientQuotas(11, 1, clock)
    quotas.load({entity(client_id=None): {"producer_byte_rate": 1000.0}})  # one rate per client
    for n in range(500):
        assert quotas.record_produce("", f"short-lived-{n}", 10) == 0
    assert quotas.measurements() == 500
    # A steady client keeps its measurement (and its debt) across the sweep.
    for _ in range(40):
        clock.now += 100.0  # 40 x 100 s: past the hour, and past several sweeps
        quotas.record_produce("", "steady", 20_000)
    assert quotas.measurements() == 1
    assert quotas.record_produce("", "steady", 20_000) > 0
    # The others start afresh when they come back.
    assert quotas.record_produce("", "short-lived-0", 10) == 0
    assert quotas.measurements() == 2
