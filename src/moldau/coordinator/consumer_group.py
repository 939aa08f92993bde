"""One KIP-848 ("consumer" protocol) group: a pure state machine driven by heartbeats.

Unlike the classic protocol there is no group-wide barrier: each member talks to the
coordinator only through ConsumerGroupHeartbeat, and the coordinator moves three epochs:

- the **group epoch** bumps whenever what the assignment depends on changes: a member joins or
  leaves, a subscription or assignor preference changes, a subscribed topic's partition count
  changes;
- the **assignment epoch** is the group epoch the current target assignment was computed for;
  whenever it lags, the assignor runs again;
- each **member epoch** says which target assignment the member has converged to.

Reconciliation is per member, and a partition is never owned by two members at once: a member
whose target drops partitions is first asked to revoke them (state ``UNREVOKED_PARTITIONS``,
epoch unchanged); only once a heartbeat reports they are gone does it advance to the new epoch.
A member whose target contains partitions another member still holds gets the free ones and
waits (``UNRELEASED_PARTITIONS``) for the rest. A member that reports an epoch it never had is
fenced (FENCED_MEMBER_EPOCH) and must rejoin with epoch 0; the previous epoch is tolerated for
one round, because the response that moved the member on may have been lost.

The machine does no I/O and keeps membership in memory only: after a broker restart members
get UNKNOWN_MEMBER_ID and rejoin, which Kafka clients do transparently (committed offsets are
persisted by the offsets module, not here). Regular-expression subscriptions are not
supported.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from .assignors import ASSIGNORS, TopicPartition, assign

#: ``group.consumer.heartbeat.interval.ms`` default.
DEFAULT_HEARTBEAT_INTERVAL_MS = 5000
#: ``group.consumer.session.timeout.ms`` default.
DEFAULT_SESSION_TIMEOUT_MS = 45000

#: Member epochs with a meaning in requests.
JOIN_EPOCH = 0
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2

Partitions = frozenset[TopicPartition]


class MemberState(enum.Enum):
    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    UNRELEASED_PARTITIONS = "unreleased_partitions"


class GroupState(enum.Enum):
    """As Kafka reports it in ListGroups/DescribeGroups/ConsumerGroupDescribe."""

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"


@dataclass(frozen=True, slots=True)
class ConsumerGroupConfig:
    heartbeat_interval_ms: int = DEFAULT_HEARTBEAT_INTERVAL_MS
    session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS
    #: ``group.consumer.assignors``: the first one is the default.
    assignors: tuple[str, ...] = ASSIGNORS


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    """A ConsumerGroupHeartbeat with topic ids already resolved to names.

    ``None`` fields mean "unchanged since the last heartbeat", as on the wire.
    """

    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topics: tuple[str, ...] | None = None
    server_assignor: str | None = None
    owned_partitions: Partitions | None = None
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True, slots=True)
class HeartbeatResponse:
    error: ErrorCode
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    #: The member's assignment; None when unchanged since it was last sent.
    assignment: Partitions | None = None


@dataclass(slots=True)
class ConsumerMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topics: frozenset[str]
    server_assignor: str | None
    rebalance_timeout_ms: int
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: Partitions = frozenset()
    pending_revocation: Partitions = frozenset()
    #: When the member is fenced unless it heartbeats before then.
    session_deadline: int = 0
    #: When the member is fenced unless it has revoked ``pending_revocation`` by then.
    revocation_deadline: int | None = None


def validate_request(req: HeartbeatRequest, version: int) -> str | None:
    """Kafka's INVALID_REQUEST checks; returns the error message, or None when valid."""
    if version >= 1 and not req.member_id:
        return "MemberId can't be empty."
    if req.member_epoch == JOIN_EPOCH:
        if req.rebalance_timeout_ms == -1:
            return "RebalanceTimeoutMs must be provided in first request."
        if req.owned_partitions:
            return "TopicPartitions must be empty when (re-)joining."
        if req.subscribed_topics is None:
            return "SubscribedTopicNames must be set in first request."
    elif req.member_epoch == STATIC_LEAVE_EPOCH:
        if req.instance_id is None:
            return "InstanceId can't be null when leaving a group statically."
    elif req.member_epoch < STATIC_LEAVE_EPOCH:
        return f"MemberEpoch {req.member_epoch} is invalid."
    if req.member_epoch != JOIN_EPOCH and not req.member_id:
        return "MemberId can't be empty."
    return None


@dataclass
class ConsumerGroup:
    group_id: str
    config: ConsumerGroupConfig = field(default_factory=ConsumerGroupConfig)
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    #: member id -> target partitions, as of ``assignment_epoch``.
    target: dict[str, Partitions] = field(default_factory=dict)
    #: Partition counts of the subscribed topics the target assignment was based on.
    topic_partitions: dict[str, int] = field(default_factory=dict)
    #: Target assignments computed (each a new assignment epoch): the group's rebalances, as
    #: Kafka's group coordinator counts them for KIP-848 groups.
    rebalances: int = 0

    # --- queries -------------------------------------------------------------------------

    @property
    def state(self) -> GroupState:
        if not self.members:
            return GroupState.EMPTY
        if self.assignment_epoch != self.group_epoch:
            return GroupState.ASSIGNING
        if any(m.member_epoch != self.assignment_epoch for m in self.members.values()):
            return GroupState.RECONCILING
        return GroupState.STABLE

    @property
    def assignor(self) -> str:
        """The members' most common preference (ties: config order), else the default."""
        votes: dict[str, int] = {}
        for m in self.members.values():
            if m.server_assignor is not None:
                votes[m.server_assignor] = votes.get(m.server_assignor, 0) + 1
        if not votes:
            return self.config.assignors[0]
        order = {name: i for i, name in enumerate(self.config.assignors)}
        return min(votes, key=lambda n: (-votes[n], order.get(n, len(order))))

    def subscribed_topics(self) -> frozenset[str]:
        return frozenset(t for m in self.members.values() for t in m.subscribed_topics)

    def next_deadline(self) -> int | None:
        """The earliest instant :meth:`expire` may have something to do."""
        deadlines = [m.session_deadline for m in self.members.values()]
        deadlines += [m.revocation_deadline for m in self.members.values()
                      if m.revocation_deadline is not None]
        return min(deadlines, default=None)

    def validate_offset_commit(self, member_id: str, member_epoch: int) -> ErrorCode:
        """Whether a commit (OffsetCommit v9+) by this member at this epoch is accepted.

        An admin commit (no member, epoch -1) is fine only while the group is empty, so it
        cannot race the consumers.
        """
        if member_epoch < 0 and not member_id:
            return ErrorCode.none if not self.members else ErrorCode.unknown_member_id
        member = self.members.get(member_id)
        if member is None:
            return ErrorCode.unknown_member_id
        if member_epoch > member.member_epoch:
            return ErrorCode.fenced_member_epoch
        if member_epoch < member.member_epoch:
            return ErrorCode.stale_member_epoch
        return ErrorCode.none

    def validate_offset_fetch(self, member_id: str, member_epoch: int) -> ErrorCode:
        """OffsetFetch v9 with a member: it must be known and at its current epoch."""
        member = self.members.get(member_id)
        if member is None:
            return ErrorCode.unknown_member_id
        if member_epoch != member.member_epoch:
            return ErrorCode.stale_member_epoch
        return ErrorCode.none

    # --- events --------------------------------------------------------------------------

    def heartbeat(
        self,
        req: HeartbeatRequest,
        topics: Mapping[str, int],
        now_ms: int,
        new_member_id: Callable[[], str],
    ) -> HeartbeatResponse:
        """Handle one (already validated) heartbeat.

        ``topics`` maps existing topics to partition counts (the broker's metadata now);
        ``new_member_id`` makes an id for a v0 join that came without one.
        """
        if req.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(req)
        if req.server_assignor is not None and req.server_assignor not in self.config.assignors:
            return HeartbeatResponse(ErrorCode.unsupported_assignor,
                                     f"ServerAssignor {req.server_assignor} is not supported.")
        member = self.members.get(req.member_id) if req.member_id else None
        changed = False
        full = req.member_epoch == JOIN_EPOCH
        if req.member_epoch == JOIN_EPOCH:
            member_or_error = self._join(req, new_member_id)
            if isinstance(member_or_error, HeartbeatResponse):
                return member_or_error
            member, changed = member_or_error
        else:
            if member is None:
                return HeartbeatResponse(ErrorCode.unknown_member_id,
                                         f"Member {req.member_id} is not a member of the group.")
            error = self._check_epoch(member, req)
            if error is not None:
                return error
            changed = self._update(member, req)
        member.session_deadline = now_ms + self.config.session_timeout_ms
        wanted = {t: topics[t] for t in self.subscribed_topics() if t in topics}
        if changed or wanted != self.topic_partitions:
            self.group_epoch += 1
            self.topic_partitions = wanted
        if self.assignment_epoch != self.group_epoch:
            self._compute_target()
        before = (member.member_epoch, member.assigned)
        self._reconcile(member, req.owned_partitions, now_ms)
        send = full or (member.member_epoch, member.assigned) != before or (
            req.owned_partitions is not None and req.owned_partitions != member.assigned)
        return HeartbeatResponse(
            ErrorCode.none, None, member.member_id, member.member_epoch,
            self.config.heartbeat_interval_ms, member.assigned if send else None,
        )

    def expire(self, now_ms: int) -> list[str]:
        """Fence members past their session, or that did not revoke in time; their ids."""
        fenced = [
            m.member_id for m in self.members.values()
            if m.session_deadline <= now_ms
            or (m.revocation_deadline is not None and m.revocation_deadline <= now_ms)
        ]
        for member_id in fenced:
            self._remove(member_id)
        return fenced

    # --- internals -----------------------------------------------------------------------

    def _join(
        self, req: HeartbeatRequest, new_member_id: Callable[[], str]
    ) -> tuple[ConsumerMember, bool] | HeartbeatResponse:
        member_id = req.member_id or new_member_id()
        subscribed = frozenset(req.subscribed_topics or ())
        inherited: ConsumerMember | None = None
        if req.instance_id is not None:
            holder = next((m for m in self.members.values()
                           if m.instance_id == req.instance_id), None)
            if holder is not None and holder.member_id != member_id:
                if holder.member_epoch != STATIC_LEAVE_EPOCH:
                    return HeartbeatResponse(
                        ErrorCode.unreleased_instance_id,
                        f"Static member {req.instance_id} is still in use.")
                inherited = holder
        changed = True
        if member_id in self.members:
            # A rejoin with epoch 0 means the client lost its state: start it afresh.
            self._remove(member_id)
        if inherited is not None:
            # A static member coming back takes over its predecessor's place and partitions;
            # nothing changes for the assignment unless the subscription did.
            del self.members[inherited.member_id]
            if inherited.member_id in self.target:
                self.target[member_id] = self.target.pop(inherited.member_id)
            changed = (inherited.subscribed_topics != subscribed
                       or inherited.server_assignor != req.server_assignor)
        member = ConsumerMember(
            member_id=member_id,
            instance_id=req.instance_id,
            rack_id=req.rack_id,
            client_id=req.client_id,
            client_host=req.client_host,
            subscribed_topics=subscribed,
            server_assignor=req.server_assignor,
            rebalance_timeout_ms=req.rebalance_timeout_ms,
        )
        if inherited is not None:
            member.member_epoch = inherited.previous_member_epoch
            member.previous_member_epoch = inherited.previous_member_epoch
            member.assigned = inherited.assigned
            member.pending_revocation = inherited.pending_revocation
            member.state = inherited.state
        self.members[member_id] = member
        return member, changed

    def _check_epoch(
        self, member: ConsumerMember, req: HeartbeatRequest
    ) -> HeartbeatResponse | None:
        """FENCED_MEMBER_EPOCH unless the epoch is current, or the previous one with owned
        partitions the member may still hold (its last response was lost)."""
        epoch = req.member_epoch
        if epoch == member.member_epoch:
            return None
        if (
            epoch < member.member_epoch
            and epoch == member.previous_member_epoch
            and req.owned_partitions is not None
            and req.owned_partitions <= member.assigned
        ):
            return None
        return HeartbeatResponse(
            ErrorCode.fenced_member_epoch,
            f"The member epoch {epoch} does not match the expected {member.member_epoch}.")

    def _update(self, member: ConsumerMember, req: HeartbeatRequest) -> bool:
        """Apply the changed fields of a heartbeat; whether the assignment depends on them."""
        changed = False
        if req.subscribed_topics is not None:
            topics = frozenset(req.subscribed_topics)
            changed |= topics != member.subscribed_topics
            member.subscribed_topics = topics
        if req.server_assignor is not None:
            changed |= req.server_assignor != member.server_assignor
            member.server_assignor = req.server_assignor
        if req.rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = req.rebalance_timeout_ms
        if req.rack_id is not None:
            member.rack_id = req.rack_id
        return changed

    def _leave(self, req: HeartbeatRequest) -> HeartbeatResponse:
        member = self.members.get(req.member_id)
        if member is None:
            return HeartbeatResponse(ErrorCode.unknown_member_id,
                                     f"Member {req.member_id} is not a member of the group.")
        if req.member_epoch == STATIC_LEAVE_EPOCH and member.instance_id is not None:
            # Kept with its partitions until its session runs out, so that a restarting
            # static member gets them back without a rebalance.
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = STATIC_LEAVE_EPOCH
        else:
            self._remove(member.member_id)
        return HeartbeatResponse(ErrorCode.none, None, req.member_id, req.member_epoch, 0)

    def _remove(self, member_id: str) -> None:
        del self.members[member_id]
        self.target.pop(member_id, None)
        self.group_epoch += 1
        self.topic_partitions = {
            t: c for t, c in self.topic_partitions.items() if t in self.subscribed_topics()
        }
        if not self.members:
            # Nothing to assign: the (empty) target is current.
            self.assignment_epoch = self.group_epoch
        else:
            self._compute_target()

    def _compute_target(self) -> None:
        subscriptions = {m.member_id: m.subscribed_topics for m in self.members.values()}
        self.target = assign(self.assignor, subscriptions, self.topic_partitions, self.target)
        self.assignment_epoch = self.group_epoch
        self.rebalances += 1

    def _held_by_others(self, member_id: str) -> Partitions:
        held: set[TopicPartition] = set()
        for other in self.members.values():
            if other.member_id != member_id:
                held |= other.assigned
                held |= other.pending_revocation
        return frozenset(held)

    def _reconcile(self, member: ConsumerMember, owned: Partitions | None, now_ms: int) -> None:
        """Move the member towards the target assignment as far as is safe right now."""
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            if owned is None or owned & member.pending_revocation:
                return
            member.pending_revocation = frozenset()
            member.revocation_deadline = None
        elif (member.state is MemberState.STABLE
              and member.member_epoch == self.assignment_epoch):
            return
        target = self.target.get(member.member_id, frozenset())
        keep = member.assigned & target
        revoke = member.assigned - target
        new = target - member.assigned
        free = new - self._held_by_others(member.member_id)
        if revoke:
            member.state = MemberState.UNREVOKED_PARTITIONS
            member.assigned = keep
            member.pending_revocation = revoke
            member.revocation_deadline = now_ms + max(member.rebalance_timeout_ms, 0)
            return
        if member.member_epoch != self.assignment_epoch:
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = self.assignment_epoch
        member.assigned = keep | free
        member.state = (MemberState.STABLE if free == new
                        else MemberState.UNRELEASED_PARTITIONS)
