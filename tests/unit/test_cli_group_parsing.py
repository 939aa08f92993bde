"""``moldau group``'s parsing and offset planning, without a broker."""

from __future__ import annotations

from datetime import datetime

import pytest

from moldau.cli.errors import CliError
from moldau.cli.group import (
    Strategy,
    clamp,
    lag,
    parse_datetime_ms,
    parse_topic_partitions,
    plan_offsets,
)


def test_topic_partitions() -> None:
    assert parse_topic_partitions("orders") == ("orders", None)
    assert parse_topic_partitions("orders:2") == ("orders", [2])
    assert parse_topic_partitions("orders:0, 2,0") == ("orders", [0, 2])


@pytest.mark.parametrize("text", [":1", "t:", "t:a", "t:1,,2", "t:-1"])
def test_bad_topic_partitions(text: str) -> None:
    with pytest.raises(CliError, match="invalid --topic"):
        parse_topic_partitions(text)


def test_datetime_with_zone_and_without() -> None:
    assert parse_datetime_ms("1970-01-01T00:00:01.500Z") == 1500
    assert parse_datetime_ms("1970-01-01T01:00:00+01:00") == 0
    # 1.001 * 1000 is 1000.999... in floating point: the parse must not lose the millisecond.
    assert parse_datetime_ms("1970-01-01T00:00:01.001Z") == 1001
    assert parse_datetime_ms("2024-05-01T12:00:05.123+00:00") == 1714564805123
    # Without a zone Kafka's tool takes local time.
    local = datetime(2024, 5, 1, 12, 0, 0).astimezone()
    assert parse_datetime_ms("2024-05-01T12:00:00") == int(local.timestamp() * 1000)


def test_bad_datetime() -> None:
    with pytest.raises(CliError, match="invalid --to-datetime"):
        parse_datetime_ms("last tuesday")


def test_clamp_and_lag() -> None:
    assert [clamp(o, 3, 10) for o in (-5, 3, 7, 10, 99)] == [3, 3, 7, 10, 10]
    assert lag(4, 10) == 6
    assert lag(None, 10) is None
    assert lag(4, None) is None


def test_strategy_needs_exactly_one() -> None:
    with pytest.raises(CliError, match="give one of"):
        Strategy.from_options(False, False, None, None, None)
    with pytest.raises(CliError, match="--to-earliest and --shift-by exclude each other"):
        Strategy.from_options(True, False, None, None, -1)
    assert Strategy.from_options(False, False, 0, None, None).offset == 0


BOUNDS = {("t", 0): (2, 10), ("t", 1): (0, 5)}
KEYS = sorted(BOUNDS)


def test_plan_ends_and_offsets() -> None:
    committed = {("t", 0): 4}
    assert plan_offsets(Strategy(earliest=True), KEYS, committed, BOUNDS) == {
        ("t", 0): 2, ("t", 1): 0}
    assert plan_offsets(Strategy(latest=True), KEYS, committed, BOUNDS) == {
        ("t", 0): 10, ("t", 1): 5}
    assert plan_offsets(Strategy(offset=7), KEYS, committed, BOUNDS) == {
        ("t", 0): 7, ("t", 1): 5}
    assert plan_offsets(Strategy(offset=0), KEYS, committed, BOUNDS) == {
        ("t", 0): 2, ("t", 1): 0}


def test_plan_shift_by() -> None:
    committed = {("t", 0): 4, ("t", 1): 1}
    assert plan_offsets(Strategy(shift_by=-3), KEYS, committed, BOUNDS) == {
        ("t", 0): 2, ("t", 1): 0}
    assert plan_offsets(Strategy(shift_by=3), KEYS, committed, BOUNDS) == {
        ("t", 0): 7, ("t", 1): 4}
    with pytest.raises(CliError, match="t:1: the group has no committed offset"):
        plan_offsets(Strategy(shift_by=1), KEYS, {("t", 0): 4}, BOUNDS)


def test_plan_by_time_falls_back_to_the_end() -> None:
    by_time = {("t", 0): 6, ("t", 1): -1}
    assert plan_offsets(Strategy(timestamp_ms=123), KEYS, {}, BOUNDS, by_time) == {
        ("t", 0): 6, ("t", 1): 5}
