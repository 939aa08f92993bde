"""Earliest and latest offsets of a topic's partitions, through the ListOffsets API.

One admin request per end of the log (a request cannot ask for both ends of the same
partition), instead of one watermark query per partition from a throwaway consumer.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Sequence

from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from .connection import Connection
from .errors import CliError, kafka_error_of

#: The offset shown for a partition whose leader could not answer.
UNKNOWN = -1


def _list(
    conn: Connection, admin: AdminClient, topic: str, partitions: Sequence[int], spec: OffsetSpec
) -> dict[int, int]:
    request = {TopicPartition(topic, p): spec for p in partitions}
    futures = admin.list_offsets(request, request_timeout=conn.timeout)
    result = {}
    for tp, future in futures.items():
        try:
            failure = future.exception(timeout=conn.timeout + 5)
        except concurrent.futures.TimeoutError:
            raise CliError(f"cannot list offsets of {topic!r}: no answer within "
                           f"{conn.timeout:g} s") from None
        error = kafka_error_of(failure) if failure is not None else None
        if error is not None and error.code() >= 0:
            # The broker's answer for this partition (no leader, an offline log dir): the
            # rest of the topic is still worth showing. librdkafka's own errors (< 0, no
            # answer at all) still end the command below.
            result[tp.partition] = UNKNOWN
            continue
        result[tp.partition] = conn.result(future, f"cannot list offsets of {topic!r}").offset
    return result


def partition_offsets(
    conn: Connection, admin: AdminClient, topic: str, partitions: Sequence[int]
) -> dict[int, tuple[int, int]]:
    """``{partition: (earliest, latest)}``; latest is the high watermark (next offset).

    A partition the cluster answers for with an error (no leader, an offline log dir) gets
    :data:`UNKNOWN` rather than failing the whole topic.
    """
    if not partitions:
        return {}
    earliest = _list(conn, admin, topic, partitions, OffsetSpec.earliest())
    latest = _list(conn, admin, topic, partitions, OffsetSpec.latest())
    return {p: (earliest[p], latest[p]) for p in partitions}
