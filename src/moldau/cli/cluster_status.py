"""What ``moldau cluster status`` reports, gathered through the Kafka protocol only.

DescribeCluster gives the brokers and the controller; Metadata gives every partition's
leader, replicas and ISR. A partition is offline when it has no leader (-1) and
under-replicated when its ISR is smaller than its replica set (``kafka-topics
--under-replicated-partitions``). Any Kafka-compatible cluster can be checked this way,
one broker included (the single node is its own controller).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from confluent_kafka import KafkaException

from .connection import Connection
from .errors import as_cli_error
from .output import print_line, print_table, stdout_console, table


@dataclass(frozen=True)
class BrokerInfo:
    id: int
    host: str
    port: int
    rack: str | None


@dataclass(frozen=True)
class PartitionProblem:
    topic: str
    partition: int
    leader: int
    replicas: list[int]
    isr: list[int]


@dataclass
class ClusterStatus:
    cluster_id: str | None
    controller: int | None
    brokers: list[BrokerInfo]
    topics: int = 0
    partitions: int = 0
    under_replicated: list[PartitionProblem] = field(default_factory=list)
    offline: list[PartitionProblem] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def gather(conn: Connection) -> ClusterStatus:
    """Ask the cluster (DescribeCluster, then Metadata for every topic)."""
    admin = conn.admin()
    described = conn.result(admin.describe_cluster(request_timeout=conn.timeout),
                            "cannot describe the cluster")
    try:
        metadata = admin.list_topics(timeout=conn.timeout)
    except KafkaException as exc:
        raise as_cli_error(exc, "cannot list topics") from exc
    status = ClusterStatus(
        cluster_id=described.cluster_id,
        controller=None if described.controller is None else described.controller.id,
        brokers=sorted((BrokerInfo(n.id, n.host, n.port, n.rack) for n in described.nodes),
                       key=lambda b: b.id),
        topics=len(metadata.topics),
    )
    for name in sorted(metadata.topics):
        for p in sorted(metadata.topics[name].partitions.values(), key=lambda p: p.id):
            status.partitions += 1
            problem = PartitionProblem(name, p.id, p.leader, list(p.replicas), list(p.isrs))
            if p.leader < 0:
                status.offline.append(problem)
            if len(p.isrs) < len(p.replicas):
                status.under_replicated.append(problem)
    return status


def print_status(status: ClusterStatus) -> None:
    """A summary line, the brokers, and every partition that is offline or under-replicated."""
    console = stdout_console()
    controller = "none" if status.controller is None else str(status.controller)
    print_line(console, f"Cluster: {status.cluster_id or '-'}  Controller: {controller}  "
                        f"Brokers: {len(status.brokers)}")
    brokers = table("Broker", "Host", "Port", "Rack", "Controller")
    for b in status.brokers:
        brokers.add_row(str(b.id), b.host, str(b.port), b.rack or "-",
                        "yes" if b.id == status.controller else "")
    print_table(console, brokers)
    print_line(console, f"Topics: {status.topics}  Partitions: {status.partitions}  "
                        f"Under-replicated: {len(status.under_replicated)}  "
                        f"Offline: {len(status.offline)}")
    problems = {(p.topic, p.partition): p for p in status.offline + status.under_replicated}
    if not problems:
        return
    offline = {(p.topic, p.partition) for p in status.offline}
    rows = table("Topic", "Partition", "Leader", "Replicas", "ISR", "State")
    for key in sorted(problems):
        p = problems[key]
        rows.add_row(p.topic, str(p.partition), "none" if p.leader < 0 else str(p.leader),
                     ",".join(map(str, p.replicas)), ",".join(map(str, p.isr)),
                     "offline" if key in offline else "under-replicated")
    print_table(console, rows)
