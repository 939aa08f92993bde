"""Client quotas on a 3-broker cluster: kept in ZooKeeper as Kafka 3.9 keeps them
(/config/users, /config/clients, /config/users/<u>/clients/<c>, ``<default>``, change
notifications), merged with the SCRAM credentials that share /config/users/<user>, and
applied by every broker within a second of being set through any one of them, or written
into ZooKeeper the way a Kafka tool would."""

from __future__ import annotations

import json
import time

from kio.schema.describe_client_quotas import v1 as describe_v1

from moldau.cli import raw_requests
from tests.conftest import MakeBroker
from tests.helpers import BrokerProcess, ok, run_moldau

from .helpers import eventually, raw_client
from .test_cluster_brokers import start_cluster

Quotas = dict[tuple[tuple[str, str | None], ...], dict[str, float]]


def quotas_on(broker: BrokerProcess) -> Quotas:
    """What one broker itself answers to DescribeClientQuotas (everything)."""
    response = raw_requests.request(
        ("127.0.0.1", broker.port),
        describe_v1.DescribeClientQuotasRequest(components=(), strict=False), 10)
    assert response.error_code == 0, response
    return {tuple((e.entity_type, e.entity_name) for e in entry.entity):
            {v.key: v.value for v in entry.values} for entry in response.entries}


def within_a_second(brokers: list[BrokerProcess], entity: tuple[tuple[str, str | None], ...],
                    values: dict[str, float] | None) -> float:
    """Wait until every broker answers ``values`` for ``entity``; how long it took."""
    started = time.monotonic()
    eventually(lambda: all(quotas_on(b).get(entity) == values for b in brokers),
               timeout=1.0, what=f"{entity} = {values} on every broker")
    return time.monotonic() - started


def test_quotas_set_through_one_broker_apply_on_all_within_a_second(
        make_broker: MakeBroker, zk_connect: str) -> None:
    brokers = start_cluster(make_broker, zk_connect)
    first = brokers[0].bootstrap

    ok(run_moldau("quota", "set", "--client-id", "app", "--add-config",
                  "producer_byte_rate=1048576", bootstrap=first))
    within_a_second(brokers[1:], (("client-id", "app"),), {"producer_byte_rate": 1048576.0})

    # SCRAM credentials and a quota share /config/users/alice: neither clobbers the other.
    ok(run_moldau("user", "add", "alice", "--password", "secret", bootstrap=first))
    ok(run_moldau("quota", "set", "--user", "alice", "--add-config",
                  "consumer_byte_rate=2048", bootstrap=first))
    within_a_second(brokers[1:], (("user", "alice"),), {"consumer_byte_rate": 2048.0})
    ok(run_moldau("quota", "set", "--user", "alice", "--client-id-default", "--add-config",
                  "request_percentage=50", bootstrap=brokers[1].bootstrap))
    within_a_second([brokers[0], brokers[2]], (("user", "alice"), ("client-id", None)),
                    {"request_percentage": 50.0})
    listed = ok(run_moldau("user", "list", bootstrap=first)).stdout
    assert "alice" in listed and "SCRAM-SHA-256" in listed

    zk_root = zk_connect.split("/", 1)[1]
    with raw_client(zk_connect.split("/", 1)[0]) as zk:
        def node(path: str) -> dict[str, object]:
            doc: dict[str, object] = json.loads(zk.get(f"/{zk_root}{path}")[0])
            return doc

        assert node("/config/clients/app") == {
            "version": 1, "config": {"producer_byte_rate": "1048576"}}
        alice = node("/config/users/alice")["config"]
        assert isinstance(alice, dict)
        assert alice["consumer_byte_rate"] == "2048"
        assert {"SCRAM-SHA-256", "SCRAM-SHA-512"} <= set(alice)
        assert node("/config/users/alice/clients/<default>")["config"] == {
            "request_percentage": "50.0"}
        changes = [json.loads(zk.get(f"/{zk_root}/config/changes/{c}")[0])
                   for c in sorted(zk.get_children(f"/{zk_root}/config/changes"))]
        paths = [c["entity_path"] for c in changes]
        assert {"clients/app", "users/alice", "users/alice/clients/<default>"} <= set(paths)
        assert all(c["version"] == 2 for c in changes)

        # Written the way Kafka's AdminZkClient writes it: every broker applies it.
        zk.create(f"/{zk_root}/config/users/<default>", json.dumps(
            {"version": 1, "config": {"producer_byte_rate": "4096"}}).encode(),
            makepath=True)
        zk.create(f"/{zk_root}/config/changes/config_change_", json.dumps(
            {"version": 2, "entity_path": "users/<default>"}).encode(), sequence=True)
        within_a_second(brokers, (("user", None),), {"producer_byte_rate": 4096.0})

    # Removed through broker 3: gone everywhere; a restarted broker loads what is left.
    ok(run_moldau("quota", "set", "--client-id", "app", "--delete-config",
                  "producer_byte_rate", bootstrap=brokers[2].bootstrap))
    within_a_second(brokers[:2], (("client-id", "app"),), None)
    brokers[1].restart()
    eventually(lambda: quotas_on(brokers[1]).get((("user", "alice"),)) == {
        "consumer_byte_rate": 2048.0}, timeout=30, what="quotas loaded after a restart")
    assert (("client-id", "app"),) not in quotas_on(brokers[1])
