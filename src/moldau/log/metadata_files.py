"""Identity files: ``partition.metadata`` (topic id) and ``meta.properties`` (log dir identity).

Both use Kafka's text forms so that Kafka tooling and operators' habits apply. Ids are UUIDs
printed the Kafka way: URL-safe base64 of the 16 bytes without padding (22 characters).
"""

from __future__ import annotations

import base64
import os
import time
import uuid
from pathlib import Path

from .checkpoint import write_atomically
from .errors import LogError
from .fileio import write_all

PARTITION_METADATA = "partition.metadata"
META_PROPERTIES = "meta.properties"


def uuid_to_text(value: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString``: base64url without padding."""
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


def uuid_from_text(text: str) -> uuid.UUID:
    """Inverse of :func:`uuid_to_text`; raises ValueError on anything else."""
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if len(raw) != 16:
        raise ValueError(f"not a Kafka uuid: {text!r}")
    return uuid.UUID(bytes=raw)


def random_id() -> str:
    """A fresh id in Kafka's text form (cluster ids, directory ids)."""
    return uuid_to_text(uuid.uuid4())


def write_partition_metadata(directory: Path, topic_id: uuid.UUID, *, sync: bool = True) -> None:
    """Write ``partition.metadata`` atomically and durably, or (``sync=False``, for a new
    partition) with one plain write: a torn file is reported and rewritten at the next start
    (:func:`read_partition_metadata` raises, the log rewrites it)."""
    data = f"version: 0\ntopic_id: {uuid_to_text(topic_id)}\n".encode()
    if sync:
        write_atomically(directory / PARTITION_METADATA, data)
        return
    fd = os.open(directory / PARTITION_METADATA, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        write_all(fd, (data,))
    finally:
        os.close(fd)


def read_partition_metadata(directory: Path) -> uuid.UUID | None:
    """The topic id recorded for a partition, None if the file is absent."""
    try:
        text = (directory / PARTITION_METADATA).read_text()
    except FileNotFoundError:
        return None
    fields = dict(
        (key.strip(), value.strip())
        for key, sep, value in (line.partition(":") for line in text.splitlines())
        if sep
    )
    if fields.get("version") != "0" or "topic_id" not in fields:
        raise LogError(f"{directory / PARTITION_METADATA}: malformed")
    try:
        return uuid_from_text(fields["topic_id"])
    except ValueError as exc:
        raise LogError(f"{directory / PARTITION_METADATA}: {exc}") from None


def read_properties(path: Path) -> dict[str, str] | None:
    """A Java-properties-style file (``key=value`` lines, ``#`` comments); None if absent."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    props: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "!")):
            continue
        key, _, value = line.partition("=")
        props[key.strip()] = value.strip()
    return props


def write_properties(path: Path, props: dict[str, str]) -> None:
    """Write ``props`` as Kafka does: a comment header, then sorted ``key=value`` lines."""
    stamp = time.strftime("%a %b %d %H:%M:%S %Z %Y")
    body = "".join(f"{key}={props[key]}\n" for key in sorted(props))
    write_atomically(path, f"#\n#{stamp}\n{body}".encode())


def ensure_meta_properties(log_dir: Path, cluster_id: str | None, node_id: int) -> dict[str, str]:
    """Read or create a log dir's ``meta.properties`` and check it belongs to this node.

    A log dir that was formatted for another cluster or node must not be used: its data would
    silently mix with ours (Kafka refuses to start in that case too).
    """
    path = log_dir / META_PROPERTIES
    props = read_properties(path)
    if props is None:
        props = {
            "version": "1",
            "cluster.id": cluster_id or random_id(),
            "node.id": str(node_id),
            "directory.id": random_id(),
        }
        write_properties(path, props)
        return props
    stored_cluster = props.get("cluster.id")
    if cluster_id is not None and stored_cluster not in (None, cluster_id):
        raise LogError(
            f"{path}: log dir belongs to cluster {stored_cluster}, not {cluster_id}"
        )
    stored_node = props.get("node.id", props.get("broker.id"))
    if stored_node is not None and stored_node != str(node_id):
        raise LogError(f"{path}: log dir belongs to node {stored_node}, not {node_id}")
    changed = False
    for key, value in (
        ("version", "1"),
        ("cluster.id", cluster_id or random_id()),
        ("node.id", str(node_id)),
        ("directory.id", random_id()),
    ):
        if key not in props:
            props[key] = value
            changed = True
    if changed:
        write_properties(path, props)
    return props
