"""Turning offsets into Spark tasks: ranges, ``minPartitions`` splits, ``maxOffsetsPerTrigger``.

Pure functions over plain dicts, so the arithmetic Spark users rely on (how a range is cut,
how a trigger's budget is shared between partitions) is tested without Spark or a broker.
Streaming offsets travel through Spark's checkpoint as ``{"topic": {"partition": offset}}``
JSON, the same shape Spark's Kafka source writes, so a checkpoint is readable by a person.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from pyspark.sql.datasource import InputPartition

from .options import TopicPartition

Offsets = dict[TopicPartition, int]


@dataclass(frozen=True)
class OffsetRange:
    """Records ``[from_offset, until_offset)`` of one topic-partition."""

    topic: str
    partition: int
    from_offset: int
    until_offset: int

    @property
    def size(self) -> int:
        return max(0, self.until_offset - self.from_offset)


class RangePartition(InputPartition):
    """One Spark task: an offset range, pickled to the executor that reads it."""

    def __init__(self, index: int, offset_range: OffsetRange) -> None:
        super().__init__(index)
        self.range = offset_range

    def __repr__(self) -> str:
        r = self.range
        return f"RangePartition({r.topic}-{r.partition} [{r.from_offset}, {r.until_offset}))"


def to_json_offsets(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """The checkpoint form: topics, then partitions as strings, both sorted."""
    result: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        result.setdefault(topic, {})[str(partition)] = int(offset)
    return result


def from_json_offsets(data: Mapping[str, Mapping[str, int]]) -> Offsets:
    """Inverse of :func:`to_json_offsets`."""
    return {(topic, int(p)): int(o) for topic, parts in data.items() for p, o in parts.items()}


def split_ranges(ranges: Iterable[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """Drop empty ranges and, when ``minPartitions`` asks for more tasks, cut big ranges.

    As Spark's KafkaOffsetRangeCalculator: each range gets a share of ``minPartitions``
    proportional to its size (at least one), then is cut into that many near-equal parts.
    """
    nonempty = [r for r in ranges if r.size > 0]
    if not min_partitions or len(nonempty) >= min_partitions:
        return nonempty
    total = sum(r.size for r in nonempty)
    result = []
    for r in nonempty:
        parts = min(r.size, max(1, round(r.size / total * min_partitions)))
        for i in range(parts):
            start = r.from_offset + r.size * i // parts
            end = r.from_offset + r.size * (i + 1) // parts
            result.append(OffsetRange(r.topic, r.partition, start, end))
    return result


def rate_limit(start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int],
               limit: int) -> Offsets:
    """End offsets that admit at most ``limit`` records in total, shared by backlog size.

    Spark shares the budget in proportion to each partition's backlog, rounding small shares
    up so no partition starves; that can exceed the limit by a few records. Here, when the
    budget covers one record per partition with a backlog, each such partition gets that one
    record first and the rest of the budget is shared in proportion to what is left; shares are
    rounded down and the remainder goes to the largest fractions. The total is exactly
    ``min(limit, backlog)``, and no partition starves unless the budget is smaller than the
    number of partitions with a backlog.
    """
    backlog = {tp: end - start.get(tp, end) for tp, end in latest.items()}
    backlog = {tp: size for tp, size in backlog.items() if size > 0}
    total = sum(backlog.values())
    if total <= limit:
        return dict(latest)
    floor = 1 if limit >= len(backlog) else 0
    rest = {tp: size - floor for tp, size in backlog.items()}
    budget = limit - floor * len(backlog)
    rest_total = sum(rest.values())  # > budget, since total > limit
    # Integer shares: granted = floor(budget * size / rest_total), the fraction as a remainder.
    split = {tp: divmod(budget * size, rest_total) for tp, size in rest.items()}
    granted = {tp: whole for tp, (whole, _) in split.items()}
    remainder = budget - sum(granted.values())
    # Fewer than ``remainder`` shares have no fraction, so only real fractions get the extra one.
    order = sorted(backlog, key=lambda tp: (-split[tp][1], tp))
    for tp in order[:remainder]:
        granted[tp] += 1
    result = dict(latest)
    for tp, amount in granted.items():
        result[tp] = start[tp] + floor + amount
    return result
