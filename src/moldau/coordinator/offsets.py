"""Committed offsets of one group, and Kafka's rules for when they expire.

A commit is kept in memory only once its record is in ``__consumer_offsets``; the broker
appends first and then calls :meth:`GroupOffsets.put`, so a restart can never bring back less
than what clients were told was committed.

Expiry follows Kafka (KIP-211): offsets of a group with members live as long as the group
subscribes to their topic; once a group is Empty, all of its offsets go
``offsets.retention.minutes`` after it became Empty. A group that never used group management
(a "simple" group, committing with generation -1) has each offset expire that long after its
own commit. Commits made with an explicit retention time (OffsetCommit v2-v4) expire at the
time they named.

Transactional commits (TxnOffsetCommit, KIP-98/KIP-447) are *pending* per producer id from
their append until the producer's COMMIT or ABORT marker reaches the group's partition: then
they become the committed offsets or are dropped. Pending offsets never expire and keep their
group alive (Kafka's ``hasOffsets``); removing a partition's offset (OffsetDelete, a deleted
topic, DeleteGroups) drops its pending ones too, as Kafka's ``removeOffsets`` does. Each
committed offset remembers the log offset of its record, because a transaction's offsets only
replace a commit that was appended before them (Kafka's ``olderThan``): a plain commit made
while the transaction was open wins over it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from .records import OffsetCommitKey, OffsetCommitValue, encode_key, encode_offset_value

#: ``offset.metadata.max.bytes``: Kafka's default limit on a commit's metadata string.
DEFAULT_METADATA_MAX_BYTES = 4096

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    #: -1 unless the commit asked for its own retention.
    expire_timestamp: int = -1

    def to_record(self, group_id: str, topic: str, partition: int) -> tuple[bytes, bytes]:
        key = encode_key(OffsetCommitKey(group_id, topic, partition))
        value = encode_offset_value(OffsetCommitValue(
            self.offset, self.metadata, self.commit_timestamp, self.leader_epoch,
            self.expire_timestamp,
        ))
        return key, value

    @classmethod
    def from_record(cls, value: OffsetCommitValue) -> OffsetAndMetadata:
        return cls(value.offset, value.leader_epoch, value.metadata, value.commit_timestamp,
                   value.expire_timestamp)


def tombstone(group_id: str, topic: str, partition: int) -> tuple[bytes, None]:
    return encode_key(OffsetCommitKey(group_id, topic, partition)), None


def metadata_too_large(metadata: str | None, max_bytes: int) -> bool:
    """Kafka compares the Java string length (UTF-16 code units) with the limit."""
    if metadata is None:
        return False
    return len(metadata.encode("utf-16-le", "surrogatepass")) // 2 > max_bytes


#: A pending transactional offset and the log offset of the batch that holds it.
PendingOffset = tuple[OffsetAndMetadata, int]


class GroupOffsets:
    """The latest committed offset of each partition a group committed to, and the pending
    transactional offsets of each producer."""

    def __init__(self) -> None:
        self._offsets: dict[TopicPartition, OffsetAndMetadata] = {}
        #: Log offset of each committed offset's record (-1 when unknown).
        self._positions: dict[TopicPartition, int] = {}
        self._pending: dict[int, dict[TopicPartition, PendingOffset]] = {}

    def __len__(self) -> int:
        return len(self._offsets)

    def __iter__(self) -> Iterator[tuple[TopicPartition, OffsetAndMetadata]]:
        return iter(sorted(self._offsets.items()))

    def get(self, topic: str, partition: int) -> OffsetAndMetadata | None:
        return self._offsets.get((topic, partition))

    def put(self, topic: str, partition: int, offset: OffsetAndMetadata,
            position: int = -1) -> bool:
        """Commit ``offset`` unless the current one's record lies later in the log (both
        positions known): a later record is the newer commit. True if it was stored."""
        tp = (topic, partition)
        current = self._positions.get(tp, -1)
        if position >= 0 and current > position and tp in self._offsets:
            return False
        self._offsets[tp] = offset
        self._positions[tp] = position
        return True

    def expire(self, topic: str, partition: int) -> bool:
        """Remove a committed offset that expired; pending ones stay (Kafka's
        removeExpiredOffsets touches committed offsets only)."""
        self._positions.pop((topic, partition), None)
        return self._offsets.pop((topic, partition), None) is not None

    def remove(self, topic: str, partition: int) -> bool:
        """Remove the committed offset and any pending transactional ones of a partition."""
        tp = (topic, partition)
        self._positions.pop(tp, None)
        for pid in list(self._pending):
            pending = self._pending[pid]
            pending.pop(tp, None)
            if not pending:
                del self._pending[pid]
        return self._offsets.pop(tp, None) is not None

    # -- transactional offsets ---------------------------------------------------------------

    @property
    def has_offsets(self) -> bool:
        """Committed or pending offsets: a group with either stays (Kafka's hasOffsets)."""
        return bool(self._offsets) or bool(self._pending)

    def add_pending(self, producer_id: int, topic: str, partition: int,
                    offset: OffsetAndMetadata, position: int) -> None:
        """A transactional commit was appended at log offset ``position``."""
        self._pending.setdefault(producer_id, {})[(topic, partition)] = (offset, position)

    def drop_pending(self, producer_id: int, topic: str, partition: int, position: int) -> None:
        """Forget one pending offset if it is still the one appended at ``position`` (its
        write failed)."""
        pending = self._pending.get(producer_id)
        if pending is not None and pending.get((topic, partition), (None, -2))[1] == position:
            del pending[(topic, partition)]
            if not pending:
                del self._pending[producer_id]

    def complete(self, producer_id: int, commit: bool) -> list[TopicPartition]:
        """The producer's marker arrived: commit its pending offsets (each unless a later
        plain commit replaced it) or drop them. Returns the partitions committed."""
        pending = self._pending.pop(producer_id, {})
        if not commit:
            return []
        return sorted(tp for tp, (offset, position) in pending.items()
                      if self.put(tp[0], tp[1], offset, position))

    def has_pending(self, topic: str, partition: int) -> bool:
        return any((topic, partition) in p for p in self._pending.values())

    def pending_partitions(self) -> set[TopicPartition]:
        return {tp for p in self._pending.values() for tp in p}

    def pending_producers(self) -> set[int]:
        return set(self._pending)

    def pending(self, producer_id: int) -> dict[TopicPartition, PendingOffset]:
        return dict(self._pending.get(producer_id, {}))

    def clear_pending(self) -> None:
        self._pending.clear()

    def topics(self) -> set[str]:
        return {topic for topic, _ in self._offsets}

    def expired(
        self,
        now: int,
        retention_ms: int,
        base_timestamp: Callable[[OffsetAndMetadata], int],
        keep_topics: frozenset[str] = frozenset(),
    ) -> list[TopicPartition]:
        """Partitions whose offset expired: ``retention_ms`` after ``base_timestamp``, or at
        their own expire timestamp; topics in ``keep_topics`` are still consumed and stay."""
        expired = []
        for tp, offset in self._offsets.items():
            if tp[0] in keep_topics:
                continue
            if offset.expire_timestamp >= 0:
                if now >= offset.expire_timestamp:
                    expired.append(tp)
            elif now - base_timestamp(offset) >= retention_ms:
                expired.append(tp)
        return sorted(expired)
