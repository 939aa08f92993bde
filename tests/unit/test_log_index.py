"""Offset and time index: append, binary search, truncation, reload."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from moldau.log.index import OffsetIndex, TimeIndex


def test_offset_index_lookup_and_file_format(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000100.index"
    index = OffsetIndex(path, 100, max_entries=1000)
    index.create()
    assert index.lookup(150) == (100, 0)
    for i in range(1, 50):
        index.append(100 + i * 10, i * 1000)
    assert len(index) == 49
    assert path.read_bytes()[:8] == struct.pack(">ii", 10, 1000)
    assert path.stat().st_size == 49 * 8
    assert index.lookup(105) == (100, 0)
    assert index.lookup(110) == (110, 1000)
    assert index.lookup(119) == (110, 1000)
    assert index.lookup(10_000) == (590, 49_000)
    assert index.position_floor(2_500) == 2_000
    assert index.position_floor(10) == 0
    assert index.last_entry() == (590, 49_000)


def test_offset_index_rejects_non_increasing(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "0.index", 0, 10)
    index.append(5, 100)
    with pytest.raises(ValueError):
        index.append(5, 200)
    with pytest.raises(ValueError):
        index.append(6, 100)


def test_offset_index_truncate_and_reload(tmp_path: Path) -> None:
    path = tmp_path / "0.index"
    index = OffsetIndex(path, 0, 3)
    for i in range(1, 6):
        index.append(i * 10, i * 100)
    assert index.is_full
    index.truncate(30, 10_000)
    assert index.last_entry() == (20, 200) and path.stat().st_size == 16
    index.truncate(1_000, 150)
    assert index.last_entry() == (10, 100)
    index.append(15, 160)
    index.close_file()

    again = OffsetIndex(path, 0, 3)
    assert again.load()
    assert again.lookup(100) == (15, 160) and len(again) == 2
    assert again.sanity_problem(log_size=1_000) is None
    assert again.sanity_problem(log_size=100) is not None

    with path.open("ab") as f:
        f.write(b"\x00\x01\x02")  # a torn entry
    assert not OffsetIndex(path, 0, 3).load()
    assert not OffsetIndex(tmp_path / "missing.index", 0, 3).load()


def test_offset_index_rebuild(tmp_path: Path) -> None:
    path = tmp_path / "7.index"
    index = OffsetIndex(path, 7, 100)
    index.append(8, 10)
    index.rebuild([(20, 100), (30, 200)])
    assert path.read_bytes() == struct.pack(">iiii", 13, 100, 23, 200)
    assert index.lookup(25) == (20, 100)


def test_time_index_monotonic_and_lookup(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.timeindex"
    index = TimeIndex(path, 0, max_entries=100)
    index.create()
    assert index.lookup(5) == (-1, 0)
    assert index.maybe_append(1_000, 9)
    assert not index.maybe_append(1_000, 19)  # not newer: skipped
    assert not index.maybe_append(900, 29)
    assert index.maybe_append(2_000, 39)
    assert index.maybe_append(3_000, 49)
    assert path.read_bytes()[:12] == struct.pack(">qi", 1_000, 9)
    assert index.lookup(999) == (-1, 0)
    assert index.lookup(1_000) == (1_000, 9)
    assert index.lookup(2_500) == (2_000, 39)
    assert index.lookup(2_000, strict=True) == (1_000, 9)
    assert index.lookup(10**12) == (3_000, 49)
    index.truncate(40)
    assert index.last_entry() == (2_000, 39) and path.stat().st_size == 24
    index.close_file()
    again = TimeIndex(path, 0, 100)
    assert again.load() and len(again) == 2
    assert again.sanity_problem(next_offset=40) is None
    assert again.sanity_problem(next_offset=39) is not None


def test_time_index_full(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / "0.timeindex", 0, max_entries=2)
    index.maybe_append(1, 1)
    assert not index.is_full
    index.maybe_append(2, 2)
    assert index.is_full
