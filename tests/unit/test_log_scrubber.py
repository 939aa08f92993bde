"""LogScrubber on real segments written through a LogManager: finds, reports once, paces."""

from __future__ import annotations

import dataclasses
import logging
import time
from pathlib import Path

import pytest

from moldau.log import LogConfig
from moldau.log.manager import LogManager
from moldau.log.scrubber import LogScrubber, ScrubberConfig
from tests.helpers.logs import lines_of

from .batchgen import simple_batch

NOW = 1_700_000_000_000
BATCH = len(simple_batch(3))


def manager_with_log(tmp_path: Path, batches: int = 30, *, per_segment: int = 10,
                     value_size: int = 10) -> LogManager:
    """One partition ``t-0`` of ``batches`` 3-record batches, ``per_segment`` per segment."""
    size = len(simple_batch(3, value_size=value_size))
    config = dataclasses.replace(LogConfig(), segment_bytes=per_segment * size + 5)
    manager = LogManager([tmp_path / "data"], node_id=0, default_config=config, now_ms=NOW)
    plog = manager.create("t", 0, config, now_ms=NOW)
    for i in range(batches):
        plog.append(simple_batch(3, timestamp=NOW + i, value_size=value_size), leader_epoch=0,
                    now_ms=NOW)
    return manager


def flip(path: Path, position: int) -> None:
    with open(path, "r+b") as file:
        file.seek(position)
        byte = file.read(1)[0]
        file.seek(position)
        file.write(bytes([byte ^ 0x01]))


def fast() -> ScrubberConfig:
    return ScrubberConfig(bytes_per_second=1 << 30, backoff_ms=0)


def test_reports_a_flipped_byte_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    manager = manager_with_log(tmp_path)
    plog = manager.get("t", 0)
    assert plog is not None and len(plog.segments) == 3
    flip(plog.segments[1].log_path, 3 * BATCH + 80)  # batch 4 of segment 30: offsets 39-41
    scrubber = LogScrubber(manager, fast())
    with caplog.at_level(logging.ERROR, logger="moldau.log.scrubber"):
        [found] = scrubber.scrub_once()
        assert (found.topic, found.partition, found.segment_base_offset, found.offset,
                found.position) == ("t", 0, 30, 39, 3 * BATCH)
        assert "CRC mismatch" in found.what
        assert scrubber.scrub_once() == []  # remembered: not reported on every pass
    errors = lines_of(caplog, "moldau.log.scrubber", logging.ERROR)
    assert len(errors) == 1
    assert errors[0].startswith(
        f"Corrupt batch in t-0, segment 30, offset 39, position {3 * BATCH}: CRC mismatch")
    manager.close()


def test_active_segment_is_not_read(tmp_path: Path) -> None:
    manager = manager_with_log(tmp_path, batches=25)
    plog = manager.get("t", 0)
    assert plog is not None
    flip(plog.segments[-1].log_path, 80)  # still being written: not the scrubber's business
    scrubber = LogScrubber(manager, fast())
    assert scrubber.scrub_once() == []
    assert scrubber.bytes_read == 20 * BATCH
    manager.close()


def test_deleted_segments_are_skipped_and_forgotten(tmp_path: Path) -> None:
    manager = manager_with_log(tmp_path)
    plog = manager.get("t", 0)
    assert plog is not None
    flip(plog.segments[0].log_path, 80)
    scrubber = LogScrubber(manager, fast())
    assert len(scrubber.scrub_once()) == 1
    manager.delete("t", 0)
    assert scrubber.scrub_once() == []
    assert scrubber._reported == {}
    manager.close()


def test_reads_at_the_configured_rate(tmp_path: Path) -> None:
    # Two closed segments of 10 batches of ~10 KB: about 200 KB at 100 KB/s takes >= ~2 s
    # (a loaded machine can only make it slower, so the bound is one-sided).
    manager = manager_with_log(tmp_path, batches=21, value_size=3300)
    plog = manager.get("t", 0)
    assert plog is not None
    closed = sum(s.size for s in plog.segments[:-1])
    rate = 100_000
    scrubber = LogScrubber(manager, ScrubberConfig(bytes_per_second=rate, backoff_ms=0))
    started = time.monotonic()
    assert scrubber.scrub_once() == []
    elapsed = time.monotonic() - started
    assert closed <= scrubber.bytes_read < 1.2 * closed  # a batch across two reads is re-read
    assert elapsed >= 0.8 * closed / rate, (elapsed, closed)
    manager.close()


def test_stop_interrupts_a_slow_pass(tmp_path: Path) -> None:
    manager = manager_with_log(tmp_path, batches=21, value_size=3300)
    scrubber = LogScrubber(manager, ScrubberConfig(bytes_per_second=1000, backoff_ms=0))
    scrubber.start()
    time.sleep(0.3)
    started = time.monotonic()
    scrubber.stop(timeout=10)
    assert time.monotonic() - started < 5
    manager.close()
