"""Names of partition directories, as Kafka spells them.

A partition lives in ``<topic>-<partition>``. Topic names may themselves contain ``-`` and
``.``, so the partition number is whatever follows the *last* ``-``. A partition being deleted
is first renamed to ``<topic>-<partition>.<32 hex>-delete`` (also ``-future`` and ``-stray``
exist in Kafka for moves between dirs), and such names must never load as live partitions.
"""

from __future__ import annotations

import re
import uuid

MAX_TOPIC_LENGTH = 249
#: Longest file name most file systems accept (ext4, xfs: NAME_MAX); topic names are ASCII.
MAX_FILE_NAME_BYTES = 255
#: The KRaft metadata log's directory name pattern; not a data partition.
CLUSTER_METADATA_TOPIC = "__cluster_metadata"

_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")
_PARTITION_DIR = re.compile(r"(?P<topic>.+)-(?P<partition>[0-9]+)")
_RENAMED_DIR = re.compile(r".+-[0-9]+\.[0-9a-f]{32}-(?P<kind>delete|future|stray)")


def is_legal_topic_name(topic: str) -> bool:
    """Kafka's rule: 1..249 chars of ``[a-zA-Z0-9._-]``, and not ``.`` or ``..``."""
    return (
        0 < len(topic) <= MAX_TOPIC_LENGTH
        and topic not in (".", "..")
        and _LEGAL_TOPIC.fullmatch(topic) is not None
    )


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """(topic, partition) for a live partition directory name, None for anything else."""
    if _RENAMED_DIR.fullmatch(name):
        return None
    match = _PARTITION_DIR.fullmatch(name)
    if match is None:
        return None
    topic = match["topic"]
    if not is_legal_topic_name(topic) or topic == CLUSTER_METADATA_TOPIC:
        return None
    return topic, int(match["partition"])


def future_dir_name(topic: str, partition: int) -> str:
    """Kafka's name of a future replica's directory (a move between log dirs under way):
    ``<topic>-<partition>.<32 hex>-future``. Never shortened: a topic whose future name would
    exceed :data:`MAX_FILE_NAME_BYTES` cannot be moved (Kafka refuses it the same way)."""
    return f"{topic}-{partition}.{uuid.uuid4().hex}-future"


def parse_future_dir(name: str) -> tuple[str, int] | None:
    """(topic, partition) of a future replica's directory name, None for anything else."""
    if renamed_dir_kind(name) != "future":
        return None
    return parse_partition_dir(name[: name.rindex(".")])


def renamed_dir_kind(name: str) -> str | None:
    """'delete', 'future' or 'stray' for a renamed partition directory, else None."""
    match = _RENAMED_DIR.fullmatch(name)
    return match["kind"] if match else None


def delete_dir_name(topic: str, partition: int) -> str:
    """The name a partition directory gets just before it is removed.

    As Kafka's ``logDeleteDirName``, the topic part is cut so that the whole name fits in
    :data:`MAX_FILE_NAME_BYTES`: a legal 249-character topic plus ``-<partition>.<32 hex>-delete``
    would otherwise exceed what the file system accepts (ENAMETOOLONG). Nothing reads the
    topic back from such a name; it only has to be unique and recognisable.
    """
    suffix = f"-{partition}.{uuid.uuid4().hex}-delete"
    return topic[: max(0, MAX_FILE_NAME_BYTES - len(suffix))] + suffix
