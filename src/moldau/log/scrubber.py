"""The log scrubber: re-checks the CRCs of closed segments in the background, at a bounded rate.

A batch's CRC is checked once, when it is produced. Bits that rot on disk afterwards would be
served silently (Kafka does the same); the scrubber finds them first. One thread walks every
inactive segment of every partition, reads it with ``pread`` at no more than
``log.scrubber.bytes.per.second`` (a token bucket: it sleeps after each read as long as the
read is ahead of the rate), checks each batch's framing and CRC (:class:`inspect.BatchScan`),
and logs one ERROR line per damaged batch: topic, partition, segment, offset, position. It
remembers what it reported, so a damaged batch is reported once per broker run, not on every
pass; a segment that disappears (retention, compaction, topic deletion) is forgotten. After
a whole pass it rests ``log.scrubber.backoff.ms``.

Threads, as for the cleaner (see :mod:`cleaner`): partition logs belong to the event loop.
The scrubber touches them only through owner calls: one to list the inactive segments, and
one per segment to take its read handle (a :class:`FileSlice`, opening the file if segment
files are opened lazily). The handle keeps the data readable if the segment is deleted while
it is being read; it is dropped as soon as the segment is done, so the scrubber holds one
descriptor at a time. It never writes: repairing from a replica is for when replicas exist.

Off by default (``log.scrubber.enable=false``): it reads every closed byte again, which costs
disk bandwidth and page cache that an operator should choose to spend.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from .background import BackgroundWorker, OwnerCall, StopRequested, run_inline
from .errors import LogError
from .file_slice import FileSlice
from .inspect import BatchScan

if TYPE_CHECKING:
    from .manager import LogManager
    from .partition_log import PartitionLog

log = logging.getLogger(__name__)



@dataclass(frozen=True, slots=True)
class ScrubberConfig:
    """``log.scrubber.*``: how fast to read, and how long to rest between passes."""

    bytes_per_second: int = 1 << 20
    backoff_ms: int = 60_000


@dataclass(frozen=True, slots=True)
class Corruption:
    """A damaged batch found by the scrubber."""

    topic: str
    partition: int
    segment_base_offset: int
    #: The batch's base offset as stored (the header may itself be what is damaged).
    offset: int
    position: int
    what: str


@dataclass(frozen=True, slots=True)
class _Target:
    log: PartitionLog
    topic: str
    partition: int
    base_offset: int


class LogScrubber(BackgroundWorker):
    """Re-reads the closed segments of a :class:`LogManager`; see the module docstring."""

    thread_name = "log-scrubber"
    description = "log scrubber"

    def __init__(
        self,
        manager: LogManager,
        config: ScrubberConfig | None = None,
        *,
        owner: OwnerCall = run_inline,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config or ScrubberConfig()
        super().__init__(owner, self.config.backoff_ms)
        self.manager = manager
        self._clock = clock
        #: (topic, partition, segment base) -> {(position, stored crc)} already reported.
        self._reported: dict[tuple[str, int, int], set[tuple[int, int]]] = {}
        self._bucket_start = clock()
        self._bucket_bytes = 0
        rate = max(self.config.bytes_per_second, 1)
        #: Reads of about a tenth of a second's budget keep the rate smooth.
        self._chunk = min(4 << 20, max(64 << 10, rate // 10))
        #: Bytes read so far (all passes), for tests and a future metric.
        self.bytes_read = 0

    # -- thread ---------------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is None:
            log.info("log scrubber started: closed segments re-checked at %d bytes/s, %d ms "
                     "between passes", self.config.bytes_per_second, self.config.backoff_ms)
        super().start()

    def run_pass(self) -> bool:
        """One pass of the thread; the scrubber always rests after a whole pass."""
        self.scrub_once()
        return False

    # -- passes ---------------------------------------------------------------------------

    def scrub_once(self) -> list[Corruption]:
        """One pass over every closed segment; return the corruption newly found."""
        targets = self._on_owner(self._closed_segments)
        found: list[Corruption] = []
        for target in targets:
            if self._stop.is_set():
                raise StopRequested
            handle = self._on_owner(partial(self._handle, target))
            if handle is not None:
                found.extend(self._scrub(target, handle))
            del handle  # one descriptor at a time
        live = {(t.topic, t.partition, t.base_offset) for t in targets}
        for key in set(self._reported) - live:
            del self._reported[key]
        return found

    def _closed_segments(self) -> list[_Target]:
        """On the owner thread: every inactive segment, as (log, topic, partition, base)."""
        return [
            _Target(plog, plog.topic, plog.partition, segment.base_offset)
            for plog in self.manager.all_logs()
            for segment in plog.segments[:-1]
        ]

    def _handle(self, target: _Target) -> FileSlice | None:
        """On the owner thread: the segment's whole file, if it is still a closed segment of a
        live log (retention, compaction or deletion may have changed that since the listing)."""
        plog = target.log
        if self.manager.get(target.topic, target.partition) is not plog or plog.offline:
            return None
        for segment in plog.segments[:-1]:
            if segment.base_offset == target.base_offset:
                try:
                    return segment.file_slice()
                except (LogError, OSError):
                    return None
        return None

    def _scrub(self, target: _Target, handle: FileSlice) -> list[Corruption]:
        key = (target.topic, target.partition, target.base_offset)
        reported = self._reported.setdefault(key, set())
        scan = BatchScan(handle.fd, handle.size, chunk_size=self._chunk, throttle=self._throttle)
        found: list[Corruption] = []
        try:
            for batch in scan:
                if batch.crc_ok:
                    continue
                header = batch.header
                what = (f"CRC mismatch (stored {header.crc:#010x}, computed "
                        f"{batch.computed_crc:#010x})")
                found.extend(self._report(target, reported, header.position, header.crc,
                                          header.base_offset, what))
        except OSError as exc:
            if (-1, -1) not in reported:  # once, like corruption
                reported.add((-1, -1))
                log.warning("log scrubber could not read segment %d of %s-%d: %s",
                            target.base_offset, target.topic, target.partition, exc)
            return found
        if scan.problem is not None:
            found.extend(self._report(target, reported, scan.end, -1, -1, scan.problem))
        return found

    def _report(self, target: _Target, reported: set[tuple[int, int]], position: int,
                crc: int, offset: int, what: str) -> list[Corruption]:
        if (position, crc) in reported:
            return []
        reported.add((position, crc))
        log.error(
            "Corrupt batch in %s-%d, segment %d, offset %d, position %d: %s "
            "(found by the log scrubber; consumers reading it will fail)",
            target.topic, target.partition, target.base_offset, offset, position, what,
        )
        return [Corruption(target.topic, target.partition, target.base_offset, offset,
                           position, what)]

    def _throttle(self, size: int) -> None:
        """Token bucket: sleep while the bytes read are ahead of ``bytes_per_second``."""
        if self._stop.is_set():
            raise StopRequested
        self.bytes_read += size
        self._bucket_bytes += size
        now = self._clock()
        rate = max(self.config.bytes_per_second, 1)
        ahead = self._bucket_bytes / rate - (now - self._bucket_start)
        if ahead < -1.0:
            # Idle for a while (between passes): do not bank the unused budget as a burst.
            self._bucket_start, self._bucket_bytes = now, size
            ahead = size / rate
        if ahead > 0 and self._stop.wait(ahead):
            raise StopRequested
