"""Partition reassignments, as Kafka 3.9's ZooKeeper controller runs them.

A reassignment is recorded in the topic znode (/brokers/topics/<t>, version 3), so it survives
a controller failover: the partition's replicas become the union RS = target + original
(Kafka's order), ``adding_replicas`` = RS - original, ``removing_replicas`` = RS - target.
Everything else follows from ordinary mechanisms:

- every broker's topic watch sees the new replica set: a broker in ``adding`` makes the log
  and follows the leader (its state znode is unchanged), the leader starts tracking the new
  followers (``Partition.update_replicas``); they catch up through normal follower fetching
  (throttled when ``*.replication.throttled.*`` say so) and join the ISR as any follower;
- each ISR change of a partition being reassigned wakes the controller, whose pass
  (``advance``) completes every reassignment whose target replicas are all in the ISR: it
  writes the topic znode with RS = target and no adding/removing;
- the same pass's leader election then treats replicas outside the assignment as ineligible
  (``Controller.reconcile``): a leader outside the target is replaced by the first target
  replica that is live and in the ISR, and removed replicas leave the ISR, at leader epoch
  + 1; the removed brokers' topic watches delete their logs (``ClusterLink._sync_topic``).

Cancelling (null replicas) reassigns to the original replicas: RS = original, nothing adding
or removing, the added replicas' logs deleted. Every write is the controller's, fenced by its
epoch and conditional on the topic znode's version (a race with another write runs again).
Validation and error codes are Kafka's (``KafkaController.validateReplicas``,
``maybeBuildReassignment``, ``maybeTriggerPartitionReassignment``).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from . import znodes
from .controller_election import ControllerLease
from .zookeeper import StaleVersionError, ZkMetadataStore

log = logging.getLogger(__name__)

#: How often a request's write is tried again after a concurrent change of the topic znode.
ATTEMPTS = 5

TopicPartition = tuple[str, int]
#: The outcome of one partition of AlterPartitionReassignments: (error code, message or None).
Outcome = tuple[ErrorCode, str | None]
OK: Outcome = (ErrorCode.none, None)
NO_REASSIGNMENT: Outcome = (ErrorCode.no_reassignment_in_progress,
                            "No partition reassignment is in progress.")
NOT_FOUND: Outcome = (ErrorCode.unknown_topic_or_partition, "The partition does not exist.")


@dataclass(frozen=True, slots=True)
class ReplicaAssignment:
    """A partition's replicas with its reassignment (Kafka's ``ReplicaAssignment``)."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @property
    def being_reassigned(self) -> bool:
        return bool(self.adding or self.removing)

    @property
    def origin(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.adding)

    @property
    def target(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.removing)

    def reassign_to(self, target: Sequence[int]) -> ReplicaAssignment:
        """RS = target then the original replicas not in it; adding and removing follow."""
        origin = self.origin
        full = tuple(dict.fromkeys([*target, *origin]))
        return ReplicaAssignment(full, tuple(r for r in full if r not in origin),
                                 tuple(r for r in full if r not in target))


def current(topic: znodes.TopicAssignment, partition: int) -> ReplicaAssignment:
    return ReplicaAssignment(tuple(topic.partitions.get(partition, ())),
                             tuple(topic.adding.get(partition, ())),
                             tuple(topic.removing.get(partition, ())))


def validate(replicas: Sequence[int], now: ReplicaAssignment, live: Iterable[int],
             allow_replication_factor_change: bool = True) -> Outcome | None:
    """Kafka's checks of a target replica list; None when it may be used."""
    if not replicas:
        return (ErrorCode.invalid_replica_assignment,
                "Empty replica list specified in partition reassignment.")
    if len(set(replicas)) != len(replicas):
        return (ErrorCode.invalid_replica_assignment,
                f"Duplicate replica ids in partition reassignment replica list: "
                f"{_scala_list(replicas)}")
    if any(r < 0 for r in replicas):
        return (ErrorCode.invalid_replica_assignment,
                f"Invalid broker id in replica list: {_scala_list(replicas)}")
    adding = now.reassign_to(replicas).adding
    alive = set(live)
    if not set(adding) <= alive:
        return (ErrorCode.invalid_replica_assignment,
                f"Replica assignment has brokers that are not alive. Replica list: "
                f"{_scala_list(adding)}, live broker list: {_scala_set(alive)}")
    if not allow_replication_factor_change and now.replicas \
            and len(replicas) != len(now.origin):
        return (ErrorCode.invalid_replication_factor,
                f"The replication factor is changed from {len(now.origin)} to "
                f"{len(replicas)}")
    return None


def _scala_list(items: Iterable[int]) -> str:
    return "ArrayBuffer(" + ", ".join(map(str, items)) + ")"


def _scala_set(items: Iterable[int]) -> str:
    ordered = sorted(items)  # Scala prints Set1..Set4 as Set(...), larger sets as HashSet(...)
    return ("Set(" if len(ordered) <= 4 else "HashSet(") + ", ".join(map(str, ordered)) + ")"


def alter(store: ZkMetadataStore, lease: ControllerLease,
          changes: Mapping[TopicPartition, Sequence[int] | None],
          allow_replication_factor_change: bool = True) -> dict[TopicPartition, Outcome]:
    """AlterPartitionReassignments on the controller: check, then record each reassignment in
    its topic znode (one fenced, versioned write per topic; blocking: run it off the loop)."""
    live = set(store.live_brokers())
    deleting = set(store.pending_deletions())
    results: dict[TopicPartition, Outcome] = {}
    by_topic: dict[str, dict[int, Sequence[int] | None]] = {}
    for (topic, partition), replicas in changes.items():
        by_topic.setdefault(topic, {})[partition] = replicas
    for topic, wanted in by_topic.items():
        for attempt in range(ATTEMPTS):
            try:
                results.update(_alter_topic(store, lease, topic, wanted, live,
                                            topic in deleting, allow_replication_factor_change))
                break
            except StaleVersionError:
                if attempt == ATTEMPTS - 1:
                    raise
    return results


def _alter_topic(store: ZkMetadataStore, lease: ControllerLease, topic: str,
                 wanted: Mapping[int, Sequence[int] | None], live: set[int], deleting: bool,
                 allow_rf_change: bool) -> dict[TopicPartition, Outcome]:
    read = store.read_topic_assignment(topic)
    znode = read[0] if read else znodes.TopicAssignment(None, {})
    results: dict[TopicPartition, Outcome] = {}
    partitions = {p: list(r) for p, r in znode.partitions.items()}
    adding = {p: list(r) for p, r in znode.adding.items()}
    removing = {p: list(r) for p, r in znode.removing.items()}
    changed: list[str] = []
    for partition, replicas in sorted(wanted.items()):
        now = current(znode, partition)
        if replicas is not None:
            error = validate(replicas, now, live, allow_rf_change)
            if error is not None:
                results[(topic, partition)] = error
                continue
        if replicas is None and not now.being_reassigned:
            results[(topic, partition)] = NO_REASSIGNMENT
            continue
        if deleting or not now.replicas:
            results[(topic, partition)] = NOT_FOUND
            continue
        new = now.reassign_to(now.origin if replicas is None else replicas)
        partitions[partition] = list(new.replicas)
        adding[partition] = list(new.adding)
        removing[partition] = list(new.removing)
        results[(topic, partition)] = OK
        changed.append(f"{partition}: {list(now.replicas)} -> "
                       f"{'cancelled, ' if replicas is None else ''}replicas "
                       f"{list(new.replicas)}, adding {list(new.adding)}, removing "
                       f"{list(new.removing)}")
    if changed and read is not None:
        store.write_topic_assignment(
            topic, dataclasses.replace(znode, partitions=partitions, adding=adding,
                                       removing=removing),
            expected_zk_version=read[1], controller_epoch_zk_version=lease.epoch_zk_version)
        for line in changed:
            log.info("controller: reassigning %s-%s", topic, line)
    return results


def advance(store: ZkMetadataStore, lease: ControllerLease) -> None:
    """Complete every reassignment whose target replicas are all in the ISR (one step of the
    controller's pass; the pass's leader election then moves the leader and shrinks the ISR).
    """
    for topic, moving in sorted(store.reassigning().items()):
        done: list[int] = []
        for partition in sorted(moving):
            state = store.partition_state(topic, partition)
            replicas = store.assignment(topic).get(partition, [])
            _adding, removing = moving[partition]
            target = [r for r in replicas if r not in removing]
            if state is not None and set(target) <= set(state.isr):
                done.append(partition)
        if not done:
            continue
        read = store.read_topic_assignment(topic)
        if read is None:
            continue
        znode, version = read
        partitions = {p: list(r) for p, r in znode.partitions.items()}
        adding_map = {p: list(r) for p, r in znode.adding.items() if p not in done}
        removing_map = {p: list(r) for p, r in znode.removing.items() if p not in done}
        for partition in done:
            partitions[partition] = list(current(znode, partition).target)
        store.write_topic_assignment(
            topic, dataclasses.replace(znode, partitions=partitions, adding=adding_map,
                                       removing=removing_map),
            expected_zk_version=version, controller_epoch_zk_version=lease.epoch_zk_version)
        for partition in done:
            log.info("controller: reassignment of %s-%d complete, replicas %s", topic,
                     partition, partitions[partition])


def listing(store: ZkMetadataStore, wanted: Mapping[str, Iterable[int]] | None
            ) -> dict[str, dict[int, ReplicaAssignment]]:
    """ListPartitionReassignments: the partitions being reassigned (all, or among ``wanted``)."""
    result: dict[str, dict[int, ReplicaAssignment]] = {}
    reassigning = store.reassigning()
    for topic, moving in sorted(reassigning.items()):
        if wanted is not None and topic not in wanted:
            continue
        asked = None if wanted is None else set(wanted[topic])
        replicas = store.assignment(topic)
        for partition, (adding, removing) in sorted(moving.items()):
            if asked is not None and partition not in asked:
                continue
            result.setdefault(topic, {})[partition] = ReplicaAssignment(
                tuple(replicas.get(partition, ())), adding, removing)
    return result
