"""One member of a classic consumer group, as the coordinator tracks it."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

#: (protocol name, member metadata) in the member's order of preference.
Protocols = tuple[tuple[str, bytes], ...]


@dataclass(slots=True)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    assignment: bytes = b""
    #: Token of the member's parked JoinGroup, answered when the rebalance completes.
    join_waiter: int | None = None
    #: Token of the member's parked SyncGroup, answered when the leader's assignment is stored.
    sync_waiter: int | None = None
    #: Joined but not yet through a completed join: expires on a join timeout, not a session.
    is_new: bool = False
    #: When the member is dropped unless it heartbeats (or is busy rebalancing) before then.
    heartbeat_deadline: int | None = None

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def awaiting_join(self) -> bool:
        return self.join_waiter is not None

    @property
    def protocol_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.protocols)

    def supports(self, protocol: str) -> bool:
        return any(name == protocol for name, _ in self.protocols)

    def metadata(self, protocol: str | None) -> bytes:
        """The member's metadata for ``protocol`` (its subscription, for consumers)."""
        for name, data in self.protocols:
            if name == protocol:
                return data
        return b""

    def matches(self, protocols: Protocols) -> bool:
        """Whether a re-join carries exactly the protocols (and metadata) already known."""
        return self.protocols == protocols

    def vote(self, candidates: Collection[str]) -> str:
        """The member's most preferred protocol among those every member supports."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")
