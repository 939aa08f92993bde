"""Batch and streaming readers: the driver plans offset ranges, executors read them.

Planning (partition listing, offset look-ups, rate limiting) runs on the driver through
:class:`~moldau.spark.metadata.OffsetLister`; ``read`` runs in Python workers on the
executors and calls :func:`~moldau.spark.fetch.read_range`. Readers are pickled to the
executors, which is why the lister drops its consumer when pickled.

Streaming offsets are ``{"topic": {"partition": offset}}``; Spark stores them in the
checkpoint, so a restarted query resumes where the last committed batch ended. The stream
reader keeps no state that needs ``stop()`` or ``commit()`` (Spark may skip the first and
repeat the second); its only state is the Trigger.AvailableNow target, which Spark sets
on this same reader object before the first ``latestOffset``, and the time of the last
micro-batch for ``minOffsetsPerTrigger``/``maxTriggerDelay`` (PySpark has no composite read
limit, so the reader applies those two from its options; Trigger.AvailableNow ignores them,
as Spark's source does, since waiting for more data would never end).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from .fetch import read_range
from .metadata import OffsetLister, report_data_loss
from .options import SourceOptions, TopicPartition
from .planning import (
    OffsetRange,
    Offsets,
    RangePartition,
    TriggerDelay,
    backlog_size,
    from_json_offsets,
    rate_limit,
    split_ranges,
    to_json_offsets,
)


def plan(start: Offsets, end: Offsets, options: SourceOptions) -> list[InputPartition]:
    """Input partitions for the ranges start → end, split as ``minPartitions`` asks."""
    ranges = [OffsetRange(t, p, start[(t, p)], until) for (t, p), until in sorted(end.items())
              if (t, p) in start]
    ranges = split_ranges(ranges, options.min_partitions, options.max_records_per_partition)
    return [RangePartition(i, r) for i, r in enumerate(ranges)]


def _read(partition: InputPartition, options: SourceOptions,
          schema: StructType) -> Iterator[pa.RecordBatch]:
    if not isinstance(partition, RangePartition):
        raise TypeError(f"unexpected input partition {partition!r}")
    return read_range(partition.range, options, schema)


class MoldauBatchReader(DataSourceReader):
    """``spark.read.format("moldau")``: a fixed range from startingOffsets to endingOffsets."""

    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema

    def partitions(self) -> Sequence[InputPartition]:
        lister = OffsetLister.for_source(self.options)
        try:
            tps = lister.partitions(self.options.subscription)
            start = lister.resolve(self.options.starting, tps, self.options, "starting")
            end = lister.resolve(self.options.ending, tps, self.options, "ending")
        finally:
            lister.close()
        for tp, until in end.items():
            if until < start[tp]:
                raise ValueError(
                    f"ending offset {until} of {tp[0]}-{tp[1]} is before its starting "
                    f"offset {start[tp]}"
                )
        return plan(start, end, self.options)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(partition, self.options, self.schema)


class MoldauStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("moldau")``: micro-batches between checkpointed offsets."""

    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema
        self.lister = OffsetLister.for_source(options)
        self.available_now_target: Offsets | None = None
        self.trigger_delay = (TriggerDelay(options.min_offsets_per_trigger,
                                           options.max_trigger_delay_ms)
                              if options.min_offsets_per_trigger else None)

    # -- driver ---------------------------------------------------------------------------
    def initialOffset(self) -> dict:
        tps = self.lister.partitions(self.options.subscription)
        start = self.lister.resolve(self.options.starting, tps, self.options, "starting")
        return to_json_offsets(start)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self.available_now_target = self._latest()

    def reportLatestOffset(self) -> dict | None:
        return to_json_offsets(self._latest())

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = from_json_offsets(start)
        if self.available_now_target is not None:
            # Only data present when the query started; new partitions since then wait.
            latest = dict(self.available_now_target)
        else:
            latest = self._latest()
        self._check_vanished(begin, latest)
        begin = self._with_new_partitions(begin, latest)
        if (self.trigger_delay is not None and self.available_now_target is None
                and self.trigger_delay.should_wait(backlog_size(begin, latest),
                                                   int(time.time() * 1000))):
            return start  # too few records yet: no micro-batch this trigger
        if isinstance(limit, ReadMaxRows):
            latest = rate_limit(begin, latest, limit.max_rows)
        # Never move a partition backwards here: a shrunken log is reported in partitions().
        for tp, offset in begin.items():
            latest.setdefault(tp, offset)
        return to_json_offsets(latest)

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        begin = from_json_offsets(start)
        until = from_json_offsets(end)
        begin = self._with_new_partitions(begin, until)
        for tp, offset in until.items():
            if offset < begin[tp]:
                report_data_loss(
                    f"partition {tp[0]}-{tp[1]}'s offset went back from {begin[tp]} to "
                    f"{offset} (was the topic deleted and created again?)",
                    self.options.fail_on_data_loss)
                until[tp] = begin[tp]
        return plan(begin, until, self.options)

    def commit(self, end: dict) -> None:
        """Nothing to do: Spark's checkpoint holds the offsets; we never commit to a group."""

    def stop(self) -> None:
        self.lister.close()

    def _latest(self) -> Offsets:
        tps = self.lister.partitions(self.options.subscription)
        return self.lister.latest(tps)

    def _with_new_partitions(self, begin: Offsets, latest: Offsets) -> Offsets:
        """Partitions unknown to ``begin`` (created since) start at their earliest offset."""
        new = [tp for tp in latest if tp not in begin]
        if not new:
            return begin
        return {**begin, **self.lister.earliest(new)}

    def _check_vanished(self, begin: Offsets, latest: Offsets) -> None:
        # A pattern subscription may legitimately lose a topic; a named one may not.
        gone: list[TopicPartition] = [tp for tp in begin if tp not in latest]
        named = self.options.subscription.kind != "subscribePattern"
        if gone and named and self.available_now_target is None:
            report_data_loss(
                "partitions " + ", ".join(f"{t}-{p}" for t, p in gone) + " disappeared",
                self.options.fail_on_data_loss)

    # -- executors ------------------------------------------------------------------------
    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(partition, self.options, self.schema)
