"""Kafka 3.9's znode layout: paths and the JSON of each znode, written as Kafka writes it.

Kept to Kafka's layout (core/src/main/scala/kafka/zk/ZkData.scala in Kafka 3.9) so Kafka's
documentation, its `zookeeper-shell` habits and tools that read these paths apply to a moldau
cluster. Encoders produce Kafka's bytes (key order included, see ``kafka_json``); decoders are
as lenient as Kafka's (unknown keys ignored, optional keys defaulted).
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .kafka_json import (
    dumps,
    java_properties_order,
    ordered,
    scala_immutable_order,
    scala_mutable_order,
)

CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
BROKERS = "/brokers"
BROKER_IDS = "/brokers/ids"
BROKER_SEQID = "/brokers/seqid"
TOPICS = "/brokers/topics"
CONFIG = "/config"
CONFIG_CHANGES = "/config/changes"
CONFIG_CHANGE_PREFIX = "/config/changes/config_change_"
ADMIN = "/admin"
DELETE_TOPICS = "/admin/delete_topics"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
LOG_DIR_EVENT_NOTIFICATION = "/log_dir_event_notification"
PRODUCER_ID_BLOCK = "/latest_producer_id_block"
CLUSTER_ID = "/cluster/id"
CONSUMERS = "/consumers"  # the old consumers' path, still created by Kafka 3.9
#: The entity types under /config (Kafka's ConfigType.ALL).
CONFIG_TYPES = ("topics", "clients", "users", "brokers", "ips")
#: The name of the cluster-wide default entity of dynamic broker configs.
DEFAULT_BROKER = "<default>"

#: Persistent paths Kafka makes sure exist at start-up (ZkData.PersistentZkPaths).
PERSISTENT_PATHS = (
    CONSUMERS,
    BROKER_IDS,
    TOPICS,
    CONFIG_CHANGES,
    DELETE_TOPICS,
    BROKER_SEQID,
    ISR_CHANGE_NOTIFICATION,
    PRODUCER_ID_BLOCK,
    LOG_DIR_EVENT_NOTIFICATION,
    *(f"{CONFIG}/{kind}" for kind in CONFIG_TYPES),
)

#: Kafka's controller epoch before the first election (KafkaController.InitialControllerEpoch).
INITIAL_CONTROLLER_EPOCH = 0
#: Ids per producer-id block (ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE).
PRODUCER_ID_BLOCK_SIZE = 1000


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS}/{topic}"


def partitions_path(topic: str) -> str:
    return f"{TOPICS}/{topic}/partitions"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}/state"


def config_path(entity_type: str, name: str) -> str:
    return f"{CONFIG}/{entity_type}/{name}"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{topic}"


def now_ms() -> int:
    return int(time.time() * 1000)


# --- topic ids: Kafka's Uuid.toString is URL-safe base64 without padding -----------------

def encode_uuid(value: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


def decode_uuid(text: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


# --- /controller and /controller_epoch ------------------------------------------------------

def encode_controller(broker_id: int, timestamp_ms: int | None = None) -> bytes:
    """ControllerZNode v2; a ZooKeeper-mode controller has no KRaft epoch (-1)."""
    ts = now_ms() if timestamp_ms is None else timestamp_ms
    return dumps({"version": 2, "brokerid": broker_id, "timestamp": str(ts),
                  "kraftControllerEpoch": -1})


def decode_controller(data: bytes) -> int:
    """The controller's broker id."""
    return int(json.loads(data)["brokerid"])


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode()


def decode_controller_epoch(data: bytes) -> int:
    return int(data.decode())


# --- /brokers/ids/<id> -----------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Endpoint:
    """One advertised listener: ``PLAINTEXT://host:port`` with its security protocol."""

    listener: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"

    @property
    def connection_string(self) -> str:
        return f"{self.listener}://{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """What /brokers/ids/<id> says about a live broker (BrokerIdZNode version 5)."""

    broker_id: int
    endpoints: tuple[Endpoint, ...]
    rack: str | None = None
    jmx_port: int = -1
    timestamp_ms: int = 0

    def endpoint(self, listener: str | None = None) -> Endpoint | None:
        """The endpoint of ``listener`` (the first one when None)."""
        for ep in self.endpoints:
            if listener is None or ep.listener == listener:
                return ep
        return None


def encode_broker(broker: BrokerRegistration) -> bytes:
    """Version 5 with empty features (a ZooKeeper-mode Kafka 3.9 broker registers none).

    The top-level host/port are those of the first PLAINTEXT endpoint (null/-1 without one),
    for old clients, as Kafka does.
    """
    plaintext = next((ep for ep in broker.endpoints if ep.security_protocol == "PLAINTEXT"),
                     None)
    fields: dict[str, Any] = {
        "version": 5,
        "host": plaintext.host if plaintext else None,
        "port": plaintext.port if plaintext else -1,
        "endpoints": [ep.connection_string for ep in broker.endpoints],
        "jmx_port": broker.jmx_port,
        "timestamp": str(broker.timestamp_ms or now_ms()),
    }
    if broker.rack is not None:
        fields["rack"] = broker.rack
    protocols = {ep.listener: ep.security_protocol for ep in broker.endpoints}
    fields["listener_security_protocol_map"] = ordered(protocols,
                                                       scala_immutable_order(list(protocols)))
    fields["features"] = {}
    return dumps(ordered(fields, scala_mutable_order(list(fields), built_with=6)))


def decode_broker(broker_id: int, data: bytes) -> BrokerRegistration:
    doc = json.loads(data)
    protocols: Mapping[str, str] = doc.get("listener_security_protocol_map") or {}
    endpoints = []
    for text in doc.get("endpoints") or []:
        listener, _, address = text.partition("://")
        host, _, port = address.rpartition(":")
        endpoints.append(Endpoint(listener, host.strip("[]"), int(port),
                                  protocols.get(listener, listener)))
    if not endpoints and doc.get("host") is not None:  # version 1: host and port only
        endpoints.append(Endpoint("PLAINTEXT", doc["host"], int(doc["port"])))
    return BrokerRegistration(broker_id, tuple(endpoints), doc.get("rack"),
                              int(doc.get("jmx_port", -1)), int(doc.get("timestamp", 0)))


# --- /brokers/topics/<topic> -----------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class TopicAssignment:
    """/brokers/topics/<topic> (TopicZNode version 3): replicas per partition and the id."""

    topic_id: uuid.UUID | None
    partitions: Mapping[int, Sequence[int]]
    adding: Mapping[int, Sequence[int]] = field(default_factory=dict)
    removing: Mapping[int, Sequence[int]] = field(default_factory=dict)


def _replica_map(replicas: Mapping[int, Sequence[int]]) -> dict[str, list[int]]:
    keys = [str(p) for p in sorted(replicas)]
    return {k: list(replicas[int(k)]) for k in scala_mutable_order(keys)}


def encode_topic(assignment: TopicAssignment) -> bytes:
    fields: dict[str, Any] = {
        "version": 3,
        "partitions": _replica_map(assignment.partitions),
        "adding_replicas": _replica_map({p: r for p, r in assignment.adding.items() if r}),
        "removing_replicas": _replica_map({p: r for p, r in assignment.removing.items() if r}),
    }
    if assignment.topic_id is not None:
        fields["topic_id"] = encode_uuid(assignment.topic_id)
    return dumps(ordered(fields, scala_mutable_order(list(fields), built_with=4)))


def decode_topic(data: bytes) -> TopicAssignment:
    doc = json.loads(data) or {}

    def replica_map(key: str) -> dict[int, list[int]]:
        return {int(p): [int(b) for b in r] for p, r in (doc.get(key) or {}).items()}

    raw_id = doc.get("topic_id")
    return TopicAssignment(decode_uuid(raw_id) if raw_id else None, replica_map("partitions"),
                           replica_map("adding_replicas"), replica_map("removing_replicas"))


# --- /brokers/topics/<topic>/partitions/<p>/state ----------------------------------------------

@dataclass(frozen=True, slots=True)
class PartitionState:
    """Leader, leader epoch, ISR and the epoch of the controller that wrote them.

    ``zk_version`` is the znode's version when read: updates are conditional on it (Kafka's
    partition epoch), so a writer holding a stale state fails instead of overwriting.
    """

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    zk_version: int = -1
    leader_recovery_state: int = 0  # 0 = RECOVERED, 1 = RECOVERING (KIP-704)


def encode_partition_state(state: PartitionState) -> bytes:
    fields: dict[str, Any] = {
        "version": 1,
        "leader": state.leader,
        "leader_epoch": state.leader_epoch,
        "controller_epoch": state.controller_epoch,
        "isr": list(state.isr),
    }
    if state.leader_recovery_state != 0:
        fields["leader_recovery_state"] = state.leader_recovery_state
    return dumps(ordered(fields, scala_immutable_order(list(fields))))


def decode_partition_state(data: bytes, zk_version: int) -> PartitionState:
    doc = json.loads(data)
    return PartitionState(int(doc["leader"]), int(doc["leader_epoch"]),
                          tuple(int(b) for b in doc["isr"]), int(doc["controller_epoch"]),
                          zk_version, int(doc.get("leader_recovery_state", 0)))


# --- /admin/preferred_replica_election -------------------------------------------------------

def encode_preferred_replica_election(partitions: Iterable[tuple[str, int]]) -> bytes:
    """What Kafka's ZooKeeper tools write to ask the controller for preferred leaders."""
    return dumps({"version": 1, "partitions": [{"topic": t, "partition": p}
                                                for t, p in partitions]})


def decode_preferred_replica_election(data: bytes) -> set[tuple[str, int]]:
    """The (topic, partition) pairs asked for; ValueError when the JSON is not Kafka's."""
    try:
        doc = json.loads(data)
        return {(str(e["topic"]), int(e["partition"])) for e in doc["partitions"]}
    except (TypeError, KeyError, AttributeError) as exc:
        raise ValueError(f"not a preferred replica election request: {exc!r}") from None


# --- /config/<type>/<name> and change notifications ------------------------------------------

def encode_config(configs: Mapping[str, str]) -> bytes:
    """ConfigEntityZNode: ``configs`` in their insertion order as a java.util.Properties."""
    return dumps({"version": 1, "config": ordered(configs, java_properties_order(configs))})


def decode_config(data: bytes | None) -> dict[str, str]:
    if not data:
        return {}
    doc = json.loads(data)
    config = doc.get("config") if isinstance(doc, dict) else None
    return {str(k): str(v) for k, v in (config or {}).items()}


def encode_config_change(entity_path: str) -> bytes:
    """A /config/changes/config_change_<seq> notification (version 2), e.g. ``topics/t``."""
    return dumps({"version": 2, "entity_path": entity_path})


def decode_config_change(data: bytes) -> str:
    return str(json.loads(data)["entity_path"])


# --- /latest_producer_id_block and /cluster/id -------------------------------------------------

@dataclass(frozen=True, slots=True)
class ProducerIdBlock:
    """A range of producer ids owned by one broker; ``last`` is inclusive."""

    broker_id: int
    first: int
    size: int = PRODUCER_ID_BLOCK_SIZE

    @property
    def last(self) -> int:
        return self.first + self.size - 1


def encode_producer_id_block(block: ProducerIdBlock) -> bytes:
    """Kafka writes the bounds as strings."""
    return dumps({"version": 1, "broker": block.broker_id, "block_start": str(block.first),
                  "block_end": str(block.last)})


def decode_producer_id_block(data: bytes) -> ProducerIdBlock:
    doc = json.loads(data)
    first, last = int(doc["block_start"]), int(doc["block_end"])
    return ProducerIdBlock(int(doc["broker"]), first, last - first + 1)


def encode_cluster_id(cluster_id: str) -> bytes:
    return dumps({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes) -> str:
    return str(json.loads(data)["id"])


def partition_paths(topic: str, partitions: Iterable[int]) -> list[str]:
    return [f"{partitions_path(topic)}/{p}" for p in partitions]
