"""The file work of creating and deleting many partitions, done off the event loop in batches.

Creating a partition means a directory, three empty segment files and ``partition.metadata``;
deleting one means closing its segments and renaming its directory. Done on the event loop
for 10,000 partitions that is seconds without answering anyone. These functions run on a
worker thread (``asyncio.to_thread``) and touch no broker state: the caller places the
partitions and adopts or detaches the logs on the loop, and commits the metadata there, after
the files exist (creation) or are gone (deletion), so the metadata never promises a partition
that is not on disk. Work goes in batches of :data:`FILE_BATCH` partitions with one directory
fsync per log dir and batch instead of one per partition.
"""

from __future__ import annotations

import gc
import logging
import uuid
from collections.abc import Sequence
from pathlib import Path

from ..log.checkpoint import fsync_dir
from ..log.config import LogConfig
from ..log.manager import LogManager
from ..log.partition_log import PartitionLog

log = logging.getLogger(__name__)

#: Partitions per batch (one fsync of each log dir per batch).
FILE_BATCH = 500


class QuietGc:
    """Automatic garbage collection paused while partitions are made or dropped in bulk.

    A partition is about 30 Python objects; making 10,000 of them triggers several full
    collections, each walking every object in the process (100-400 ms here) while holding
    the GIL, which stalls the event loop whichever thread triggers it. So collection is off
    while any bulk operation runs, and when the last one ends the surviving objects are
    frozen (``gc.freeze``): partition logs live long, and later full collections need not
    walk them. Entered and left on the event loop only.
    """

    def __init__(self) -> None:
        self._depth = 0
        self._was_enabled = True

    def __enter__(self) -> None:
        if self._depth == 0:
            self._was_enabled = gc.isenabled()
            gc.disable()
        self._depth += 1

    def __exit__(self, *exc_info: object) -> None:
        self._depth -= 1
        if self._depth == 0:
            gc.freeze()
            if self._was_enabled:
                gc.enable()


def make_partitions(
    topic: str,
    placed: Sequence[tuple[int, Path]],
    config: LogConfig,
    topic_id: uuid.UUID | None,
) -> list[tuple[PartitionLog, Path]]:
    """Create the logs of ``placed`` partitions batch by batch; all or nothing.

    On an error the partitions of earlier batches are removed again (the failing batch
    removes its own), so a failed creation leaves no directory behind.
    """
    made: list[tuple[PartitionLog, Path]] = []
    try:
        for i in range(0, len(placed), FILE_BATCH):
            made += LogManager.make(topic, placed[i : i + FILE_BATCH], config, topic_id)
    except BaseException:
        LogManager.remove_renamed(LogManager.rename_for_deletion([p for p, _ in made]))
        raise
    return made


#: Renamed partitions: each detached log with its ``-delete`` directory.
Renamed = list[tuple[PartitionLog, Path]]


def rename_partitions(logs: Sequence[PartitionLog]) -> Renamed:
    """Rename detached logs to their ``-delete`` names batch by batch; all or nothing.

    On an error every directory renamed so far is renamed back before the error is raised, so
    the caller can put the topic back as it was.
    """
    renamed: Renamed = []
    try:
        for i in range(0, len(logs), FILE_BATCH):
            batch = logs[i : i + FILE_BATCH]
            renamed += zip(batch, LogManager.rename_for_deletion(batch), strict=True)
    except BaseException:
        restore_renamed(renamed)
        raise
    return renamed


def restore_renamed(renamed: Renamed) -> None:
    """Rename directories back to their partition names (a deletion that could not finish)."""
    for plog, path in reversed(renamed):
        try:
            plog.undo_rename_for_deletion(path)
        except OSError as exc:
            log.error("cannot rename %s back after a failed deletion: %s", path, exc)
    for parent in {path.parent for _, path in renamed}:
        try:
            fsync_dir(parent)
        except OSError as exc:
            log.error("cannot fsync %s after a failed deletion: %s", parent, exc)


def remove_renamed(renamed: Renamed) -> None:
    """Remove renamed directories (whatever a crash leaves is removed at the next start).

    ``renamed`` is emptied here, so that the thousands of objects of the deleted logs are
    freed on this (worker) thread rather than on the event loop.
    """
    LogManager.remove_renamed([path for _, path in renamed])
    renamed.clear()
