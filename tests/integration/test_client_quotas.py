"""AlterClientQuotas and DescribeClientQuotas against a real broker: through kafka-python's
protocol classes (neither kafka-python's nor confluent-kafka's admin client has calls for
them) and ``moldau quota``; Kafka's errors for bad input; request-time and controller
mutation quotas seen by real clients.

One broker serves the module: quotas are broker-wide, so the shared session broker is left
alone.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient
from kafka.protocol.admin.client_quotas import (
    AlterClientQuotasRequest,
    DescribeClientQuotasRequest,
)
from kio.schema.create_topics import v7 as create_v7
from kio.schema.describe_client_quotas import v1 as describe_v1
from kio.schema.errors import ErrorCode
from kio.static.primitive import i16, i32, i32Timedelta

from moldau.cli import raw_requests
from tests.conftest import TEST_BROKER_OVERRIDES
from tests.helpers import BrokerProcess, ok, one_line_error, run_moldau

Entry = AlterClientQuotasRequest.EntryData
Component = DescribeClientQuotasRequest.ComponentData
EXACT, DEFAULT, ANY = 0, 1, 2


@pytest.fixture(scope="module")
def quota_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path_factory.mktemp("quotas"),
                            overrides=TEST_BROKER_OVERRIDES).start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="module")
def admin(quota_broker: BrokerProcess) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=quota_broker.bootstrap, client_id="quota-admin")
    try:
        yield client
    finally:
        client.close()


def send(admin: KafkaAdminClient, request: Any) -> Any:
    return admin._manager.run(admin._manager.send, request)


def entity(**parts: str | None) -> list[Any]:
    return [Entry.EntityData(entity_type=k.replace("_", "-"), entity_name=v)
            for k, v in parts.items()]


def alter(admin: KafkaAdminClient, parts: dict[str, str | None], ops: dict[str, float | None],
          validate_only: bool = False) -> Any:
    request = AlterClientQuotasRequest(entries=[Entry(
        entity=entity(**parts),
        ops=[Entry.OpData(key=k, value=0.0 if v is None else v, remove=v is None)
             for k, v in ops.items()])], validate_only=validate_only)
    return send(admin, request).entries[0]


def described(admin: KafkaAdminClient, components: list[tuple[str, int, str | None]],
              strict: bool = False) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
    response = send(admin, DescribeClientQuotasRequest(components=[
        Component(entity_type=t, match_type=mt, match=m) for t, mt, m in components],
        strict=strict))
    assert response.error_code == 0, response.error_message
    return {tuple((e.entity_type, e.entity_name) for e in entry.entity):
            {v.key: v.value for v in entry.values} for entry in response.entries}


def test_alter_then_describe_with_filters(admin: KafkaAdminClient) -> None:
    assert alter(admin, {"user": "alice"}, {"producer_byte_rate": 1048576}).error_code == 0
    assert alter(admin, {"user": "alice", "client_id": None},
                 {"consumer_byte_rate": 2048}).error_code == 0
    assert alter(admin, {"client_id": None}, {"request_percentage": 150.5}).error_code == 0
    assert alter(admin, {"user": None}, {"producer_byte_rate": 4096}).error_code == 0

    everything = described(admin, [])
    assert everything[(("user", "alice"),)] == {"producer_byte_rate": 1048576.0}
    assert everything[(("user", "alice"), ("client-id", None))] == {"consumer_byte_rate": 2048.0}
    assert everything[(("client-id", None),)] == {"request_percentage": 150.5}
    # exact user, not strict: alice alone and alice with any client id
    assert set(described(admin, [("user", EXACT, "alice")])) == {
        (("user", "alice"),), (("user", "alice"), ("client-id", None))}
    # strict: exactly the filtered entity types
    assert set(described(admin, [("user", EXACT, "alice")], strict=True)) == {
        (("user", "alice"),)}
    assert set(described(admin, [("user", DEFAULT, None)], strict=True)) == {
        (("user", None),)}
    assert set(described(admin, [("client-id", ANY, None)], strict=True)) == {
        (("client-id", None),)}
    assert described(admin, [("user", EXACT, "nobody")]) == {}

    # removing the last key removes the entity; validate_only changes nothing
    assert alter(admin, {"user": "alice", "client_id": None},
                 {"consumer_byte_rate": None}).error_code == 0
    assert alter(admin, {"user": "alice"}, {"producer_byte_rate": 1}, validate_only=True
                 ).error_code == 0
    after = described(admin, [("user", EXACT, "alice")])
    assert after == {(("user", "alice"),): {"producer_byte_rate": 1048576.0}}


@pytest.mark.parametrize(("parts", "ops", "message"), [
    ({"user": "bob"}, {"bogus_rate": 1.0}, "Invalid configuration key bogus_rate"),
    ({"user": "bob"}, {"producer_byte_rate": 1.5}, "must be a Long value"),
    ({"ip": "10.0.0.1"}, {"connection_creation_rate": 5.0}, "IP quotas"),
    ({"group": "g"}, {"producer_byte_rate": 5.0}, "Unhandled client quota entity type: group"),
])
def test_bad_alterations_get_invalid_request(admin: KafkaAdminClient, parts: dict[str, str],
                                             ops: dict[str, float], message: str) -> None:
    result = alter(admin, parts, ops)
    assert result.error_code == 42, result  # INVALID_REQUEST
    assert message in result.error_message
    assert described(admin, [("user", EXACT, "bob")]) == {}


def test_one_bad_entry_does_not_stop_the_others(admin: KafkaAdminClient) -> None:
    request = AlterClientQuotasRequest(entries=[
        Entry(entity=entity(user="carol") + entity(user="dave"),
              ops=[Entry.OpData(key="producer_byte_rate", value=1.0, remove=False)]),
        Entry(entity=entity(user="erin"),
              ops=[Entry.OpData(key="consumer_byte_rate", value=100.0, remove=False)]),
    ], validate_only=False)
    first, second = send(admin, request).entries
    assert first.error_code == 42 and "Duplicate user" in first.error_message
    assert second.error_code == 0
    assert described(admin, [("user", EXACT, "erin")]) == {
        (("user", "erin"),): {"consumer_byte_rate": 100.0}}


def test_bad_describe_filters_get_invalid_request(admin: KafkaAdminClient) -> None:
    for components, message in [
        ([Component(entity_type="user", match_type=7, match=None)], "Unexpected match type"),
        ([Component(entity_type="user", match_type=EXACT, match=None)], "null match"),
        ([Component(entity_type="user", match_type=ANY, match=None)] * 2, "Duplicate user"),
        ([Component(entity_type="topic", match_type=ANY, match=None)], "not supported"),
    ]:
        response = send(admin, DescribeClientQuotasRequest(components=components, strict=False))
        assert response.error_code == 42, response
        assert message in response.error_message


def test_cli_sets_and_describes_quotas(quota_broker: BrokerProcess) -> None:
    b = quota_broker.bootstrap
    out = ok(run_moldau("quota", "set", "--user", "frank", "--client-id-default",
                        "--add-config", "producer_byte_rate=1048576,consumer_byte_rate=2e6",
                        bootstrap=b)).stdout
    assert "user=frank, client-id=<default>" in out and "producer_byte_rate=1048576" in out
    out = ok(run_moldau("quota", "describe", "--user", "frank", "--client-id-default",
                        bootstrap=b)).stdout.strip().splitlines()
    assert out == ["user=frank, client-id=<default>  consumer_byte_rate=2000000, "
                   "producer_byte_rate=1048576"]
    ok(run_moldau("quota", "set", "--user", "frank", "--client-id-default",
                  "--delete-config", "consumer_byte_rate", bootstrap=b))
    listed = ok(run_moldau("quota", "describe", bootstrap=b)).stdout
    assert "user=frank, client-id=<default>  producer_byte_rate=1048576" in listed
    # user mistakes: one line each, no traceback
    one_line_error(run_moldau("quota", "set", "--user", "x", "--add-config", "speed=1",
                              bootstrap=b), "unknown quota 'speed'")
    one_line_error(run_moldau("quota", "set", "--user", "x", "--add-config",
                              "producer_byte_rate=1.5", bootstrap=b),
                   "must be a Long value", "INVALID_REQUEST")
    one_line_error(run_moldau("quota", "set", "--add-config", "producer_byte_rate=1",
                              bootstrap=b), "name the entity")
    one_line_error(run_moldau("quota", "describe", "--user", "a", "--user-default",
                              bootstrap=b), "not both")


def test_quotas_survive_a_restart(tmp_path: Path) -> None:
    process = BrokerProcess(tmp_path / "b", overrides=TEST_BROKER_OVERRIDES).start()
    try:
        ok(run_moldau("quota", "set", "--client-id", "app", "--add-config",
                      "consumer_byte_rate=5000", bootstrap=process.bootstrap))
        process.restart()
        out = ok(run_moldau("quota", "describe", bootstrap=process.bootstrap)).stdout
        assert out.strip() == "client-id=app  consumer_byte_rate=5000"
    finally:
        process.stop()


def test_request_percentage_throttles_with_throttle_time(quota_broker: BrokerProcess) -> None:
    """The CLI's raw requests carry client id moldau-cli: limit it to 0.001 % of a thread."""
    ok(run_moldau("quota", "set", "--client-id", "moldau-cli", "--add-config",
                  "request_percentage=0.001", bootstrap=quota_broker.bootstrap))
    try:
        throttles = []
        request = describe_v1.DescribeClientQuotasRequest(components=(), strict=False)
        for _ in range(20):
            response = raw_requests.request(("127.0.0.1", quota_broker.port), request, 10)
            throttles.append(response.throttle_time.total_seconds() * 1000)
        assert max(throttles) > 0, throttles
        # bounded to one quota window (quota.window.size.seconds=1), as Kafka does
        assert max(throttles) <= 1000, throttles
    finally:
        ok(run_moldau("quota", "set", "--client-id", "moldau-cli", "--delete-config",
                      "request_percentage", bootstrap=quota_broker.bootstrap))


def test_controller_mutation_rate_refuses_once_spent(quota_broker: BrokerProcess,
                                                     topic_name: str) -> None:
    """CreateTopics v7 (strict mode) from client id moldau-cli (raw requests), whose bucket
    holds 1 x 11 windows x 1 s = 11 partitions: the first topic's 20 drive it negative, so
    the second topic of the same request is refused, and the response says how long to
    wait. librdkafka sends CreateTopics v4, which is only throttled (permissive mode)."""
    ok(run_moldau("quota", "set", "--client-id", "moldau-cli", "--add-config",
                  "controller_mutation_rate=1", bootstrap=quota_broker.bootstrap))
    try:
        topics = (create_v7.request.CreatableTopic(
            name=name, num_partitions=i32(count), replication_factor=i16(1), assignments=(),
            configs=()) for name, count in ((topic_name, 20), (topic_name + "-2", 1)))
        response = raw_requests.request(
            ("127.0.0.1", quota_broker.port),
            create_v7.CreateTopicsRequest(topics=tuple(topics), timeout=i32Timedelta.parse(
                datetime.timedelta(seconds=30)), validate_only=False), 30)
        first, second = response.topics
        assert first.error_code == ErrorCode.none, first
        assert second.error_code == ErrorCode.throttling_quota_exceeded, second
        assert second.error_message == "The throttling quota has been exceeded."
        # 9 tokens short at 1 partition/s
        assert 8000 <= response.throttle_time.total_seconds() * 1000 <= 9000
    finally:
        ok(run_moldau("quota", "set", "--client-id", "moldau-cli", "--delete-config",
                      "controller_mutation_rate", bootstrap=quota_broker.bootstrap))
    admin = AdminClient({"bootstrap.servers": quota_broker.bootstrap})
    admin.create_topics([NewTopic(topic_name + "-2", 1, 1)])[topic_name + "-2"].result(
        timeout=30)


def test_quotas_need_alter_configs_and_describe_configs_on_the_cluster(
        make_broker: Any) -> None:
    """With an authorizer, User:ANONYMOUS (no ACL) may neither set nor describe quotas."""
    broker = make_broker("authorizer.class.name=kafka.security.authorizer.AclAuthorizer")
    one_line_error(run_moldau("quota", "set", "--user", "x", "--add-config",
                              "producer_byte_rate=1", bootstrap=broker.bootstrap),
                   "CLUSTER_AUTHORIZATION_FAILED")
    one_line_error(run_moldau("quota", "describe", bootstrap=broker.bootstrap),
                   "CLUSTER_AUTHORIZATION_FAILED")
