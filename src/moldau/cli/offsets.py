"""Earliest and latest offsets of a topic's partitions, through the ListOffsets API.

One admin request per end of the log (a request cannot ask for both ends of the same
partition), instead of one watermark query per partition from a throwaway consumer.
"""

from __future__ import annotations

from collections.abc import Sequence

from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from .connection import Connection


def _list(
    conn: Connection, admin: AdminClient, topic: str, partitions: Sequence[int], spec: OffsetSpec
) -> dict[int, int]:
    request = {TopicPartition(topic, p): spec for p in partitions}
    futures = admin.list_offsets(request, request_timeout=conn.timeout)
    return {
        tp.partition: conn.result(future, f"cannot list offsets of {topic!r}").offset
        for tp, future in futures.items()
    }


def partition_offsets(
    conn: Connection, admin: AdminClient, topic: str, partitions: Sequence[int]
) -> dict[int, tuple[int, int]]:
    """``{partition: (earliest, latest)}``; latest is the high watermark (next offset)."""
    if not partitions:
        return {}
    earliest = _list(conn, admin, topic, partitions, OffsetSpec.earliest())
    latest = _list(conn, admin, topic, partitions, OffsetSpec.latest())
    return {p: (earliest[p], latest[p]) for p in partitions}
