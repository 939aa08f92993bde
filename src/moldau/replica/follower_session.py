"""The follower's half of an incremental fetch session (KIP-227) with one leader.

The leader's half (:mod:`moldau.broker.fetch_sessions`) remembers what this follower fetches;
this side remembers what the leader's session holds, so each Fetch names only the partitions
whose fetch offset, epoch, log start or byte limit changed, and the ones to forget (moved
away, or waiting to be truncated). The first request of a connection opens the session with
every partition (epoch 0); a session-level error, a lost connection or a leader that gives no
session makes the next request a full one again. Nothing here does I/O.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from .partition import TopicPartition

#: What a fetched partition's entry in a request says: (leader epoch, fetch offset, log start,
#: byte limit).
Wanted = tuple[int, int, int, int]

_MAX_EPOCH = 0x7FFFFFFF
#: Errors that mean the leader no longer has the session as this side knows it.
SESSION_ERRORS = frozenset({ErrorCode.fetch_session_id_not_found,
                            ErrorCode.invalid_fetch_session_epoch})


class FollowerSession:
    """What the leader's session holds, and the id and epoch of the next request."""

    def __init__(self) -> None:
        self.id = 0
        #: 0 asks the leader for a new session (with a full request).
        self.epoch = 0
        self._held: dict[TopicPartition, Wanted] = {}

    def reset(self) -> None:
        """Start over with a full request (new connection, or the leader lost the session)."""
        self.id = 0
        self.epoch = 0
        self._held = {}

    def changes(self, wanted: dict[TopicPartition, Wanted]
                ) -> tuple[list[TopicPartition], list[TopicPartition]]:
        """(partitions to name, partitions to forget) for a request fetching ``wanted``:
        everything and nothing for a request that opens a session."""
        if self.id == 0:
            return list(wanted), []
        named = [key for key, entry in wanted.items() if self._held.get(key) != entry]
        forgotten = [key for key in self._held if key not in wanted]
        return named, forgotten

    def answered(self, session_id: int, error: ErrorCode,
                 wanted: dict[TopicPartition, Wanted]) -> None:
        """The leader answered the request made from ``changes(wanted)``."""
        if error in SESSION_ERRORS or session_id == 0:
            # No session (any more): the next request is a full one, asking for one again.
            self.reset()
            return
        if self.id == 0:
            self.id = session_id
            self.epoch = 1
        else:
            self.epoch = self.epoch + 1 if self.epoch < _MAX_EPOCH else 1
        self._held = dict(wanted)
