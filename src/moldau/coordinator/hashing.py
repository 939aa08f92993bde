"""Which ``__consumer_offsets`` partition holds a group: Java's ``String.hashCode``, as Kafka.

Kafka places group ``g`` in partition ``Utils.abs(g.hashCode()) % partitions``. Clients never
compute this (they ask FindCoordinator), but tools that read ``__consumer_offsets`` directly
and data directories moved between moldau and Kafka do, so the arithmetic must be Java's
exactly: 32-bit wrap-around over UTF-16 code units (a character outside the BMP counts as its
two surrogates), and Kafka's own ``abs`` that maps ``Integer.MIN_VALUE`` to 0 instead of
leaving it negative as ``Math.abs`` would.
"""

from __future__ import annotations

import functools
import struct

INT_MIN = -(2**31)
_MASK32 = 0xFFFFFFFF


def _to_int32(value: int) -> int:
    value &= _MASK32
    return value - (1 << 32) if value & 0x80000000 else value


@functools.lru_cache(maxsize=4096)
def java_string_hash(text: str) -> int:
    """``text.hashCode()`` in Java: ``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 code units.

    Cached: coordinators hash the same group and transactional ids on every request (a
    transactional producer's id several times per transaction), and the loop over UTF-16
    units costs microseconds in Python."""
    data = text.encode("utf-16-be", "surrogatepass")
    h = 0
    for (unit,) in struct.iter_unpack(">H", data):
        h = (31 * h + unit) & _MASK32
    return _to_int32(h)


def kafka_abs(value: int) -> int:
    """Kafka's ``Utils.abs``: the absolute value, except that ``Integer.MIN_VALUE`` gives 0."""
    return 0 if value == INT_MIN else abs(value)


def to_positive(value: int) -> int:
    """Kafka's ``Utils.toPositive`` (clear the sign bit), used by the producer's partitioner.

    Not what the coordinator uses: kept next to :func:`kafka_abs` because the two are easily
    confused, and they differ for every negative input.
    """
    return value & 0x7FFFFFFF


def partition_for(group_id: str, partitions: int) -> int:
    """The ``__consumer_offsets`` partition of ``group_id`` among ``partitions``."""
    return kafka_abs(java_string_hash(group_id)) % partitions
