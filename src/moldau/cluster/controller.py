"""The controller's work: partition leaders and ISRs in ZooKeeper, and topic deletions.

Every broker runs a ``Controller``; it acts only while its ``ControllerElection`` holds the
lease. Its work is one idempotent pass, ``reconcile``, run on a thread of its own whenever
something it cares about may have changed (elected, topics or their assignments, live
brokers, deletion requests), coalesced so that a burst of events costs one pass:

- every partition without a state znode gets one: leader = the first live replica of the
  assignment, ISR = the live replicas (none live: leader -1);
- a partition whose leader is gone gets the first replica of the assignment that is live and
  in the ISR, at leader epoch + 1 (none: leader -1 and the ISR kept, as Kafka does, unless
  ``unclean.leader.election.enable`` lets a live out-of-sync replica lead);
- dead replicas leave the ISR of partitions whose leader lives (leader epoch + 1);
- reassignments whose target replicas are all in the ISR complete (``reassignment.advance``);
  replicas no longer assigned count as dead for the two rules above;
- deletion requests under /admin/delete_topics are completed (the brokers delete their logs
  when the topic leaves their topic cache);
- ControlledShutdown requests are answered before each pass (``controlled_shutdown``), and
  brokers shutting down are never elected leader.

Every write is fenced: a transaction that checks /controller_epoch is still at the version
this controller wrote when it was elected (a deposed controller's write fails with
``ControllerMovedError``) and that the state znode is at the version read (a concurrent ISR
change by a leader makes it ``StaleVersionError``: the pass runs again). The brokers learn the
result through their watches on the state znodes (``zk_states``).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future

from kazoo.exceptions import KazooException, NoNodeError

from . import reassignment, znodes
from .controlled_shutdown import ControlledShutdowns, ShutdownAnswer
from .controller_election import ControllerElection, ControllerLease
from .zk_session import watch_callback
from .zookeeper import ControllerMovedError, StaleVersionError, ZkMetadataStore

log = logging.getLogger(__name__)

#: A failed pass (ZooKeeper unreachable, a race) is tried again after this long.
RETRY_S = 0.5


def elect_leader(replicas: list[int], state: znodes.PartitionState, live: set[int],
                 unclean: bool, excluded: frozenset[int] = frozenset()
                 ) -> tuple[int, tuple[int, ...]] | None:
    """The new (leader, ISR) of an existing partition, or None when it needs no change.

    ``excluded`` brokers (shutting down) may not become leader.
    """
    isr_live = tuple(b for b in state.isr if b in live)
    if state.leader in live:
        if isr_live == state.isr:
            return None
        return state.leader, isr_live  # dead followers leave the ISR
    candidates = [r for r in replicas if r in live and r in state.isr and r not in excluded]
    if candidates:
        leader = candidates[0]
        return leader, isr_live
    if unclean:
        out_of_sync = [r for r in replicas if r in live and r not in excluded]
        if out_of_sync:
            log.warning("unclean leader election: broker %d (not in the ISR %s) leads",
                        out_of_sync[0], list(state.isr))
            return out_of_sync[0], (out_of_sync[0],)
    if state.leader == -1:
        return None
    return -1, state.isr


class Controller:
    """Runs ``reconcile`` on its own thread while this broker is the controller."""

    def __init__(self, store: ZkMetadataStore, election: ControllerElection, *,
                 unclean_default: Callable[[str], bool]) -> None:
        self._store = store
        self._election = election
        self._unclean = unclean_default
        self._wake = threading.Event()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="controller", daemon=True)
        self.shutdowns = ControlledShutdowns(store)

    def start(self) -> None:
        self._thread.start()
        self._store.client.ChildrenWatch(znodes.DELETE_TOPICS, self._on_deletions)

    def stop(self) -> None:
        self._stopped = True
        self._wake.set()
        self.shutdowns.refuse_pending()

    def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> Future[ShutdownAnswer]:
        """A ControlledShutdown request (any thread), answered by the controller's thread."""
        answer = self.shutdowns.submit(broker_id, broker_epoch)
        if self._stopped:
            self.shutdowns.refuse_pending()
        self._wake.set()
        return answer

    def poke(self, *_args: object) -> None:
        """Something changed (any thread): run a pass soon, if this broker is the controller."""
        self._wake.set()

    def elected(self, lease: ControllerLease) -> None:
        log.info("controller %d (epoch %d) takes over", lease.broker_id, lease.epoch)
        self.shutdowns.brokers.clear()  # as in Kafka, a new controller starts with none
        self._wake.set()

    @watch_callback("following topic deletion requests")
    def _on_deletions(self, children: list[str]) -> bool:
        if self._stopped:
            return False
        if children:
            self._wake.set()
        return True

    def _run(self) -> None:
        while not self._stopped:
            self._wake.wait()
            self._wake.clear()
            if self._stopped:
                self.shutdowns.refuse_pending()
                return
            lease = self._election.lease
            self.shutdowns.run_pending(lease)
            if lease is None:
                continue
            try:
                self.reconcile(lease)
            except ControllerMovedError as exc:
                log.info("controller %d stops: %s", lease.broker_id, exc)
            except (StaleVersionError, KazooException) as exc:
                log.info("controller pass cut short (%s: %s); running it again",
                         type(exc).__name__, exc)
                threading.Timer(RETRY_S, self._wake.set).start()
            except Exception:
                log.exception("controller pass failed; running it again")
                threading.Timer(RETRY_S, self._wake.set).start()

    def reconcile(self, lease: ControllerLease) -> None:
        """One pass over deletions and every partition's state (see the module docstring)."""
        store = self._store
        for name in store.pending_deletions():
            if self._election.lease != lease:
                return
            log.info("controller: deleting topic %s", name)
            with contextlib.suppress(NoNodeError):
                store.complete_topic_deletion(name)
        reassignment.advance(store, lease)
        live = set(store.live_brokers())
        excluded = self.shutdowns.excluded()
        for name in sorted(store.topics()):
            if self._election.lease != lease:
                return
            new_states: dict[int, znodes.PartitionState] = {}
            for partition, replicas in sorted(store.assignment(name).items()):
                state = store.partition_state(name, partition)
                if state is None:
                    alive = tuple(r for r in replicas if r in live)
                    leader = next((r for r in alive if r not in excluded), -1)
                    new_states[partition] = znodes.PartitionState(
                        leader, 0, alive or tuple(replicas), lease.epoch)
                    continue
                # A replica outside the assignment (a reassignment removed it) may neither
                # lead nor stay in the ISR.
                change = elect_leader(replicas, state, live & set(replicas),
                                      self._unclean(name), excluded)
                if change is None:
                    continue
                leader, isr = change
                store.update_partition_state(
                    name, partition,
                    znodes.PartitionState(leader, state.leader_epoch + 1, isr, lease.epoch),
                    expected_zk_version=state.zk_version,
                    controller_epoch_zk_version=lease.epoch_zk_version)
                log.info("controller: %s-%d leader %d -> %d, epoch %d, ISR %s", name,
                         partition, state.leader, leader, state.leader_epoch + 1, list(isr))
            if new_states:
                try:
                    store.create_partition_states(name, new_states, lease.epoch_zk_version)
                except ControllerMovedError:
                    raise
                except Exception as exc:  # a topic deleted meanwhile, or a racing pass
                    raise StaleVersionError(f"creating states of {name}: {exc}") from exc
                log.info("controller: %s partitions %s online, leaders %s", name,
                         sorted(new_states), [s.leader for _, s in sorted(new_states.items())])
