"""The authorizer on a real broker: every denied operation of each API family gets Kafka's
error and changes nothing, a principal without ACLs can do nothing, a super user everything,
prefixed ACLs, deny wins, hosts; ACLs made with confluent-kafka's AdminClient, checked with
confluent-kafka, kafka-python and aiokafka over SASL (PLAIN and SCRAM).

One broker for the module: a SASL_PLAINTEXT listener (admin is a super user) and a
PLAINTEXT one (User:ANONYMOUS, no ACLs). Tests use topic and group names of their own.
"""

from __future__ import annotations

import asyncio
import datetime
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.errors import TopicAuthorizationFailedError as AioTopicAuthorizationFailed
from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from kafka import KafkaAdminClient
from kafka.admin import (
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    ResourcePatternFilter,
)
from kafka.admin import ResourceType as KpResourceType
from kafka.errors import (
    ClusterAuthorizationFailedError,
    GroupAuthorizationFailedError,
    TopicAuthorizationFailedError,
)
from kio.schema.describe_producers.v0.request import DescribeProducersRequest
from kio.schema.describe_producers.v0.request import TopicRequest as ProducersTopic
from kio.schema.describe_topic_partitions.v0.request import (
    DescribeTopicPartitionsRequest,
)
from kio.schema.describe_topic_partitions.v0.request import TopicRequest as PartitionsTopic
from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest
from kio.schema.elect_leaders.v2.request import ElectLeadersRequest
from kio.schema.end_txn.v3.request import EndTxnRequest
from kio.schema.heartbeat.v4.request import HeartbeatRequest
from kio.schema.list_offsets.v5.request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from kio.schema.list_transactions.v1.request import ListTransactionsRequest
from kio.schema.offset_commit.v8.request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kio.schema.offset_fetch.v7.request import OffsetFetchRequest, OffsetFetchRequestTopic
from kio.schema.offset_for_leader_epoch.v4.request import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from kio.static.primitive import i32, i64

from tests.helpers.broker_process import BrokerProcess, free_port
from tests.helpers.cli import one_line_error, run_moldau
from tests.integration.test_bad_input import fetch as wire_fetch
from tests.integration.test_bad_input import produce as wire_produce
from tests.integration.test_bad_input import values_batch
from tests.integration.wire import WireClient

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'username="admin" password="admin-pw" user_admin="admin-pw" '
        'user_alice="alice-pw" user_bob="bob-pw" user_frank="frank-pw";')


class AclBroker:
    def __init__(self, process: BrokerProcess, plain: int, sasl: int) -> None:
        self.process, self.plain, self.sasl = process, plain, sasl

    def conf(self, user: str, password: str | None = None,
             mechanism: str = "PLAIN") -> dict[str, Any]:
        return {"bootstrap.servers": f"127.0.0.1:{self.sasl}",
                "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
                "sasl.username": user, "sasl.password": password or f"{user}-pw"}

    def admin(self, user: str = "admin") -> AdminClient:
        return AdminClient(self.conf(user))

    def kafka_python(self, user: str) -> KafkaAdminClient:
        return KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{self.sasl}",
                                security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                                sasl_plain_username=user, sasl_plain_password=f"{user}-pw")


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AclBroker]:
    plain, sasl = free_port(), free_port()
    process = BrokerProcess(tmp_path_factory.mktemp("acl"), port=sasl, overrides=(
        f"listeners=PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512",
        f"listener.name.sasl_plaintext.plain.sasl.jaas.config={JAAS}",
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users=User:admin",
        "offsets.topic.replication.factor=1",
        "auto.create.topics.enable=true",
    )).start()
    broker = AclBroker(process, plain, sasl)
    admin = broker.admin()
    futures = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        "carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"carol-pw")])
    for future in futures.values():
        future.result(timeout=15)
    try:
        yield broker
    finally:
        process.stop()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def allow(principal: str, name: str, *operations: AclOperation,
          rtype: ResourceType = ResourceType.TOPIC,
          pattern: ResourcePatternType = ResourcePatternType.LITERAL, host: str = "*",
          permission: AclPermissionType = AclPermissionType.ALLOW) -> list[AclBinding]:
    return [AclBinding(rtype, name, pattern, principal, host, op, permission)
            for op in operations]


def create_acls(broker: AclBroker, bindings: list[AclBinding]) -> None:
    admin = broker.admin()  # kept: futures fail once their client is gone
    for future in admin.create_acls(bindings).values():
        future.result(timeout=15)


def create_topic(broker: AclBroker, name: str, partitions: int = 1) -> None:
    admin = broker.admin()
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(timeout=15)


def produce(conf: dict[str, Any], topic: str, count: int = 3) -> list[KafkaError | None]:
    errors: list[KafkaError | None] = []
    producer = Producer({**conf, "enable.idempotence": False, "message.timeout.ms": 5000})
    for i in range(count):
        producer.produce(topic, value=f"v{i}".encode(),
                         on_delivery=lambda err, _msg: errors.append(err))
    producer.flush(15)
    return errors


def end_offset(broker: AclBroker, topic: str) -> int:
    consumer = Consumer({**broker.conf("admin"), "group.id": unique("probe")})
    try:
        return int(consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1])
    finally:
        consumer.close()


def consume(conf: dict[str, Any], topic: str, group: str, want: int = 3,
            polls: int = 40) -> tuple[list[bytes], list[KafkaError]]:
    consumer = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    values: list[bytes] = []
    errors: list[KafkaError] = []
    consumer.subscribe([topic])
    try:
        for _ in range(polls):
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                errors.append(msg.error())
                break
            values.append(msg.value())
            if len(values) == want:
                consumer.commit(asynchronous=False)
                break
    finally:
        consumer.close()
    return values, errors


def admin_error(future: Any) -> int:
    with pytest.raises(KafkaException) as info:
        future.result(timeout=15)
    return int(info.value.args[0].code())


# -- super user, nobody, anonymous ---------------------------------------------------------------


def test_super_user_may_do_everything(acl_broker: AclBroker) -> None:
    topic = unique("super")
    create_topic(acl_broker, topic)
    assert produce(acl_broker.conf("admin"), topic) == [None, None, None]
    values, errors = consume(acl_broker.conf("admin"), topic, unique("g"))
    assert values == [b"v0", b"v1", b"v2"] and not errors
    admin = acl_broker.admin()
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    assert admin.describe_configs([resource])[resource].result(timeout=15)
    admin.delete_topics([topic])[topic].result(timeout=15)


def test_a_principal_without_acls_can_do_nothing(acl_broker: AclBroker) -> None:
    topic, group = unique("guarded"), unique("group")
    create_topic(acl_broker, topic)
    assert produce(acl_broker.conf("admin"), topic) == [None, None, None]
    consume(acl_broker.conf("admin"), topic, group)  # commits offset 3 for the group
    bob = acl_broker.conf("bob")
    admin = AdminClient(bob)
    # Metadata: the topic is hidden from "all topics".
    assert topic not in admin.list_topics(timeout=10).topics
    # Produce: TOPIC_AUTHORIZATION_FAILED, nothing appended.
    errors = produce(bob, topic)
    assert [e.code() if e else None for e in errors] == [
        KafkaError.TOPIC_AUTHORIZATION_FAILED] * 3
    assert end_offset(acl_broker, topic) == 3
    # Fetch and groups: the consumer is refused (the group first).
    values, errors = consume(bob, topic, group, polls=10)
    assert not values
    assert errors and errors[0].code() in (KafkaError.GROUP_AUTHORIZATION_FAILED,
                                           KafkaError.TOPIC_AUTHORIZATION_FAILED)
    # Admin APIs: create/delete topics, partitions, configs.
    new = unique("never")
    assert admin_error(admin.create_topics([NewTopic(new, 1, 1)])[new]) == \
        KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert admin_error(admin.delete_topics([topic])[topic]) == \
        KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert admin_error(admin.create_partitions([NewPartitions(topic, 3)])[topic]) == \
        KafkaError.TOPIC_AUTHORIZATION_FAILED
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.ms", "1000",
                    incremental_operation=AlterConfigOpType.SET)])
    assert admin_error(admin.incremental_alter_configs([resource])[resource]) == \
        KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert admin_error(admin.describe_configs([resource])[resource]) == \
        KafkaError.TOPIC_AUTHORIZATION_FAILED
    broker_resource = ConfigResource(ConfigResource.Type.BROKER, "0")
    assert admin_error(admin.describe_configs([broker_resource])[broker_resource]) == \
        KafkaError.CLUSTER_AUTHORIZATION_FAILED
    # Nothing changed.
    super_admin = acl_broker.admin()
    described = super_admin.list_topics(topic, timeout=10).topics[topic]
    assert len(described.partitions) == 1
    assert new not in super_admin.list_topics(timeout=10).topics
    config = super_admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)])
    assert next(iter(config.values())).result(timeout=15)["retention.ms"].value != "1000"
    committed = Consumer({**acl_broker.conf("admin"), "group.id": group}).committed(
        [TopicPartition(topic, 0)], timeout=10)
    assert committed[0].offset == 3


def test_kafka_python_gets_kafkas_errors(acl_broker: AclBroker) -> None:
    topic, group = unique("kp"), unique("kp-group")
    create_topic(acl_broker, topic)
    consume(acl_broker.conf("admin"), topic, group, want=0, polls=4)
    client = acl_broker.kafka_python("bob")
    try:
        acl_filter = ACLFilter(principal=None, host="*", operation=ACLOperation.ANY,
                               permission_type=ACLPermissionType.ANY,
                               resource_pattern=ResourcePatternFilter(
                                   KpResourceType.ANY, None, ACLResourcePatternType.ANY))
        with pytest.raises(ClusterAuthorizationFailedError):
            client.describe_acls(acl_filter)
        with pytest.raises(ClusterAuthorizationFailedError):
            client.describe_cluster()
        # FindCoordinator needs DESCRIBE on the group: every group call stops there.
        with pytest.raises(GroupAuthorizationFailedError):
            client.list_group_offsets({group: None})
        with pytest.raises(GroupAuthorizationFailedError):
            client.delete_groups([group])
        assert client.list_groups() == []
        assert client.describe_topics([topic])[0]["error_code"] == \
            TopicAuthorizationFailedError.errno
        # With DESCRIBE on the group, deleting it still needs DELETE.
        create_acls(acl_broker, allow("User:bob", group, AclOperation.DESCRIBE,
                                      rtype=ResourceType.GROUP))
        assert [g[0] if isinstance(g, tuple) else g for g in client.list_groups()]
        described = client.describe_groups([group], include_authorized_operations=True)
        assert described[group]["authorized_operations"] == ["DESCRIBE"]
        assert client.delete_groups([group]) == {group: "GroupAuthorizationFailedError"}
        with pytest.raises(ClusterAuthorizationFailedError):
            client.describe_user_scram_credentials()
    finally:
        client.close()
    assert group in str(acl_broker.kafka_python("admin").list_groups())


def test_aiokafka_producer_is_refused(acl_broker: AclBroker) -> None:
    topic = unique("aio")
    create_topic(acl_broker, topic)

    async def run() -> None:
        producer = AIOKafkaProducer(
            bootstrap_servers=f"127.0.0.1:{acl_broker.sasl}", security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="carol",
            sasl_plain_password="carol-pw", request_timeout_ms=5000)
        await producer.start()
        try:
            with pytest.raises(AioTopicAuthorizationFailed):
                await producer.send_and_wait(topic, b"x")
        finally:
            await producer.stop()

    asyncio.run(run())
    assert end_offset(acl_broker, topic) == 0


def test_anonymous_on_plaintext_sees_nothing(acl_broker: AclBroker) -> None:
    topic = unique("anon")
    create_topic(acl_broker, topic)
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{acl_broker.plain}"})
    assert topic not in admin.list_topics(timeout=10).topics
    errors = produce({"bootstrap.servers": f"127.0.0.1:{acl_broker.plain}"}, topic, 1)
    assert errors[0] is not None and errors[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_idempotent_and_transactional_producers_need_their_acls(acl_broker: AclBroker) -> None:
    topic = unique("eos")
    create_topic(acl_broker, topic)
    bob = acl_broker.conf("bob")
    idempotent = Producer({**bob, "enable.idempotence": True, "message.timeout.ms": 5000})
    errors: list[KafkaError] = []
    idempotent.produce(topic, b"x", on_delivery=lambda err, _m: errors.append(err))
    idempotent.flush(10)
    assert errors and errors[0] is not None
    assert errors[0].code() in (KafkaError.CLUSTER_AUTHORIZATION_FAILED,
                                KafkaError._FATAL, KafkaError.TOPIC_AUTHORIZATION_FAILED)
    transactional = Producer({**bob, "transactional.id": unique("txn")})
    with pytest.raises(KafkaException) as info:
        transactional.init_transactions(10)
    assert info.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert end_offset(acl_broker, topic) == 0


def test_transactions_with_their_acls(acl_broker: AclBroker) -> None:
    topic, txn = unique("txn-topic"), unique("txn-id")
    create_topic(acl_broker, topic)
    create_acls(acl_broker, allow("User:alice", topic, AclOperation.WRITE)
                + allow("User:alice", txn, AclOperation.WRITE,
                        rtype=ResourceType.TRANSACTIONAL_ID))
    producer = Producer({**acl_broker.conf("alice"), "transactional.id": txn})
    producer.init_transactions(15)
    producer.begin_transaction()
    producer.produce(topic, b"committed")
    producer.commit_transaction(15)
    assert end_offset(acl_broker, topic) == 2  # the record and the commit marker


# -- ACLs: literal, prefixed, deny, hosts, the ACL APIs ------------------------------------------


def test_literal_acls_let_a_user_produce_and_consume(acl_broker: AclBroker) -> None:
    topic, group = unique("alice"), unique("alice-group")
    create_topic(acl_broker, topic)
    alice = acl_broker.conf("alice")
    create_acls(acl_broker, allow("User:alice", topic, AclOperation.WRITE)
                + allow("User:alice", topic, AclOperation.READ)
                + allow("User:alice", group, AclOperation.READ, rtype=ResourceType.GROUP))
    assert produce(alice, topic) == [None, None, None]
    values, errors = consume(alice, topic, group)
    assert values == [b"v0", b"v1", b"v2"] and not errors
    # DESCRIBE is implied: the topic is listed; others are not.
    listed = AdminClient(alice).list_topics(timeout=10).topics
    assert topic in listed and not any(t.startswith("super-") for t in listed)
    # Authorized operations (KIP-430) are alice's own: READ, WRITE and the implied DESCRIBE.
    alice_admin = AdminClient(alice)
    described = alice_admin.describe_topics(TopicCollection([topic]),
                                            include_authorized_operations=True)
    assert set(described[topic].result(timeout=15).authorized_operations) == {
        AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE}
    # DeleteRecords needs DELETE: refused by the broker, nothing deleted.
    deleting = alice_admin.delete_records([TopicPartition(topic, 0, 2)])
    assert admin_error(next(iter(deleting.values()))) == \
        KafkaError.TOPIC_AUTHORIZATION_FAILED
    probe = Consumer({**acl_broker.conf("admin"), "group.id": unique("probe")})
    try:
        assert probe.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[0] == 0
    finally:
        probe.close()


def test_prefixed_acls_and_deny_wins(acl_broker: AclBroker) -> None:
    prefix = unique("team") + "."
    allowed, denied = prefix + "orders", prefix + "secret"
    for name in (allowed, denied):
        create_topic(acl_broker, name)
    create_acls(acl_broker, allow("User:carol", prefix, AclOperation.WRITE,
                                  pattern=ResourcePatternType.PREFIXED)
                + allow("User:carol", denied, AclOperation.WRITE,
                        permission=AclPermissionType.DENY))
    carol = acl_broker.conf("carol", mechanism="SCRAM-SHA-512")
    assert produce(carol, allowed, 1) == [None]
    errors = produce(carol, denied, 1)
    assert errors[0] is not None and errors[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert end_offset(acl_broker, denied) == 0
    # WRITE without CREATE does not create a topic (Metadata refuses its auto-creation).
    missing = prefix + "missing"
    errors = produce(carol, missing, 1)
    assert errors[0] is not None and errors[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    admin = acl_broker.admin()
    assert missing not in admin.list_topics(timeout=10).topics


def test_hosts_must_match(acl_broker: AclBroker) -> None:
    topic = unique("hosts")
    create_topic(acl_broker, topic)
    create_acls(acl_broker, allow("User:frank", topic, AclOperation.WRITE, host="10.9.9.9"))
    errors = produce(acl_broker.conf("frank"), topic, 1)
    assert errors[0] is not None and errors[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    create_acls(acl_broker, allow("User:frank", topic, AclOperation.WRITE, host="127.0.0.1"))
    assert produce(acl_broker.conf("frank"), topic, 1) == [None]


def test_acl_apis_describe_and_delete_with_filters(acl_broker: AclBroker) -> None:
    name = unique("acl-api")
    bindings = (allow("User:dave", name, AclOperation.READ, AclOperation.WRITE)
                + allow("User:dave", name, AclOperation.READ, rtype=ResourceType.GROUP))
    create_acls(acl_broker, bindings)
    admin = acl_broker.admin()
    by_name = AclBindingFilter(ResourceType.ANY, name, ResourcePatternType.ANY, None, None,
                               AclOperation.ANY, AclPermissionType.ANY)
    assert sorted(map(str, admin.describe_acls(by_name).result(timeout=15))) == \
        sorted(map(str, bindings))
    topic_only = AclBindingFilter(ResourceType.TOPIC, name, ResourcePatternType.LITERAL, None,
                                  None, AclOperation.ANY, AclPermissionType.ANY)
    deleted = admin.delete_acls([topic_only])[topic_only].result(timeout=15)
    assert len(deleted) == 2
    assert [str(b) for b in admin.describe_acls(by_name).result(timeout=15)] == \
        [str(bindings[2])]
    # An invalid binding is refused with Kafka's INVALID_REQUEST and stores nothing.
    bad = AclBinding(ResourceType.BROKER, "not-the-cluster", ResourcePatternType.LITERAL,
                     "User:dave", "*", AclOperation.ALTER, AclPermissionType.ALLOW)
    assert admin_error(admin.create_acls([bad])[bad]) == KafkaError.INVALID_REQUEST
    # Without ALTER on the cluster, nobody else may change ACLs.
    bob = AdminClient(acl_broker.conf("bob"))
    grab = allow("User:bob", "*", AclOperation.ALL)[0]
    assert admin_error(bob.create_acls([grab])[grab]) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    assert admin_error(bob.delete_acls([by_name])[by_name]) == \
        KafkaError.CLUSTER_AUTHORIZATION_FAILED
    assert len(admin.describe_acls(by_name).result(timeout=15)) == 1


def test_cluster_authorized_operations_are_the_principals(acl_broker: AclBroker) -> None:
    """DescribeCluster (through librdkafka's Metadata) reports what the principal may do."""

    def operations(user: str) -> set[AclOperation]:
        admin = acl_broker.admin(user)
        described = admin.describe_cluster(include_authorized_operations=True,
                                           request_timeout=10).result(timeout=15)
        return set(described.authorized_operations or ())

    assert AclOperation.CLUSTER_ACTION in operations("admin")
    assert operations("alice") == set()
    create_acls(acl_broker, allow("User:alice", "kafka-cluster", AclOperation.DESCRIBE,
                                  AclOperation.ALTER_CONFIGS, rtype=ResourceType.BROKER))
    assert operations("alice") == {AclOperation.DESCRIBE, AclOperation.ALTER_CONFIGS,
                                   AclOperation.DESCRIBE_CONFIGS}


def test_acls_survive_a_restart(tmp_path: Path) -> None:
    sasl = free_port()
    overrides = (f"listeners=SASL_PLAINTEXT://127.0.0.1:{sasl}", "sasl.enabled.mechanisms=PLAIN",
                 f"listener.name.sasl_plaintext.plain.sasl.jaas.config={JAAS}",
                 "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
                 "super.users=User:admin")
    process = BrokerProcess(tmp_path, port=sasl, overrides=overrides).start()
    broker = AclBroker(process, 0, sasl)
    binding = allow("User:alice", "kept", AclOperation.READ)
    try:
        create_acls(broker, binding)
    finally:
        process.stop()
    process = BrokerProcess(tmp_path, port=sasl, overrides=overrides).start()
    try:
        everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None,
                                      None, AclOperation.ANY, AclPermissionType.ANY)
        admin = broker.admin()
        assert [str(b) for b in admin.describe_acls(everything).result(timeout=15)] \
            == [str(binding[0])]
    finally:
        process.stop()


# -- moldau acl ----------------------------------------------------------------------------------


def as_user(broker: AclBroker, user: str) -> tuple[str, ...]:
    return ("-b", f"127.0.0.1:{broker.sasl}", "-X", "security.protocol=SASL_PLAINTEXT",
            "-X", "sasl.mechanism=PLAIN", "-X", f"sasl.username={user}",
            "-X", f"sasl.password={user}-pw")


def test_cli_add_list_remove(acl_broker: AclBroker) -> None:
    topic, group = unique("cli"), unique("cli-group")
    admin = as_user(acl_broker, "admin")
    added = run_moldau("acl", "add", "--allow-principal", "User:gina", "--operation", "Read",
                       "--operation", "describe", "--topic", topic, *admin)
    assert added.returncode == 0, added.stderr
    assert f"ResourcePattern(resourceType=TOPIC, name={topic}, patternType=LITERAL)" \
        in added.stdout
    listed = run_moldau("acl", "list", "--topic", topic, *admin)
    assert listed.returncode == 0, listed.stderr
    assert "(principal=User:gina, host=*, operation=READ, permissionType=ALLOW)" \
        in listed.stdout
    assert "operation=DESCRIBE" in listed.stdout
    removed = run_moldau("acl", "remove", "--allow-principal", "User:gina", "--operation",
                         "Read", "--topic", topic, *admin)
    assert removed.returncode == 0, removed.stderr
    listed = run_moldau("acl", "list", "--topic", topic, *admin)
    assert "operation=READ" not in listed.stdout and "operation=DESCRIBE" in listed.stdout
    assert run_moldau("acl", "remove", "--topic", topic, *admin).returncode == 0
    assert topic not in run_moldau("acl", "list", *admin).stdout
    # The conveniences, and a prefixed pattern.
    conveniences = run_moldau("acl", "add", "--allow-principal", "User:gina", "--producer",
                              "--consumer", "--topic", topic, "--group", group,
                              "--resource-pattern-type", "prefixed", *admin)
    assert conveniences.returncode == 0, conveniences.stderr
    listed = run_moldau("acl", "list", "--principal", "User:gina", *admin).stdout
    for op in ("WRITE", "DESCRIBE", "CREATE", "READ"):
        assert f"operation={op}," in listed
    assert f"name={group}, patternType=PREFIXED" in listed


@pytest.mark.parametrize(("args", "fragments"), [
    (("add", "--operation", "Read", "--topic", "t"), ("--allow-principal",)),
    (("add", "--allow-principal", "User:x", "--operation", "Read"), ("at least one resource",)),
    (("add", "--allow-principal", "User:x", "--operation", "Fly", "--topic", "t"),
     ("invalid --operation 'Fly'",)),
    (("add", "--allow-principal", "User:x", "--operation", "Write", "--group", "g"),
     ("ResourceType GROUP only supports operations",)),
    (("add", "--allow-principal", "alice", "--operation", "Read", "--topic", "t"),
     ("invalid principal 'alice'",)),
    (("add", "--allow-principal", "User:x", "--operation", "Read", "--topic", "t",
      "--resource-pattern-type", "match"), ("not valid for add",)),
    (("add", "--allow-principal", "User:x", "--consumer", "--topic", "t"),
     ("--consumer needs --group",)),
])
def test_cli_refuses_bad_input_in_one_line(acl_broker: AclBroker, args: tuple[str, ...],
                                           fragments: tuple[str, ...]) -> None:
    one_line_error(run_moldau("acl", *args, *as_user(acl_broker, "admin")), *fragments)


def test_cli_without_the_right_acls_or_authorizer(acl_broker: AclBroker,
                                                  broker: Any) -> None:
    result = run_moldau("acl", "add", "--allow-principal", "User:bob", "--operation", "All",
                        "--topic", "t", *as_user(acl_broker, "bob"))
    one_line_error(result, "CLUSTER_AUTHORIZATION_FAILED")
    result = run_moldau("acl", "add", "--allow-principal", "User:bob", "--operation", "All",
                        "--topic", "t", "-b", broker.bootstrap)
    one_line_error(result, "No Authorizer is configured")


# -- the other API families, on the wire as User:ANONYMOUS (no ACL) ------------------------------


def test_other_apis_refuse_on_the_wire(acl_broker: AclBroker) -> None:
    topic, txn = unique("wire"), unique("wire-txn")
    create_topic(acl_broker, topic)
    transactional = Producer({**acl_broker.conf("admin"), "transactional.id": txn})
    transactional.init_transactions(15)
    assert produce(acl_broker.conf("admin"), topic, 1) == [None]
    with WireClient.to(f"127.0.0.1:{acl_broker.plain}") as client:
        # Produce, Fetch, ListOffsets: the topic's error, nothing appended, nothing read.
        produced = client.request(wire_produce(topic, values_batch([b"anonymous"])))
        assert produced.responses[0].partition_responses[0].error_code == 29
        fetched = client.request(wire_fetch(topic, 0))
        assert fetched.responses[0].partitions[0].error_code == 29
        assert not fetched.responses[0].partitions[0].records
        offsets = client.request(ListOffsetsRequest(
            replica_id=-1, isolation_level=0, topics=(ListOffsetsTopic(
                name=topic, partitions=(ListOffsetsPartition(
                    partition_index=i32(0), current_leader_epoch=i32(-1),
                    timestamp=i64(-1)),)),)))
        assert offsets.topics[0].partitions[0].error_code == 29
        producers = client.request(DescribeProducersRequest(topics=(
            ProducersTopic(name=topic, partition_indexes=(i32(0),)),)))
        assert producers.topics[0].partitions[0].error_code == 29
        partitions = client.request(DescribeTopicPartitionsRequest(
            topics=(PartitionsTopic(name=topic),), response_partition_limit=i32(100)))
        assert partitions.topics[0].error_code == 29
        epochs = client.request(OffsetForLeaderEpochRequest(topics=(OffsetForLeaderTopic(
            topic=topic, partitions=(OffsetForLeaderPartition(
                partition=i32(0), leader_epoch=i32(0)),)),)))
        assert epochs.topics[0].partitions[0].error_code == 29
        described = client.request(DescribeTransactionsRequest(transactional_ids=(txn,)))
        assert described.transaction_states[0].error_code == 53
        listed = client.request(ListTransactionsRequest(state_filters=(),
                                                        producer_id_filters=()))
        assert listed.error_code == 0 and txn not in {s.transactional_id
                                                      for s in listed.transaction_states}
        end = client.request(EndTxnRequest(transactional_id=txn, producer_id=i64(0),
                                           producer_epoch=0, committed=True))
        assert end.error_code == 53
        heartbeat = client.request(HeartbeatRequest(group_id="g", generation_id=i32(0),
                                                    member_id="m", group_instance_id=None))
        assert heartbeat.error_code == 30
        elect = client.request(ElectLeadersRequest(election_type=0, topic_partitions=None,
                                                   timeout=datetime.timedelta(seconds=10)))
        assert elect.error_code == 31
    assert end_offset(acl_broker, topic) == 1
    # The super user sees what ANONYMOUS may not.
    admin_client = acl_broker.kafka_python("admin")
    try:
        assert txn in str(admin_client.list_transactions())
    finally:
        admin_client.close()


def test_offsets_need_the_group_and_each_topic(acl_broker: AclBroker) -> None:
    readable, hidden = unique("offsets-ok"), unique("offsets-hidden")
    group, other_group = unique("anon-group"), unique("other-group")
    for name in (readable, hidden):
        create_topic(acl_broker, name)
    create_acls(acl_broker, allow("User:ANONYMOUS", group, AclOperation.READ,
                                  rtype=ResourceType.GROUP)
                + allow("User:ANONYMOUS", readable, AclOperation.READ))

    def commit(group_id: str) -> dict[str, int]:
        request = OffsetCommitRequest(
            group_id=group_id, generation_id_or_member_epoch=i32(-1), member_id="",
            group_instance_id=None, topics=tuple(OffsetCommitRequestTopic(
                name=name, partitions=(OffsetCommitRequestPartition(
                    partition_index=i32(0), committed_offset=i64(0),
                    committed_leader_epoch=i32(-1), committed_metadata=None),))
                for name in (readable, hidden)))
        with WireClient.to(f"127.0.0.1:{acl_broker.plain}") as client:
            response = client.request(request)
        return {t.name: int(t.partitions[0].error_code) for t in response.topics}

    assert commit(other_group) == {readable: 30, hidden: 30}
    assert commit(group) == {readable: 0, hidden: 29}
    with WireClient.to(f"127.0.0.1:{acl_broker.plain}") as client:
        fetched = client.request(OffsetFetchRequest(group_id=group, topics=tuple(
            OffsetFetchRequestTopic(name=name, partition_indexes=(i32(0),))
            for name in (readable, hidden))))
    assert {t.name: (int(t.partitions[0].error_code), t.partitions[0].committed_offset)
            for t in fetched.topics} == {readable: (0, 0), hidden: (29, -1)}
    # Only the allowed partition was committed.
    committed = Consumer({**acl_broker.conf("admin"), "group.id": group})
    try:
        offsets = committed.committed([TopicPartition(readable, 0), TopicPartition(hidden, 0)],
                                      timeout=10)
    finally:
        committed.close()
    assert [tp.offset for tp in offsets] == [0, -1001]
