"""Putting a cleaned segment in place of the segments it replaces, crash-safely, as Kafka does.

The cleaner writes its output under temporary names, ``<base>.log.cleaned`` (and
``.index.cleaned``, ``.timeindex.cleaned`` and, when it keeps ABORT markers,
``.txnindex.cleaned``), fsyncs it, then commits in three steps:

1. rename the indexes, then the log, from ``.cleaned`` to ``.swap``, and fsync the directory;
2. delete the replaced segments' files (open descriptors keep them readable for fetches);
3. rename the indexes (the offset index first), then the log, from ``.swap`` to their final
   names.

The existence of ``<base>.log.swap`` is the commit point. :func:`finish_interrupted_swaps`,
run before a partition's segments are loaded, makes a crash at any moment end in a valid log:

- ``*.cleaned`` files are an unfinished clean: deleted (the old segments are all still there);
- an index ``.swap`` without its ``.log.swap`` is a crash inside step 1: deleted too;
- a ``<base>.log.swap`` is a committed clean: every segment whose base offset lies in
  ``[base, next offset of the swap segment)`` is one it replaces and is deleted, then the
  swap files take their final names. When ``<base>.index.swap`` is gone, step 3 had begun,
  so step 2 had deleted every replaced file: the files already named ``<base>.*`` are the
  cleaned segment's own and stay. This matters for the ``.txnindex``, which, unlike the
  offset and time indexes, cannot be rebuilt from the segment alone (an ABORT marker does
  not say where its transaction began). An offset or time index missing at that point is
  rebuilt by the ordinary index check of segment loading, so an old index is never paired
  with a new log.

The range rule needs the cleaned segment to end where the replaced group ended; the cleaner
guarantees it by never dropping the group's last batch (see :mod:`compactor`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path

from .batch import RecoveryScan
from .checkpoint import fsync_dir
from .segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, LogSegment
from .txn_index import TXN_INDEX_SUFFIX

log = logging.getLogger(__name__)

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
_SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
#: Every file of a segment; the log last, so that its rename is the commit of a rename step.
_RENAME_ORDER = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, LOG_SUFFIX)


def _base_of(name: str, suffix: str) -> int | None:
    """Base offset of ``<20 digits><suffix>``; None for any other name."""
    if not name.endswith(suffix):
        return None
    stem = name[: -len(suffix)]
    return int(stem) if len(stem) == 20 and stem.isdigit() else None


def commit_cleaned_segment(cleaned: LogSegment, replaced: Sequence[LogSegment]) -> None:
    """Steps 1-3 above: ``cleaned`` (written with the ``.cleaned`` suffix, fsynced, sealed)
    takes the place of ``replaced`` on disk. The caller swaps the in-memory objects."""
    directory = cleaned.directory
    cleaned.change_file_suffix(SWAP_SUFFIX)
    fsync_dir(directory)
    for segment in replaced:
        segment.delete()
    cleaned.change_file_suffix("")


def finish_interrupted_swaps(directory: Path) -> None:
    """Complete or roll back a clean that a crash interrupted (see the module docstring)."""
    names = [path.name for path in directory.iterdir()]
    changed = False
    for name in names:
        if name.endswith(CLEANED_SUFFIX):
            log.info("%s: removing %s, left by an interrupted clean", directory.name, name)
            (directory / name).unlink(missing_ok=True)
            changed = True
    swaps = sorted(
        base for name in names
        if (base := _base_of(name, LOG_SUFFIX + SWAP_SUFFIX)) is not None
    )
    for base in swaps:
        _finish_swap(directory, base)
        changed = True
    for name in os.listdir(directory):
        if name.endswith(SWAP_SUFFIX):  # an index renamed before the crash, its log was not
            log.info("%s: removing %s, left by an interrupted clean", directory.name, name)
            (directory / name).unlink(missing_ok=True)
            changed = True
    if changed:
        fsync_dir(directory)


def _finish_swap(directory: Path, base: int) -> None:
    swap_log = directory / f"{base:020d}{LOG_SUFFIX}{SWAP_SUFFIX}"
    with open(swap_log, "rb") as file:
        scan = RecoveryScan(file.fileno(), 0, os.fstat(file.fileno()).st_size, base)
        next_offset = base
        for header in scan:
            next_offset = header.next_offset
    if next_offset == base and (directory / f"{base:020d}{LOG_SUFFIX}").exists():
        # An empty swap covers no offsets, so it cannot tell what it replaced; the cleaner
        # never writes one for a non-empty group, so keep the old files and drop it.
        log.warning("%s: dropping empty swap segment %d", directory.name, base)
        for suffix in _SEGMENT_SUFFIXES:
            (directory / f"{base:020d}{suffix}{SWAP_SUFFIX}").unlink(missing_ok=True)
        return
    log.info("%s: completing the swap of cleaned segment %d (offsets %d..%d)",
             directory.name, base, base, next_offset - 1)
    renaming = not (directory / f"{base:020d}{INDEX_SUFFIX}{SWAP_SUFFIX}").exists()
    for name in os.listdir(directory):
        for suffix in _SEGMENT_SUFFIXES:
            other = _base_of(name, suffix)
            if other is None or not base <= other < next_offset:
                continue
            if renaming and other == base:
                continue  # renamed in step 3 already: the cleaned segment's own file
            (directory / name).unlink(missing_ok=True)
    for suffix in _RENAME_ORDER:
        source = directory / f"{base:020d}{suffix}{SWAP_SUFFIX}"
        if source.exists():
            os.rename(source, directory / f"{base:020d}{suffix}")
