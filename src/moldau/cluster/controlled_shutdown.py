"""The controller's side of a controlled shutdown (Kafka's ``doControlledShutdown``).

A broker about to stop sends ControlledShutdown(broker id, broker epoch) to the controller.
The controller then, on its own thread (requests are queued here and run by ``Controller``
before its next pass, so they never race its other writes):

- checks the broker: not registered is BROKER_NOT_AVAILABLE; an epoch older than its
  registration's (a request from before a restart) is STALE_BROKER_EPOCH; -1 is not checked;
- marks it as shutting down (``ShuttingDownBrokers``): from now on it is never elected leader
  (``Controller.reconcile`` leaves it out) until it registers again with a new broker epoch;
- for every replicated partition it leads, elects the first replica of the assignment that
  is live, in the ISR and not shutting down, at leader epoch + 1, the shutting-down brokers
  out of the ISR. A partition with no such replica keeps its leader (nothing else could lead
  it without losing acknowledged records): it is answered as a *remaining* partition, and the
  broker asks again later;
- removes it from the ISR of the partitions it only follows, at the same leader epoch (the
  leader keeps leading; as a leader's own ISR change, it does not disturb its clients).

Every write is fenced like the controller's others (/controller_epoch version, the state
znode's version). Brokers learn the new states through their watches; the answer lists the
partitions the broker still leads.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import threading
from collections.abc import Mapping
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field

from kazoo.exceptions import KazooException
from kio.schema.errors import ErrorCode

from . import znodes
from .controller_election import ControllerLease
from .zookeeper import ControllerMovedError, StaleVersionError, ZkMetadataStore

log = logging.getLogger(__name__)

#: A partition whose state changed under the pass (a leader's own ISR change) is read again.
ATTEMPTS_PER_PARTITION = 5


@dataclass(frozen=True, slots=True)
class ShutdownAnswer:
    code: ErrorCode
    #: (topic, partition) still led by the broker.
    remaining: tuple[tuple[str, int], ...] = ()


@dataclass(slots=True)
class _Request:
    broker_id: int
    broker_epoch: int
    answer: Future[ShutdownAnswer] = field(default_factory=Future)


class ShuttingDownBrokers:
    """Brokers in controlled shutdown, with the broker epoch they shut down in."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._epochs: dict[int, int] = {}

    def add(self, broker_id: int, broker_epoch: int) -> None:
        with self._lock:
            self._epochs[broker_id] = broker_epoch

    def clear(self) -> None:
        with self._lock:
            self._epochs.clear()

    def current(self, live_epochs: Mapping[int, int]) -> frozenset[int]:
        """The ids still shutting down: a broker gone, or registered again (a new epoch),
        is forgotten."""
        with self._lock:
            self._epochs = {b: e for b, e in self._epochs.items() if live_epochs.get(b) == e}
            return frozenset(self._epochs)


def shutdown_state(replicas: list[int], state: znodes.PartitionState, broker: int,
                   eligible: set[int]) -> znodes.PartitionState | None:
    """The state of a partition once ``broker`` shuts down (None: unchanged).

    ``eligible`` = live brokers not shutting down: the only possible new leaders and the only
    ISR members kept besides the leader.
    """
    if state.leader == broker:
        candidates = [r for r in replicas if r in eligible and r in state.isr]
        if not candidates:
            return None  # the only one in sync: it keeps leading (a remaining partition)
        isr = tuple(r for r in state.isr if r in eligible)
        return znodes.PartitionState(candidates[0], state.leader_epoch + 1, isr,
                                     state.controller_epoch)
    if state.leader >= 0 and broker in state.isr:
        isr = tuple(r for r in state.isr if r != broker)
        return znodes.PartitionState(state.leader, state.leader_epoch, isr,
                                     state.controller_epoch)
    return None


class ControlledShutdowns:
    """ControlledShutdown requests waiting for the controller's thread, and the brokers
    shutting down."""

    def __init__(self, store: ZkMetadataStore) -> None:
        self._store = store
        self._pending: collections.deque[_Request] = collections.deque()
        self.brokers = ShuttingDownBrokers()

    def submit(self, broker_id: int, broker_epoch: int) -> Future[ShutdownAnswer]:
        """Queue a request (any thread); the controller's thread answers it."""
        request = _Request(broker_id, broker_epoch)
        self._pending.append(request)
        return request.answer

    def excluded(self) -> frozenset[int]:
        """Brokers that may not be elected leader now."""
        return self.brokers.current(self._store.broker_epochs())

    def run_pending(self, lease: ControllerLease | None) -> None:
        """Answer every queued request (on the controller's thread; None: not controller)."""
        while self._pending:
            request = self._pending.popleft()
            try:
                answer = (ShutdownAnswer(ErrorCode.not_controller) if lease is None
                          else self._shut_down(lease, request.broker_id, request.broker_epoch))
            except ControllerMovedError as exc:
                log.info("controlled shutdown of broker %d: %s", request.broker_id, exc)
                answer = ShutdownAnswer(ErrorCode.not_controller)
            except Exception as exc:
                log.warning("controlled shutdown of broker %d failed: %s: %s",
                            request.broker_id, type(exc).__name__, exc)
                log.debug("controlled shutdown failed", exc_info=True)
                answer = ShutdownAnswer(ErrorCode.unknown_server_error)
            with contextlib.suppress(InvalidStateError):  # answered by a racing refusal
                request.answer.set_result(answer)

    def refuse_pending(self) -> None:
        """The controller stops: whoever waits is told to ask the next one."""
        self.run_pending(None)

    def _shut_down(self, lease: ControllerLease, broker_id: int,
                   broker_epoch: int) -> ShutdownAnswer:
        store = self._store
        stat = store.client.exists(znodes.broker_path(broker_id))
        if stat is None:
            return ShutdownAnswer(ErrorCode.broker_not_available)
        registered_epoch = int(stat.czxid)
        if broker_epoch != -1 and broker_epoch < registered_epoch:
            log.info("controlled shutdown of broker %d refused: broker epoch %d is older than "
                     "%d", broker_id, broker_epoch, registered_epoch)
            return ShutdownAnswer(ErrorCode.stale_broker_epoch)
        self.brokers.add(broker_id, registered_epoch)
        log.info("controller: broker %d shuts down (controlled)", broker_id)
        deleting = set(store.pending_deletions())
        remaining: list[tuple[str, int]] = []
        moved = shrunk = 0
        for name in sorted(store.topics()):
            if name in deleting:
                continue
            for partition, replicas in sorted(store.assignment(name).items()):
                if broker_id not in replicas or len(replicas) < 2:
                    continue
                outcome = self._move(lease, name, partition, replicas, broker_id)
                if outcome == "remaining":
                    remaining.append((name, partition))
                elif outcome == "moved":
                    moved += 1
                elif outcome == "shrunk":
                    shrunk += 1
        log.info("controller: broker %d: leadership of %d partitions moved, out of the ISR of "
                 "%d, %d remaining", broker_id, moved, shrunk, len(remaining))
        return ShutdownAnswer(ErrorCode.none, tuple(remaining))

    def _move(self, lease: ControllerLease, name: str, partition: int, replicas: list[int],
              broker_id: int) -> str:
        """Write one partition's new state; 'moved', 'shrunk', 'remaining' or ''."""
        store = self._store
        for _ in range(ATTEMPTS_PER_PARTITION):
            state = store.partition_state(name, partition)
            if state is None:
                return ""
            eligible = set(store.broker_epochs()) - self.excluded()
            new = shutdown_state(replicas, state, broker_id, eligible)
            if new is None:
                return "remaining" if state.leader == broker_id else ""
            new = znodes.PartitionState(new.leader, new.leader_epoch, new.isr, lease.epoch)
            try:
                store.update_partition_state(name, partition, new,
                                             expected_zk_version=state.zk_version,
                                             controller_epoch_zk_version=lease.epoch_zk_version)
            except StaleVersionError:
                continue
            except KazooException as exc:
                log.info("controlled shutdown: %s-%d not written: %s", name, partition, exc)
                return "remaining" if state.leader == broker_id else ""
            log.info("controller: %s-%d leader %d -> %d, epoch %d, ISR %s (broker %d shuts "
                     "down)", name, partition, state.leader, new.leader, new.leader_epoch,
                     list(new.isr), broker_id)
            return "moved" if state.leader == broker_id else "shrunk"
        state = store.partition_state(name, partition)
        return "remaining" if state is not None and state.leader == broker_id else ""
