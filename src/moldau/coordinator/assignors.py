"""Server-side partition assignors for KIP-848 consumer groups.

With the consumer protocol the coordinator, not a group leader, computes the target
assignment, so the assignors live in the pure core. Both are deterministic functions of the
members' subscriptions, the topics' partition counts and the previous target assignment, so
that the same inputs (e.g. after a restart) give the same answer.

``uniform`` (Kafka's default) balances the number of partitions per member and is sticky: a
member keeps the partitions it already had as long as that does not unbalance the group, which
keeps revocations (and thus consumption pauses) to a minimum. ``range`` gives each member a
contiguous range of every subscribed topic, for co-partitioned joins; it is not sticky.
"""

from __future__ import annotations

from collections.abc import Mapping

TopicPartition = tuple[str, int]
#: member id -> the topics the member subscribes to.
Subscriptions = Mapping[str, frozenset[str]]
#: member id -> the partitions assigned to it.
Assignment = dict[str, frozenset[TopicPartition]]

UNIFORM = "uniform"
RANGE = "range"
ASSIGNORS = (UNIFORM, RANGE)


def assign(
    name: str,
    subscriptions: Subscriptions,
    partitions: Mapping[str, int],
    previous: Mapping[str, frozenset[TopicPartition]],
) -> Assignment:
    """The target assignment computed by the assignor called ``name``.

    ``partitions`` maps each existing topic to its partition count; subscribed topics missing
    from it are ignored (they may be created later, which bumps the group epoch).
    """
    if name == RANGE:
        return range_assign(subscriptions, partitions)
    if name == UNIFORM:
        return uniform_assign(subscriptions, partitions, previous)
    raise ValueError(f"unknown assignor {name!r}")


def range_assign(subscriptions: Subscriptions, partitions: Mapping[str, int]) -> Assignment:
    """Per topic, the subscribers sorted by id get contiguous ranges, the first ones one extra."""
    result: dict[str, set[TopicPartition]] = {member: set() for member in subscriptions}
    for topic in sorted({t for topics in subscriptions.values() for t in topics}):
        count = partitions.get(topic)
        if not count:
            continue
        members = sorted(m for m, topics in subscriptions.items() if topic in topics)
        quota, extra = divmod(count, len(members))
        start = 0
        for index, member in enumerate(members):
            size = quota + (1 if index < extra else 0)
            result[member].update((topic, p) for p in range(start, start + size))
            start += size
    return {member: frozenset(tps) for member, tps in result.items()}


def uniform_assign(
    subscriptions: Subscriptions,
    partitions: Mapping[str, int],
    previous: Mapping[str, frozenset[TopicPartition]],
) -> Assignment:
    """Balanced, sticky assignment; works for homogeneous and heterogeneous subscriptions.

    1. Every member keeps the previously assigned partitions it still subscribes to, up to its
       fair share (ceil of subscribed-partitions / members), so that a newcomer can get some.
    2. Each partition left over goes to the eligible member with the fewest partitions.
    3. While a partition can move from a member to an eligible one with at least two fewer
       partitions, it moves: this balances heterogeneous subscriptions that step 1 could not.
    Ties break on member id, so the result is deterministic.
    """
    members = sorted(subscriptions)
    result: dict[str, set[TopicPartition]] = {member: set() for member in members}
    if not members:
        return {}
    all_partitions = sorted(
        (topic, p)
        for topic in {t for topics in subscriptions.values() for t in topics}
        for p in range(partitions.get(topic, 0))
    )
    eligible = {
        tp: [m for m in members if tp[0] in subscriptions[m]] for tp in all_partitions
    }
    share = {
        m: -(-sum(1 for tp in all_partitions if tp[0] in subscriptions[m]) // len(members))
        for m in members
    }
    taken: set[TopicPartition] = set()
    for member in members:
        kept = sorted(
            tp for tp in previous.get(member, frozenset())
            if tp in eligible and member in eligible[tp] and tp not in taken
        )
        for tp in kept[: max(share[member], 0)]:
            result[member].add(tp)
            taken.add(tp)
    for tp in all_partitions:
        if tp in taken:
            continue
        owner = min(eligible[tp], key=lambda m: (len(result[m]), m))
        result[owner].add(tp)
        taken.add(tp)
    moved = True
    while moved:
        moved = False
        for donor in sorted(members, key=lambda m: (-len(result[m]), m)):
            for tp in sorted(result[donor]):
                candidates = [m for m in eligible[tp] if len(result[m]) + 1 < len(result[donor])]
                if candidates:
                    target = min(candidates, key=lambda m: (len(result[m]), m))
                    result[donor].discard(tp)
                    result[target].add(tp)
                    moved = True
                    break
            if moved:
                break
    return {member: frozenset(tps) for member, tps in result.items()}
