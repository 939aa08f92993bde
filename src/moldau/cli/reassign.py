"""``moldau cluster reassign``: move partition replicas, list and cancel moves, throttle them.

What Kafka's ``kafka-reassign-partitions.sh`` does, through the Kafka protocol only (so it
works against Kafka too): AlterPartitionReassignments and ListPartitionReassignments go to the
controller (found with DescribeCluster), in a raw request encoded by kio, because
confluent-kafka has no call for them; configs go through confluent-kafka's
IncrementalAlterConfigs. A plan is Kafka's reassignment JSON,
``{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2]}]}``; an entry's
optional ``log_dirs`` (one per replica, ``"any"`` for no choice) is sent first, as Kafka's tool
does, as AlterReplicaLogDirs to each replica's broker: an existing replica moves to that dir,
a new one is created there (its broker answers REPLICA_NOT_AVAILABLE and remembers the dir).
Other keys are ignored.

``--throttle`` sets what Kafka's tool sets: ``leader.replication.throttled.rate`` and
``follower.replication.throttled.rate`` on every broker holding or receiving a moving replica,
``leader.replication.throttled.replicas`` (the current replicas) and
``follower.replication.throttled.replicas`` (the new ones) on each moving topic. ``--verify``
reports each partition and, once none is moving any more, removes those throttles; so does
``--cancel``.
"""

from __future__ import annotations

import datetime
import itertools
import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource
from kio.schema.alter_partition_reassignments.v0.request import (
    AlterPartitionReassignmentsRequest,
    ReassignablePartition,
    ReassignableTopic,
)
from kio.schema.errors import ErrorCode
from kio.schema.list_partition_reassignments.v0.request import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsTopics,
)

from ..protocol.codec import build
from . import log_dirs, raw_requests
from .connection import Connection
from .errors import CliError
from .output import print_line, print_table, stdout_console, table

LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"



@dataclass(frozen=True)
class Move:
    topic: str
    partition: int
    replicas: tuple[int, ...] | None  # None: cancel
    #: Per replica, the log dir it should be in ("any": no choice); None: not given.
    log_dirs: tuple[str, ...] | None = None


# -- input ------------------------------------------------------------------------------------


def parse_replicas(text: str) -> tuple[int, ...]:
    items = [item.strip() for item in text.split(",")]
    if not text.strip() or not all(item.lstrip("-").isdigit() for item in items):
        raise CliError(f"invalid --replicas {text!r}: expected broker ids like 1,2,3")
    return tuple(int(item) for item in items)


def read_plan(path: Path) -> list[Move]:
    """Kafka's reassignment JSON (version 1)."""
    try:
        doc = json.loads(path.read_text())
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror or exc}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CliError(f"{path} is not JSON: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("partitions"), list):
        raise CliError(f'{path}: expected {{"version":1,"partitions":[{{"topic":..,'
                       '"partition":..,"replicas":[..]}]}')
    if doc.get("version", 1) != 1:
        raise CliError(f"{path}: unsupported version {doc.get('version')!r} (Kafka's is 1)")
    moves = []
    for n, entry in enumerate(doc["partitions"], 1):
        if not isinstance(entry, dict):
            raise CliError(f"{path}: partition entry {n} is not an object")
        topic, partition, replicas = (entry.get("topic"), entry.get("partition"),
                                      entry.get("replicas"))
        if not isinstance(topic, str) or not topic:
            raise CliError(f"{path}: partition entry {n} has no topic")
        if not isinstance(partition, int) or isinstance(partition, bool) or partition < 0:
            raise CliError(f"{path}: partition entry {n} ({topic}) has no valid partition")
        if not isinstance(replicas, list) or not all(
                isinstance(r, int) and not isinstance(r, bool) for r in replicas):
            raise CliError(f"{path}: {topic}-{partition}: replicas must be a list of broker ids")
        dirs = entry.get("log_dirs")
        if dirs is not None:
            if not isinstance(dirs, list) or not all(isinstance(d, str) for d in dirs):
                raise CliError(f"{path}: {topic}-{partition}: log_dirs must be a list of paths "
                               '(or "any")')
            if len(dirs) != len(replicas):
                raise CliError(f"{path}: {topic}-{partition}: {len(replicas)} replicas but "
                               f"{len(dirs)} log_dirs (one per replica)")
        moves.append(Move(topic, partition, tuple(replicas),
                          None if dirs is None else tuple(dirs)))
    if not moves:
        raise CliError(f"{path}: the plan names no partition")
    keys = [(m.topic, m.partition) for m in moves]
    duplicate = next((k for k in keys if keys.count(k) > 1), None)
    if duplicate is not None:
        raise CliError(f"{path}: {duplicate[0]}-{duplicate[1]} appears twice")
    return moves


# -- the controller, spoken to directly -------------------------------------------------------


def _controller(conn: Connection, admin: Any) -> tuple[str, int]:
    described = conn.result(admin.describe_cluster(request_timeout=conn.timeout),
                            "cannot describe the cluster")
    if described.controller is None:
        raise CliError("the cluster has no controller right now; try again shortly")
    return described.controller.host, described.controller.port


def _to_controller(conn: Connection, admin: Any, obj: Any) -> Any:
    """Send to the controller; once more if it moved meanwhile (NOT_CONTROLLER)."""
    for attempt in range(2):
        address = _controller(conn, admin)
        response = raw_requests.ask(conn, address, obj, "the controller")
        if response.error_code != ErrorCode.not_controller or attempt:
            break
    if response.error_code != ErrorCode.none:
        message = response.error_message
        raise CliError(f"the controller refused: {message + ' ' if message else ''}"
                       f"({response.error_code.name.upper()})")
    return response


def _timeout(conn: Connection) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=conn.timeout_ms)


def alter(conn: Connection, admin: Any, moves: Iterable[Move]) -> dict[tuple[str, int], str]:
    """AlterPartitionReassignments; each refused partition's one-line reason."""
    by_topic: dict[str, list[Move]] = defaultdict(list)
    for move in moves:
        by_topic[move.topic].append(move)
    request = build(
        AlterPartitionReassignmentsRequest, timeout=_timeout(conn), topics=tuple(
            build(ReassignableTopic, name=topic, partitions=tuple(
                build(ReassignablePartition, partition_index=m.partition, replicas=m.replicas)
                for m in parts)) for topic, parts in by_topic.items()))
    response = _to_controller(conn, admin, request)
    refused = {}
    for topic in response.responses:
        for p in topic.partitions:
            if p.error_code != ErrorCode.none:
                refused[(topic.name, p.partition_index)] = \
                    f"{p.error_message or p.error_code.name} ({p.error_code.name.upper()})"
    return refused


def ongoing(conn: Connection, admin: Any, topics: dict[str, list[int]] | None
            ) -> dict[tuple[str, int], tuple[list[int], list[int], list[int]]]:
    """ListPartitionReassignments: (replicas, adding, removing) of each moving partition."""
    request = build(
        ListPartitionReassignmentsRequest, timeout=_timeout(conn),
        topics=None if topics is None else tuple(
            build(ListPartitionReassignmentsTopics, name=t, partition_indexes=tuple(ps))
            for t, ps in topics.items()))
    response = _to_controller(conn, admin, request)
    return {(t.name, p.partition_index): (list(p.replicas), list(p.adding_replicas),
                                          list(p.removing_replicas))
            for t in response.topics for p in t.partitions}


def current_replicas(conn: Connection, admin: Any, moves: Iterable[Move]
                     ) -> dict[tuple[str, int], list[int]]:
    topics = sorted({m.topic for m in moves})
    try:
        metadata = admin.list_topics(timeout=conn.timeout)
    except Exception as exc:
        raise CliError(f"cannot read the topics' metadata: {exc}") from None
    found = {}
    for name in topics:
        topic = metadata.topics.get(name)
        if topic is None or topic.error is not None:
            continue
        for p in topic.partitions.values():
            found[(name, p.id)] = list(p.replicas)
    return found


# -- throttles --------------------------------------------------------------------------------


def _alter_configs(conn: Connection, admin: Any, resources: list[ConfigResource],
                   what: str) -> None:
    # One call per resource: librdkafka takes a single BROKER resource per request (each
    # goes to its own broker).
    for resource in resources:
        (future,) = admin.incremental_alter_configs([resource]).values()
        kind = "topic" if resource.restype == ConfigResource.Type.TOPIC else "broker"
        conn.result(future, f"cannot {what} on {kind} {resource.name}")


def set_throttle(conn: Connection, admin: Any, rate: int, moves: list[Move],
                 current: dict[tuple[str, int], list[int]]) -> list[int]:
    """Kafka's throttle for a plan; the brokers given the rate."""
    leaders: dict[str, set[str]] = defaultdict(set)
    followers: dict[str, set[str]] = defaultdict(set)
    brokers: set[int] = set()
    for m in moves:
        now = current.get((m.topic, m.partition), [])
        target = list(m.replicas or ())
        brokers.update(now, target)
        leaders[m.topic].update(f"{m.partition}:{b}" for b in now)
        followers[m.topic].update(f"{m.partition}:{b}" for b in target if b not in now)
    set_op = AlterConfigOpType.SET
    topics = [ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry(LEADER_REPLICAS, ",".join(sorted(leaders[topic])),
                    incremental_operation=set_op),
        ConfigEntry(FOLLOWER_REPLICAS, ",".join(sorted(followers[topic])) or "",
                    incremental_operation=set_op if followers[topic]
                    else AlterConfigOpType.DELETE)]) for topic in sorted(leaders)]
    _alter_configs(conn, admin, topics, "set the throttled replicas")
    _alter_configs(conn, admin, [ConfigResource(ConfigResource.Type.BROKER, str(b),
                                                incremental_configs=[
        ConfigEntry(LEADER_RATE, str(rate), incremental_operation=set_op),
        ConfigEntry(FOLLOWER_RATE, str(rate), incremental_operation=set_op)])
        for b in sorted(brokers)], "set the throttle rate")
    return sorted(brokers)


def clear_throttle(conn: Connection, admin: Any, topics: Iterable[str],
                   brokers: Iterable[int]) -> None:
    delete = AlterConfigOpType.DELETE
    _alter_configs(conn, admin, [ConfigResource(ConfigResource.Type.TOPIC, t, incremental_configs=[
        ConfigEntry(LEADER_REPLICAS, "", incremental_operation=delete),
        ConfigEntry(FOLLOWER_REPLICAS, "", incremental_operation=delete)])
        for t in sorted(set(topics))], "remove the throttled replicas")
    _alter_configs(conn, admin, [ConfigResource(ConfigResource.Type.BROKER, str(b),
                                                incremental_configs=[
        ConfigEntry(LEADER_RATE, "", incremental_operation=delete),
        ConfigEntry(FOLLOWER_RATE, "", incremental_operation=delete)])
        for b in sorted(set(brokers))], "remove the throttle rate")


# -- the command ------------------------------------------------------------------------------


def _moves(topic: str | None, partition: int | None, replicas: str | None,
           plan: Path | None, cancel: bool, verify: bool) -> list[Move]:
    if plan is not None:
        if topic is not None or partition is not None or replicas is not None:
            raise CliError("give either --file or --topic/--partition/--replicas, not both")
        moves = read_plan(plan)
        return [Move(m.topic, m.partition, None) for m in moves] if cancel else moves
    if topic is None or partition is None:
        raise CliError("name the partition to move: --topic T --partition P --replicas 1,2,3 "
                       "(or --file plan.json)")
    if cancel:
        if replicas is not None:
            raise CliError("--cancel takes no --replicas")
        return [Move(topic, partition, None)]
    if verify:
        return [Move(topic, partition, parse_replicas(replicas) if replicas else None)]
    if replicas is None:
        raise CliError("--replicas is missing: the broker ids to move the partition to, "
                       "e.g. --replicas 1,2,3")
    return [Move(topic, partition, parse_replicas(replicas))]


def run(conn: Connection, topic: str | None, partition: int | None, replicas: str | None,
        plan: Path | None, listing: bool, cancel: bool, verify: bool,
        throttle: int | None) -> None:
    if sum((listing, cancel, verify)) > 1:
        raise CliError("give only one of --list, --cancel, --verify")
    if throttle is not None and (listing or cancel or verify):
        raise CliError("--throttle goes with a reassignment, not with --list/--cancel/--verify")
    if listing:
        if plan is not None or replicas is not None or partition is not None:
            raise CliError("--list takes at most --topic")
        admin = conn.admin()
        show_ongoing(ongoing(conn, admin, None), topic)
        return
    moves = _moves(topic, partition, replicas, plan, cancel, verify)
    admin = conn.admin()
    if verify:
        verify_moves(conn, admin, moves)
        return
    current = current_replicas(conn, admin, moves)
    brokers: list[int] = []
    if throttle is not None:
        brokers = set_throttle(conn, admin, throttle, moves, current)
    refused = place_log_dirs(conn, admin, moves)
    refused.update(alter(conn, admin, [m for m in moves if (m.topic, m.partition) not in refused]))
    console = stdout_console()
    for m in moves:
        key = (m.topic, m.partition)
        if key in refused:
            continue
        if m.replicas is None:
            print_line(console, f"Cancelled the reassignment of {m.topic}-{m.partition}.")
        else:
            print_line(console, f"Reassigning {m.topic}-{m.partition}: "
                                f"{_ids(current.get(key, []))} -> {_ids(m.replicas)}.")
    if throttle is not None:
        print_line(console, f"Throttle: {throttle} bytes/s on brokers {_ids(brokers)}; "
                            "`moldau cluster reassign --verify` removes it once done.")
    if cancel:
        clear_throttle(conn, admin, {m.topic for m in moves},
                       {b for ids in current.values() for b in ids})
    if refused:
        lines = [f"{t}-{p}: {why}" for (t, p), why in sorted(refused.items())]
        raise CliError(lines[0] if len(lines) == 1 else
                       f"{len(lines)} partitions refused: " + "; ".join(lines))


def place_log_dirs(conn: Connection, admin: Any, moves: list[Move]
                   ) -> dict[tuple[str, int], str]:
    """Send the plan's ``log_dirs`` (Kafka's tool does so before the reassignment); each
    partition refused because of one, with the reason."""
    wanted = {(m.topic, m.partition, broker): d for m in moves if m.replicas and m.log_dirs
              for broker, d in zip(m.replicas, m.log_dirs, strict=True) if d != "any"}
    if not wanted:
        return {}
    refused: dict[tuple[str, int], str] = {}
    for (topic, partition, broker), code in sorted(log_dirs.alter_dirs(conn, admin,
                                                                      wanted).items()):
        # REPLICA_NOT_AVAILABLE: not there yet; the broker puts it in that dir when the
        # reassignment creates it.
        if code not in (ErrorCode.none, ErrorCode.replica_not_available):
            refused.setdefault((topic, partition), f"log dir {wanted[(topic, partition, broker)]}"
                               f" on broker {broker}: {code.name.upper()}")
    return refused


def verify_moves(conn: Connection, admin: Any, moves: list[Move]) -> None:
    """Kafka's ``--verify``: each partition's state; throttles removed once all are done."""
    moving = ongoing(conn, admin, None)
    current = current_replicas(conn, admin, moves)
    console = stdout_console()
    done = True
    for m in moves:
        key = (m.topic, m.partition)
        if key in moving:
            done = False
            state = "is still in progress"
        elif m.replicas is None or current.get(key) == list(m.replicas):
            state = "is complete"
        else:
            state = f"has replicas {_ids(current.get(key, []))}, not {_ids(m.replicas)}"
        print_line(console, f"Reassignment of partition {m.topic}-{m.partition} {state}.")
    if done:
        brokers = set(itertools.chain.from_iterable(current.values()))
        clear_throttle(conn, admin, {m.topic for m in moves}, brokers)
        print_line(console, "Throttles removed.")


def show_ongoing(found: dict[tuple[str, int], tuple[list[int], list[int], list[int]]],
                 topic: str | None) -> None:
    console = stdout_console()
    rows = table("Topic", "Partition", "Replicas", "Adding", "Removing")
    for (name, partition), (replicas, adding, removing) in sorted(found.items()):
        if topic is None or name == topic:
            rows.add_row(name, str(partition), _ids(replicas), _ids(adding), _ids(removing))
    if not rows.rows:
        print_line(console, "No partition reassignment is in progress.")
        return
    print_table(console, rows)


def _ids(ids: Iterable[int]) -> str:
    return ",".join(map(str, ids)) or "-"


def options(command: Any) -> Any:
    for decorator in reversed((
        click.option("--topic", help="The topic of the partition to move."),
        click.option("--partition", type=click.IntRange(min=0), help="The partition."),
        click.option("--replicas", metavar="IDS",
                     help="Broker ids to move it to, comma-separated (the first leads)."),
        click.option("--file", "plan", type=click.Path(dir_okay=False, path_type=Path),
                     help="A plan in Kafka's reassignment JSON "
                          '({"version":1,"partitions":[{"topic","partition","replicas"}]}; '
                          'an optional "log_dirs" per entry places each replica in a dir).'),
        click.option("--list", "listing", is_flag=True,
                     help="List the reassignments in progress (of --topic only, if given)."),
        click.option("--cancel", is_flag=True,
                     help="Cancel the reassignment of --topic/--partition or of the plan, "
                          "and remove its throttles."),
        click.option("--verify", is_flag=True,
                     help="Report each partition of the plan; remove the throttles once done."),
        click.option("--throttle", type=click.IntRange(min=1), metavar="BYTES/S",
                     help="Limit the replication traffic of the moving replicas."),
    )):
        command = decorator(command)
    return command
