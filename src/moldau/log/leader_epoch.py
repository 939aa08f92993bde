"""The leader-epoch cache of a partition, persisted in ``leader-epoch-checkpoint``.

It records at which offset each leader epoch started. Followers use it (through
OffsetForLeaderEpoch) to find where their log diverges from the leader's after a leader
change; Kafka's KIP-101 replaced truncation to the high watermark with this.
"""

from __future__ import annotations

import logging
from bisect import bisect_right
from pathlib import Path

from .checkpoint import read_checkpoint, write_checkpoint
from .errors import LogError

log = logging.getLogger(__name__)

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


class LeaderEpochCache:
    """Ordered (epoch, start offset) pairs; every change is written to disk at once.

    Changes are rare (a new leader epoch, truncation, retention), so rewriting the whole small
    file each time is cheap and keeps the file the single source of truth.
    """

    def __init__(self, path: Path, entries: list[tuple[int, int]] | None = None) -> None:
        self.path = path
        self._entries: list[tuple[int, int]] = entries or []

    @classmethod
    def load(cls, path: Path) -> LeaderEpochCache:
        """Read the checkpoint; a missing or unreadable one starts empty (logged)."""
        try:
            raw = read_checkpoint(path, 2)
            entries = [(int(e), int(o)) for e, o in raw] if raw else []
        except (LogError, ValueError) as exc:
            log.warning("ignoring unreadable %s: %s", path, exc)
            entries = []
        return cls(path, entries)

    @property
    def entries(self) -> list[tuple[int, int]]:
        return list(self._entries)

    @property
    def latest_epoch(self) -> int:
        return self._entries[-1][0] if self._entries else UNDEFINED_EPOCH

    def _save(self) -> None:
        write_checkpoint(self.path, self._entries)

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset`` if it is newer than the latest.

        Older or equal epochs are ignored: batches of the current epoch arrive all the time,
        and an older epoch can only come from a stale leader.
        """
        if epoch < 0 or epoch <= self.latest_epoch:
            return False
        while self._entries and self._entries[-1][1] >= start_offset:
            self._entries.pop()  # would contradict the new epoch's start
        self._entries.append((epoch, start_offset))
        self._save()
        return True

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) answer of OffsetForLeaderEpoch for ``epoch``.

        The end offset of an epoch is the start offset of the next higher epoch, or the log end
        offset for the latest one; the returned epoch is the largest known one <= ``epoch``.
        """
        if epoch == UNDEFINED_EPOCH or not self._entries:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if epoch == self.latest_epoch:
            return epoch, log_end_offset
        epochs = [e for e, _ in self._entries]
        i = bisect_right(epochs, epoch)
        if i == len(epochs):
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        higher_start = self._entries[i][1]
        if i == 0:
            return epoch, higher_start
        return self._entries[i - 1][0], higher_start

    def truncate_from_end(self, end_offset: int) -> None:
        """Forget epochs that start at or after ``end_offset`` (the log was truncated)."""
        keep = [entry for entry in self._entries if entry[1] < end_offset]
        if len(keep) != len(self._entries):
            self._entries = keep
            self._save()

    def truncate_from_start(self, start_offset: int) -> None:
        """Move the log start forward: epochs wholly below it go, the one spanning it is clamped."""
        below = [i for i, (_, start) in enumerate(self._entries) if start < start_offset]
        if not below:
            return
        last = below[-1]
        epoch = self._entries[last][0]
        self._entries = [(epoch, start_offset), *self._entries[last + 1 :]]
        self._save()

    def clear(self) -> None:
        if self._entries:
            self._entries = []
            self._save()
