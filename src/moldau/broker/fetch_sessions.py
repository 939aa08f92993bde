"""The leader's half of incremental fetch sessions (KIP-227) with its followers.

A follower fetches every partition it follows on this broker in one request, again each
time anything is appended to any of them. Without a session each request names every
partition and each response answers for every partition, so the cost of one small write
grows with the number of partitions the two brokers share: with the 50 partitions of
``__transaction_state`` alone, a transaction's handful of small writes made the brokers of a
3-node cluster spend about 20 ms of CPU on encoding and decoding fetches.

With a session the leader remembers what the follower fetches (each partition's fetch
offset, leader epoch, log start and byte limit) and what it last told the follower about
each partition (high watermark, last stable offset, log start). An incremental request then
names only the partitions whose fetch offset or limits changed, and the ones to forget; the
response carries only the partitions with records, an error, or a changed watermark. The
leader still reads every partition of the session on each fetch, as Kafka does, so the
follower's position, and with it the ISR and the high watermark, stay as they would be with
full requests.

Sessions are given to followers only (``replica_id`` >= 0) and live on their connection: a
follower opens a new one whenever it reconnects, nothing outlives a closed connection, and a
session id is unknown on any other connection. Consumers get session id 0 (no session),
which the protocol allows; they keep sending full requests.

Request forms (session id, epoch): (0, -1) a full fetch without a session; (0, 0) or (id, 0) a
full fetch that opens a new session (replacing the connection's); (id, -1) closes the session
and is a full fetch; (id, n > 0) the session's n-th incremental fetch, answered
FETCH_SESSION_ID_NOT_FOUND or INVALID_FETCH_SESSION_EPOCH when it does not match.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

#: Session ids of this broker: unique, never 0, within int32.
_IDS = itertools.count(1)
_MAX_EPOCH = 0x7FFFFFFF


@dataclass(slots=True)
class SessionPartition:
    """A partition of a session: what the follower fetches from (attribute names as the
    request's, so reads treat both alike) and what it was last told."""

    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int
    log_start_offset: int
    #: (high watermark, last stable offset, log start) in the last response that carried
    #: this partition; None before the first.
    sent: tuple[int, int, int] | None = None


@dataclass(slots=True)
class SessionTopic:
    """A topic of a session, shaped like a request's topic."""

    topic: str | None
    topic_id: Any
    partitions: list[SessionPartition] = field(default_factory=list)


class FetchSession:
    """One follower's fetch session on this broker."""

    def __init__(self, replica_id: int) -> None:
        self.id = (next(_IDS) - 1) % _MAX_EPOCH + 1
        self.replica_id = replica_id
        #: The epoch the next incremental request must carry.
        self.epoch = 1
        self._partitions: dict[tuple[Any, int], tuple[SessionTopic, SessionPartition]] = {}
        self._topics: dict[Any, SessionTopic] = {}

    def apply(self, request: Any) -> None:
        """Add or update the request's partitions, drop its forgotten ones."""
        for forgotten in getattr(request, "forgotten_topics_data", ()) or ():
            key = _topic_key(forgotten)
            for index in forgotten.partitions:
                self._forget(key, index)
        for fetch_topic in request.topics:
            key = _topic_key(fetch_topic)
            topic = self._topics.get(key)
            if topic is None:
                topic = self._topics[key] = SessionTopic(
                    getattr(fetch_topic, "topic", None), getattr(fetch_topic, "topic_id", None))
            for p in fetch_topic.partitions:
                known = self._partitions.get((key, p.partition))
                if known is not None:
                    part = known[1]
                    part.fetch_offset = p.fetch_offset
                    part.partition_max_bytes = p.partition_max_bytes
                    part.current_leader_epoch = getattr(p, "current_leader_epoch", -1)
                    part.log_start_offset = getattr(p, "log_start_offset", -1)
                    continue
                part = SessionPartition(p.partition, p.fetch_offset, p.partition_max_bytes,
                                        getattr(p, "current_leader_epoch", -1),
                                        getattr(p, "log_start_offset", -1))
                topic.partitions.append(part)
                self._partitions[(key, p.partition)] = (topic, part)

    def _forget(self, key: Any, index: int) -> None:
        found = self._partitions.pop((key, index), None)
        if found is None:
            return
        topic, part = found
        topic.partitions.remove(part)
        if not topic.partitions:
            del self._topics[key]

    def topics(self) -> list[SessionTopic]:
        """Every topic of the session with its partitions, in the order they were added."""
        return list(self._topics.values())

    def advance(self) -> None:
        """The incremental request was accepted: the next one carries the next epoch."""
        self.epoch = self.epoch + 1 if self.epoch < _MAX_EPOCH else 1


def has_updates(part: SessionPartition, code: ErrorCode, has_records: bool,
                high_watermark: int, last_stable_offset: int, log_start_offset: int) -> bool:
    """Whether an incremental response carries this partition, noting what it is told."""
    state = (high_watermark, last_stable_offset, log_start_offset)
    if has_records or code is not ErrorCode.none or state != part.sent:
        part.sent = state
        return True
    return False


def _topic_key(fetch_topic: Any) -> Any:
    name = getattr(fetch_topic, "topic", None)
    return name if name is not None else getattr(fetch_topic, "topic_id", None)


class SessionOutcome:
    """How one Fetch request relates to its connection's session."""

    __slots__ = ("error", "incremental", "session")

    def __init__(self, session: FetchSession | None = None, incremental: bool = False,
                 error: ErrorCode | None = None) -> None:
        #: The session the fetch belongs to (None: a fetch without one).
        self.session = session
        #: The request named only changes: read and answer for the whole session.
        self.incremental = incremental
        #: A session-level error to answer with, reading nothing.
        self.error = error


def resolve(holder: Any, request: Any, follower: int) -> SessionOutcome:
    """The fetch's session, opened, closed or advanced as the request's id and epoch say.

    ``holder`` is the connection's :class:`~.session.Session` (its ``fetch_session``).
    Only followers get sessions; a consumer's incremental request names a session it can
    never have been given.
    """
    session_id = getattr(request, "session_id", 0) or 0
    epoch = getattr(request, "session_epoch", -1)
    if epoch is None:
        epoch = -1
    current: FetchSession | None = holder.fetch_session if holder is not None else None
    if epoch > 0:
        if current is None or follower < 0 or current.id != session_id \
                or current.replica_id != follower:
            return SessionOutcome(error=ErrorCode.fetch_session_id_not_found)
        if epoch != current.epoch:
            return SessionOutcome(error=ErrorCode.invalid_fetch_session_epoch)
        current.apply(request)
        current.advance()
        return SessionOutcome(current, incremental=True)
    if holder is not None:
        holder.fetch_session = None  # (id, -1) and (id, 0) close it; (0, 0) replaces it
    if epoch == 0 and follower >= 0 and holder is not None:
        session = FetchSession(follower)
        session.apply(request)
        holder.fetch_session = session
        return SessionOutcome(session)
    return SessionOutcome()
