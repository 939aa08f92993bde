"""Turning offsets into Spark tasks: ranges, ``minPartitions`` and ``maxRecordsPerPartition``
splits, ``maxOffsetsPerTrigger``, and ``minOffsetsPerTrigger`` with ``maxTriggerDelay``.

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


def _cut(r: OffsetRange, parts: int) -> list[OffsetRange]:
    """``r`` in ``parts`` near-equal consecutive pieces."""
    return [OffsetRange(r.topic, r.partition, r.from_offset + r.size * i // parts,
                        r.from_offset + r.size * (i + 1) // parts) for i in range(parts)]


def split_ranges(ranges: Iterable[OffsetRange], min_partitions: int | None,
                 max_records: int | None = None) -> list[OffsetRange]:
    """Drop empty ranges and cut big ones: none longer than ``maxRecordsPerPartition``, and
    at least ``minPartitions`` tasks when there are enough records.

    As Spark's KafkaOffsetRangeCalculator: ranges are first cut to at most ``max_records``
    records each; if that gives fewer than ``minPartitions`` tasks, each range gets a share
    of ``minPartitions`` proportional to its size (at least one), then is cut into that many
    near-equal parts.
    """
    nonempty = [r for r in ranges if r.size > 0]
    if max_records:
        nonempty = [piece for r in nonempty for piece in _cut(r, -(-r.size // max_records))]
    if not min_partitions or len(nonempty) >= min_partitions:
        return nonempty
    total = sum(r.size for r in nonempty)
    result = []
    for r in nonempty:
        parts = min(r.size, max(1, round(r.size / total * min_partitions)))
        result.extend(_cut(r, parts))
    return result


def backlog_size(start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int]
                 ) -> int:
    """Records between ``start`` and ``latest`` (a partition new to ``start`` counts whole)."""
    return sum(max(0, end - start.get(tp, 0)) for tp, end in latest.items())


class TriggerDelay:
    """``minOffsetsPerTrigger`` with ``maxTriggerDelay``: a micro-batch waits until enough
    records are there, or until the delay since the last batch that ran has passed.

    As Spark's Kafka source: the first batch never waits, and the clock restarts whenever a
    batch is let through. ``now_ms`` is passed in so the rule is testable without a clock.
    """

    def __init__(self, min_records: int, max_delay_ms: int) -> None:
        self.min_records = min_records
        self.max_delay_ms = max_delay_ms
        self.last_trigger_ms: int | None = None

    def should_wait(self, available: int, now_ms: int) -> bool:
        overdue = (self.last_trigger_ms is None
                   or now_ms - self.last_trigger_ms >= self.max_delay_ms)
        if not overdue and available < self.min_records:
            return True
        self.last_trigger_ms = now_ms
        return False


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
