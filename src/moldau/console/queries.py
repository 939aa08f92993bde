"""What the console's pages show, asked of the cluster through the AdminClient.

Built from the CLI's own helpers (moldau.cli.topic, group, configs, offsets), so a page
and the matching ``moldau`` command always agree. Functions raise :class:`CliError` with
one clear line for anything a person can cause (a missing topic, a bad config value).
"""

from __future__ import annotations

from dataclasses import dataclass

from confluent_kafka import KafkaException, TopicCollection
from confluent_kafka.admin import (
    AdminClient,
    ConfigEntry,
    ConfigResource,
    ConsumerGroupDescription,
    OffsetSpec,
    ResourceType,
    TopicDescription,
)

from ..cli.configs import fetch_configs
from ..cli.connection import Connection
from ..cli.errors import CliError, as_cli_error
from ..cli.group import (
    committed_offsets,
    describe_group,
    lag,
    list_offsets,
    protocol_type,
    state_name,
)
from ..cli.log_dirs import partition_sizes
from ..cli.offsets import partition_offsets
from ..cli.topic import describe_topic, topic_names


@dataclass(frozen=True)
class Broker:
    id: int
    host: str
    port: int
    rack: str | None


@dataclass(frozen=True)
class Overview:
    cluster_id: str | None
    controller: int | None
    brokers: list[Broker]
    topics: int
    partitions: int
    under_replicated: int
    offline: int


def overview(conn: Connection, admin: AdminClient) -> Overview:
    """Brokers, controller and partition health (DescribeCluster and Metadata)."""
    described = conn.result(admin.describe_cluster(request_timeout=conn.timeout),
                            "cannot describe the cluster")
    try:
        metadata = admin.list_topics(timeout=conn.timeout)
    except KafkaException as exc:
        raise as_cli_error(exc, "cannot list topics") from exc
    names = topic_names(conn, admin, internal=False)
    partitions = [p for t in metadata.topics.values() for p in t.partitions.values()]
    return Overview(
        cluster_id=described.cluster_id,
        controller=None if described.controller is None else described.controller.id,
        brokers=sorted((Broker(n.id, n.host, n.port, n.rack) for n in described.nodes),
                       key=lambda b: b.id),
        topics=len(names),
        partitions=len(partitions),
        under_replicated=sum(1 for p in partitions if len(p.isrs) < len(p.replicas)),
        offline=sum(1 for p in partitions if p.leader < 0),
    )


@dataclass(frozen=True)
class TopicRow:
    name: str
    partitions: int
    replication: int
    records: int
    size: int | None  # bytes on disk, None when the brokers did not say
    under_replicated: int


def topics(conn: Connection, admin: AdminClient, *, internal: bool, query: str) -> list[TopicRow]:
    """Every topic whose name contains ``query`` (any case), with its record count.

    Records are end minus start offsets summed over partitions: what a consumer reading
    from the beginning would get (less anything compaction removed).
    """
    needle = query.strip().lower()
    names = [n for n in topic_names(conn, admin, internal) if needle in n.lower()]
    if not names:
        return []
    futures = admin.describe_topics(TopicCollection(names), request_timeout=conn.timeout)
    described = {n: conn.result(futures[n], f"cannot describe {n!r}") for n in names}
    keys = [(n, p.id) for n, d in described.items() for p in d.partitions]
    earliest = list_offsets(conn, admin, {k: OffsetSpec.earliest() for k in keys}, strict=False)
    latest = list_offsets(conn, admin, {k: OffsetSpec.latest() for k in keys}, strict=False)
    try:
        sizes: dict[tuple[str, int], int] | None = partition_sizes(conn, admin)
    except CliError:
        sizes = None  # a broker that cannot describe its log dirs costs the column only
    rows = []
    for name, description in described.items():
        parts = description.partitions
        rows.append(TopicRow(
            name=name,
            partitions=len(parts),
            replication=len(parts[0].replicas) if parts else 0,
            records=sum(max(0, latest.get((name, p.id), 0) - earliest.get((name, p.id), 0))
                        for p in parts),
            size=None if sizes is None else sum(sizes.get((name, p.id), 0) for p in parts),
            under_replicated=sum(1 for p in parts if len(p.isr) < len(p.replicas)),
        ))
    return rows


@dataclass(frozen=True)
class TopicDetail:
    description: TopicDescription
    offsets: dict[int, tuple[int, int]]
    configs: list[ConfigEntry]

    @property
    def partitions(self) -> list[int]:
        return sorted(p.id for p in self.description.partitions)


def topic_detail(conn: Connection, admin: AdminClient, name: str,
                 *, all_configs: bool) -> TopicDetail:
    description = describe_topic(conn, admin, name)
    ids = sorted(p.id for p in description.partitions)
    resource = ConfigResource(ResourceType.TOPIC, name)
    return TopicDetail(
        description=description,
        offsets=partition_offsets(conn, admin, name, ids),
        configs=fetch_configs(conn, admin, resource, include_defaults=all_configs),
    )


def config_value(conn: Connection, admin: AdminClient, topic: str, key: str) -> str | None:
    """The current value of one topic config (None when the broker does not know the key)."""
    resource = ConfigResource(ResourceType.TOPIC, topic)
    for entry in fetch_configs(conn, admin, resource, include_defaults=True):
        if entry.name == key:
            return entry.value
    return None


@dataclass(frozen=True)
class GroupRow:
    group_id: str
    state: str
    protocol_type: str
    members: int
    lag: int | None


def groups(conn: Connection, admin: AdminClient) -> list[GroupRow]:
    """Every group with its state, member count and total lag."""
    listing = conn.result(admin.list_consumer_groups(request_timeout=conn.timeout),
                          "cannot list consumer groups")
    ids = sorted(g.group_id for g in listing.valid or [])
    rows = []
    for group_id in ids:
        detail = group_detail(conn, admin, group_id)
        lags = [r.lag for r in detail.offsets if r.lag is not None]
        rows.append(GroupRow(group_id, detail.state, detail.protocol_type,
                             len(detail.description.members) if detail.description else 0,
                             sum(lags) if lags else None))
    return rows


@dataclass(frozen=True)
class OffsetRow:
    topic: str
    partition: int
    committed: int | None
    end: int | None
    member: str | None

    @property
    def lag(self) -> int | None:
        return lag(self.committed, self.end)


@dataclass(frozen=True)
class GroupDetail:
    group_id: str
    description: ConsumerGroupDescription | None
    state: str
    protocol_type: str
    offsets: list[OffsetRow]


def group_detail(conn: Connection, admin: AdminClient, group_id: str) -> GroupDetail:
    """Members, assignments, committed offsets and lag of one group.

    A group that only has committed offsets (no description) is still shown, as Kafka's
    tool does; one with neither does not exist.
    """
    description = describe_group(conn, admin, group_id)
    committed = committed_offsets(conn, admin, group_id)
    if description is None and not committed:
        raise CliError(f"group {group_id!r} does not exist")
    owners: dict[tuple[str, int], str] = {}
    for member in description.members if description else []:
        for tp in member.assignment.topic_partitions:
            owners[(tp.topic, tp.partition)] = member.member_id
    keys = sorted(set(committed) | set(owners))
    ends = list_offsets(conn, admin, {k: OffsetSpec.latest() for k in keys}, strict=False)
    return GroupDetail(
        group_id=group_id,
        description=description,
        state=state_name(getattr(description, "state", None)) if description else "Empty",
        protocol_type=protocol_type(description.is_simple_consumer_group)
        if description else "-",
        offsets=[OffsetRow(t, p, committed.get((t, p)), ends.get((t, p)), owners.get((t, p)))
                 for t, p in keys],
    )
