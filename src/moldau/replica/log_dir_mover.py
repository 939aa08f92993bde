"""Moves of hosted partitions between this broker's log dirs (AlterReplicaLogDirs).

Kafka's ReplicaAlterLogDirsThread, as one asyncio task per moving partition: the partition
keeps serving from its current log while the task copies its batches, byte for byte, into
the *future* log the log manager made in the target dir (``append_replicated``, so offsets,
leader epochs and producer state come along as on a follower). The copy follows the current
log as it grows, is truncated with it (a follower's divergent tail) and drops what its
retention or DeleteRecords drop. Once the copy reached the current log end, the swap runs
without yielding the loop, so no append can fall between the last copied batch and the
switch: the log manager renames the future to the live name and the old directory for
deletion (crash-safe, see :mod:`moldau.log.manager`), the :class:`Partition` serves from the
new log, and the old directory is removed on a worker thread.

Each step copies at most :data:`CHUNK_BYTES` and then yields, so produce and fetch latency
stay what they were; a move runs as fast as the loop has time left, or at
``replica.alter.log.dirs.io.max.bytes.per.second`` (Kafka's key; dynamic) when that is set:
steps of a tenth of a second's budget, each followed by the sleep it costs. A failing dir stops the
move (the future is resumed at the next start, or discarded if the partition left); any
other error is logged and discards the future. At start-up, futures found on disk resume.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from ..log.batch import parse_batches
from ..log.config import LONG_MAX
from ..log.errors import StorageError
from ..log.manager import LogManager
from ..log.partition_log import PartitionLog
from .partition import Partition, TopicPartition

log = logging.getLogger(__name__)

#: Bytes copied per step of a move before the loop serves others again.
CHUNK_BYTES = 1 << 20


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class LogDirMover:
    """Runs the moves of hosted partitions to other log dirs; see the module docstring."""

    def __init__(self, logs: LogManager, lookup: Callable[[str, int], Partition | None]) -> None:
        self._logs = logs
        self._lookup = lookup
        self._tasks: dict[TopicPartition, asyncio.Task[None]] = {}
        #: Finished moves' old directories being removed (awaited by :meth:`stop`).
        self._removals: set[asyncio.Task[None]] = set()
        #: Bytes/s a move copies at most (replica.alter.log.dirs.io.max.bytes.per.second).
        self.rate = LONG_MAX

    def start(self, partition: Partition) -> None:
        """Copy (or go on copying) ``partition`` into its future log; no-op if running."""
        key = partition.key
        task = self._tasks.get(key)
        if task is not None and not task.done():
            return
        task = asyncio.get_running_loop().create_task(self._move(partition))
        self._tasks[key] = task

        def done(finished: asyncio.Task[None]) -> None:
            if self._tasks.get(key) is finished:
                del self._tasks[key]

        task.add_done_callback(done)

    def resume_all(self) -> None:
        """Start a task for every future log (found on disk at start-up)."""
        for future in self._logs.futures():
            partition = self._lookup(future.topic, future.partition)
            if partition is not None:
                self.start(partition)

    def moving(self, key: TopicPartition) -> bool:
        task = self._tasks.get(key)
        return task is not None and not task.done()

    def cancel(self, key: TopicPartition) -> None:
        """Stop the move of ``key`` (its future is discarded by the caller)."""
        task = self._tasks.pop(key, None)
        if task is not None:
            task.cancel()

    async def stop(self) -> None:
        """Stop every move (a shutdown: futures stay on disk and resume at the next start)."""
        tasks = list(self._tasks.values()) + list(self._removals)
        for task in self._tasks.values():
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks.clear()

    async def _move(self, partition: Partition) -> None:
        topic, number = partition.key
        future = self._logs.future(topic, number)
        if future is None:
            return
        current = partition.log
        truncated: list[int] = []
        listener = truncated.append
        current.truncation_listeners.append(listener)
        current.moving = True
        target = future.directory.parent
        log.info("%s: moving from %s to %s (%d bytes)", partition.log.name,
                 current.directory.parent, target, current.size_bytes)
        try:
            while True:
                if (self._lookup(topic, number) is not partition or partition.log is not current
                        or self._logs.future(topic, number) is not future):
                    return  # deleted, or the move was cancelled or redirected
                if current.offline or future.offline:
                    log.warning("%s: move to %s stopped: a log dir is offline", current.name,
                                target)
                    return
                if truncated:
                    _follow_truncation(future, min(truncated))
                    truncated.clear()
                _follow_log_start(current, future)
                if future.log_end_offset >= current.log_end_offset:
                    self._swap(partition, current, future)
                    return
                rate = self.rate
                copied = _copy_chunk(current, future, min(CHUNK_BYTES, max(rate // 10, 1)))
                # No progress (should not happen): do not spin on the loop.
                await asyncio.sleep(0.1 if not copied else 0 if rate >= LONG_MAX
                                    else copied / rate)
        except StorageError as exc:
            log.warning("%s: move to %s stopped: %s", current.name, target, exc)
        except Exception:
            log.exception("%s: move to %s failed; its copy is discarded", current.name, target)
            self._logs.discard_future(topic, number)
        finally:
            with contextlib.suppress(ValueError):
                current.truncation_listeners.remove(listener)
            # A move redirected to another dir already runs in a new task: still moving.
            if self._tasks.get(partition.key) in (None, asyncio.current_task()):
                current.moving = False

    def _swap(self, partition: Partition, current: PartitionLog, future: PartitionLog) -> None:
        """Make the caught-up future the partition's log; runs without yielding the loop."""
        renamed = self._logs.replace_current_with_future(current.topic, current.partition)
        partition.replace_log(future)
        log.info("%s: moved to %s at offset %d", future.name, future.directory.parent,
                 future.log_end_offset)
        if renamed is not None:
            task = asyncio.get_running_loop().create_task(_remove(renamed))
            self._removals.add(task)
            task.add_done_callback(self._removals.discard)


async def _remove(path: Path) -> None:
    await asyncio.to_thread(shutil.rmtree, path, True)


def _follow_truncation(future: PartitionLog, end: int) -> None:
    """The current log was truncated to ``end``: so is its copy."""
    if end < future.log_end_offset:
        future.truncate_to(end)


def _follow_log_start(current: PartitionLog, future: PartitionLog) -> None:
    """Retention or DeleteRecords moved the current log's start: the copy follows, and starts
    over at the new start when that is past what it copied."""
    start = current.log_start_offset
    if start > future.log_end_offset:
        future.truncate_fully_and_start_at(start)
    elif start > future.log_start_offset:
        future.advance_log_start(start)
    future.high_watermark = min(current.high_watermark, future.log_end_offset)


def _copy_chunk(current: PartitionLog, future: PartitionLog, max_bytes: int) -> int:
    """Append the current log's next batches (at most ``max_bytes``, but at least one batch)
    to the copy; the bytes copied."""
    offset = future.log_end_offset
    chunk = current.read(offset, max_bytes, min_one_batch=True)
    if chunk is None:
        return 0
    data = chunk.read()
    headers = parse_batches(data)
    # The batch holding ``offset`` starts there unless the current log changed below it
    # since (then the copy restarts at that batch).
    first = next((h for h in headers if h.base_offset + h.last_offset_delta >= offset), None)
    if first is None:
        return 0
    if first.base_offset < offset:
        future.truncate_to(first.base_offset)
    future.append_replicated(memoryview(data)[first.position:], _now_ms())
    return len(data) - first.position
