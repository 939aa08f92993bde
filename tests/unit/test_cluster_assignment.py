"""Replica placement reproduces Kafka's AdminUtils (expected lists from Kafka 3.9's tests)."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from kio.schema.errors import ErrorCode

from moldau.cluster.assignment import (
    AssignmentError,
    BrokerPlacement,
    assign_replicas,
    check_explicit_assignment,
    rack_alternated,
)

RACKS = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}


def placements(racks: dict[int, str | None]) -> list[BrokerPlacement]:
    return [BrokerPlacement(b, r) for b, r in racks.items()]


def test_rack_alternated_broker_list() -> None:
    assert rack_alternated(RACKS) == [0, 3, 1, 5, 4, 2]
    assert rack_alternated({b: r for b, r in RACKS.items() if b != 5}) == [0, 3, 1, 4, 2]


def test_rack_unaware_assignment_matches_kafka() -> None:
    got = assign_replicas(placements(dict.fromkeys(range(5))), 10, 3, fixed_start=0)
    assert got == {0: [0, 1, 2], 1: [1, 2, 3], 2: [2, 3, 4], 3: [3, 4, 0], 4: [4, 0, 1],
                   5: [0, 2, 3], 6: [1, 3, 4], 7: [2, 4, 0], 8: [3, 0, 1], 9: [4, 1, 2]}


def test_rack_aware_assignment_matches_kafka() -> None:
    got = assign_replicas(placements(dict(RACKS)), 7, 3, fixed_start=0)
    assert got == {0: [0, 3, 1], 1: [3, 1, 5], 2: [1, 5, 4], 3: [5, 4, 2], 4: [4, 2, 0],
                   5: [2, 0, 3], 6: [0, 4, 2]}


def test_rack_aware_puts_each_replica_in_another_rack_and_spreads_leaders() -> None:
    for seed in range(20):
        got = assign_replicas(placements(dict(RACKS)), 12, 3, rng=random.Random(seed))
        for replicas in got.values():
            assert len({RACKS[b] for b in replicas}) == 3
        assert set(Counter(r[0] for r in got.values()).values()) == {2}


def test_start_partition_continues_numbering() -> None:
    got = assign_replicas(placements(dict.fromkeys(range(3))), 2, 2, start_partition=3,
                          fixed_start=0)
    assert sorted(got) == [3, 4]


@pytest.mark.parametrize(("partitions", "factor", "code"), [
    (0, 1, ErrorCode.invalid_partitions),
    (1, 0, ErrorCode.invalid_replication_factor),
    (1, 4, ErrorCode.invalid_replication_factor),
])
def test_bad_counts(partitions: int, factor: int, code: ErrorCode) -> None:
    with pytest.raises(AssignmentError) as info:
        assign_replicas(placements(dict.fromkeys(range(3))), partitions, factor)
    assert info.value.code == code


def test_some_brokers_without_rack_are_refused() -> None:
    with pytest.raises(AssignmentError, match="Not all brokers have rack information"):
        assign_replicas(placements({0: "a", 1: None}), 1, 1)


@pytest.mark.parametrize(("assignment", "message"), [
    ({0: [1], 2: [1]}, "consecutive"),
    ({0: []}, "empty replica list"),
    ({0: [1, 1]}, "more than once"),
    ({0: [1, 9]}, "broker 9, but no such broker"),
    ({0: [1, 2], 1: [1]}, "same number of replicas"),
])
def test_explicit_assignment_checks(assignment: dict[int, list[int]], message: str) -> None:
    with pytest.raises(AssignmentError, match=message) as info:
        check_explicit_assignment(assignment, [1, 2, 3])
    assert info.value.code == ErrorCode.invalid_replica_assignment


def test_explicit_assignment_accepted() -> None:
    check_explicit_assignment({0: [1, 2], 1: [2, 3]}, [1, 2, 3])
    check_explicit_assignment({2: [1]}, [1], first_partition=2)
