"""One hosted partition as the replica layer sees it (Kafka's ``cluster.Partition``).

A :class:`Partition` wraps the :class:`~moldau.log.partition_log.PartitionLog` and owns what
replication is about: the role (leader or follower), the leader epoch, the ISR, what the
leader knows of each follower (its log end offset, when it was last caught up), the high
watermark, and the ``acks=all`` produce requests waiting for it. Request handlers append and
read through it, so every epoch, leadership and ISR check is made in one place.

The high watermark is the lowest log end offset in the ISR. Its value is stored on the log
(which clamps it to the log's bounds, raises it with the log start and lowers it on
truncation, and whose manager writes it to Kafka's ``replication-offset-checkpoint``), but only
this class moves it forward. On a single broker the ISR is {self}, so the high watermark
follows the log end offset at once and ``acks=all`` completes right after the append.

ISR changes are applied here at once; ``on_isr_change`` is told of each one (where a cluster
will write it to its metadata store, fenced by the leader epoch).
"""

from __future__ import annotations

import asyncio
import collections
import enum
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from ..log.config import LogConfig
from ..log.control_batch import ControlType
from ..log.file_slice import FileSlice
from ..log.partition_log import AppendOrigin, AppendResult, PartitionLog
from ..log.txn_index import AbortedTxn
from .errors import ReplicaError

log = logging.getLogger(__name__)

#: ``current_leader_epoch`` of a request that does not ask for an epoch check.
NO_EPOCH = -1
#: ListOffsets sentinels (Kafka's ListOffsetsRequest constants).
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5
#: ListOffsets v11 (KIP-1023): the first offset not yet uploaded to tiered storage.
EARLIEST_PENDING_UPLOAD_TIMESTAMP = -6

TopicPartition = tuple[str, int]


class Role(enum.Enum):
    LEADER = "leader"
    FOLLOWER = "follower"


@dataclass(slots=True)
class FollowerState:
    """What the leader knows of one follower, learnt from its Fetch requests."""

    #: The follower's log end offset (its fetch offset); -1 until it fetched.
    log_end_offset: int = -1
    #: When the follower was last known to have everything the leader had.
    last_caught_up_ms: int = 0
    #: Time and leader log end offset of the follower's previous fetch (Kafka's rule: a fetch
    #: that reaches what the leader had at the previous fetch was caught up at that time).
    last_fetch_ms: int = 0
    last_fetch_leader_end_offset: int = -1
    #: The follower's log start offset, as its Fetch requests say; -1 until it fetched.
    log_start_offset: int = -1


class _AcksWaiter:
    """A produce with ``acks=all``: done once the high watermark reaches ``end_offset``."""

    __slots__ = ("end_offset", "future")

    def __init__(self, end_offset: int) -> None:
        self.end_offset = end_offset
        self.future: asyncio.Future[ErrorCode] = asyncio.get_running_loop().create_future()


class _LowWatermarkWaiter:
    """A DeleteRecords: done once every ISR replica's log start reached ``offset``."""

    __slots__ = ("future", "offset")

    def __init__(self, offset: int) -> None:
        self.offset = offset
        self.future: asyncio.Future[ErrorCode] = asyncio.get_running_loop().create_future()


class IsrChangeCounts:
    """ISR shrinks and expands applied by this broker as leader, over all its partitions
    (Kafka's IsrShrinksPerSec / IsrExpandsPerSec), and the bytes its followers appended from
    their leaders (ReplicationBytesInPerSec); read by the metrics endpoint."""

    __slots__ = ("expands", "replication_bytes_in", "shrinks")

    def __init__(self) -> None:
        self.shrinks = 0
        self.expands = 0
        self.replication_bytes_in = 0


class Partition:
    """Role, epoch, ISR, follower positions, high watermark and acks waiters of a partition."""

    def __init__(
        self,
        plog: PartitionLog,
        local_id: int,
        *,
        on_committed: Callable[[TopicPartition, int, int], None] | None = None,
        on_isr_change: Callable[[Partition, frozenset[int]], None] | None = None,
        isr_counts: IsrChangeCounts | None = None,
    ) -> None:
        """A partition hosted here, a follower of nobody until :meth:`make_leader` or
        :meth:`make_follower` (the replica manager makes a single broker leader at once).

        ``on_committed(key, bytes, stable_bytes)`` is called when the high watermark moves
        past newly appended bytes (it wakes fetches waiting for data; ``stable_bytes`` is
        what read_committed fetches gained, up to the last stable offset);
        ``on_isr_change(partition, old)`` after every ISR change.
        """
        self._log = plog
        self.local_id = local_id
        self.key: TopicPartition = (plog.topic, plog.partition)
        self.role = Role.FOLLOWER
        self.leader_id = -1
        self.leader_epoch = NO_EPOCH
        #: Every replica assigned to the partition (this broker's id included).
        self.replicas: tuple[int, ...] = (local_id,)
        self.isr: frozenset[int] = frozenset()
        self._followers: dict[int, FollowerState] = {}
        self._waiters: collections.deque[_AcksWaiter] = collections.deque()
        #: DeleteRecords requests waiting for the followers' log starts (usually none).
        self._low_watermark_waiters: list[_LowWatermarkWaiter] = []
        #: Bytes appended that consumers cannot see yet (for waking waiting fetches).
        self._uncommitted_bytes = 0
        self._on_committed = on_committed
        self._on_isr_change = on_isr_change
        self._isr_counts = isr_counts
        #: Set in a cluster: called after every append as leader, to wake follower fetches
        #: waiting for data above the high watermark.
        self.on_leader_append: Callable[[TopicPartition, int], None] | None = None
        #: Set in a cluster: ISR changes are proposed to ZooKeeper instead of applied here.
        self.propose_isr: Callable[[Partition, frozenset[int]], None] | None = None
        #: Set while this broker hands its leadership over (controlled shutdown): appends are
        #: refused, so the new leader (an ISR member, caught up first) has every record. The
        #: future is done once the hand-over ended (produce requests wait for it, see the
        #: produce handler).
        self.handover: asyncio.Future[None] | None = None

    def replace_log(self, plog: PartitionLog) -> None:
        """Serve from ``plog`` from now on: a move to another log dir swapped in its copy,
        which holds the same batches up to the same log end (and the high watermark)."""
        self._log = plog

    def __repr__(self) -> str:
        return (f"Partition({self.topic}-{self.partition}, {self.role.value}, "
                f"epoch={self.leader_epoch}, isr={sorted(self.isr)}, hw={self.high_watermark})")

    # -- what it is ------------------------------------------------------------------------

    @property
    def log(self) -> PartitionLog:
        """The partition's log, for the layers below (cleaner, scrubber, loaders)."""
        return self._log

    @property
    def topic(self) -> str:
        return self._log.topic

    @property
    def partition(self) -> int:
        return self._log.partition

    @property
    def config(self) -> LogConfig:
        return self._log.config

    @property
    def offline(self) -> bool:
        """True once the partition's log dir failed (no leader then, as Kafka reports it)."""
        return self._log.offline

    @property
    def is_leader(self) -> bool:
        return self.role is Role.LEADER

    @property
    def high_watermark(self) -> int:
        return self._log.high_watermark

    @property
    def log_end_offset(self) -> int:
        return self._log.log_end_offset

    @property
    def last_stable_offset(self) -> int:
        """min(first unstable offset, high watermark): where read_committed reads stop."""
        return self._log.last_stable_offset

    @property
    def log_start_offset(self) -> int:
        return self._log.log_start_offset

    def tombstone_bound(self) -> int:
        """The offset below which the cleaner may remove tombstones: the lowest position every
        assigned replica is known to have fetched to (the leader's own log end included).

        Kafka removes tombstones on each replica on a timer of its own, so a replica that was
        away longer than ``delete.retention.ms`` keeps an old value whose delete it never saw,
        and serves it again once it leads. Here a tombstone stays until every replica has
        fetched past it. Only the leader learns the followers' positions (from their fetches);
        a replica it has not heard from since it became leader counts as having nothing, and a
        follower cannot know the other followers' positions, so it keeps every tombstone (-1).
        """
        if self.role is not Role.LEADER:
            return -1
        bound = self._log.log_end_offset
        for replica in self.replicas:
            if replica != self.local_id:
                state = self._followers.get(replica)
                bound = min(bound, state.log_end_offset if state is not None else -1)
        return bound

    def follower(self, replica_id: int) -> FollowerState | None:
        """What the leader knows of one follower (None: not a follower of this partition)."""
        return self._followers.get(replica_id)

    # -- role changes ------------------------------------------------------------------------

    def make_leader(self, epoch: int, isr: Iterable[int], replicas: Iterable[int] | None = None,
                    now_ms: int = 0) -> bool:
        """Lead the partition from ``epoch`` with this ISR (which must hold this broker).

        False (nothing changes) for an epoch older than the current one: the request comes
        from a stale controller. Every follower starts as caught up at ``now_ms`` if in the
        ISR, as in Kafka, so it is not dropped before it had a chance to fetch.
        """
        if epoch < self.leader_epoch:
            log.info("%s-%d: ignoring leadership at epoch %d, already at %d", self.topic,
                     self.partition, epoch, self.leader_epoch)
            return False
        new_isr = frozenset(isr)
        if self.local_id not in new_isr:
            raise ValueError(f"the ISR {sorted(new_isr)} of a leader must hold itself")
        if self.role is Role.LEADER:  # still leading, at a new epoch (the controller's change)
            self._count_isr_change(new_isr)
        self.role = Role.LEADER
        self.leader_id = self.local_id
        self.leader_epoch = epoch
        self._log.start_leader_epoch(epoch)
        self.replicas = tuple(replicas) if replicas is not None else tuple(sorted(new_isr))
        self.isr = new_isr
        # ISR members outside the assignment (a reassignment just removed them) are tracked
        # too until the controller's next state drops them from the ISR.
        self._followers = {
            r: FollowerState(last_caught_up_ms=now_ms if r in new_isr else 0)
            for r in (*self.replicas, *sorted(new_isr - set(self.replicas)))
            if r != self.local_id
        }
        self._maybe_increment_high_watermark()
        return True

    def update_replicas(self, replicas: Iterable[int], now_ms: int) -> None:
        """The assignment changed at the same leader epoch (a reassignment adds or removes
        replicas): a leader starts tracking new followers (they join the ISR once caught up)
        and forgets removed ones, except those still in the ISR (the controller removes them
        from it first; until then the high watermark keeps waiting for them)."""
        new = tuple(replicas)
        if new == self.replicas:
            return
        self.replicas = new
        if self.role is not Role.LEADER:
            return
        for r in new:
            if r != self.local_id and r not in self._followers:
                self._followers[r] = FollowerState(last_caught_up_ms=0)
        for r in list(self._followers):
            if r not in new and r not in self.isr:
                del self._followers[r]

    def make_follower(self, leader_id: int, epoch: int) -> bool:
        """Follow ``leader_id`` from ``epoch``; False for a stale epoch (nothing changes).

        Produce requests waiting for ``acks=all`` are answered NOT_LEADER_OR_FOLLOWER: their
        records may or may not survive the new leader's truncation, and the producer retries.
        """
        if epoch < self.leader_epoch:
            return False
        self.role = Role.FOLLOWER
        self.leader_id = leader_id
        self.leader_epoch = epoch
        self.isr = frozenset()
        self._followers = {}
        self.fail_waiters(ErrorCode.not_leader_or_follower)
        return True

    def stop(self) -> None:
        """No longer hosted here (deleted, or a reassignment moved it away): lead and follow
        nobody, and answer every ``acks=all`` waiter NOT_LEADER_OR_FOLLOWER, including one
        that registers later (a deferred produce whose wait starts after this: it would
        otherwise wait for a high watermark that never moves)."""
        self.role = Role.FOLLOWER
        self.leader_id = -1
        self.isr = frozenset()
        self._followers = {}
        self.fail_waiters(ErrorCode.not_leader_or_follower)

    def fail_waiters(self, code: ErrorCode) -> None:
        """Answer every ``acks=all`` and DeleteRecords waiter with ``code`` (leadership lost,
        partition gone)."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.future.done():
                waiter.future.set_result(code)
        waiting, self._low_watermark_waiters = self._low_watermark_waiters, []
        for deletion in waiting:
            if not deletion.future.done():
                deletion.future.set_result(code)

    # -- checks ------------------------------------------------------------------------------

    def check_epoch(self, current_leader_epoch: int, *, require_leader: bool = True) -> None:
        """Refuse a request whose view of the leader epoch is not ours (KIP-320), then one
        that needs the leader when this broker follows.

        A newer epoch means this broker has not heard of the change yet (UNKNOWN_LEADER_EPOCH,
        the client retries); an older one means the client is stale (FENCED_LEADER_EPOCH, it
        refreshes its metadata). -1 skips the epoch check.
        """
        if current_leader_epoch != NO_EPOCH:
            if current_leader_epoch > self.leader_epoch:
                raise ReplicaError(ErrorCode.unknown_leader_epoch,
                                   f"epoch {current_leader_epoch} is newer than "
                                   f"{self.leader_epoch} of {self.topic}-{self.partition}")
            if current_leader_epoch < self.leader_epoch:
                raise ReplicaError(ErrorCode.fenced_leader_epoch,
                                   f"epoch {current_leader_epoch} is older than "
                                   f"{self.leader_epoch} of {self.topic}-{self.partition}")
        if require_leader and self.role is not Role.LEADER:
            raise ReplicaError(ErrorCode.not_leader_or_follower,
                               f"broker {self.local_id} is not the leader of "
                               f"{self.topic}-{self.partition}")

    # -- produce -----------------------------------------------------------------------------

    def append_as_leader(self, records: bytes | bytearray | memoryview, origin: AppendOrigin,
                         required_acks: int, now_ms: int) -> AppendResult:
        """Append a produce request's (or a coordinator's) batches, as the leader.

        ``required_acks=-1`` with fewer than ``min.insync.replicas`` in the ISR is refused
        before anything is written (NOT_ENOUGH_REPLICAS). Log errors pass through. The batches
        stay opaque bytes: the log patches their headers and writes them with one writev.
        """
        self._check_appendable(required_acks)
        result = self._log.append(records, leader_epoch=self.leader_epoch, now_ms=now_ms,
                                  origin=origin)
        return self._appended(result, len(records))

    def append_marker(self, producer_id: int, producer_epoch: int, control: ControlType,
                      coordinator_epoch: int, now_ms: int, required_acks: int = -1
                      ) -> AppendResult:
        """Write a transaction marker as the leader (the checks of :meth:`append_as_leader`;
        the log's marker checks raise InvalidProducerEpochError and
        TransactionCoordinatorFencedError). Wait for :meth:`wait_for_acks` after it."""
        self._check_appendable(required_acks)
        result = self._log.append_marker(producer_id, producer_epoch, control,
                                         coordinator_epoch, leader_epoch=self.leader_epoch,
                                         now_ms=now_ms)
        return self._appended(result, self._log.log_end_offset - result.base_offset)

    def _check_appendable(self, required_acks: int) -> None:
        if self.role is not Role.LEADER or self.handover is not None:
            raise ReplicaError(ErrorCode.not_leader_or_follower,
                               f"broker {self.local_id} is not the leader of "
                               f"{self.topic}-{self.partition}")
        min_isr = self._log.config.min_insync_replicas
        if required_acks == -1 and len(self.isr) < min_isr:
            raise ReplicaError(ErrorCode.not_enough_replicas,
                               f"min.insync.replicas={min_isr} but the ISR has "
                               f"{len(self.isr)} replica{'s' if len(self.isr) != 1 else ''}")

    def _appended(self, result: AppendResult, size: int) -> AppendResult:
        if result.duplicate:
            # A producer's retry of a batch already written: nothing new to replicate; its
            # acks=all answer still waits for the high watermark to pass the original.
            return result
        self._uncommitted_bytes += size
        if self.on_leader_append is not None:
            self.on_leader_append(self.key, size)
        self._maybe_increment_high_watermark()
        return result

    def acks_reached(self, end_offset: int) -> ErrorCode | None:
        """The answer to an ``acks=all`` produce whose records end before ``end_offset``:
        None while the high watermark is below it, then NONE, or
        NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank below ``min.insync.replicas``
        meanwhile (the records are written but not as safely as asked), as in Kafka."""
        if self.role is not Role.LEADER:
            return ErrorCode.not_leader_or_follower
        if self._log.high_watermark < end_offset:
            return None
        if len(self.isr) < self._log.config.min_insync_replicas:
            return ErrorCode.not_enough_replicas_after_append
        return ErrorCode.none

    @property
    def acks_waiting(self) -> int:
        """Produce requests (acks=all) waiting here for the ISR: the produce purgatory."""
        return len(self._waiters)

    def wait_for_acks(self, end_offset: int) -> asyncio.Future[ErrorCode]:
        """A future with :meth:`acks_reached`'s answer, set once the high watermark reaches
        ``end_offset`` (or leadership is lost)."""
        waiter = _AcksWaiter(end_offset)
        code = self.acks_reached(end_offset)
        if code is not None:
            waiter.future.set_result(code)
        else:
            self._waiters.append(waiter)
        return waiter.future

    # -- high watermark and ISR --------------------------------------------------------------

    def _maybe_increment_high_watermark(self) -> bool:
        """Move the high watermark to the lowest log end offset in the ISR if that is higher;
        wake the fetches and ``acks=all`` produces that waited for it."""
        if self.role is not Role.LEADER:
            return False
        new = self._log.log_end_offset
        for replica in self.isr:
            if replica != self.local_id:
                new = min(new, self._followers[replica].log_end_offset)
        plog = self._log
        if new <= plog.high_watermark:
            return False
        transactions = plog.producers.has_transactions
        old_stable = plog.last_stable_offset if transactions else 0
        plog.high_watermark = new
        if self._uncommitted_bytes and self._on_committed is not None:
            # Waiting fetches count bytes; when the watermark stops short of the log end, the
            # count may be early (the fetch then answers with what is visible). With
            # transactions about, read_committed fetches count what became stable instead.
            stable = self._uncommitted_bytes
            if transactions:
                new_stable = plog.last_stable_offset
                stable = 0 if new_stable == old_stable else \
                    plog.bytes_between(old_stable, new_stable)
            self._on_committed(self.key, self._uncommitted_bytes, stable)
        self._uncommitted_bytes = 0
        waiters = self._waiters
        while waiters and waiters[0].end_offset <= new:
            waiter = waiters.popleft()
            if not waiter.future.done():
                code = self.acks_reached(waiter.end_offset)
                waiter.future.set_result(code if code is not None else ErrorCode.none)
        return True

    def update_follower_position(self, replica_id: int, log_end_offset: int,
                                 now_ms: int) -> None:
        """Record a follower's Fetch at ``log_end_offset`` (the offset it fetches from).

        Kafka's rules: a follower that reached the leader's log end offset is caught up now;
        one that reached what the leader had at its previous fetch was caught up then. A
        follower outside the ISR joins it once it reached the high watermark and the start of
        the current leader epoch; the high watermark may then advance.
        """
        if self.role is not Role.LEADER:
            raise ReplicaError(ErrorCode.not_leader_or_follower,
                               f"broker {self.local_id} is not the leader of "
                               f"{self.topic}-{self.partition}")
        state = self._followers.get(replica_id)
        if state is None:
            raise ReplicaError(ErrorCode.unknown_server_error,
                               f"broker {replica_id} is not a replica of "
                               f"{self.topic}-{self.partition}")
        leader_end = self._log.log_end_offset
        if log_end_offset >= leader_end:
            state.last_caught_up_ms = max(state.last_caught_up_ms, now_ms)
            if log_end_offset == state.log_end_offset and replica_id in self.isr:
                # Caught up and not moved (most partitions of most fetches): the high
                # watermark cannot have changed because of this fetch.
                state.last_fetch_leader_end_offset = leader_end
                state.last_fetch_ms = now_ms
                return
        elif log_end_offset >= state.last_fetch_leader_end_offset >= 0:
            state.last_caught_up_ms = max(state.last_caught_up_ms, state.last_fetch_ms)
        state.last_fetch_leader_end_offset = leader_end
        state.last_fetch_ms = now_ms
        state.log_end_offset = log_end_offset
        if replica_id not in self.isr and self._in_sync(state):
            self._change_isr(self.isr | {replica_id})
        self._maybe_increment_high_watermark()

    def _in_sync(self, state: FollowerState) -> bool:
        """Can a follower outside the ISR join it (Kafka's isFollowerInSync)?"""
        if state.log_end_offset < self._log.high_watermark:
            return False
        epoch_start = self._epoch_start_offset()
        return epoch_start is None or state.log_end_offset >= epoch_start

    def _epoch_start_offset(self) -> int | None:
        """Where the current leader epoch starts in the log (None: nothing written in it)."""
        for epoch, start in reversed(self._log.leader_epochs):
            if epoch == self.leader_epoch:
                return start
            if epoch < self.leader_epoch:
                break
        return None

    def out_of_sync_replicas(self, now_ms: int, max_lag_ms: int) -> frozenset[int]:
        """ISR members that are behind the leader and were last caught up more than
        ``max_lag_ms`` ago (``replica.lag.time.max.ms``)."""
        if self.role is not Role.LEADER or len(self.isr) <= 1:
            return frozenset()
        leader_end = self._log.log_end_offset
        out = []
        for replica in self.isr:
            if replica == self.local_id:
                continue
            state = self._followers[replica]
            if state.log_end_offset != leader_end and now_ms - state.last_caught_up_ms > max_lag_ms:
                out.append(replica)
        return frozenset(out)

    def maybe_shrink_isr(self, now_ms: int, max_lag_ms: int) -> frozenset[int]:
        """Drop the followers that lag too long from the ISR; the ones dropped. The high
        watermark may advance (it no longer waits for them)."""
        out = self.out_of_sync_replicas(now_ms, max_lag_ms)
        if out:
            self._change_isr(self.isr - out)
            self._maybe_increment_high_watermark()
        return out

    def _count_isr_change(self, new_isr: frozenset[int]) -> None:
        """Count an ISR change as it is applied here (a replica out: a shrink; in: an
        expand), whoever decided it: this leader, or the controller through ZooKeeper."""
        counts = self._isr_counts
        if counts is not None:
            if self.isr - new_isr:
                counts.shrinks += 1
            if new_isr - self.isr:
                counts.expands += 1

    def _change_isr(self, new_isr: frozenset[int]) -> None:
        if self.propose_isr is not None:
            # In a cluster ZooKeeper holds the ISR: a change counts once written there (it
            # comes back through ``set_isr``). A grown ISR is used at once, which only makes
            # the high watermark wait for one more replica; a shrunk one is not, so no record
            # is committed by fewer replicas than ZooKeeper's ISR names.
            if new_isr >= self.isr:
                self._count_isr_change(new_isr)
                self.isr = new_isr
            self.propose_isr(self, new_isr)
            return
        old = self.isr
        self._count_isr_change(new_isr)
        self.isr = new_isr
        log.info("%s-%d: ISR %s -> %s at epoch %d", self.topic, self.partition, sorted(old),
                 sorted(new_isr), self.leader_epoch)
        if self._on_isr_change is not None:
            self._on_isr_change(self, old)
        self._complete_deletions()

    # -- follower ----------------------------------------------------------------------------

    def append_as_follower(self, records: bytes | bytearray | memoryview,
                           leader_high_watermark: int, now_ms: int) -> int:
        """Append what the fetcher got from the leader (opaque batches, offsets kept) and
        follow the leader's high watermark; the new log end offset."""
        if self.role is not Role.FOLLOWER:
            raise ReplicaError(ErrorCode.not_leader_or_follower,
                               f"{self.topic}-{self.partition} is led here")
        end = self._log.append_replicated(records, now_ms) if len(records) else \
            self._log.log_end_offset
        if self._isr_counts is not None:
            self._isr_counts.replication_bytes_in += len(records)
        self.follow_high_watermark(leader_high_watermark)
        return end

    def follow_high_watermark(self, leader_high_watermark: int) -> None:
        """A follower's high watermark: the leader's, as far as this log reaches."""
        if self.role is Role.FOLLOWER and leader_high_watermark > self._log.high_watermark:
            self._log.high_watermark = min(leader_high_watermark, self._log.log_end_offset)
            if self._log.producers.has_transactions:
                # Forget completed transactions the watermark passed: nobody asks a
                # follower for its LSO, which would do it on a leader.
                self._log.producers.first_unstable_offset(self._log.high_watermark)

    def truncate_to(self, offset: int) -> int:
        """Drop a divergent tail before following a new leader (bytes removed)."""
        if self.role is not Role.FOLLOWER:
            raise ReplicaError(ErrorCode.not_leader_or_follower,
                               f"{self.topic}-{self.partition} is led here")
        removed = self._log.truncate_to(offset)
        if removed:
            log.info("%s-%d: truncated to %d (%d bytes) to follow %d at epoch %d", self.topic,
                     self.partition, offset, removed, self.leader_id, self.leader_epoch)
        return removed

    def set_isr(self, isr: Iterable[int]) -> None:
        """The ISR as written in ZooKeeper at the current epoch (the leader's own change
        coming back through its watch, or the controller's)."""
        new = frozenset(isr)
        if self.role is Role.LEADER and new != self.isr and self.local_id in new:
            self._count_isr_change(new)
            self.isr = new
            for replica in new:
                state = self._followers.get(replica)
                if state is not None and state.last_caught_up_ms == 0:
                    state.last_caught_up_ms = state.last_fetch_ms
            self._maybe_increment_high_watermark()
            self._complete_deletions()


    def read(self, offset: int, max_bytes: int, *, min_one_batch: bool = True,
             fetch_only_committed: bool = True, current_leader_epoch: int = NO_EPOCH,
             require_leader: bool = True) -> FileSlice | None:
        """Whole batches from ``offset`` as a file range, for a fetch (nothing is copied).

        Consumers see only what is below the high watermark (read_committed ones use
        :meth:`read_committed`); followers (``fetch_only_committed=False``) read up to the
        log end. Epoch and leadership checks raise :class:`ReplicaError`; log errors
        (OffsetOutOfRangeError, StorageError) pass.
        """
        self.check_epoch(current_leader_epoch, require_leader=require_leader)
        return self._log.read(offset, max_bytes, min_one_batch=min_one_batch,
                              max_offset=self._log.high_watermark if fetch_only_committed
                              else None)

    def read_committed(self, offset: int, max_bytes: int, *, min_one_batch: bool = True,
                       current_leader_epoch: int = NO_EPOCH, require_leader: bool = True
                       ) -> tuple[FileSlice | None, list[AbortedTxn]]:
        """A read_committed consumer's read: batches below the last stable offset and the
        aborted transactions overlapping them (see :meth:`PartitionLog.read_committed`)."""
        self.check_epoch(current_leader_epoch, require_leader=require_leader)
        return self._log.read_committed(offset, max_bytes, min_one_batch=min_one_batch)

    def fetch_offset_for_timestamp(self, timestamp: int, current_leader_epoch: int = NO_EPOCH,
                                   *, require_leader: bool = True,
                                   read_committed: bool = False) -> tuple[int, int, int]:
        """ListOffsets for one partition: (timestamp, offset, leader epoch) as Kafka answers.

        LATEST is the high watermark (records above it are not visible yet), or the last
        stable offset for ``read_committed`` (isolation level 1); the sentinels
        -2 / -4 the log start; LATEST_TIERED and EARLIEST_PENDING_UPLOAD have no answer
        (nothing is tiered).
        """
        self.check_epoch(current_leader_epoch, require_leader=require_leader)
        epoch = self.leader_epoch
        if timestamp == LATEST_TIMESTAMP:
            return -1, (self._log.last_stable_offset if read_committed
                        else self._log.high_watermark), epoch
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            return -1, self._log.log_start_offset, epoch
        if timestamp in (LATEST_TIERED_TIMESTAMP, EARLIEST_PENDING_UPLOAD_TIMESTAMP):
            return -1, -1, -1
        found = (self._log.max_timestamp_entry() if timestamp == MAX_TIMESTAMP
                 else self._log.offset_for_timestamp(timestamp))
        if found is None:
            return -1, -1, -1
        offset, ts = found
        return ts, offset, epoch

    def last_offset_for_leader_epoch(self, current_leader_epoch: int, leader_epoch: int,
                                     *, require_leader: bool = True) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (epoch, end offset) of ``leader_epoch`` in this log, from the
        leader-epoch cache; (-1, -1) when unknown."""
        self.check_epoch(current_leader_epoch, require_leader=require_leader)
        if leader_epoch == NO_EPOCH:
            return NO_EPOCH, -1
        epoch, end_offset = self._log.end_offset_for_epoch(leader_epoch)
        if end_offset == -1:
            return NO_EPOCH, -1
        return epoch, end_offset

    def delete_records_on_leader(self, offset: int) -> tuple[int, int]:
        """DeleteRecords: advance the log start to ``offset`` (-1: the high watermark);
        (the offset asked for, -1 resolved, and the low watermark now). Refused on
        compact-only topics (POLICY_VIOLATION, as Kafka: moving the start would break the
        promise to keep the latest value of every key).

        The request is done once the low watermark reaches the offset
        (:meth:`wait_for_low_watermark`): at once alone, after the followers' next fetches
        in a cluster."""
        self.check_epoch(NO_EPOCH)
        if not self._log.config.deletes:
            raise ReplicaError(ErrorCode.policy_violation,
                               f"{self.topic} is compacted without deletion")
        requested = self._log.high_watermark if offset == -1 else offset
        self._log.delete_records_before(offset)
        return requested, self.low_watermark()

    def low_watermark(self) -> int:
        """The lowest log start offset of the ISR (Kafka's lowWatermarkIfLeader, which takes
        the live replicas instead): below it no in-sync replica, hence no replica a clean
        election can make leader, serves records any more. A follower not heard from since
        this broker became leader counts as -1."""
        low = self._log.log_start_offset
        for replica in self.isr:
            if replica != self.local_id:
                state = self._followers.get(replica)
                low = min(low, state.log_start_offset if state is not None else -1)
        return low

    def wait_for_low_watermark(self, offset: int) -> asyncio.Future[ErrorCode]:
        """A future set to NONE once the low watermark reaches ``offset``, or to
        NOT_LEADER_OR_FOLLOWER if leadership is lost first."""
        waiter = _LowWatermarkWaiter(offset)
        if self.role is not Role.LEADER:
            waiter.future.set_result(ErrorCode.not_leader_or_follower)
        elif self.low_watermark() >= offset:
            waiter.future.set_result(ErrorCode.none)
        else:
            self._low_watermark_waiters.append(waiter)
        return waiter.future

    def update_follower_log_start(self, replica_id: int, log_start_offset: int) -> None:
        """Record the log start offset a follower's Fetch carried (after
        :meth:`update_follower_position`); completes the DeleteRecords it was the last to
        reach. One comparison per fetched partition when no DeleteRecords waits."""
        state = self._followers.get(replica_id)
        if state is None or log_start_offset == state.log_start_offset:
            return
        state.log_start_offset = log_start_offset
        if self._low_watermark_waiters:
            self._complete_deletions()

    def _complete_deletions(self) -> None:
        waiting = self._low_watermark_waiters
        if not waiting:
            return
        low = self.low_watermark()
        self._low_watermark_waiters = [w for w in waiting if w.offset > low
                                       and not w.future.done()]
        for waiter in waiting:
            if waiter.offset <= low and not waiter.future.done():
                waiter.future.set_result(ErrorCode.none)

    def follow_log_start(self, leader_log_start: int) -> None:
        """A follower's log start: the leader's (DeleteRecords, retention), as far as this
        log's high watermark reaches (Kafka's followers do the same from each Fetch
        response), so a follower that becomes leader does not serve what was deleted."""
        if self.role is not Role.FOLLOWER or leader_log_start <= self._log.log_start_offset:
            return
        target = min(leader_log_start, self._log.high_watermark)
        if target > self._log.log_start_offset:
            self._log.delete_records_before(target)
