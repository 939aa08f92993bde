"""Znode JSON as Kafka 3.9 writes it, byte for byte, and read back as Kafka reads it.

The samples are the bytes a Kafka 3.9 broker and controller (Scala 2.13, Jackson) leave in
ZooKeeper for the same values: ZkData.scala builds the maps, and their iteration order is
the key order (e.g. a partition state reads {"controller_epoch":..,"leader":..,"version":1,..}).
"""

from __future__ import annotations

import uuid

from moldau.cluster import znodes
from moldau.cluster.kafka_json import java_properties_order, scala_mutable_order

TOPIC_ID = uuid.UUID("5d2c81a3-a851-46c0-88af-96f3930b5d7f")
TOPIC_ID_TEXT = "XSyBo6hRRsCIr5bzkwtdfw"

KAFKA_BROKER = (b'{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},'
                b'"endpoints":["PLAINTEXT://127.0.0.1:9092"],"jmx_port":-1,"port":9092,'
                b'"host":"127.0.0.1","version":5,"timestamp":"1700000000000"}')
KAFKA_BROKER_RACK = (b'{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT",'
                     b'"SSL":"SSL"},"endpoints":["PLAINTEXT://h1:9092","SSL://h1:9093"],'
                     b'"rack":"dc1","jmx_port":-1,"port":9092,"host":"h1","version":5,'
                     b'"timestamp":"1700000000000"}')
KAFKA_TOPIC = (b'{"partitions":{"0":[1,2,3],"1":[2,3,1]},"topic_id":"' + TOPIC_ID_TEXT.encode()
               + b'","adding_replicas":{},"removing_replicas":{},"version":3}')
KAFKA_STATE = b'{"controller_epoch":4,"leader":1,"version":1,"leader_epoch":7,"isr":[1,3]}'
KAFKA_CONTROLLER = (b'{"version":2,"brokerid":2,"timestamp":"1700000000000",'
                    b'"kraftControllerEpoch":-1}')
KAFKA_PID_BLOCK = b'{"version":1,"broker":3,"block_start":"2000","block_end":"2999"}'


def test_topic_id_text_is_kafkas_uuid_string() -> None:
    assert znodes.encode_uuid(TOPIC_ID) == TOPIC_ID_TEXT
    assert znodes.decode_uuid(TOPIC_ID_TEXT) == TOPIC_ID


def test_broker_registration_bytes() -> None:
    reg = znodes.BrokerRegistration(1, (znodes.Endpoint("PLAINTEXT", "127.0.0.1", 9092),),
                                    timestamp_ms=1700000000000)
    assert znodes.encode_broker(reg) == KAFKA_BROKER
    assert znodes.decode_broker(1, KAFKA_BROKER) == reg


def test_broker_registration_with_rack_and_two_listeners() -> None:
    reg = znodes.BrokerRegistration(
        5, (znodes.Endpoint("PLAINTEXT", "h1", 9092), znodes.Endpoint("SSL", "h1", 9093, "SSL")),
        rack="dc1", timestamp_ms=1700000000000)
    assert znodes.encode_broker(reg) == KAFKA_BROKER_RACK
    assert znodes.decode_broker(5, KAFKA_BROKER_RACK) == reg


def test_topic_bytes() -> None:
    topic = znodes.TopicAssignment(TOPIC_ID, {0: [1, 2, 3], 1: [2, 3, 1]})
    assert znodes.encode_topic(topic) == KAFKA_TOPIC
    back = znodes.decode_topic(KAFKA_TOPIC)
    assert back.topic_id == TOPIC_ID and back.partitions == {0: [1, 2, 3], 1: [2, 3, 1]}


def test_topic_with_many_partitions_orders_them_as_a_scala_hash_map() -> None:
    keys = [str(p) for p in range(12)]
    # Twelve keys grow the table to 32 buckets: "11" lands in bucket 0, "0".."9" in 16..25.
    assert scala_mutable_order(keys) == ["11", *map(str, range(11))]
    data = znodes.encode_topic(znodes.TopicAssignment(None, {p: [0] for p in range(12)}))
    assert data.startswith(b'{"partitions":{"11":[0],"0":[0],"1":[0]')
    assert znodes.decode_topic(data).partitions == {p: [0] for p in range(12)}


def test_topic_written_by_old_kafka_without_id_or_reassignment_keys() -> None:
    back = znodes.decode_topic(b'{"version":1,"partitions":{"0":[1]}}')
    assert back.topic_id is None and back.partitions == {0: [1]} and back.adding == {}


def test_partition_state_bytes() -> None:
    state = znodes.PartitionState(1, 7, (1, 3), 4, zk_version=12)
    assert znodes.encode_partition_state(state) == KAFKA_STATE
    assert znodes.decode_partition_state(KAFKA_STATE, 12) == state


def test_controller_and_epoch_bytes() -> None:
    assert znodes.encode_controller(2, 1700000000000) == KAFKA_CONTROLLER
    assert znodes.decode_controller(KAFKA_CONTROLLER) == 2
    # Kafka 2.x wrote version 1 without the KRaft epoch; it still names the controller.
    assert znodes.decode_controller(b'{"version":1,"brokerid":7,"timestamp":"1"}') == 7
    assert znodes.encode_controller_epoch(13) == b"13"
    assert znodes.decode_controller_epoch(b"13") == 13


def test_producer_id_block_bytes() -> None:
    block = znodes.ProducerIdBlock(3, 2000)
    assert znodes.encode_producer_id_block(block) == KAFKA_PID_BLOCK
    assert znodes.decode_producer_id_block(KAFKA_PID_BLOCK) == block
    assert block.last == 2999


def test_cluster_id_config_and_change_notification_bytes() -> None:
    assert znodes.encode_cluster_id("abc") == b'{"version":"1","id":"abc"}'
    assert znodes.decode_cluster_id(b'{"version":"1","id":"abc"}') == "abc"
    assert znodes.encode_config({}) == b'{"version":1,"config":{}}'
    assert (znodes.encode_config({"retention.ms": "1000"})
            == b'{"version":1,"config":{"retention.ms":"1000"}}')
    assert znodes.decode_config(b'{"version":1,"config":{"a":"1"}}') == {"a": "1"}
    assert znodes.decode_config(None) == {}
    assert znodes.encode_config_change("topics/t") == b'{"version":2,"entity_path":"topics/t"}'


def test_config_keys_follow_java_properties_order() -> None:
    # "cleanup.policy" hashes to a lower bin of a 16-bin ConcurrentHashMap than
    # "retention.ms", so Kafka writes it first whatever the order they were set in.
    order = java_properties_order(["retention.ms", "cleanup.policy"])
    assert order == java_properties_order(["cleanup.policy", "retention.ms"])
    data = znodes.encode_config({"retention.ms": "1", "cleanup.policy": "compact"})
    assert list(znodes.decode_config(data)) == order


def test_persistent_paths_are_kafkas() -> None:
    assert "/brokers/ids" in znodes.PERSISTENT_PATHS
    assert "/config/brokers" in znodes.PERSISTENT_PATHS
    assert znodes.partition_state_path("t", 3) == "/brokers/topics/t/partitions/3/state"
    assert znodes.config_path("brokers", znodes.DEFAULT_BROKER) == "/config/brokers/<default>"
