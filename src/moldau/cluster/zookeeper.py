"""Cluster metadata in ZooKeeper, in Kafka 3.9's znode layout (see ``znodes``).

``ZkMetadataStore`` offers what ``metadata.MetadataStore`` (and ``local.LocalMetadataStore``)
offer a single node, with ZooKeeper as the source of truth, plus what a cluster needs: broker
registration, replica assignments, partition states written conditionally on their znode
version (a stale controller's or leader's write fails), topic deletion requests, producer-id
blocks. Controller election is in ``controller_election``.

Reads that the broker makes per request (``topics``, ``topic``, ``topic_by_id``) are answered
from a cache kept current by ZooKeeper watches (``zk_topics``); every write goes to ZooKeeper
first and then into the cache, so a writer reads its own writes. All calls block on
ZooKeeper round trips: the broker is to call the writing ones off its event loop.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from kazoo.protocol.states import ZnodeStat
from kio.schema.errors import ErrorCode

from ..config.client_quotas import (
    QUOTA_KEYS,
    QuotaEntity,
    decode_values,
    encode_value,
    entity_path,
    parse_entity_path,
)
from ..security.acls import AclBinding
from . import znodes
from .assignment import (
    AssignmentError,
    BrokerPlacement,
    assign_replicas,
    check_explicit_assignment,
)
from .local import new_cluster_id
from .metadata import MetadataStore, TopicMetadata
from .zk_acls import ZkAclStore
from .zk_brokers import BrokerCache
from .zk_config_changes import ConfigChangeListener
from .zk_session import ZkSession
from .zk_topics import TopicCache

log = logging.getLogger(__name__)


class ZkStoreError(Exception):
    """A ZooKeeper write that Kafka's rules refuse."""


class TopicExistsError(ZkStoreError):
    pass


class StaleVersionError(ZkStoreError):
    """A conditional write found a newer znode version: someone else wrote since we read."""


class ControllerMovedError(ZkStoreError):
    """A controller's fenced write found /controller_epoch changed: it is no longer controller."""


class ZkMetadataStore:
    """Metadata of a cluster whose brokers share one ZooKeeper (``zookeeper.connect``)."""

    def __init__(self, connect: str, broker_id: int, *, session_timeout_ms: int = 18_000,
                 connection_timeout_ms: int = 18_000, cluster_id: str | None = None,
                 on_topic_change: Callable[[str], None] | None = None,
                 on_brokers_change: Callable[[dict[int, znodes.BrokerRegistration]], None]
                 | None = None) -> None:
        self.broker_id = broker_id
        self.session = ZkSession(connect, session_timeout_ms=session_timeout_ms,
                                 connection_timeout_ms=connection_timeout_ms)
        self.client = self.session.client
        self._proposed_cluster_id = cluster_id or new_cluster_id()
        self.cluster_id = self._proposed_cluster_id
        self._registration: znodes.BrokerRegistration | None = None
        self.broker_epoch = -1
        self._cache = TopicCache(self.client, on_change=on_topic_change)
        self._brokers = BrokerCache(self.client, on_change=on_brokers_change)
        #: The authorizer's ACLs (/kafka-acl, /kafka-acl-extended and their notifications).
        self.acl_store = ZkAclStore(self.client)
        self._pid_lock = threading.Lock()
        self._pid_block: znodes.ProducerIdBlock | None = None
        self._next_pid = 0
        self._config_changes: ConfigChangeListener | None = None

    # --- life cycle ------------------------------------------------------------------------

    def start(self) -> ZkMetadataStore:
        """Connect, make Kafka's persistent paths, agree on the cluster id, load the topics."""
        self.session.start()
        self.session.on_new_session(self._reregister)
        for path in znodes.PERSISTENT_PATHS:
            self.client.ensure_path(path)
        self.acl_store.ensure_paths()
        try:
            self.client.create(znodes.CLUSTER_ID, znodes.encode_cluster_id(
                self._proposed_cluster_id), makepath=True)
        except NodeExistsError:
            self.cluster_id = znodes.decode_cluster_id(self.client.get(znodes.CLUSTER_ID)[0])
        self._cache.start()
        self._brokers.start()
        return self

    def close(self) -> None:
        """End the session: the registration (and /controller if ours) disappear at once."""
        self._cache.stop()
        self._brokers.stop()
        if self._config_changes is not None:
            self._config_changes.stop()
        self.session.close()

    # --- broker registration ---------------------------------------------------------------

    def register_broker(self, registration: znodes.BrokerRegistration) -> int:
        """Create the ephemeral /brokers/ids/<id>; return the broker epoch (its czxid).

        Registered again by itself in every new session after an expiry. A registration of
        the same id by another live session is refused (Kafka: NodeExists at start-up).
        """
        self._registration = registration
        self.broker_epoch = self._create_registration(registration)
        return self.broker_epoch

    def _create_registration(self, registration: znodes.BrokerRegistration) -> int:
        path = znodes.broker_path(registration.broker_id)
        data = znodes.encode_broker(registration)
        try:
            self.client.create(path, data, ephemeral=True, makepath=True)
        except NodeExistsError:
            # Ours from before a reconnect in the same session is fine; another session's not.
            stat = self.client.exists(path)
            if stat is None or stat.ephemeralOwner != self.session.session_id:
                raise ZkStoreError(f"broker id {registration.broker_id} is already registered "
                                   "in ZooKeeper by another live broker") from None
        stat = self.client.exists(path)
        log.info("Registered broker %d at %s, broker epoch (czxid) %d", registration.broker_id,
                 path, stat.czxid if stat else -1)
        return int(stat.czxid) if stat else -1

    def _reregister(self) -> None:
        if self._registration is not None:
            self.broker_epoch = self._create_registration(self._registration)

    def brokers(self) -> dict[int, znodes.BrokerRegistration]:
        """The live brokers as last seen by the watch (no round trip; for Metadata)."""
        return self._brokers.brokers

    def broker_epochs(self) -> dict[int, int]:
        """Each live broker's epoch (its registration's czxid), from the watch."""
        return self._brokers.epochs

    def live_brokers(self) -> dict[int, znodes.BrokerRegistration]:
        """The live brokers read from ZooKeeper now (admin operations: placement)."""
        brokers = {}
        for child in self.client.get_children(znodes.BROKER_IDS):
            try:
                data, _ = self.client.get(znodes.broker_path(int(child)))
            except NoNodeError:
                continue  # went away between the listing and the read
            brokers[int(child)] = znodes.decode_broker(int(child), data)
        return dict(sorted(brokers.items()))

    # --- topics (the MetadataStore interface) ----------------------------------------------

    def topics(self) -> dict[str, TopicMetadata]:
        return self._cache.topics

    def topic(self, name: str) -> TopicMetadata | None:
        return self._cache.topics.get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicMetadata | None:
        return self._cache.by_id.get(topic_id)

    def assignment(self, name: str) -> dict[int, list[int]]:
        """Replicas of each partition of ``name`` (the first is the preferred leader)."""
        return {p: list(r) for p, r in self._cache.assignments.get(name, {}).items()}

    def reassigning(self) -> dict[str, dict[int, tuple[tuple[int, ...], tuple[int, ...]]]]:
        """Partitions being reassigned, from the cache: topic -> partition -> (adding, removing)."""
        return self._cache.reassigning

    def is_reassigning(self, name: str, partition: int) -> bool:
        return partition in self._cache.reassigning.get(name, {})

    def read_topic_assignment(self, name: str) -> tuple[znodes.TopicAssignment, int] | None:
        """/brokers/topics/<t> read now, with its znode version (None: no such topic)."""
        try:
            data, stat = self.client.get(znodes.topic_path(name))
        except NoNodeError:
            return None
        return znodes.decode_topic(data), int(stat.version)

    def write_topic_assignment(self, name: str, assignment: znodes.TopicAssignment, *,
                               expected_zk_version: int, controller_epoch_zk_version: int) -> None:
        """The controller's change of a topic's replicas (reassignments): fenced by its epoch
        and written only over ``expected_zk_version`` (else ``StaleVersionError``)."""
        txn = self.client.transaction()
        txn.check(znodes.CONTROLLER_EPOCH, controller_epoch_zk_version)
        txn.set_data(znodes.topic_path(name), znodes.encode_topic(assignment),
                     expected_zk_version)
        results = self._commit_fenced(txn.commit(), f"reassign partitions of {name}")
        if isinstance(results[1], BadVersionError):
            raise StaleVersionError(f"topic {name} changed since version {expected_zk_version}")
        self._cache.update_reassignments(name, assignment.adding, assignment.removing)
        self._cache.update_partitions(name, assignment.partitions)

    def place_replicas(self, partitions: int, replication_factor: int, *,
                       start_partition: int = 0) -> dict[int, list[int]]:
        """Kafka's rack-aware placement over the live brokers."""
        brokers = [BrokerPlacement(b, r.rack) for b, r in self.live_brokers().items()]
        return assign_replicas(brokers, partitions, replication_factor,
                               start_partition=start_partition)

    def create_topic(self, topic: TopicMetadata,
                     assignment: Mapping[int, Sequence[int]] | None = None,
                     replication_factor: int = 1) -> None:
        """Write /config/topics/<t> and /brokers/topics/<t> in one ZooKeeper transaction.

        Without ``assignment`` the replicas are placed over the live brokers; a given one is
        checked against them (``AssignmentError`` with Kafka's code and message). Kafka writes
        the two znodes one after the other; one transaction leaves no half-created topic.
        """
        if assignment is not None:
            check_explicit_assignment(assignment, list(self.live_brokers()))
            replicas = {p: list(r) for p, r in assignment.items()}
        else:
            replicas = self.place_replicas(topic.partitions, replication_factor)
        config_path = znodes.config_path("topics", topic.name)
        for _ in range(5):  # the config znode may appear or vanish between exists and commit
            txn = self.client.transaction()
            txn.create(znodes.topic_path(topic.name), znodes.encode_topic(
                znodes.TopicAssignment(topic.topic_id, replicas)))
            stat = self.client.exists(config_path)
            if stat is None:
                txn.create(config_path, znodes.encode_config(topic.configs))
            else:
                txn.set_data(config_path, znodes.encode_config(topic.configs), stat.version)
            results = txn.commit()
            if isinstance(results[0], NodeExistsError):
                raise TopicExistsError(f"Topic '{topic.name}' already exists.")
            if not any(isinstance(r, Exception) for r in results):
                self._cache.put(topic, replicas)
                return
        raise ZkStoreError(f"could not create topic {topic.name}: its config znode keeps changing")

    def set_partitions(self, name: str, partitions: int,
                       assignment: Mapping[int, Sequence[int]] | None = None,
                       replication_factor: int | None = None) -> None:
        """Add partitions (CreatePartitions): extend /brokers/topics/<t>, conditionally."""
        data, stat = self.client.get(znodes.topic_path(name))
        current = znodes.decode_topic(data)
        have = len(current.partitions)
        if partitions <= have:
            raise AssignmentError(ErrorCode.invalid_partitions,
                                  f"Topic currently has {have} partitions, which is higher than "
                                  f"the requested {partitions}." if partitions < have else
                                  f"Topic already has {have} partitions.")
        if assignment is not None and len(assignment) != partitions - have:
            raise AssignmentError(ErrorCode.invalid_replica_assignment,
                                  f"Increasing the number of partitions by {partitions - have} "
                                  f"but {len(assignment)} assignments provided.")
        if assignment is None:
            factor = replication_factor or len(next(iter(current.partitions.values()), [1]))
            assignment = self.place_replicas(partitions - have, factor, start_partition=have)
        else:
            check_explicit_assignment(assignment, list(self.live_brokers()),
                                      first_partition=have)
        replicas = {**current.partitions, **assignment}
        try:
            self.client.set(znodes.topic_path(name), znodes.encode_topic(
                dataclasses.replace(current, partitions=replicas)), version=stat.version)
        except BadVersionError:
            raise StaleVersionError(f"topic {name} changed while adding partitions") from None
        self._cache.update_partitions(name, replicas)

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        self._set_entity_config("topics", name, configs)
        self._cache.update_configs(name, configs)

    def _set_entity_config(self, entity_type: str, name: str, configs: Mapping[str, str]) -> None:
        """Kafka's changeEntityConfig: set or create the znode, then a change notification."""
        path = znodes.config_path(entity_type, name)
        data = znodes.encode_config(configs)
        try:
            self.client.set(path, data)
        except NoNodeError:
            try:
                self.client.create(path, data, makepath=True)
            except NodeExistsError:
                self.client.set(path, data)
        self.client.create(znodes.CONFIG_CHANGE_PREFIX,
                           znodes.encode_config_change(f"{entity_type}/{name}"), sequence=True)

    def delete_topic(self, name: str) -> None:
        """What a lone broker does: request the deletion and carry it out at once.

        In a cluster the two steps are apart: any broker requests (DeleteTopics), the
        controller completes once the replicas are stopped and their logs deleted.
        """
        self.request_topic_deletion(name)
        self.complete_topic_deletion(name)

    def request_topic_deletion(self, name: str) -> None:
        """Create /admin/delete_topics/<t>, the request Kafka's controller watches."""
        with contextlib.suppress(NodeExistsError):  # already requested
            self.client.create(znodes.delete_topic_path(name), makepath=True)

    def pending_deletions(self) -> list[str]:
        return sorted(self.client.get_children(znodes.DELETE_TOPICS))

    def complete_topic_deletion(self, name: str) -> None:
        """Remove the topic's znodes, its config and the deletion request (the controller)."""
        self.client.delete(znodes.topic_path(name), recursive=True)
        for path in (znodes.config_path("topics", name), znodes.delete_topic_path(name)):
            with contextlib.suppress(NoNodeError):
                self.client.delete(path)
        self._cache.drop(name)

    # --- dynamic broker configs -----------------------------------------------------------

    def broker_configs(self, entity: str | None = None) -> dict[str, str]:
        """/config/brokers/<id> (this broker unless ``entity``, e.g. ``<default>``)."""
        try:
            data, _ = self.client.get(znodes.config_path("brokers", entity or str(
                self.broker_id)))
        except NoNodeError:
            return {}
        return znodes.decode_config(data)

    def set_broker_configs(self, configs: dict[str, str], entity: str | None = None) -> None:
        self._set_entity_config("brokers", entity or str(self.broker_id), configs)

    # --- SCRAM credentials (/config/users/<user>, as Kafka 3.9 keeps them) -------------------

    def user_configs(self, user: str) -> dict[str, str]:
        try:
            data, _ = self.client.get(znodes.config_path("users", user))
        except NoNodeError:
            return {}
        return znodes.decode_config(data)

    def set_user_configs(self, user: str, configs: dict[str, str]) -> None:
        self._set_entity_config("users", user, configs)

    def users(self) -> list[str]:
        try:
            children = self.client.get_children(f"{znodes.CONFIG}/users")
        except NoNodeError:
            return []
        # /config/users/<user> also holds quotas: a user is listed for its credentials only.
        return sorted(u for u in children
                      if any(k.startswith("SCRAM-") for k in self.user_configs(u)))

    # --- client quotas (/config/users, /config/clients, as Kafka 3.9 keeps them) ----------

    def _entity_configs(self, path: str) -> dict[str, str]:
        try:
            data, _ = self.client.get(f"{znodes.CONFIG}/{path}")
        except NoNodeError:
            return {}
        return znodes.decode_config(data)

    def client_quota(self, entity: QuotaEntity) -> dict[str, float]:
        """One entity's quota values (blocking: one round trip)."""
        return decode_values(self._entity_configs(entity_path(entity)))

    def client_quotas(self) -> dict[QuotaEntity, dict[str, float]]:
        found: dict[QuotaEntity, dict[str, float]] = {}

        def add(path: str) -> None:
            quota_entity = parse_entity_path(path)
            values = decode_values(self._entity_configs(path))
            if quota_entity is not None and values:
                found[quota_entity] = values

        for kind in ("users", "clients"):
            try:
                names = self.client.get_children(f"{znodes.CONFIG}/{kind}")
            except NoNodeError:
                continue
            for name in names:
                add(f"{kind}/{name}")
                if kind == "users":
                    with contextlib.suppress(NoNodeError):
                        for client in self.client.get_children(
                                f"{znodes.CONFIG}/users/{name}/clients"):
                            add(f"users/{name}/clients/{client}")
        return found

    def set_client_quotas(self, entity: QuotaEntity, values: dict[str, float]) -> None:
        """Replace the entity's quota keys, keeping the others (SCRAM credentials share
        /config/users/<user>), then notify every broker (/config/changes)."""
        path = entity_path(entity)
        kind, _, name = path.partition("/")
        configs = {k: v for k, v in self._entity_configs(path).items() if k not in QUOTA_KEYS}
        configs.update({k: encode_value(k, v) for k, v in values.items()})
        self._set_entity_config(kind, name, configs)

    def watch_config_changes(self, on_change: Callable[[str], None]) -> None:
        """Call ``on_change(entity_path)`` (on a kazoo thread) for every config change
        notification from now on."""
        self._config_changes = ConfigChangeListener(self.client, on_change)
        self._config_changes.start()

    # --- ACLs (see zk_acls) -----------------------------------------------------------------

    def acls(self) -> list[AclBinding]:
        return self.acl_store.load_all()

    def change_acls(self, added: list[AclBinding], removed: list[AclBinding]) -> None:
        self.acl_store.change(added, removed)

    # --- producer ids -----------------------------------------------------------------------

    def next_producer_id(self) -> int:
        with self._pid_lock:
            if self._pid_block is None or self._next_pid > self._pid_block.last:
                self._pid_block = self.allocate_producer_id_block()
                self._next_pid = self._pid_block.first
            pid = self._next_pid
            self._next_pid += 1
            return pid

    def allocate_producer_id_block(self) -> znodes.ProducerIdBlock:
        """Claim the next block with a versioned write, retried on a race (ZkProducerIdManager).

        Every broker reads /latest_producer_id_block and writes the following block only if
        the znode is still at the version it read, so two brokers never get the same block.
        """
        while True:
            data, stat = self.client.get(znodes.PRODUCER_ID_BLOCK)
            first = znodes.decode_producer_id_block(data).last + 1 if data else 0
            block = znodes.ProducerIdBlock(self.broker_id, first)
            try:
                self.client.set(znodes.PRODUCER_ID_BLOCK, znodes.encode_producer_id_block(block),
                                version=stat.version)
            except BadVersionError:
                continue
            log.info("Acquired producer id block %d-%d", block.first, block.last)
            return block

    # --- partition state (controller and leaders) ----------------------------------------

    def create_partition_states(self, topic: str, states: Mapping[int, znodes.PartitionState],
                                controller_epoch_zk_version: int) -> None:
        """The controller's first leader and ISR of new partitions, fenced by its epoch."""
        txn = self.client.transaction()
        txn.check(znodes.CONTROLLER_EPOCH, controller_epoch_zk_version)
        if self.client.exists(znodes.partitions_path(topic)) is None:
            txn.create(znodes.partitions_path(topic))
        for partition, state in sorted(states.items()):
            parent = f"{znodes.partitions_path(topic)}/{partition}"
            if self.client.exists(parent) is None:
                txn.create(parent)
            txn.create(znodes.partition_state_path(topic, partition),
                       znodes.encode_partition_state(state))
        self._commit_fenced(txn.commit(), f"create partition states of {topic}")

    def partition_state(self, topic: str, partition: int) -> znodes.PartitionState | None:
        try:
            data, stat = self.client.get(znodes.partition_state_path(topic, partition))
        except NoNodeError:
            return None
        return znodes.decode_partition_state(data, stat.version)

    def update_partition_state(self, topic: str, partition: int, state: znodes.PartitionState,
                               *, expected_zk_version: int,
                               controller_epoch_zk_version: int | None = None) -> int:
        """Write ``state`` only over version ``expected_zk_version``; return the new version.

        With ``controller_epoch_zk_version`` (the controller's writes) the write is also
        fenced by /controller_epoch: it fails with ControllerMovedError once another
        controller was elected. A leader's ISR change passes None and is fenced by the
        partition's version alone (Kafka's partition epoch).
        """
        path = znodes.partition_state_path(topic, partition)
        data = znodes.encode_partition_state(state)
        if controller_epoch_zk_version is None:
            try:
                stat: ZnodeStat = self.client.set(path, data, version=expected_zk_version)
            except BadVersionError:
                raise StaleVersionError(f"{topic}-{partition}: state changed since version "
                                        f"{expected_zk_version}") from None
            return int(stat.version)
        txn = self.client.transaction()
        txn.check(znodes.CONTROLLER_EPOCH, controller_epoch_zk_version)
        txn.set_data(path, data, expected_zk_version)
        results = self._commit_fenced(txn.commit(), f"update state of {topic}-{partition}")
        if isinstance(results[1], BadVersionError):
            raise StaleVersionError(f"{topic}-{partition}: state changed since version "
                                    f"{expected_zk_version}")
        new_stat = results[1]
        assert isinstance(new_stat, ZnodeStat)
        return int(new_stat.version)

    def delete_preferred_replica_election(self, controller_epoch_zk_version: int) -> None:
        """The controller's delete of /admin/preferred_replica_election once carried out."""
        txn = self.client.transaction()
        txn.check(znodes.CONTROLLER_EPOCH, controller_epoch_zk_version)
        txn.delete(znodes.PREFERRED_REPLICA_ELECTION)
        results = txn.commit()
        if isinstance(results[1], NoNodeError):
            return  # already gone
        self._commit_fenced(results, "delete the preferred replica election")

    @staticmethod
    def _commit_fenced(results: list[object], what: str) -> list[object]:
        """Raise ControllerMovedError when the epoch check (first op) failed."""
        if isinstance(results[0], BadVersionError | NoNodeError):
            raise ControllerMovedError(f"{what}: the controller epoch moved")
        errors = [r for r in results[1:] if isinstance(r, Exception)
                  and not isinstance(r, BadVersionError)]
        real = [r for r in errors if type(r).__name__ != "RolledBackError"]
        if real:
            raise ZkStoreError(f"{what}: {real[0]!r}")
        return results


if TYPE_CHECKING:
    def _is_a_metadata_store(store: ZkMetadataStore) -> MetadataStore:
        """mypy checks here that the broker can use this store where it uses the local one."""
        return store
