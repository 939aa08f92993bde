"""ACLs on a three-broker cluster with the authorizer on: kept in ZooKeeper as Kafka 3.9
keeps them (/kafka-acl, /kafka-acl-extended, change notifications), made on one broker and
applied by every other within a second. Inter-broker traffic is PLAINTEXT as User:ANONYMOUS,
a super user; clients come in over SASL_PLAINTEXT."""

from __future__ import annotations

import json
import time

from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kio.schema.describe_acls.v3.request import DescribeAclsRequest

from tests.conftest import MakeBroker
from tests.helpers.broker_process import BrokerProcess, free_port
from tests.integration.wire import WireClient

from .helpers import eventually, raw_client

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'username="admin" password="admin-pw" user_alice="alice-pw";')


def start(make_broker: MakeBroker, zk_connect: str) -> list[tuple[BrokerProcess, int]]:
    brokers = []
    for node in (1, 2, 3):
        plain, sasl = free_port(), free_port()
        process = make_broker(
            f"node.id={node}", f"zookeeper.connect={zk_connect}",
            "zookeeper.session.timeout.ms=4000",
            f"listeners=PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
            "sasl.enabled.mechanisms=PLAIN",
            f"listener.name.sasl_plaintext.plain.sasl.jaas.config={JAAS}",
            "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
            "super.users=User:ANONYMOUS", port=plain)
        brokers.append((process, sasl))
    return brokers


def acl_count(broker: BrokerProcess, principal: str) -> int:
    """The ACLs of ``principal`` as this broker's own authorizer has them."""
    with WireClient.to(broker.bootstrap) as client:
        response = client.request(DescribeAclsRequest(
            resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
            principal_filter=principal, host_filter=None, operation=1, permission_type=1))
    assert response.error_code == 0, response
    return sum(len(r.acls) for r in response.resources)


def test_an_acl_made_on_one_broker_applies_on_all_within_a_second(
        make_broker: MakeBroker, zk_connect: str, topic_name: str) -> None:
    brokers = start(make_broker, zk_connect)
    first = brokers[0][0]
    admin = AdminClient({"bootstrap.servers": first.bootstrap})
    # Three replicas each: followers fetch as User:ANONYMOUS (a super user: CLUSTER_ACTION).
    admin.create_topics([NewTopic(topic_name, 3, 3)])[topic_name].result(timeout=30)
    alice = {"bootstrap.servers": f"127.0.0.1:{brokers[1][1]}",
             "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
             "sasl.username": "alice", "sasl.password": "alice-pw",
             "enable.idempotence": False, "message.timeout.ms": 10000, "acks": "all"}

    def produce_to_every_partition() -> list[KafkaError | None]:
        errors: list[KafkaError | None] = []
        producer = Producer(alice)
        for partition in range(3):
            producer.produce(topic_name, b"x", partition=partition,
                             on_delivery=lambda err, _m: errors.append(err))
        producer.flush(15)
        return errors

    refused = produce_to_every_partition()
    assert all(e is not None and e.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
               for e in refused), refused
    binding = AclBinding(ResourceType.TOPIC, topic_name[:5], ResourcePatternType.PREFIXED,
                         "User:alice", "*", AclOperation.WRITE, AclPermissionType.ALLOW)
    made = time.monotonic()
    admin.create_acls([binding])[binding].result(timeout=15)
    eventually(lambda: all(acl_count(b, "User:alice") == 1 for b, _ in brokers), timeout=5,
               what="the ACL on every broker")
    assert time.monotonic() - made < 1.0
    # Every partition leader lets alice write now, and its followers replicate (acks=all).
    assert produce_to_every_partition() == [None, None, None]
    # Kafka 3.9's znodes.
    with raw_client(zk_connect) as zk:
        data, _ = zk.get(f"/kafka-acl-extended/prefixed/Topic/{topic_name[:5]}")
        assert json.loads(data) == {"version": 1, "acls": [
            {"principal": "User:alice", "permissionType": "Allow", "operation": "Write",
             "host": "*"}]}
        assert zk.get_children("/kafka-acl-extended-changes")
    # Deleting on another broker reaches everyone too.
    other = AdminClient({"bootstrap.servers": brokers[2][0].bootstrap})
    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY,
                                  "User:alice", None, AclOperation.ANY, AclPermissionType.ANY)
    assert len(other.delete_acls([everything])[everything].result(timeout=15)) == 1
    eventually(lambda: all(acl_count(b, "User:alice") == 0 for b, _ in brokers), timeout=5,
               what="the ACL gone from every broker")
    assert all(e is not None for e in produce_to_every_partition())
