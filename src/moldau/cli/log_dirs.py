"""``moldau cluster log-dirs``: where each broker keeps its replicas, and moves between a
broker's own log dirs.

Kafka's ``kafka-log-dirs.sh --describe`` (DescribeLogDirs) and the log-dir half of
``kafka-reassign-partitions.sh`` (AlterReplicaLogDirs, sent to the broker holding the
replica), through the Kafka protocol only, so it works against Kafka too. confluent-kafka has
neither call, so both are raw kio requests to each broker, found with DescribeCluster.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from kio.schema.alter_replica_log_dirs.v2.request import (
    AlterReplicaLogDir,
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirTopic,
)
from kio.schema.describe_log_dirs.v4.request import DescribeLogDirsRequest
from kio.schema.errors import ErrorCode

from ..protocol.codec import build
from .connection import Connection
from .errors import CliError
from .output import print_line, print_table, stdout_console, table
from .raw_requests import ask

Address = tuple[str, int]


def brokers(conn: Connection, admin: Any) -> dict[int, Address]:
    """Every live broker's id and address (DescribeCluster)."""
    described = conn.result(admin.describe_cluster(request_timeout=conn.timeout),
                            "cannot describe the cluster")
    return {node.id: (node.host, node.port) for node in described.nodes}


def _send(conn: Connection, node: int, address: Address, request: Any) -> Any:
    return ask(conn, address, request, f"broker {node}")


def _pick(found: dict[int, Address], broker: int | None) -> dict[int, Address]:
    if broker is None:
        return found
    if broker not in found:
        raise CliError(f"broker {broker} is not in the cluster (live brokers: "
                       f"{','.join(map(str, sorted(found))) or 'none'})")
    return {broker: found[broker]}


def _log_dirs(conn: Connection, found: dict[int, Address]) -> Iterator[tuple[int, Any]]:
    """Each broker's DescribeLogDirs results (all dirs, all replicas), by broker id."""
    request = build(DescribeLogDirsRequest, topics=None)
    for node, address in sorted(found.items()):
        yield node, _send(conn, node, address, request).results


def partition_sizes(conn: Connection, admin: Any) -> dict[tuple[str, int], int]:
    """Bytes on disk of each partition: its largest current replica on any live broker.

    Replicas of one partition hold the same records, so the largest is the partition's
    size (a follower catching up is smaller); offline dirs and future replicas are left out.
    """
    sizes: dict[tuple[str, int], int] = {}
    for _node, results in _log_dirs(conn, brokers(conn, admin)):
        for result in results:
            if result.error_code != ErrorCode.none:
                continue
            for t in result.topics:
                for p in t.partitions:
                    if not p.is_future_key:
                        key = (t.name, p.partition_index)
                        sizes[key] = max(sizes.get(key, 0), p.partition_size)
    return sizes


def describe(conn: Connection, broker: int | None, topic: str | None) -> None:
    """A row per replica (current and future) per log dir of each broker asked."""
    found = _pick(brokers(conn, conn.admin()), broker)
    rows = table("Broker", "Log dir", "Topic", "Partition", "Size", "Lag", "Replica")
    for node, results in _log_dirs(conn, found):
        for result in results:
            if result.error_code != ErrorCode.none:
                rows.add_row(str(node), result.log_dir, "-", "-", "-", "-",
                             f"dir offline ({result.error_code.name.upper()})")
                continue
            for t in result.topics:
                if topic is not None and t.name != topic:
                    continue
                for p in sorted(t.partitions, key=lambda p: p.partition_index):
                    rows.add_row(str(node), result.log_dir, t.name, str(p.partition_index),
                                 str(p.partition_size), str(p.offset_lag),
                                 "future" if p.is_future_key else "current")
    console = stdout_console()
    if not rows.rows:
        print_line(console, "No replica found." if topic is None else
                   f"No replica of {topic} found.")
        return
    print_table(console, rows)


def alter_dirs(conn: Connection, admin: Any, wanted: dict[tuple[str, int, int], str]
               ) -> dict[tuple[str, int, int], ErrorCode]:
    """AlterReplicaLogDirs for several replicas ((topic, partition, broker) -> dir), one
    request per broker; each replica's answer. A broker that is not live answers nothing:
    BROKER_NOT_AVAILABLE."""
    found = brokers(conn, admin)
    by_broker: dict[int, dict[str, dict[str, list[int]]]] = {}
    for (topic, partition, broker), path in wanted.items():
        by_broker.setdefault(broker, {}).setdefault(path, {}).setdefault(topic, []).append(
            partition)
    codes: dict[tuple[str, int, int], ErrorCode] = {}
    for broker, dirs in sorted(by_broker.items()):
        if broker not in found:
            codes.update({key: ErrorCode.broker_not_available for key in wanted
                          if key[2] == broker})
            continue
        request = build(AlterReplicaLogDirsRequest, dirs=tuple(
            build(AlterReplicaLogDir, path=path, topics=tuple(
                build(AlterReplicaLogDirTopic, name=topic, partitions=tuple(parts))
                for topic, parts in topics.items()))
            for path, topics in dirs.items()))
        response = _send(conn, broker, found[broker], request)
        for t in response.results:
            for p in t.partitions:
                codes[(t.topic_name, p.partition_index, broker)] = p.error_code
    return codes


def move(conn: Connection, topic: str, partition: int, broker: int | None, path: str) -> None:
    """AlterReplicaLogDirs for one replica, on its broker (the only one if not given)."""
    found = brokers(conn, conn.admin())
    if broker is None:
        if len(found) != 1:
            raise CliError("name the broker holding the replica: --broker ID")
        broker = next(iter(found))
    address = _pick(found, broker)[broker]
    request = build(AlterReplicaLogDirsRequest, dirs=(build(
        AlterReplicaLogDir, path=path, topics=(build(
            AlterReplicaLogDirTopic, name=topic, partitions=(partition,)),)),))
    response = _send(conn, broker, address, request)
    codes = [p.error_code for t in response.results for p in t.partitions]
    code = codes[0] if codes else ErrorCode.unknown_server_error
    if code != ErrorCode.none:
        reasons = {
            ErrorCode.log_dir_not_found: f"{path} is not one of broker {broker}'s log.dirs",
            ErrorCode.kafka_storage_error: "a log dir involved is offline",
            ErrorCode.unknown_topic_or_partition: f"{topic}-{partition} does not exist",
            ErrorCode.replica_not_available: f"broker {broker} has no replica of "
                                             f"{topic}-{partition}",
        }
        raise CliError(f"cannot move {topic}-{partition} on broker {broker}: "
                       f"{reasons.get(code, code.name)} ({code.name.upper()})")
    print_line(stdout_console(), f"Moving {topic}-{partition} on broker {broker} to {path}; "
                                 "`moldau cluster log-dirs` shows its progress.")
