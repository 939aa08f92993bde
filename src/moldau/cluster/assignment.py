"""Replica assignment for new topics and partitions, as Kafka's AdminUtils does it.

Pure functions, so the controller's placement is unit-tested without a cluster. Kafka's rules:
without racks, partition p's first replica is broker (p + start) mod n and the others follow
at a shift that grows every n partitions, so leaders and followers spread evenly; with racks
(every broker must have one), brokers are first arranged alternating rack by rack and a
replica is skipped while its rack (or broker) already holds one and another rack (or broker)
holds none. ``start`` and the first shift are random unless fixed (tests fix them).
Explicit assignments are checked with Kafka's messages.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kio.schema.errors import ErrorCode


class AssignmentError(Exception):
    """An assignment Kafka would refuse: the error code and message it would answer with."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class BrokerPlacement:
    """A live broker as placement sees it."""

    broker_id: int
    rack: str | None = None


def rack_alternated(brokers: Mapping[int, str]) -> list[int]:
    """Brokers ordered one per rack in turn (racks sorted, brokers sorted within a rack)."""
    by_rack: dict[str, list[int]] = {}
    for broker_id, rack in brokers.items():
        by_rack.setdefault(rack, []).append(broker_id)
    racks = sorted(by_rack)
    queues = {rack: sorted(ids) for rack, ids in by_rack.items()}
    result: list[int] = []
    index = 0
    while len(result) < len(brokers):
        queue = queues[racks[index]]
        if queue:
            result.append(queue.pop(0))
        index = (index + 1) % len(racks)
    return result


def _replica_index(first: int, shift: int, replica: int, n: int) -> int:
    return (first + 1 + (shift + replica) % (n - 1)) % n


def assign_replicas(
    brokers: Sequence[BrokerPlacement],
    partitions: int,
    replication_factor: int,
    *,
    start_partition: int = 0,
    fixed_start: int = -1,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    """Replicas for partitions ``start_partition .. start_partition + partitions - 1``.

    The first replica of each list is the preferred leader.
    """
    if partitions <= 0:
        raise AssignmentError(ErrorCode.invalid_partitions,
                              "Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise AssignmentError(ErrorCode.invalid_replication_factor,
                              "Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise AssignmentError(ErrorCode.invalid_replication_factor,
                              f"Replication factor: {replication_factor} larger than available "
                              f"brokers: {len(brokers)}.")
    racks = {b.broker_id: b.rack for b in brokers}
    if all(rack is None for rack in racks.values()):
        ordered_ids = sorted(racks)
        rack_of: dict[int, str] | None = None
    elif any(rack is None for rack in racks.values()):
        raise AssignmentError(ErrorCode.invalid_replication_factor,
                              "Not all brokers have rack information for replica rack aware "
                              "assignment.")
    else:
        rack_of = {b: r for b, r in racks.items() if r is not None}
        ordered_ids = rack_alternated(rack_of)
    n = len(ordered_ids)
    rng = rng or random.Random()
    start = fixed_start if fixed_start >= 0 else rng.randrange(n)
    shift = fixed_start if fixed_start >= 0 else rng.randrange(n)
    result: dict[int, list[int]] = {}
    partition = max(0, start_partition)
    for _ in range(partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + start) % n
        if rack_of is None:
            replicas = [ordered_ids[first]] + [
                ordered_ids[_replica_index(first, shift, j, n)]
                for j in range(replication_factor - 1)
            ]
        else:
            replicas = _rack_aware_replicas(ordered_ids, rack_of, first, shift,
                                            replication_factor)
        result[partition] = replicas
        partition += 1
    return result


def _rack_aware_replicas(ordered_ids: list[int], rack_of: Mapping[int, str], first: int,
                         shift: int, replication_factor: int) -> list[int]:
    n = len(ordered_ids)
    rack_count = len(set(rack_of.values()))
    leader = ordered_ids[first]
    replicas = [leader]
    racks_used = {rack_of[leader]}
    brokers_used = {leader}
    k = 0
    for _ in range(replication_factor - 1):
        while True:
            broker = ordered_ids[_replica_index(first, shift * rack_count, k, n)]
            rack = rack_of[broker]
            k += 1
            if ((rack not in racks_used or len(racks_used) == rack_count)
                    and (broker not in brokers_used or len(brokers_used) == n)):
                replicas.append(broker)
                racks_used.add(rack)
                brokers_used.add(broker)
                break
    return replicas


def check_explicit_assignment(
    assignment: Mapping[int, Sequence[int]],
    live_brokers: Sequence[int],
    *,
    first_partition: int = 0,
) -> None:
    """Refuse what Kafka refuses in a manual assignment (CreateTopics/CreatePartitions).

    Partitions must be consecutive from ``first_partition``, each list non-empty, without
    duplicates, all of one length, and name only live brokers.
    """
    indexes = sorted(assignment)
    if indexes != list(range(first_partition, first_partition + len(indexes))):
        raise AssignmentError(ErrorCode.invalid_replica_assignment,
                              "partitions should be a consecutive 0-based integer sequence")
    live = set(live_brokers)
    lengths = set()
    for partition in indexes:
        replicas = list(assignment[partition])
        if not replicas:
            raise AssignmentError(ErrorCode.invalid_replica_assignment,
                                  f"The manual partition assignment of partition {partition} "
                                  "includes an empty replica list.")
        if len(set(replicas)) != len(replicas):
            raise AssignmentError(ErrorCode.invalid_replica_assignment,
                                  f"The manual partition assignment of partition {partition} "
                                  "includes a broker more than once.")
        unknown = [b for b in replicas if b not in live]
        if unknown:
            raise AssignmentError(ErrorCode.invalid_replica_assignment,
                                  f"The manual partition assignment includes broker "
                                  f"{unknown[0]}, but no such broker is registered.")
        lengths.add(len(replicas))
    if len(lengths) > 1:
        raise AssignmentError(ErrorCode.invalid_replica_assignment,
                              "All partitions should have the same number of replicas")
