"""Storage faults in the log layer: classification of I/O errors, and all-or-nothing appends.

A real write error without root: ``RLIMIT_FSIZE`` makes the kernel refuse (EFBIG) any write
past a file size, so an append can be made to fail half-way through, exactly where a full
disk would stop it. The broker-level behaviour (ENOSPC on a tmpfs, a read-only remount) is
tested in tests/faults.
"""

from __future__ import annotations

import errno
import logging
import resource
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from moldau.log.config import LogConfig
from moldau.log.dir_failures import LogDirFailures
from moldau.log.errors import DiskFullError, LogDirOfflineError
from moldau.log.partition_log import PartitionLog
from tests.helpers.logs import lines_of

from .batchgen import decode_batches, simple_batch
from .test_log_segment import append, fill, new_segment, reopen


@contextmanager
def max_file_size(limit: int) -> Iterator[None]:
    """Writes past ``limit`` bytes fail with EFBIG while inside the block."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)


def test_disk_full_is_logged_once_per_event_and_ends(caplog: pytest.LogCaptureFixture) -> None:
    failures = LogDirFailures()
    offline: list[Path] = []
    failures.add_listener(offline.append)
    full = OSError(errno.ENOSPC, "No space left on device")
    with caplog.at_level(logging.INFO, logger="moldau.log.dir_failures"):
        for _ in range(3):
            assert isinstance(failures.io_failed(Path("/d"), "t-0", full), DiskFullError)
        failures.io_succeeded("t-0")
        failures.io_succeeded("t-0")
        assert isinstance(failures.io_failed(Path("/d"), "t-0", full), DiskFullError)
    messages = lines_of(caplog, "moldau.log.dir_failures")
    assert len(messages) == 3, messages
    assert messages[0].startswith("t-0: no space left in log dir /d")
    assert messages[1] == "t-0: writing again, space was freed"
    assert messages[2] == messages[0]
    assert not offline and not failures.offline  # a full disk never takes a dir offline


def test_other_errors_take_the_dir_offline_once(caplog: pytest.LogCaptureFixture) -> None:
    failures = LogDirFailures()
    offline: list[Path] = []
    failures.add_listener(offline.append)
    with caplog.at_level(logging.INFO, logger="moldau.log.dir_failures"):
        for subject in ("t-0", "t-1", "checkpoints"):
            err = failures.io_failed(Path("/d"), subject, OSError(errno.EIO, "I/O error"))
            assert isinstance(err, LogDirOfflineError)
    assert offline == [Path("/d")] and failures.is_offline(Path("/d"))
    assert not failures.is_offline(Path("/other"))
    lines = lines_of(caplog, "moldau.log.dir_failures")
    assert len(lines) == 1 and "log dir /d is offline" in lines[0], lines


def test_failed_segment_append_leaves_nothing_behind(tmp_path: Path) -> None:
    seg = new_segment(tmp_path, interval=50)
    fill(seg, 10)
    state = (seg.size, seg.next_offset, seg.max_timestamp, len(seg.offset_index),
             len(seg.time_index))
    files = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    big = simple_batch(50, timestamp=9_000, value_size=200)
    with max_file_size(seg.size + 100), pytest.raises(OSError) as failed:
        append(seg, big)
    assert failed.value.errno == errno.EFBIG
    assert (seg.size, seg.next_offset, seg.max_timestamp, len(seg.offset_index),
            len(seg.time_index)) == state
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == files

    # Once the limit is gone the same append goes through, and a reload agrees.
    (h,) = append(seg, big)
    assert h.base_offset == state[1]
    seg.close()
    again = reopen(tmp_path, interval=50)
    assert again.needs_recovery is None
    assert again.next_offset == h.next_offset and again.size == seg.size


def test_partition_log_append_raises_storage_error_and_keeps_its_state(tmp_path: Path) -> None:
    plog = PartitionLog.open(tmp_path / "t-0", LogConfig(), now_ms=0)
    plog.append(simple_batch(5), leader_epoch=0, now_ms=0)
    end, size = plog.log_end_offset, plog.size_bytes
    with max_file_size(size + 10), pytest.raises(LogDirOfflineError):
        plog.append(simple_batch(20, value_size=100), leader_epoch=0, now_ms=0)
    assert (plog.log_end_offset, plog.size_bytes) == (end, size)
    plog.append(simple_batch(2, tag=7), leader_epoch=0, now_ms=0)
    data = plog.read(0, 1 << 20)
    assert data is not None
    batches = decode_batches(data.read())
    assert [b.base_offset for b in batches] == [0, 5]
