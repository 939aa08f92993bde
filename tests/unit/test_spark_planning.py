"""Option parsing and offset-range arithmetic of the Spark source, without Spark or a broker."""

from __future__ import annotations

from itertools import pairwise

import pytest

pytest.importorskip("pyspark", reason="the Spark source needs pyspark: pip install -e '.[spark]'")

from hypothesis import example, given
from hypothesis import strategies as st

from moldau.spark.options import (
    EARLIEST,
    LATEST,
    OptionError,
    parse_sink_options,
    parse_source_options,
)
from moldau.spark.planning import (
    OffsetRange,
    from_json_offsets,
    rate_limit,
    split_ranges,
    to_json_offsets,
)

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def test_defaults_follow_spark() -> None:
    batch = parse_source_options({**BASE, "subscribe": "a,b"}, streaming=False)
    assert batch.subscription.topics == ("a", "b")
    assert (batch.starting.kind, batch.ending.kind) == ("earliest", "latest")
    assert batch.fail_on_data_loss and not batch.include_headers
    stream = parse_source_options({**BASE, "subscribePattern": "page-.*"}, streaming=True)
    assert stream.starting.kind == "latest"
    config = dict(stream.client_config)
    assert config.pop("group.id").startswith("spark-kafka-source-")  # Spark's group prefix
    assert config == {"bootstrap.servers": "127.0.0.1:9092"}


def test_per_partition_offsets_and_assign() -> None:
    options = parse_source_options({
        **BASE, "assign": '{"t": [1, 0]}', "startingOffsets": '{"t": {"0": 5, "1": -2}}',
        "endingOffsets": '{"t": {"0": -1, "1": 9}}', "minPartitions": "4",
        "failOnDataLoss": "false", "includeHeaders": "TRUE", "kafka.client.id": "x",
    }, streaming=False)
    assert options.subscription.partitions == (("t", 0), ("t", 1))
    assert dict(options.starting.offsets) == {("t", 0): 5, ("t", 1): EARLIEST}
    assert dict(options.ending.offsets) == {("t", 0): LATEST, ("t", 1): 9}
    assert options.min_partitions == 4
    assert not options.fail_on_data_loss and options.include_headers
    assert options.client_config["client.id"] == "x"


@pytest.mark.parametrize("options, streaming, message", [
    ({}, False, "exactly one"),
    ({"subscribe": "a", "assign": '{"a": [0]}'}, False, "exactly one"),
    ({"subscribe": "a", "startingOffsets": "latest"}, False, "cannot be latest"),
    ({"subscribe": "a", "endingOffsets": '{"a": {"0": -2}}'}, False, "cannot be earliest"),
    ({"subscribe": "a", "endingOffsets": "latest"}, False, None),
    ({"subscribe": "a", "endingOffsets": "earliest"}, True, "not valid in a streaming"),
    ({"subscribe": "a", "maxOffsetsPerTrigger": "10"}, False, "only applies to streaming"),
    ({"subscribe": "a", "maxOffsetsPerTrigger": "0"}, True, "positive integer"),
    ({"subscribe": "a", "startingOffsets": "{oops"}, True, "not valid JSON"),
    ({"subscribe": "a", "startingTimestamp": "noon"}, True, "milliseconds"),
    ({"subscribe": "a", "failOnDataLoss": "maybe"}, True, "true or false"),
    ({"subscribe": "a", "kafka.auto.offset.reset": "earliest"}, True, "startingOffsets"),
    ({"assign": "[0, 1]"}, True, "must be JSON like"),
])
def test_mistakes_name_the_option(options: dict[str, str], streaming: bool,
                                  message: str | None) -> None:
    if message is None:
        parse_source_options({**BASE, **options}, streaming=streaming)
        return
    with pytest.raises(OptionError, match=message):
        parse_source_options({**BASE, **options}, streaming=streaming)


def test_bootstrap_is_required_and_sink_topic_is_optional() -> None:
    with pytest.raises(OptionError, match="bootstrap"):
        parse_source_options({"subscribe": "a"}, streaming=True)
    assert parse_sink_options({**BASE}).topic is None
    assert parse_sink_options({**BASE, "topic": "out"}).topic == "out"


def test_checkpoint_offsets_round_trip() -> None:
    offsets = {("b", 1): 7, ("a", 0): 3, ("a", 10): 0}
    assert to_json_offsets(offsets) == {"a": {"0": 3, "10": 0}, "b": {"1": 7}}
    assert from_json_offsets(to_json_offsets(offsets)) == offsets


def test_min_partitions_splits_in_proportion() -> None:
    ranges = [OffsetRange("t", 0, 0, 300), OffsetRange("t", 1, 10, 110),
              OffsetRange("t", 2, 5, 5)]
    assert split_ranges(ranges, None) == ranges[:2]  # empty ranges make no task
    split = split_ranges(ranges, 4)
    assert [(r.partition, r.from_offset, r.until_offset) for r in split] == [
        (0, 0, 100), (0, 100, 200), (0, 200, 300), (1, 10, 110)]


@given(st.lists(st.integers(0, 10_000), min_size=1, max_size=6), st.integers(1, 20))
def test_splits_cover_each_range_exactly(sizes: list[int], min_partitions: int) -> None:
    ranges = [OffsetRange("t", p, 100, 100 + size) for p, size in enumerate(sizes)]
    split = split_ranges(ranges, min_partitions)
    for r in ranges:
        parts = [s for s in split if s.partition == r.partition]
        assert sum(s.size for s in parts) == r.size
        assert all(s.size > 0 for s in parts)
        if parts:
            assert parts[0].from_offset == r.from_offset
            assert parts[-1].until_offset == r.until_offset
            assert all(a.until_offset == b.from_offset for a, b in pairwise(parts))


@given(st.lists(st.integers(0, 1000), min_size=1, max_size=8), st.integers(1, 3000))
@example([1, 1, 1, 3], 4)  # found by hypothesis in CI: rounded-down shares starved one partition
def test_rate_limit_never_exceeds_the_budget(backlogs: list[int], limit: int) -> None:
    start = {("t", p): 50 for p in range(len(backlogs))}
    latest = {("t", p): 50 + b for p, b in enumerate(backlogs)}
    end = rate_limit(start, latest, limit)
    admitted = [end[tp] - start[tp] for tp in start]
    assert sum(admitted) == min(limit, sum(backlogs))
    assert all(0 <= a <= b for a, b in zip(admitted, backlogs, strict=True))
    if limit >= len(backlogs):  # enough budget: no partition with a backlog starves
        assert all(a > 0 for a, b in zip(admitted, backlogs, strict=True) if b)
