"""Kafka's small checkpoint files, written atomically.

Format (all of them): a version line, a count line, then one entry per line with fields
separated by single spaces. The offset checkpoints of a log dir
(``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
``replication-offset-checkpoint``) hold ``<topic> <partition> <offset>``;
``leader-epoch-checkpoint`` holds ``<epoch> <start offset>``.

Writes go to a temporary file that is fsynced and renamed over the old one, then the directory
is fsynced, so a crash leaves either the old or the new checkpoint, never a mix.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from .errors import LogError
from .fileio import write_all

log = logging.getLogger(__name__)

CHECKPOINT_VERSION = 0
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"


def fsync_dir(path: Path) -> None:
    """Make renames and new files in ``path`` durable (directory entries need their own fsync)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so that readers see the old or the new content only."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        write_all(fd, (data,))
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)


def write_checkpoint(path: Path, entries: Iterable[Iterable[object]]) -> None:
    """Write a version-0 checkpoint with one space-separated line per entry."""
    lines = [" ".join(str(field) for field in entry) for entry in entries]
    text = f"{CHECKPOINT_VERSION}\n{len(lines)}\n" + "".join(line + "\n" for line in lines)
    write_atomically(path, text.encode())


def read_checkpoint(path: Path, fields: int) -> list[list[str]] | None:
    """The entries of a checkpoint (each split into ``fields`` strings); None if it is absent.

    Raises LogError when the file is malformed: a wrong checkpoint is worse than none, and the
    caller decides how to degrade.
    """
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return None
    if len(lines) < 2 or lines[0].strip() != str(CHECKPOINT_VERSION):
        raise LogError(f"{path}: unsupported or missing checkpoint version")
    try:
        count = int(lines[1])
    except ValueError:
        raise LogError(f"{path}: bad entry count {lines[1]!r}") from None
    entries = [line.split() for line in lines[2:] if line.strip()]
    if len(entries) != count or any(len(entry) != fields for entry in entries):
        raise LogError(f"{path}: expected {count} entries of {fields} fields")
    return entries


def read_offsets(path: Path) -> dict[tuple[str, int], int]:
    """A log dir's per-partition offsets; empty (with a warning) if missing or malformed.

    Degrading to "no checkpoint" is safe for every offset checkpoint: recovery then scans more
    segments, and log start offsets fall back to the first segment's base offset.
    """
    try:
        entries = read_checkpoint(path, 3)
        if entries is None:
            return {}
        return {(topic, int(partition)): int(offset) for topic, partition, offset in entries}
    except (LogError, ValueError) as exc:
        log.warning("ignoring unreadable checkpoint %s: %s", path, exc)
        return {}


def write_offsets(path: Path, offsets: Mapping[tuple[str, int], int]) -> None:
    write_checkpoint(path, ((t, p, o) for (t, p), o in sorted(offsets.items())))
