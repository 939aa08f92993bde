"""Spark's Kafka options that need no broker: refusals, group ids, tuning options, the
``maxRecordsPerPartition`` split, the ``minOffsetsPerTrigger`` rule, and the docs' table."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("pyspark", reason="the Spark source needs pyspark: pip install -e '.[spark]'")

from moldau.spark.option_catalog import CATALOG, PARSED_NAMES
from moldau.spark.options import (
    SINK_FORBIDDEN_KEYS,
    SOURCE_FORBIDDEN_KEYS,
    OptionError,
    parse_sink_options,
    parse_source_options,
)
from moldau.spark.planning import OffsetRange, TriggerDelay, split_ranges

ROOT = Path(__file__).resolve().parents[2]
BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092"}
SOURCE = {**BASE, "subscribe": "t"}


@pytest.mark.parametrize("option", [o for o in CATALOG if o.status == "refused"],
                         ids=lambda o: o.name)
def test_refused_kafka_options_name_themselves(option: object) -> None:
    name = option.name  # type: ignore[attr-defined]
    with pytest.raises(OptionError, match=re.escape(f"'{name}' is not supported")):
        if option.side == "sink":  # type: ignore[attr-defined]
            parse_sink_options({**BASE, "topic": "t", name: "x"})
        else:
            parse_source_options({**SOURCE, name: "x"}, streaming=True)


def test_refusals_are_exactly_the_catalogs() -> None:
    refused = {o.name for o in CATALOG if o.status == "refused"}
    assert refused == ({f"kafka.{k}" for k in SOURCE_FORBIDDEN_KEYS}
                       | {f"kafka.{k}" for k in SINK_FORBIDDEN_KEYS})


def test_group_id_prefix_and_group_id() -> None:
    def group(options: dict[str, str], streaming: bool = True) -> str:
        return parse_source_options({**SOURCE, **options}, streaming).client_config["group.id"]

    assert group({}).startswith("spark-kafka-source-")
    assert group({}, streaming=False).startswith("spark-kafka-relation-")
    assert group({}) != group({})  # one group per query
    assert group({"groupIdPrefix": "jobA"}).startswith("jobA-")
    # As in Spark, kafka.group.id wins and groupIdPrefix is then ignored.
    assert group({"kafka.group.id": "mine", "groupIdPrefix": "jobA"}) == "mine"
    with pytest.raises(OptionError, match="'groupIdPrefix' is empty"):
        group({"groupIdPrefix": " "})


def test_source_tuning_options_are_parsed() -> None:
    options = parse_source_options({
        **SOURCE, "kafkaConsumer.pollTimeoutMs": "5000", "fetchOffset.numRetries": "0",
        "fetchOffset.retryIntervalMs": "250", "minOffsetsPerTrigger": "100",
        "maxTriggerDelay": "30s", "maxRecordsPerPartition": "1000",
        "kafka.isolation.level": "read_committed"}, streaming=True)
    assert options.poll_timeout_ms == 5000
    assert (options.fetch_offset_retries, options.fetch_offset_retry_interval_ms) == (0, 250)
    assert (options.min_offsets_per_trigger, options.max_trigger_delay_ms) == (100, 30_000)
    assert options.max_records_per_partition == 1000
    assert options.client_config["isolation.level"] == "read_committed"
    defaults = parse_source_options(SOURCE, streaming=True)
    assert (defaults.fetch_offset_retries, defaults.fetch_offset_retry_interval_ms) == (3, 10)
    assert defaults.max_trigger_delay_ms == 15 * 60_000 and defaults.min_offsets_per_trigger is None
    for raw, ms in (("250", 250), ("250ms", 250), ("2m", 120_000), ("1h", 3_600_000)):
        assert parse_source_options({**SOURCE, "maxTriggerDelay": raw},
                                    streaming=True).max_trigger_delay_ms == ms


@pytest.mark.parametrize(("options", "streaming", "message"), [
    ({"maxTriggerDelay": "soon"}, True, "'maxTriggerDelay' must be a duration"),
    ({"maxTriggerDelay": "5 parsecs"}, True, "'maxTriggerDelay' must be a duration"),
    ({"minOffsetsPerTrigger": "0"}, True, "'minOffsetsPerTrigger' must be a positive"),
    ({"minOffsetsPerTrigger": "10"}, False, "'minOffsetsPerTrigger' only applies to stream"),
    ({"maxTriggerDelay": "1m"}, False, "'maxTriggerDelay' only applies to streaming"),
    ({"maxRecordsPerPartition": "-3"}, False, "'maxRecordsPerPartition' must be a positive"),
    ({"fetchOffset.numRetries": "many"}, True, "'fetchOffset.numRetries' must be 0 or"),
    ({"fetchOffset.retryIntervalMs": "-1"}, True, "'fetchOffset.retryIntervalMs' must be"),
    ({"kafka.isolation.level": "serializable"}, True, "'kafka.isolation.level' must be"),
    ({"kafkaConsumer.pollTimeoutMs": "x"}, True, "'kafkaConsumer.pollTimeoutMs' must be"),
])
def test_tuning_mistakes_name_the_option(options: dict[str, str], streaming: bool,
                                         message: str) -> None:
    with pytest.raises(OptionError, match=re.escape(message)):
        parse_source_options({**SOURCE, **options}, streaming=streaming)


def test_sink_include_headers_and_write_path() -> None:
    assert parse_sink_options({**BASE, "includeHeaders": "true"}).write_path == "batches"
    assert parse_sink_options({**BASE, "writePath": "Columnar"}).write_path == "columnar"
    assert parse_sink_options({**BASE, "writePath": "ROWS"}).write_path == "rows"
    with pytest.raises(OptionError, match="'includeHeaders' must be true or false"):
        parse_sink_options({**BASE, "includeHeaders": "yes"})
    with pytest.raises(OptionError, match="'writePath' must be 'batches', 'columnar' or 'rows'"):
        parse_sink_options({**BASE, "writePath": "fast"})


def test_max_records_per_partition_cuts_ranges() -> None:
    ranges = [OffsetRange("t", 0, 0, 10), OffsetRange("t", 1, 5, 8), OffsetRange("t", 2, 3, 3)]
    cut = split_ranges(ranges, None, 4)
    assert [(r.partition, r.from_offset, r.until_offset) for r in cut] == [
        (0, 0, 3), (0, 3, 6), (0, 6, 10), (1, 5, 8)]
    # minPartitions still applies on top when the cut gives fewer tasks.
    assert len(split_ranges(ranges, 8, 4)) >= 8
    assert sum(r.size for r in split_ranges(ranges, 8, 4)) == 13


def test_trigger_delay_waits_for_enough_records_or_the_delay() -> None:
    delay = TriggerDelay(min_records=10, max_delay_ms=1000)
    assert not delay.should_wait(available=1, now_ms=0)  # the first batch never waits
    assert delay.should_wait(available=9, now_ms=500)
    assert not delay.should_wait(available=10, now_ms=600)  # enough: runs, clock restarts
    assert delay.should_wait(available=3, now_ms=1599)
    assert not delay.should_wait(available=3, now_ms=1600)  # the delay has passed


def _docs_table() -> dict[str, tuple[str, str, str]]:
    """``docs/spark.md``'s option table: name → (applies to, status, test)."""
    rows = {}
    for line in (ROOT / "docs" / "spark.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = (cells[1], cells[2], cells[4].strip("`"))
    return rows


def test_docs_table_lists_every_option_and_a_real_test() -> None:
    table = _docs_table()
    assert {name: (side, status) for name, (side, status, _) in table.items()} == \
        {o.name: (o.side, o.status) for o in CATALOG}
    sources = "\n".join(p.read_text() for p in (ROOT / "tests").rglob("test_*.py"))
    for name, (_, _, test) in table.items():
        assert re.search(rf"^def {re.escape(test)}\(", sources, re.M), \
            f"docs/spark.md names test {test!r} for {name!r}, which does not exist"


def _names_the_parser_reads() -> set[str]:
    """Option names in options.py's look-ups: ``_get(options, "name")``, ``parse_bool(...)``
    and the other ``_parse_*`` helpers, and the names of ``for name in (...)`` loops around
    them; ``f"{which}Offsets"`` stands for starting and ending."""
    source = (ROOT / "src" / "moldau" / "spark" / "options.py").read_text()
    names = set()
    for literal in re.findall(r"\b(?:_get|parse_bool|_parse_\w+)\(\s*options,\s*f?\"([^\"]+)\"",
                              source):
        if "{which}" in literal:
            names |= {literal.replace("{which}", w) for w in ("starting", "ending")}
        elif "{" not in literal:
            names.add(literal)
    for group in re.findall(r"for name in \(([^)]*)\)", source):
        names |= set(re.findall(r"\"([^\"]+)\"", group))
    return names


def test_the_parser_reads_exactly_the_catalogs_options() -> None:
    read = {name.lower() for name in _names_the_parser_reads()}
    assert len(read) > 20  # the pattern still finds the look-ups
    assert read == PARSED_NAMES
