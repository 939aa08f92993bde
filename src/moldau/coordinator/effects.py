"""What the group state machines hand back to the broker: answers, writes, and continuations.

The state machines do no I/O. A JoinGroup or SyncGroup request is answered when the group
decides, which may be during a later event (another member's join, a timer), so the broker
parks each such request under an integer *waiter token* and the machines answer it with a
:class:`Reply` naming that token. Records to persist come back as :class:`Write`; a write
may carry a *completion* that the broker passes to ``GroupCoordinator.write_completed`` once
the append has succeeded or failed, because some answers (the SyncGroup assignment, a static
member's re-join) may only go out after the group's new state is on disk.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

#: One ``__consumer_offsets`` record: key and value bytes (None: a tombstone).
Record = tuple[bytes, bytes | None]


@dataclass(frozen=True, slots=True)
class JoinedMember:
    """A member as the leader sees it in the JoinGroup response."""

    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinResponse:
    error: ErrorCode
    member_id: str = ""
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    #: Filled for the leader only: every member with its metadata for the chosen protocol.
    members: tuple[JoinedMember, ...] = ()
    #: KIP-814: the leader is told who it is but must not compute a new assignment.
    skip_assignment: bool = False


@dataclass(frozen=True, slots=True)
class SyncResponse:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(frozen=True, slots=True)
class Reply:
    token: int
    response: JoinResponse | SyncResponse


@dataclass(frozen=True, slots=True)
class AssignmentWritten:
    """The leader's assignment for ``generation_id`` is being stored; then go Stable."""

    group_id: str
    generation_id: int
    assignment: Mapping[str, bytes]


@dataclass(frozen=True, slots=True)
class StaticMemberRejoined:
    """A static member replaced its old member id in a Stable group; answer once stored."""

    group_id: str
    generation_id: int
    token: int
    member_id: str
    old_member_id: str
    old_protocols: tuple[tuple[str, bytes], ...]
    old_session_timeout_ms: int
    old_rebalance_timeout_ms: int
    #: The leader id to report to a client that cannot skip the assignment (JoinGroup < v9).
    leader_before: str
    supports_skip_assignment: bool


Completion = AssignmentWritten | StaticMemberRejoined


@dataclass(frozen=True, slots=True)
class Write:
    """Records to append to the group's ``__consumer_offsets`` partition."""

    group_id: str
    records: tuple[Record, ...]
    completion: Completion | None = None
    #: (producer id, producer epoch) for a transactional batch (TxnOffsetCommit), else None.
    producer: tuple[int, int] | None = None


@dataclass(slots=True)
class Effects:
    """Everything one event produced, in order."""

    replies: list[Reply] = field(default_factory=list)
    writes: list[Write] = field(default_factory=list)
    #: What happened to groups, in words, for the broker's log (the machines do no I/O).
    notes: list[str] = field(default_factory=list)
    #: Rebalances begun (the broker's rebalance counter for its metrics).
    rebalances: int = 0

    def reply(self, token: int | None, response: JoinResponse | SyncResponse) -> None:
        if token is not None:
            self.replies.append(Reply(token, response))

    def extend(self, other: Effects) -> None:
        self.replies.extend(other.replies)
        self.writes.extend(other.writes)
        self.notes.extend(other.notes)
        self.rebalances += other.rebalances
