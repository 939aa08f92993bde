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


class GroupOffsets:
    """The latest committed offset of each partition a group committed to."""

    def __init__(self) -> None:
        self._offsets: dict[TopicPartition, OffsetAndMetadata] = {}

    def __len__(self) -> int:
        return len(self._offsets)

    def __iter__(self) -> Iterator[tuple[TopicPartition, OffsetAndMetadata]]:
        return iter(sorted(self._offsets.items()))

    def get(self, topic: str, partition: int) -> OffsetAndMetadata | None:
        return self._offsets.get((topic, partition))

    def put(self, topic: str, partition: int, offset: OffsetAndMetadata) -> None:
        self._offsets[(topic, partition)] = offset

    def remove(self, topic: str, partition: int) -> bool:
        return self._offsets.pop((topic, partition), None) is not None

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
