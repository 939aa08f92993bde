"""``moldau cluster reassign``'s input checks: each bad input is one clear line, found before
any broker is contacted (the command against a real cluster: tests/cluster/test_reassignment.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from moldau.cli.connection import Connection
from moldau.cli.errors import CliError
from moldau.cli.reassign import Move, parse_replicas, read_plan, run

UNREACHABLE = Connection("127.0.0.1:1", 0.5)


def fails(*args: object, **kwargs: object) -> str:
    options = {"topic": None, "partition": None, "replicas": None, "plan": None,
               "listing": False, "cancel": False, "verify": False, "throttle": None}
    options.update(kwargs)
    with pytest.raises(CliError) as caught:
        run(UNREACHABLE, **options)  # type: ignore[arg-type]
    return caught.value.message


def test_replicas_parse() -> None:
    assert parse_replicas("1, 2,3") == (1, 2, 3)
    for bad in ("", "a,b", "1,,2", "1;2"):
        with pytest.raises(CliError, match="expected broker ids like 1,2,3"):
            parse_replicas(bad)


def test_command_line_mistakes() -> None:
    assert "--replicas is missing" in fails(topic="t", partition=0)
    assert "name the partition to move" in fails()
    assert "name the partition to move" in fails(topic="t")
    assert "only one of --list, --cancel, --verify" in fails(listing=True, cancel=True)
    assert "--cancel takes no --replicas" in fails(topic="t", partition=0, replicas="1",
                                                   cancel=True)
    assert "--throttle goes with a reassignment" in fails(listing=True, throttle=10)
    assert "--list takes at most --topic" in fails(listing=True, partition=0)
    assert "either --file or --topic" in fails(topic="t", plan=Path("p.json"))
    assert "cannot reach a broker" in fails(listing=True)


def test_plans(tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"

    def with_plan(doc: object) -> str:
        plan.write_text(doc if isinstance(doc, str) else json.dumps(doc))
        with pytest.raises(CliError) as caught:
            read_plan(plan)
        return caught.value.message

    assert "cannot read" in fails(plan=tmp_path / "missing.json")
    assert "is not JSON" in with_plan("{nope")
    assert "expected {\"version\":1" in with_plan([1])
    assert "unsupported version 2" in with_plan({"version": 2, "partitions": []})
    assert "names no partition" in with_plan({"version": 1, "partitions": []})
    assert "entry 1 has no topic" in with_plan({"partitions": [{"partition": 0}]})
    assert "has no valid partition" in with_plan({"partitions": [{"topic": "t"}]})
    assert "replicas must be a list" in with_plan(
        {"partitions": [{"topic": "t", "partition": 0, "replicas": "1,2"}]})
    assert "t-0 appears twice" in with_plan({"partitions": [
        {"topic": "t", "partition": 0, "replicas": [1]},
        {"topic": "t", "partition": 0, "replicas": [2]}]})
    assert "2 replicas but 1 log_dirs" in with_plan({"partitions": [
        {"topic": "t", "partition": 0, "replicas": [1, 2], "log_dirs": ["any"]}]})
    assert "log_dirs must be a list" in with_plan({"partitions": [
        {"topic": "t", "partition": 0, "replicas": [1], "log_dirs": "/d"}]})
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "t", "partition": 1, "replicas": [3, 1], "log_dirs": ["any", "/d2"]},
        {"topic": "t", "partition": 2, "replicas": [2]}]}))
    assert read_plan(plan) == [Move("t", 1, (3, 1), ("any", "/d2")), Move("t", 2, (2,))]
