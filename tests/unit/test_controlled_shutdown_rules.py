"""The controller's rules for a broker in controlled shutdown (pure functions, no ZooKeeper)."""

from __future__ import annotations

from moldau.cluster.controlled_shutdown import ShuttingDownBrokers, shutdown_state
from moldau.cluster.controller import elect_leader
from moldau.cluster.znodes import PartitionState


def state(leader: int, isr: tuple[int, ...], epoch: int = 4) -> PartitionState:
    return PartitionState(leader, epoch, isr, 2)


def test_a_led_partition_moves_to_the_first_eligible_in_sync_replica() -> None:
    new = shutdown_state([1, 2, 3], state(1, (1, 2, 3)), 1, eligible={2, 3})
    assert new is not None
    assert (new.leader, new.leader_epoch, new.isr) == (2, 5, (2, 3))
    # Replica order decides, and only in-sync, eligible replicas count.
    new = shutdown_state([1, 3, 2], state(1, (1, 2)), 1, eligible={2, 3})
    assert new is not None and (new.leader, new.isr) == (2, (2,))
    # Another broker shutting down is neither leader nor kept in the ISR.
    new = shutdown_state([1, 2, 3], state(1, (1, 2, 3)), 1, eligible={3})
    assert new is not None and (new.leader, new.isr) == (3, (3,))


def test_a_led_partition_without_another_in_sync_replica_stays() -> None:
    assert shutdown_state([1, 2, 3], state(1, (1,)), 1, eligible={2, 3}) is None
    assert shutdown_state([1, 2], state(1, (1, 2)), 1, eligible=set()) is None


def test_a_followed_partition_loses_it_from_the_isr_at_the_same_epoch() -> None:
    new = shutdown_state([2, 1, 3], state(2, (1, 2, 3)), 1, eligible={2, 3})
    assert new is not None and (new.leader, new.leader_epoch, new.isr) == (2, 4, (2, 3))
    # Not in the ISR, or an offline partition: nothing to do.
    assert shutdown_state([2, 1, 3], state(2, (2, 3)), 1, eligible={2, 3}) is None
    assert shutdown_state([2, 1, 3], state(-1, (1,)), 1, eligible={3}) is None


def test_reconcile_never_elects_a_broker_shutting_down() -> None:
    # Leader 2 died; 1 is in the ISR but shutting down: 3 leads.
    assert elect_leader([1, 2, 3], state(2, (1, 2, 3)), {1, 3}, False, frozenset({1})) \
        == (3, (1, 3))
    # Only the shutting-down broker is in sync: offline rather than it, and no unclean pick.
    assert elect_leader([1, 2, 3], state(2, (1, 2)), {1, 3}, True, frozenset({1, 3})) \
        == (-1, (1, 2))


def test_shutting_down_brokers_are_forgotten_when_they_register_again_or_go() -> None:
    brokers = ShuttingDownBrokers()
    brokers.add(1, 100)
    brokers.add(2, 200)
    assert brokers.current({1: 100, 2: 200, 3: 300}) == {1, 2}
    assert brokers.current({1: 150, 2: 200}) == {2}  # 1 registered again (new epoch)
    assert brokers.current({1: 150}) == frozenset()  # 2 is gone
