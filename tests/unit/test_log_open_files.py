"""Bounded descriptors (lazy segment files) and deletion names that fit any legal topic."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from moldau.log import LogConfig, LogManager
from moldau.log.names import MAX_FILE_NAME_BYTES, delete_dir_name, renamed_dir_kind
from moldau.log.open_files import SEGMENT_FILES

from .batchgen import Record, build_batch

NOW = 1_700_000_000_000
CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def batch(i: int) -> bytes:
    return build_batch([Record(b"k%d" % i, b"v" * 40, NOW + i)])


def manager(path: Path, cap: int) -> LogManager:
    return LogManager([path], node_id=1, cluster_id=CLUSTER, now_ms=NOW, max_open_segments=cap)


def test_idle_partitions_hold_no_descriptors(tmp_path: Path) -> None:
    """300 partitions written and read through a cache of 16 open segments: descriptors stay
    bounded (the old code held 4 per partition), and every read still finds its data."""
    before = open_fds()
    m = manager(tmp_path, 16)
    try:
        for p in range(300):
            m.create("many", p, LogConfig(), uuid.uuid4())
        assert open_fds() - before <= 4  # creating opens nothing that stays open
        for p in range(300):
            plog = m.get("many", p)
            assert plog is not None
            plog.append(batch(p), leader_epoch=0, now_ms=NOW)
        assert len(SEGMENT_FILES) <= 16
        assert open_fds() - before <= 16 * 4 + 4
        for p in range(300):
            plog = m.get("many", p)
            assert plog is not None
            data = plog.read(0, 1 << 20)
            assert data is not None and b"k%d" % p in data.read()
        assert open_fds() - before <= 16 * 4 + 4
    finally:
        m.close()
    again = manager(tmp_path, 16)
    try:
        assert open_fds() - before <= 16 * 4 + 4
        plog = again.get("many", 299)
        assert plog is not None and plog.log_end_offset == 1
    finally:
        again.close()


def test_eviction_never_cuts_a_slice_being_sent(tmp_path: Path) -> None:
    """A slice handed out for sendfile keeps its file readable after its segment is evicted
    (and even after the partition is deleted), as a fetch response still queued needs."""
    m = manager(tmp_path, 16)
    try:
        first = m.create("t", 0, LogConfig())
        first.append(batch(7), leader_epoch=0, now_ms=NOW)
        piece = first.read(0, 1 << 20)
        assert piece is not None
        expected = piece.read()
        for p in range(1, 60):  # push "t-0" out of the cache
            other = m.create("t", p, LogConfig())
            other.append(batch(p), leader_epoch=0, now_ms=NOW)
            other.read(0, 100)
        assert first.active_segment not in SEGMENT_FILES
        assert os.pread(piece.fd, piece.size, piece.position) == expected
        m.delete("t", 0)
        assert piece.read() == expected
    finally:
        m.close()


@pytest.mark.parametrize("topic", ["a" * 249, "x." * 124 + "y", "_" * 249, "t"])
@pytest.mark.parametrize("partition", [0, 7, 2**31 - 1])
def test_delete_dir_name_fits(topic: str, partition: int) -> None:
    name = delete_dir_name(topic, partition)
    assert len(name.encode()) <= MAX_FILE_NAME_BYTES
    assert renamed_dir_kind(name) == "delete"
    assert name.endswith(f"-{partition}.{name.split('.')[-1]}")
    assert topic.startswith(name[: name.rindex(f"-{partition}.")])


def test_longest_topic_name_deletes_and_reloads(tmp_path: Path) -> None:
    """A 249-character topic: the -delete rename used to fail with ENAMETOOLONG."""
    topic = "z" * 249
    m = manager(tmp_path, 16)
    plog = m.create(topic, 3, LogConfig(), uuid.uuid4())
    plog.append(batch(1), leader_epoch=0, now_ms=NOW)
    m.close()
    m = manager(tmp_path, 16)
    assert m.get(topic, 3) is not None
    assert m.delete(topic, 3)
    assert [p.name for p in tmp_path.iterdir() if p.is_dir()] == []
    m.close()
    manager(tmp_path, 16).close()


def test_new_partition_has_only_its_log_file_and_verifies_clean(tmp_path: Path) -> None:
    """Index files come with the first data; `moldau log verify` accepts an empty segment
    without them, and a written one has both."""
    from moldau.log.inspect import check_segment

    m = manager(tmp_path, 16)
    try:
        plog = m.create("fresh", 0, LogConfig(), uuid.uuid4())
        log_file = plog.directory / "00000000000000000000.log"
        assert sorted(p.name for p in plog.directory.iterdir()) == [
            log_file.name, "partition.metadata"]
        report = check_segment(log_file)
        assert report is not None and report.problems == []
        plog.append(batch(1), leader_epoch=0, now_ms=NOW)
        plog.flush()
        assert (plog.directory / "00000000000000000000.index").exists()
        report = check_segment(log_file)
        assert report is not None and report.problems == []
    finally:
        m.close()
