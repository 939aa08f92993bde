"""The classic group protocol as a pure state machine: one :class:`Group` per group id.

States and what moves a group between them (Kafka's ``GroupMetadata`` and coordinator)::

    Empty ──join──> PreparingRebalance ──all joined / timeout──> CompletingRebalance
      ^                 ^      │                                       │ leader's SyncGroup
      │                 │      └──no members left──> Empty             v   stored
      │                 └──join, leave, expiry, metadata change──── Stable
      └── (DeleteGroups or expired offsets of an Empty group) ──> Dead

Every method takes the current time in milliseconds and an :class:`Effects` to fill; nothing
here sleeps, reads a clock or touches a file. Deadlines (sessions, the rebalance timeout, the
initial rebalance delay, members that never send SyncGroup) are fields the broker's timer
reads through :meth:`Group.next_deadline` and fires with :meth:`Group.on_timer`.

Membership rules worth knowing, all as in Kafka:

- KIP-394: a JoinGroup v4+ without a member id gets MEMBER_ID_REQUIRED and an id to rejoin
  with; until it does, the id is *pending* and the rebalance waits for it (for at most a
  session timeout).
- KIP-345: a member with a ``group.instance.id`` that comes back under a new member id takes
  over the old member's place; the old id is fenced (FENCED_INSTANCE_ID). In a Stable group
  this happens without a rebalance unless it changes the protocol the group would select, so a
  restarted static member gets its previous assignment back and nobody else notices.
- Members busy in a rebalance (waiting for JoinGroup or SyncGroup answers) cannot heartbeat,
  so their session does not expire meanwhile; new members that never complete a join are
  dropped after :data:`NEW_MEMBER_JOIN_TIMEOUT_MS`.
"""

from __future__ import annotations

import enum
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from .consumer_protocol import PROTOCOL_TYPE as CONSUMER_PROTOCOL_TYPE
from .consumer_protocol import subscribed_topics
from .effects import (
    AssignmentWritten,
    Effects,
    JoinedMember,
    JoinResponse,
    Record,
    StaticMemberRejoined,
    SyncResponse,
    Write,
)
from .member import Member, Protocols
from .offsets import GroupOffsets, OffsetAndMetadata, TopicPartition
from .records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadataValue,
    encode_group_value,
    encode_key,
)

#: How long a new member may wait in JoinGroup for the rebalance to complete (Kafka's
#: ``NewMemberJoinTimeoutMs``): its socket is busy, so it cannot heartbeat, and a client that
#: gave up and retried with a fresh join would otherwise leave a ghost member behind.
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class GroupLimits:
    """The broker's ``group.*`` settings."""

    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    max_size: int = 2**31 - 1
    initial_rebalance_delay_ms: int = 3000


@dataclass(frozen=True, slots=True)
class JoinRequest:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    #: KIP-394 (JoinGroup v4+): an unknown member first gets an id, then joins with it.
    require_known_member_id: bool = True
    #: KIP-814 (JoinGroup v9+): the client understands ``skip_assignment``.
    supports_skip_assignment: bool = False


#: Longest string a legacy (int16-length) field holds: every member id must fit, so that the
#: group can still be described to old clients and stored in ``__consumer_offsets``.
MAX_MEMBER_ID_BYTES = 0x7FFF


def default_member_id(prefix: str) -> str:
    """``<client id or instance id>-<uuid>``, the shape of Kafka's member ids.

    A client id can be 32,767 bytes long, so Kafka's ids can exceed what DescribeGroups v0-v4,
    JoinGroup v0-v5 and the group metadata record can carry; moldau shortens the prefix so
    that a member created through a new version never breaks an answer in an old one.
    """
    suffix = f"-{uuid.uuid4()}"
    room = MAX_MEMBER_ID_BYTES - len(suffix)
    raw = prefix.encode("utf-8")
    if len(raw) > room:
        prefix = raw[:room].decode("utf-8", "ignore")
    return prefix + suffix


class Group:
    """State of one classic group; see the module docstring."""

    def __init__(
        self,
        group_id: str,
        limits: GroupLimits,
        now: int,
        *,
        new_member_id: Callable[[str], str] = default_member_id,
    ) -> None:
        self.group_id = group_id
        self.limits = limits
        self._new_member_id = new_member_id
        self.state = GroupState.EMPTY
        #: When the group entered its state; None for groups loaded from old records.
        self.state_timestamp: int | None = now
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}
        #: group.instance.id -> member id of the static member holding it.
        self.static_members: dict[str, str] = {}
        #: KIP-394 ids handed out but not yet used to join -> when they lapse.
        self.pending_members: dict[str, int] = {}
        #: Members that got the JoinGroup answer of this generation but sent no SyncGroup yet.
        self.pending_sync: set[str] = set()
        self.join_deadline: int | None = None
        #: While the first rebalance of an empty group waits for more members (Kafka's
        #: InitialDelayedJoin): how much of the rebalance timeout is left to extend into.
        self.initial_delay_remaining: int | None = None
        self.new_member_added = False
        self.sync_deadline: int | None = None
        #: Topics the members subscribe to (consumer groups); None when unknown.
        self.subscribed_topics: frozenset[str] | None = None
        self.offsets = GroupOffsets()

    # -- properties ------------------------------------------------------------------------

    def __repr__(self) -> str:
        return (f"Group({self.group_id!r}, {self.state.value}, generation {self.generation_id}, "
                f"{len(self.members)} members)")

    @property
    def is_empty(self) -> bool:
        return self.state is GroupState.EMPTY

    @property
    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def is_fenced(self, group_instance_id: str | None, member_id: str) -> bool:
        """A static instance now held by another member id: the caller is an old incarnation."""
        if group_instance_id is None:
            return False
        holder = self.static_members.get(group_instance_id)
        return holder is not None and holder != member_id

    def _all_joined(self) -> bool:
        return not self.pending_members and all(m.awaiting_join for m in self.members.values())

    def _supports_protocols(self, protocol_type: str, names: Sequence[str]) -> bool:
        if self.state is GroupState.EMPTY:
            return bool(protocol_type) and bool(names)
        return protocol_type == self.protocol_type and any(
            all(m.supports(name) for m in self.members.values()) for name in names
        )

    def select_protocol(self) -> str:
        """The protocol for the next generation, chosen as Kafka does.

        Candidates are the protocols every member supports; each member votes for its most
        preferred candidate and the most votes win. Kafka leaves ties to hash-map order;
        here the leader's preference breaks them, so the choice is deterministic.
        """
        members = list(self.members.values())
        leader = self.members.get(self.leader_id or "", members[0])
        candidates = [name for name in leader.protocol_names
                      if all(m.supports(name) for m in members)]
        if not candidates:  # cannot happen through join, which checks; be safe on bad input
            return leader.protocol_names[0]
        votes = Counter(m.vote(candidates) for m in members)
        preference = {name: i for i, name in enumerate(leader.protocol_names)}
        return max(votes, key=lambda name: (votes[name], -preference.get(name, len(preference))))

    def next_deadline(self) -> int | None:
        """The earliest time at which :meth:`on_timer` has something to do."""
        times = [m.heartbeat_deadline for m in self.members.values()
                 if m.heartbeat_deadline is not None]
        times.extend(self.pending_members.values())
        if self.state is GroupState.PREPARING_REBALANCE and self.join_deadline is not None:
            times.append(self.join_deadline)
        if self.sync_deadline is not None:
            times.append(self.sync_deadline)
        return min(times, default=None)

    # -- JoinGroup ---------------------------------------------------------------------------

    def join(self, req: JoinRequest, token: int, now: int, out: Effects) -> None:
        """Handle a JoinGroup whose group id and session timeout were already checked."""
        if not self._accepts_joining(req.member_id):
            member = self.members.get(req.member_id)
            if member is not None:
                self._remove_and_update(member, now, out, "does not fit group.max.size")
            out.reply(token, JoinResponse(ErrorCode.group_max_size_reached))
        elif not req.member_id:
            self._join_new(req, token, now, out)
        else:
            self._join_known(req, token, now, out)
        self._maybe_complete_join(now, out)

    def _accepts_joining(self, member_id: str) -> bool:
        # Counting members *awaiting* join while rebalancing lets a lowered group.max.size
        # shed the members that rejoin last; otherwise existing members always get in.
        if self.state in (GroupState.EMPTY, GroupState.DEAD):
            return True
        existing = self.members.get(member_id)
        if self.state is GroupState.PREPARING_REBALANCE:
            awaiting = sum(1 for m in self.members.values() if m.awaiting_join)
            return (existing is not None and existing.awaiting_join) or (
                awaiting < self.limits.max_size)
        return existing is not None or len(self.members) < self.limits.max_size

    def _join_error(self, token: int, code: ErrorCode, member_id: str, out: Effects) -> None:
        out.reply(token, JoinResponse(code, member_id=member_id))

    def _join_new(self, req: JoinRequest, token: int, now: int, out: Effects) -> None:
        if self.state is GroupState.DEAD:
            return self._join_error(token, ErrorCode.coordinator_not_available, "", out)
        if not self._supports_protocols(req.protocol_type, [n for n, _ in req.protocols]):
            return self._join_error(token, ErrorCode.inconsistent_group_protocol, "", out)
        instance = req.group_instance_id
        new_id = self._new_member_id(instance if instance is not None else req.client_id)
        if instance is not None and instance in self.static_members:
            self._replace_static_member(req, new_id, token, now, out)
        elif instance is None and req.require_known_member_id:
            self.pending_members[new_id] = now + req.session_timeout_ms
            self._join_error(token, ErrorCode.member_id_required, new_id, out)
        else:
            self._add_member(new_id, req, token, now, out)
        return None

    def _join_known(self, req: JoinRequest, token: int, now: int, out: Effects) -> None:
        member_id = req.member_id
        if self.state is GroupState.DEAD:
            return self._join_error(token, ErrorCode.coordinator_not_available, member_id, out)
        if not self._supports_protocols(req.protocol_type, [n for n, _ in req.protocols]):
            return self._join_error(token, ErrorCode.inconsistent_group_protocol, member_id, out)
        if member_id in self.pending_members:
            return self._add_member(member_id, req, token, now, out)
        instance = req.group_instance_id
        if self.is_fenced(instance, member_id):
            return self._join_error(token, ErrorCode.fenced_instance_id, member_id, out)
        member = self.members.get(member_id)
        if member is None or (instance is not None and instance not in self.static_members):
            return self._join_error(token, ErrorCode.unknown_member_id, member_id, out)
        state = self.state
        if state is GroupState.PREPARING_REBALANCE:
            self._update_member(member, req, token, out)
        elif state is GroupState.COMPLETING_REBALANCE and member.matches(req.protocols):
            # A lost JoinGroup answer, asked again: repeat it for the current generation.
            out.reply(token, self._join_answer(member))
        elif state is GroupState.STABLE and member_id != self.leader_id and member.matches(
                req.protocols):
            # A follower with nothing new: send it to SyncGroup for the current assignment.
            out.reply(token, self._join_answer(member))
        elif state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            # Changed metadata, or the leader asking for a rebalance (e.g. it saw new
            # partitions, which no member's metadata shows).
            changed = not member.matches(req.protocols)
            self._update_member(member, req, token, out)
            self._prepare_rebalance(now, out, f"member {member_id} rejoined "
                                    + ("with new metadata" if changed else "as leader"))
        else:
            self._join_error(token, ErrorCode.unknown_member_id, member_id, out)
        return None

    def _join_answer(self, member: Member, *, include_members: bool | None = None) -> JoinResponse:
        is_leader = member.member_id == self.leader_id
        members: tuple[JoinedMember, ...] = ()
        if is_leader if include_members is None else include_members:
            members = tuple(
                JoinedMember(m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
                for m in self.members.values()
            )
        return JoinResponse(
            ErrorCode.none,
            member_id=member.member_id,
            generation_id=self.generation_id,
            protocol_type=self.protocol_type,
            protocol_name=self.protocol_name,
            leader=self.leader_id or "",
            members=members,
        )

    def _add_member(self, member_id: str, req: JoinRequest, token: int, now: int,
                    out: Effects) -> None:
        member = Member(
            member_id=member_id,
            group_instance_id=req.group_instance_id,
            client_id=req.client_id,
            client_host=req.client_host,
            session_timeout_ms=req.session_timeout_ms,
            rebalance_timeout_ms=req.rebalance_timeout_ms,
            protocol_type=req.protocol_type,
            protocols=req.protocols,
            join_waiter=token,
            is_new=True,
            heartbeat_deadline=now + NEW_MEMBER_JOIN_TIMEOUT_MS,
        )
        if self.state is GroupState.PREPARING_REBALANCE and self.generation_id == 0:
            self.new_member_added = True  # lets the initial delay extend once more
        if not self.members:
            self.protocol_type = req.protocol_type
        self.members[member_id] = member
        if self.leader_id is None:
            self.leader_id = member_id
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member_id
        self.pending_members.pop(member_id, None)
        self._maybe_prepare_rebalance(now, out, f"member {member_id} joined")

    def _update_member(self, member: Member, req: JoinRequest, token: int, out: Effects) -> None:
        member.protocols = req.protocols
        member.session_timeout_ms = req.session_timeout_ms
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        if member.join_waiter is not None:
            # Superseded by a retry (e.g. on a new connection): the old request gets an answer
            # that makes a client that still listens simply join again.
            out.reply(member.join_waiter, JoinResponse(ErrorCode.rebalance_in_progress,
                                                       member_id=member.member_id))
        member.join_waiter = token

    def _rename_member(self, member: Member, new_id: str, out: Effects) -> None:
        """Give ``member`` a new member id; requests parked under the old id are fenced."""
        old_id = member.member_id
        out.reply(member.join_waiter, JoinResponse(ErrorCode.fenced_instance_id, member_id=old_id))
        out.reply(member.sync_waiter, SyncResponse(ErrorCode.fenced_instance_id))
        member.join_waiter = member.sync_waiter = None
        member.member_id = new_id
        self.members = {(new_id if k == old_id else k): m for k, m in self.members.items()}
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)

    def _replace_static_member(self, req: JoinRequest, new_id: str, token: int, now: int,
                               out: Effects) -> None:
        assert req.group_instance_id is not None
        old_id = self.static_members[req.group_instance_id]
        member = self.members[old_id]
        leader_before = self.leader_id or ""
        old = (member.protocols, member.session_timeout_ms, member.rebalance_timeout_ms)
        self._rename_member(member, new_id, out)
        member.heartbeat_deadline = now + member.session_timeout_ms
        self._update_member(member, req, token, out)
        if self.state is GroupState.STABLE:
            if self.select_protocol() == self.protocol_name:
                # Same protocol next generation: keep the assignment, persist the new id, and
                # answer once that is stored (see write_completed).
                completion = StaticMemberRejoined(
                    self.group_id, self.generation_id, token, new_id, old_id, old[0], old[1],
                    old[2], leader_before, req.supports_skip_assignment,
                )
                assignment = {m.member_id: m.assignment for m in self.members.values()}
                out.writes.append(Write(self.group_id, (self.metadata_record(assignment),),
                                        completion))
            else:
                self._prepare_rebalance(now, out, f"static member {new_id} changes the protocol")
        elif self.state is GroupState.COMPLETING_REBALANCE:
            # Members may already hold this generation's answers without the new id: redo it.
            self._prepare_rebalance(now, out, f"static member {new_id} replaced {old_id}")
        # PreparingRebalance: the member simply waits with everybody else.

    # -- rebalance ------------------------------------------------------------------------

    def _transition(self, state: GroupState, now: int) -> None:
        self.state = state
        self.state_timestamp = now

    def _maybe_prepare_rebalance(self, now: int, out: Effects, reason: str) -> None:
        if self.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY):
            self._prepare_rebalance(now, out, reason)

    def _prepare_rebalance(self, now: int, out: Effects, reason: str) -> None:
        out.notes.append(f"preparing to rebalance group {self.group_id} in state "
                         f"{self.state.value} with old generation {self.generation_id} "
                         f"({reason})")
        out.rebalances += 1
        if self.state is GroupState.COMPLETING_REBALANCE:
            self._reset_assignments(ErrorCode.rebalance_in_progress, out)
        self.pending_sync.clear()
        self.sync_deadline = None
        if self.state is GroupState.EMPTY:
            delay = self.limits.initial_rebalance_delay_ms
            self.initial_delay_remaining = max(self.rebalance_timeout_ms - delay, 0)
            self.new_member_added = False
            self.join_deadline = now + delay
        else:
            self.initial_delay_remaining = None
            self.join_deadline = now + self.rebalance_timeout_ms
        self._transition(GroupState.PREPARING_REBALANCE, now)
        self._maybe_complete_join(now, out)

    def _maybe_complete_join(self, now: int, out: Effects) -> None:
        # The initial delay never completes early: it exists to wait for more members.
        if (self.state is GroupState.PREPARING_REBALANCE
                and self.initial_delay_remaining is None and self._all_joined()):
            self._complete_join(now, out)

    def _on_join_deadline(self, now: int, out: Effects) -> None:
        remaining = self.initial_delay_remaining
        if remaining is not None and self.new_member_added and remaining > 0:
            self.new_member_added = False
            delay = min(self.limits.initial_rebalance_delay_ms, remaining)
            self.initial_delay_remaining = max(remaining - delay, 0)
            self.join_deadline = now + delay
            return
        self._complete_join(now, out)

    def _complete_join(self, now: int, out: Effects) -> None:
        self.join_deadline = None
        self.initial_delay_remaining = None
        for member in list(self.members.values()):
            # Dynamic members that did not rejoin in time are out; static ones keep their
            # place until their session expires (they may be restarting).
            if not member.awaiting_join and not member.is_static:
                out.notes.append(f"member {member.member_id} did not rejoin group "
                                 f"{self.group_id} in time; removing it")
                self._remove(member, out)
        if self.members and not self._elect_joined_leader():
            # Only static members that have not rejoined: wait another rebalance timeout,
            # during which their sessions may expire.
            self.join_deadline = now + self.rebalance_timeout_ms
            return
        self._init_next_generation(now)
        if self.state is GroupState.EMPTY:
            out.notes.append(f"group {self.group_id} with generation {self.generation_id} "
                             "is now empty")
            out.writes.append(Write(self.group_id, (self.metadata_record({}),)))
            return
        out.notes.append(f"stabilized group {self.group_id} generation {self.generation_id} "
                         f"with {len(self.members)} members, protocol {self.protocol_name}")
        for member in self.members.values():
            out.reply(member.join_waiter, self._join_answer(member))
            member.join_waiter = None
            member.is_new = False
            member.heartbeat_deadline = now + member.session_timeout_ms
            self.pending_sync.add(member.member_id)
        self.sync_deadline = now + self.rebalance_timeout_ms

    def _elect_joined_leader(self) -> bool:
        leader = self.members.get(self.leader_id or "")
        if leader is not None and leader.awaiting_join:
            return True
        joined = next((m for m in self.members.values() if m.awaiting_join), None)
        if joined is None:
            return False
        self.leader_id = joined.member_id
        return True

    def _init_next_generation(self, now: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self._transition(GroupState.COMPLETING_REBALANCE, now)
        else:
            self.protocol_name = None
            self._transition(GroupState.EMPTY, now)
        self.subscribed_topics = self._compute_subscribed_topics()
        self.pending_sync.clear()

    def _compute_subscribed_topics(self) -> frozenset[str] | None:
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return frozenset()
        topics: set[str] = set()
        for member in self.members.values():
            parsed = subscribed_topics(member.metadata(self.protocol_name))
            if parsed is None:
                return None
            topics |= parsed
        return frozenset(topics)

    def _reset_assignments(self, error: ErrorCode, out: Effects) -> None:
        for member in self.members.values():
            member.assignment = b""
            out.reply(member.sync_waiter, SyncResponse(error))
            member.sync_waiter = None

    # -- SyncGroup ----------------------------------------------------------------------------

    def sync(
        self,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: Mapping[str, bytes],
        token: int,
        now: int,
        out: Effects,
    ) -> None:
        error = self._check_member(member_id, group_instance_id, generation_id)
        if error is None and (
            (protocol_type is not None and protocol_type != self.protocol_type)
            or (protocol_name is not None and protocol_name != self.protocol_name)
        ):
            error = ErrorCode.inconsistent_group_protocol
        if error is None and self.state is GroupState.EMPTY:
            error = ErrorCode.unknown_member_id
        if error is None and self.state is GroupState.PREPARING_REBALANCE:
            error = ErrorCode.rebalance_in_progress
        if error is not None:
            out.reply(token, SyncResponse(error))
            return
        member = self.members[member_id]
        self._synced(member_id)
        if self.state is GroupState.STABLE:
            out.reply(token, self._sync_answer(member))
            member.heartbeat_deadline = now + member.session_timeout_ms
            return
        # CompletingRebalance: everybody waits for the leader's assignment to be stored.
        out.reply(member.sync_waiter, SyncResponse(ErrorCode.rebalance_in_progress))
        member.sync_waiter = token
        if member_id == self.leader_id:
            full = {mid: bytes(assignments.get(mid, b"")) for mid in self.members}
            completion = AssignmentWritten(self.group_id, self.generation_id, full)
            out.writes.append(Write(self.group_id, (self.metadata_record(full),), completion))

    def _synced(self, member_id: str) -> None:
        self.pending_sync.discard(member_id)
        if not self.pending_sync:
            self.sync_deadline = None

    def _sync_answer(self, member: Member) -> SyncResponse:
        return SyncResponse(ErrorCode.none, self.protocol_type, self.protocol_name,
                            member.assignment)

    def assignment_written(self, done: AssignmentWritten, error: ErrorCode | None, now: int,
                           out: Effects) -> None:
        """The leader's assignment is on disk (or failed to get there)."""
        if (self.state is not GroupState.COMPLETING_REBALANCE
                or done.generation_id != self.generation_id):
            return  # the group moved on meanwhile; its waiters were answered then
        if error is not None:
            self._reset_assignments(error, out)
            self._prepare_rebalance(now, out, f"storing the assignment failed: {error.name}")
            return
        for member in self.members.values():
            member.assignment = done.assignment.get(member.member_id, b"")
            if member.sync_waiter is not None:
                out.reply(member.sync_waiter, self._sync_answer(member))
                member.sync_waiter = None
                member.heartbeat_deadline = now + member.session_timeout_ms
        self._transition(GroupState.STABLE, now)

    def static_member_written(self, done: StaticMemberRejoined, error: ErrorCode | None,
                              now: int, out: Effects) -> None:
        """A Stable group's new static member id is on disk (or not): answer its JoinGroup."""
        member = self.members.get(done.member_id)
        if member is None or member.join_waiter != done.token:
            return
        member.join_waiter = None
        if error is not None:
            # Put the old incarnation back, as if this join never happened.
            self._rename_member(member, done.old_member_id, out)
            member.protocols = done.old_protocols
            member.session_timeout_ms = done.old_session_timeout_ms
            member.rebalance_timeout_ms = done.old_rebalance_timeout_ms
            out.reply(done.token, JoinResponse(error))
            return
        if done.supports_skip_assignment and self.leader_id == member.member_id:
            # KIP-814: the leader learns it leads (to watch metadata) but keeps the assignment.
            answer = self._join_answer(member, include_members=True)
            out.reply(done.token, JoinResponse(
                answer.error, answer.member_id, answer.generation_id, answer.protocol_type,
                answer.protocol_name, answer.leader, answer.members, skip_assignment=True))
            return
        # Older clients would compute a new assignment if named leader; a Stable group would
        # never hand it out, so report the previous leader id and let them SyncGroup.
        answer = self._join_answer(member, include_members=False)
        out.reply(done.token, JoinResponse(
            answer.error, answer.member_id, answer.generation_id, answer.protocol_type,
            answer.protocol_name, done.leader_before))

    # -- Heartbeat, LeaveGroup, removal ------------------------------------------------------

    def _check_member(self, member_id: str, group_instance_id: str | None,
                      generation_id: int) -> ErrorCode | None:
        if self.state is GroupState.DEAD:
            return ErrorCode.coordinator_not_available
        if self.is_fenced(group_instance_id, member_id):
            return ErrorCode.fenced_instance_id
        if member_id not in self.members:
            return ErrorCode.unknown_member_id
        if generation_id != self.generation_id:
            return ErrorCode.illegal_generation
        return None

    def heartbeat(self, member_id: str, group_instance_id: str | None, generation_id: int,
                  now: int) -> ErrorCode:
        error = self._check_member(member_id, group_instance_id, generation_id)
        if error is not None:
            return error
        if self.state is GroupState.EMPTY:
            return ErrorCode.unknown_member_id
        member = self.members[member_id]
        member.heartbeat_deadline = now + member.session_timeout_ms
        if self.state is GroupState.PREPARING_REBALANCE:
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def touch(self, member_id: str, now: int) -> None:
        """Count a member's offset commit as a sign of life, as Kafka does."""
        member = self.members.get(member_id)
        if member is not None:
            member.heartbeat_deadline = now + member.session_timeout_ms

    def leave(self, member_id: str, group_instance_id: str | None, now: int,
              out: Effects) -> ErrorCode:
        """One member of a LeaveGroup; an empty member id removes by instance id (admin)."""
        if not member_id:
            holder = self.static_members.get(group_instance_id or "")
            if group_instance_id is None or holder is None:
                return ErrorCode.unknown_member_id
            self._remove_and_update(self.members[holder], now, out, "was removed by an admin")
            return ErrorCode.none
        if member_id in self.pending_members:
            del self.pending_members[member_id]
            self._maybe_complete_join(now, out)
            return ErrorCode.none
        if self.is_fenced(group_instance_id, member_id):
            return ErrorCode.fenced_instance_id
        member = self.members.get(member_id)
        if member is None:
            return ErrorCode.unknown_member_id
        self._remove_and_update(member, now, out, "left")
        return ErrorCode.none

    def _remove(self, member: Member, out: Effects) -> None:
        member_id = member.member_id
        out.reply(member.join_waiter, JoinResponse(ErrorCode.unknown_member_id))
        out.reply(member.sync_waiter, SyncResponse(ErrorCode.unknown_member_id))
        member.join_waiter = member.sync_waiter = None
        del self.members[member_id]
        instance = member.group_instance_id
        if instance is not None and self.static_members.get(instance) == member_id:
            del self.static_members[instance]
        self._synced(member_id)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)

    def _remove_and_update(self, member: Member, now: int, out: Effects, why: str) -> None:
        reason = f"member {member.member_id} {why}"
        out.notes.append(f"{reason}; removing it from group {self.group_id}")
        self._remove(member, out)
        if self.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(now, out, reason)
        elif self.state is GroupState.PREPARING_REBALANCE:
            self._maybe_complete_join(now, out)

    # -- timers ---------------------------------------------------------------------------

    def on_timer(self, now: int, out: Effects) -> None:
        """Fire every deadline that has passed."""
        for member_id, lapses in list(self.pending_members.items()):
            if lapses <= now:
                del self.pending_members[member_id]
                self._maybe_complete_join(now, out)
        for member in list(self.members.values()):
            deadline = member.heartbeat_deadline
            if deadline is None or deadline > now or member.member_id not in self.members:
                continue
            if not member.is_new and (member.join_waiter is not None
                                      or member.sync_waiter is not None):
                member.heartbeat_deadline = None  # busy rebalancing: cannot heartbeat
            else:
                self._remove_and_update(member, now, out, "join timed out" if member.is_new
                                        else "session timed out")
        if self.sync_deadline is not None and self.sync_deadline <= now:
            self.sync_deadline = None
            missing = [self.members[m] for m in self.pending_sync if m in self.members]
            if missing and self.state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
                for member in missing:
                    self._remove(member, out)
                self._prepare_rebalance(now, out, "members sent no SyncGroup in time: "
                                        + ", ".join(m.member_id for m in missing))
        if (self.state is GroupState.PREPARING_REBALANCE and self.join_deadline is not None
                and self.join_deadline <= now):
            self._on_join_deadline(now, out)

    # -- offsets --------------------------------------------------------------------------

    def validate_offset_commit(self, member_id: str, group_instance_id: str | None,
                               generation_id: int) -> ErrorCode | None:
        """Kafka's rules for who may commit: members of the current generation, or anybody
        (generation -1, no member id) while the group has no members."""
        if self.state is GroupState.DEAD:
            return ErrorCode.coordinator_not_available
        if generation_id < 0 and self.state is GroupState.EMPTY:
            return None
        if generation_id >= 0 or member_id or group_instance_id is not None:
            error = self._check_member(member_id, group_instance_id, generation_id)
            if error is not None:
                return error
        elif self.state is not GroupState.EMPTY:
            return ErrorCode.unknown_member_id
        if self.state is GroupState.COMPLETING_REBALANCE:
            # The member has its new generation but not yet its assignment.
            return ErrorCode.rebalance_in_progress
        return None

    def validate_txn_offset_commit(self, member_id: str, group_instance_id: str | None,
                                   generation_id: int) -> ErrorCode | None:
        """Kafka's rules for TxnOffsetCommit (KIP-447): each identity field is checked only
        when set (member id non-empty, generation >= 0), and there is no rebalance check,
        since the transaction fences zombies through the producer epoch."""
        if self.state is GroupState.DEAD:
            return ErrorCode.coordinator_not_available
        if self.is_fenced(group_instance_id, member_id):
            return ErrorCode.fenced_instance_id
        if member_id and member_id not in self.members:
            return ErrorCode.unknown_member_id
        if generation_id >= 0 and generation_id != self.generation_id:
            return ErrorCode.illegal_generation
        return None

    def expired_offsets(self, now: int, retention_ms: int) -> list[TopicPartition]:
        """Offsets past ``offsets.retention.minutes`` (see :mod:`offsets` for the rules)."""
        def commit_time(o: OffsetAndMetadata) -> int:
            return o.commit_timestamp

        if self.protocol_type is not None and self.state is GroupState.EMPTY:
            became_empty = self.state_timestamp
            return self.offsets.expired(
                now, retention_ms,
                commit_time if became_empty is None else (lambda _o: became_empty))
        if (self.protocol_type == CONSUMER_PROTOCOL_TYPE and self.subscribed_topics is not None
                and self.state is GroupState.STABLE):
            return self.offsets.expired(now, retention_ms, commit_time, self.subscribed_topics)
        if self.protocol_type is None:
            return self.offsets.expired(now, retention_ms, commit_time)
        return []

    def is_subscribed_to(self, topic: str) -> bool:
        """Whether members consume ``topic``; unknown subscriptions count as yes (safe)."""
        return self.subscribed_topics is None or topic in self.subscribed_topics

    def mark_dead(self, now: int, out: Effects) -> None:
        out.notes.append(f"group {self.group_id} transitioned to Dead in generation "
                         f"{self.generation_id}")
        self._transition(GroupState.DEAD, now)

    # -- records --------------------------------------------------------------------------

    def metadata_record(self, assignment: Mapping[str, bytes]) -> Record:
        """The group's GroupMetadata record, with the given assignment for each member."""
        protocol = self.protocol_name
        value = GroupMetadataValue(
            protocol_type=self.protocol_type or "",
            generation=self.generation_id,
            protocol=protocol,
            leader=self.leader_id,
            current_state_timestamp=-1 if self.state_timestamp is None else self.state_timestamp,
            members=tuple(
                MemberMetadataValue(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    rebalance_timeout=m.rebalance_timeout_ms,
                    session_timeout=m.session_timeout_ms,
                    subscription=m.metadata(protocol),
                    assignment=assignment.get(m.member_id, b""),
                )
                for m in self.members.values()
            ),
        )
        return encode_key(GroupMetadataKey(self.group_id)), encode_group_value(value)

    def tombstone(self) -> Record:
        return encode_key(GroupMetadataKey(self.group_id)), None

    @classmethod
    def from_record(
        cls,
        group_id: str,
        value: GroupMetadataValue,
        limits: GroupLimits,
        now: int,
        *,
        new_member_id: Callable[[str], str] = default_member_id,
    ) -> Group:
        """Rebuild a group from its latest GroupMetadata record, as Kafka's loader does.

        Members come back as they were stored, in a Stable group, and get a full session
        timeout from ``now`` to heartbeat: clients that were connected before a broker restart
        carry on in the same generation, and the others expire like any silent member.
        """
        group = cls(group_id, limits, now, new_member_id=new_member_id)
        group.protocol_type = value.protocol_type
        group.generation_id = value.generation
        group.protocol_name = value.protocol
        group.state_timestamp = (None if value.current_state_timestamp < 0
                                 else value.current_state_timestamp)
        for stored in value.members:
            protocols: Protocols = ((value.protocol or "", stored.subscription),)
            member = Member(
                member_id=stored.member_id,
                group_instance_id=stored.group_instance_id,
                client_id=stored.client_id,
                client_host=stored.client_host,
                session_timeout_ms=stored.session_timeout,
                rebalance_timeout_ms=stored.rebalance_timeout,
                protocol_type=value.protocol_type,
                protocols=protocols,
                assignment=stored.assignment,
                heartbeat_deadline=now + stored.session_timeout,
            )
            group.members[member.member_id] = member
            if member.group_instance_id is not None:
                group.static_members[member.group_instance_id] = member.member_id
        if group.members:
            group.state = GroupState.STABLE
            group.leader_id = value.leader if value.leader in group.members else next(
                iter(group.members))
        group.subscribed_topics = group._compute_subscribed_topics()
        return group

    def shrink_to_max_size(self, now: int, out: Effects) -> None:
        """After loading: a group above ``group.max.size`` rebalances, so the surplus that
        rejoins last is turned away."""
        if len(self.members) > self.limits.max_size:
            self._prepare_rebalance(now, out, "the group is above group.max.size")
