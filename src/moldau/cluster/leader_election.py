"""Requested and automatic leader elections, as Kafka 3.9's controller runs them on ZooKeeper.

The ``Controller`` (``controller.py``) only repairs leadership: it gives partitions whose
leader died another one. Moving leadership on purpose is this module's job, done by the
controller broker on a thread of its own (``leader-election``), one election at a time:

- **ElectLeaders** (``LeaderElector.elect``, from the ElectLeaders handler): PREFERRED makes
  the first replica of the assignment lead, if it is live and in the ISR (it already leads:
  ELECTION_NOT_NEEDED; it cannot: PREFERRED_LEADER_NOT_AVAILABLE). UNCLEAN acts only on a
  partition without a live leader: the first live replica in the ISR, else the first live
  replica at all (a record only the lost leader had is lost), else
  ELIGIBLE_LEADERS_NOT_AVAILABLE. Unknown partitions get UNKNOWN_TOPIC_OR_PARTITION, those
  of a topic being deleted INVALID_TOPIC_EXCEPTION, and a broker that is not the controller
  answers NOT_CONTROLLER for each partition.
- **/admin/preferred_replica_election**: the znode Kafka's ZooKeeper tools write; its
  partitions get a PREFERRED election, then the znode is deleted (fenced by the controller
  epoch). Looked at when a broker becomes controller and whenever the znode appears.
- **Automatic rebalance** (``auto.leader.rebalance.enable``): 5 s after the election and then
  every ``leader.imbalance.check.interval.seconds``, for each broker the share of the
  partitions it is preferred leader of that are led elsewhere; above
  ``leader.imbalance.per.broker.percentage`` the ones whose preferred replica is live and in
  the ISR get a PREFERRED election (Kafka's checkAndTriggerAutoLeaderRebalance), unless a
  partition reassignment is in progress.

*Live* means registered and not in a controlled shutdown (``shutting_down``), as Kafka's
controller counts live brokers. Decisions are taken on the partition-state cache
(``zk_states``, current through watches) and written as the controller writes: a
transaction that checks /controller_epoch is still at this controller's version and the
state znode at the version read. A stale cache entry fails the write
(``StaleVersionError``); the state is read again from ZooKeeper and the decision taken
again. A new state has leader epoch + 1, so brokers apply it through their watches exactly
like a failover; the old leader becomes a follower and truncates as usual.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kazoo.exceptions import KazooException, NoNodeError
from kio.schema.errors import ErrorCode

from . import znodes
from .controller_election import ControllerElection, ControllerLease
from .zk_session import watch_callback
from .zk_states import PartitionStateCache
from .zookeeper import ControllerMovedError, StaleVersionError, ZkMetadataStore

log = logging.getLogger(__name__)

PREFERRED = 0
UNCLEAN = 1
ELECTION_TYPES = {PREFERRED: "PREFERRED", UNCLEAN: "UNCLEAN"}

#: Kafka's controller checks the leader imbalance first this long after it was elected.
FIRST_CHECK_DELAY_S = 5.0
#: A failed look at /admin/preferred_replica_election is tried again after this long.
RETRY_S = 0.5
#: Conditional writes tried per partition before giving up (each after a fresh read).
WRITE_ATTEMPTS = 5

Key = tuple[str, int]


@dataclass(frozen=True, slots=True)
class ElectionOutcome:
    """One partition's result, as ElectLeaders reports it; ``zk_version`` of the state
    written when ``code`` is none (the handler waits until this broker's cache has it)."""

    code: ErrorCode
    message: str | None = None
    leader: int = -1
    zk_version: int = -1


NOT_CONTROLLER = ElectionOutcome(ErrorCode.not_controller)
NOT_NEEDED = ElectionOutcome(ErrorCode.election_not_needed,
                             "Leader election not needed for topic partition.")
UNKNOWN_PARTITION = ElectionOutcome(ErrorCode.unknown_topic_or_partition,
                                    "The partition does not exist.")
BEING_DELETED = ElectionOutcome(ErrorCode.invalid_topic_exception, "The topic is being deleted")


def election_needed(election_type: int, replicas: list[int], state: znodes.PartitionState,
                    live: set[int]) -> bool:
    """Kafka's test: PREFERRED when the preferred replica does not lead, UNCLEAN when
    nobody live leads."""
    if election_type == PREFERRED:
        return state.leader != replicas[0]
    return state.leader == -1 or state.leader not in live


def choose_leader(election_type: int, replicas: list[int], state: znodes.PartitionState,
                  live: set[int]) -> tuple[int, tuple[int, ...]] | None:
    """The new (leader, ISR), or None when no replica may lead under this election type."""
    if election_type == PREFERRED:
        preferred = replicas[0]
        if preferred in live and preferred in state.isr:
            return preferred, state.isr  # the ISR is kept, as Kafka's preferred election does
        return None
    in_sync = [r for r in replicas if r in live and r in state.isr]
    if in_sync:
        return in_sync[0], tuple(b for b in state.isr if b in live)
    out_of_sync = [r for r in replicas if r in live]
    if out_of_sync:
        return out_of_sync[0], (out_of_sync[0],)
    return None


def not_available(election_type: int, key: Key) -> ElectionOutcome:
    """No replica may lead: Kafka's code and message (its strategy's name included)."""
    strategy = ("PreferredReplicaPartitionLeaderElectionStrategy" if election_type == PREFERRED
                else "OfflinePartitionLeaderElectionStrategy(true)")
    code = (ErrorCode.preferred_leader_not_available if election_type == PREFERRED
            else ErrorCode.eligible_leaders_not_available)
    return ElectionOutcome(code, f"Failed to elect leader for partition {key[0]}-{key[1]} "
                                 f"under strategy {strategy}")


def imbalanced(by_preferred: dict[int, list[Key]], leaders: dict[Key, int],
               percentage: int) -> list[Key]:
    """Partitions led elsewhere of every broker whose share of them is above ``percentage``.

    ``by_preferred``: each broker's partitions where it is the first replica; ``leaders``:
    their current leader (partitions without a state yet are not counted as led elsewhere).
    """
    chosen: list[Key] = []
    for broker, keys in sorted(by_preferred.items()):
        elsewhere = [k for k in keys if k in leaders and leaders[k] != broker]
        if keys and len(elsewhere) / len(keys) > percentage / 100:
            chosen.extend(elsewhere)
    return chosen


class _Request:
    __slots__ = ("election_type", "future", "partitions")

    def __init__(self, election_type: int, partitions: set[Key] | None) -> None:
        self.election_type = election_type
        self.partitions = partitions
        self.future: concurrent.futures.Future[dict[Key, ElectionOutcome]] = \
            concurrent.futures.Future()


class LeaderElector:
    """Runs requested and automatic elections on its own thread while this broker is the
    controller (see the module docstring)."""

    def __init__(self, store: ZkMetadataStore, election: ControllerElection,
                 states: PartitionStateCache, *, auto_rebalance: bool,
                 check_interval_s: float, imbalance_percentage: int,
                 shutting_down: Callable[[], frozenset[int]] = frozenset) -> None:
        self._store = store
        self._shutting_down = shutting_down
        self._election = election
        self._states = states
        self._auto = auto_rebalance
        self._interval = check_interval_s
        self._percentage = imbalance_percentage
        self._lock = threading.Lock()
        self._requests: deque[_Request] = deque()
        self._wake = threading.Event()
        self._znode_pending = False
        self._next_check: float | None = None
        self._lease_seen: ControllerLease | None = None
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="leader-election", daemon=True)

    def start(self) -> None:
        self._thread.start()
        self._store.client.DataWatch(znodes.PREFERRED_REPLICA_ELECTION, self._on_znode)

    def stop(self) -> None:
        self._stopped = True
        self._wake.set()
        with self._lock:
            pending, self._requests = list(self._requests), deque()
        for request in pending:
            request.future.cancel()

    def poke(self, *_args: object) -> None:
        """The lease may have changed (any thread): look again."""
        self._wake.set()

    def elect(self, election_type: int, partitions: Iterable[Key] | None
              ) -> concurrent.futures.Future[dict[Key, ElectionOutcome]]:
        """Queue an ElectLeaders election (None = every partition); the future resolves once
        the new states are written. A broker that is not the controller answers at once."""
        request = _Request(election_type, None if partitions is None else set(partitions))
        if self._election.lease is None or self._stopped:
            request.future.set_result(dict.fromkeys(
                self._all_partitions() if request.partitions is None else request.partitions,
                NOT_CONTROLLER))
            return request.future
        with self._lock:
            self._requests.append(request)
        self._wake.set()
        return request.future

    @watch_callback("following preferred replica election requests")
    def _on_znode(self, _data: bytes | None, stat: object) -> bool:
        if self._stopped:
            return False
        if stat is not None:
            self._znode_pending = True
            self._wake.set()
        return True

    # -- the thread ----------------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stopped:
            timeout = None if self._next_check is None else \
                max(0.0, self._next_check - time.monotonic())
            self._wake.wait(timeout)
            self._wake.clear()
            if self._stopped:
                return
            lease = self._election.lease
            if lease != self._lease_seen:
                self._lease_seen = lease
                self._next_check = (time.monotonic() + FIRST_CHECK_DELAY_S
                                    if lease is not None and self._auto else None)
                self._znode_pending = self._znode_pending or lease is not None
            self._serve_requests(lease)
            if lease is None:
                continue
            if self._znode_pending:
                self._znode_pending = False
                self._guarded(self._from_znode, lease, "preferred replica election request",
                              retry=True)
            if self._next_check is not None and time.monotonic() >= self._next_check:
                self._next_check = time.monotonic() + self._interval
                self._guarded(self._rebalance, lease, "leader imbalance check")

    def _guarded(self, work: Callable[[ControllerLease], None], lease: ControllerLease,
                 what: str, *, retry: bool = False) -> None:
        """Run ``work``; ZooKeeper trouble is one log line (and, with ``retry``, a new try)."""
        try:
            work(lease)
        except ControllerMovedError as exc:
            log.info("%s stopped: %s", what, exc)
        except KazooException as exc:
            log.info("%s cut short (%s: %s)", what, type(exc).__name__, exc)
            if retry:
                self._znode_pending = True
                threading.Timer(RETRY_S, self._wake.set).start()
        except Exception:
            log.exception("%s failed", what)

    def _serve_requests(self, lease: ControllerLease | None) -> None:
        while True:
            with self._lock:
                if not self._requests:
                    return
                request = self._requests.popleft()
            if not request.future.set_running_or_notify_cancel():
                continue  # the client gave up waiting
            try:
                if lease is None:
                    wanted = request.partitions
                    result = dict.fromkeys(self._all_partitions() if wanted is None else wanted,
                                           NOT_CONTROLLER)
                else:
                    result = self.run_election(lease, request.election_type, request.partitions,
                                               "ElectLeaders")
                request.future.set_result(result)
            except Exception as exc:  # ZooKeeper unreachable: the handler answers the error
                request.future.set_exception(exc)

    # -- elections -----------------------------------------------------------------------------

    def _live(self) -> set[int]:
        """Brokers that may lead: registered and not in a controlled shutdown (Kafka's
        liveBrokerIds)."""
        return set(self._store.live_brokers()) - self._shutting_down()

    def _all_partitions(self) -> set[Key]:
        return {(name, p) for name in self._store.topics()
                for p in self._store.assignment(name)}

    def run_election(self, lease: ControllerLease, election_type: int,
                     partitions: set[Key] | None, trigger: str) -> dict[Key, ElectionOutcome]:
        """Elect for ``partitions`` (None: all of them); one outcome per partition."""
        store = self._store
        live = self._live()
        deleting = set(store.pending_deletions())
        wanted = self._all_partitions() if partitions is None else partitions
        results: dict[Key, ElectionOutcome] = {}
        for key in sorted(wanted):
            replicas = store.assignment(key[0]).get(key[1]) if store.topic(key[0]) else None
            if not replicas:
                results[key] = UNKNOWN_PARTITION
            elif key[0] in deleting:
                results[key] = BEING_DELETED
            elif self._election.lease != lease:
                results[key] = NOT_CONTROLLER
            else:
                try:
                    results[key] = self._elect_one(lease, election_type, key, replicas, live,
                                                   trigger)
                except ControllerMovedError:
                    log.info("controller moved during a %s election",
                             ELECTION_TYPES[election_type])
                    results[key] = NOT_CONTROLLER
        return results

    def _elect_one(self, lease: ControllerLease, election_type: int, key: Key,
                   replicas: list[int], live: set[int], trigger: str) -> ElectionOutcome:
        state = self._states.get(*key) or self._store.partition_state(*key)
        for _ in range(WRITE_ATTEMPTS):
            if state is None:
                return not_available(election_type, key)
            if not election_needed(election_type, replicas, state, live):
                return NOT_NEEDED
            choice = choose_leader(election_type, replicas, state, live)
            if choice is None:
                return not_available(election_type, key)
            leader, isr = choice
            new = znodes.PartitionState(leader, state.leader_epoch + 1, isr, lease.epoch)
            try:
                version = self._store.update_partition_state(
                    key[0], key[1], new, expected_zk_version=state.zk_version,
                    controller_epoch_zk_version=lease.epoch_zk_version)
            except StaleVersionError:
                state = self._store.partition_state(*key)  # the cache was behind: read again
                continue
            if election_type == UNCLEAN and leader not in state.isr:
                log.warning("controller: unclean election (%s) of %s-%d: broker %d, not in the "
                            "ISR %s, leads", trigger, key[0], key[1], leader, list(state.isr))
            log.info("controller: %s election (%s) of %s-%d: leader %d -> %d, epoch %d, ISR %s",
                     ELECTION_TYPES[election_type].lower(), trigger, key[0], key[1],
                     state.leader, leader, new.leader_epoch, list(isr))
            return ElectionOutcome(ErrorCode.none, None, leader, version)
        return ElectionOutcome(ErrorCode.unknown_server_error,
                               f"the state of {key[0]}-{key[1]} kept changing")

    def _from_znode(self, lease: ControllerLease) -> None:
        """Carry out /admin/preferred_replica_election and delete it."""
        client = self._store.client
        try:
            data, _ = client.get(znodes.PREFERRED_REPLICA_ELECTION)
        except NoNodeError:
            return
        try:
            partitions = znodes.decode_preferred_replica_election(data)
        except ValueError as exc:
            log.warning("ignoring %s: %s", znodes.PREFERRED_REPLICA_ELECTION, exc)
            partitions = set()
        if partitions:
            results = self.run_election(lease, PREFERRED, partitions,
                                        znodes.PREFERRED_REPLICA_ELECTION)
            failed = {f"{t}-{p}": ErrorCode(o.code).name for (t, p), o in results.items()
                      if o.code not in (ErrorCode.none, ErrorCode.election_not_needed)}
            if failed:
                log.info("controller: preferred election for %s failed: %s",
                         znodes.PREFERRED_REPLICA_ELECTION, failed)
        self._store.delete_preferred_replica_election(lease.epoch_zk_version)

    def _rebalance(self, lease: ControllerLease) -> None:
        """Kafka's checkAndTriggerAutoLeaderRebalance (see the module docstring)."""
        store = self._store
        if any(store.reassigning().values()):
            return  # as Kafka: leadership is not rebalanced while replicas are being moved
        deleting = set(store.pending_deletions())
        by_preferred: dict[int, list[Key]] = defaultdict(list)
        leaders: dict[Key, int] = {}
        assigned: dict[Key, list[int]] = {}
        for name in sorted(store.topics()):
            if name in deleting:
                continue
            for p, replicas in sorted(store.assignment(name).items()):
                if not replicas:
                    continue
                assigned[(name, p)] = replicas
                by_preferred[replicas[0]].append((name, p))
                state = self._states.get(name, p)
                if state is not None:
                    leaders[(name, p)] = state.leader
        candidates = imbalanced(by_preferred, leaders, self._percentage)
        if not candidates:
            return
        live = self._live()
        electable = set()
        for key in candidates:
            state = self._states.get(*key)
            if state is not None and choose_leader(PREFERRED, assigned[key], state,
                                                   live) is not None:
                electable.add(key)
        if electable:
            log.info("controller: leader imbalance above %d%%; moving %d partitions back to "
                     "their preferred leader", self._percentage, len(electable))
            self.run_election(lease, PREFERRED, electable, "auto rebalance")
