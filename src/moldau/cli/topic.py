"""``moldau topic``: create, list, describe, alter and delete topics.

Partition and replication defaults are left to the broker (``-1`` in CreateTopics), so
``num.partitions`` and ``default.replication.factor`` in server.properties mean what they
mean in Kafka.
"""

from __future__ import annotations

import click
from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import (
    AdminClient,
    ConfigResource,
    NewPartitions,
    NewTopic,
    ResourceType,
    TopicDescription,
)

from .assignments import parse_assignments
from .configs import alter_configs, fetch_configs, print_configs
from .connection import Connection, connection_options
from .errors import CliError, as_cli_error, kafka_error_of
from .kafka_compat import topic_argument
from .offsets import partition_offsets
from .output import print_line, print_table, stdout_console, table


def _has_code(exc: KafkaException, code: int) -> bool:
    error = kafka_error_of(exc)
    return error is not None and error.code() == code


class TopicMissing(CliError):
    """The topic named does not exist (UNKNOWN_TOPIC_OR_PARTITION)."""


class TopicExists(CliError):
    """The topic to create exists already (TOPIC_ALREADY_EXISTS)."""


def _not_found(name: str) -> CliError:
    return TopicMissing(f"topic {name!r} does not exist")


def describe_topic(conn: Connection, admin: AdminClient, name: str) -> TopicDescription:
    """Metadata for one topic; a missing topic is a user mistake, not a crash."""
    futures = admin.describe_topics(TopicCollection([name]), request_timeout=conn.timeout)
    try:
        return futures[name].result(timeout=conn.timeout + 5)
    except KafkaException as exc:
        if _has_code(exc, KafkaError.UNKNOWN_TOPIC_OR_PART):
            raise _not_found(name) from None
        raise as_cli_error(exc, f"cannot describe topic {name!r}") from exc


def create_topic(
    conn: Connection, admin: AdminClient, new_topic: NewTopic, *, validate_only: bool = False
) -> None:
    """CreateTopics for one topic; :class:`TopicExists` when the name is taken."""
    name = new_topic.topic
    futures = admin.create_topics(
        [new_topic], request_timeout=conn.timeout, validate_only=validate_only
    )
    try:
        futures[name].result(timeout=conn.timeout + 5)
    except KafkaException as exc:
        if _has_code(exc, KafkaError.TOPIC_ALREADY_EXISTS):
            raise TopicExists(f"topic {name!r} already exists") from None
        raise as_cli_error(exc, f"cannot create topic {name!r}") from exc


def delete_topic(conn: Connection, admin: AdminClient, name: str) -> None:
    """DeleteTopics for one topic; :class:`TopicMissing` when there is no such topic."""
    futures = admin.delete_topics([name], request_timeout=conn.timeout)
    try:
        futures[name].result(timeout=conn.timeout + 5)
    except KafkaException as exc:
        if _has_code(exc, KafkaError.UNKNOWN_TOPIC_OR_PART):
            raise _not_found(name) from None
        raise as_cli_error(exc, f"cannot delete topic {name!r}") from exc


def add_partitions(conn: Connection, admin: AdminClient, name: str, total: int) -> None:
    """CreatePartitions: grow ``name`` to ``total`` partitions (Kafka never shrinks one)."""
    futures = admin.create_partitions([NewPartitions(name, total)], request_timeout=conn.timeout)
    conn.result(futures[name], f"cannot change partitions of {name!r}")


@click.group("topic")
def topic_group() -> None:
    """Create, list, describe, alter and delete topics."""


@topic_group.command("create")
@topic_argument()
@click.option("--partitions", type=click.IntRange(min=1), help="Default: broker's num.partitions.")
@click.option(
    "--replication-factor",
    type=click.IntRange(min=1),
    help="Default: broker's default.replication.factor.",
)
@click.option("--config", "configs", multiple=True, metavar="KEY=VALUE", help="Topic config.")
@click.option("--if-not-exists", is_flag=True, help="Succeed if the topic already exists.")
@click.option("--validate-only", is_flag=True, help="Ask the broker to check, not create.")
@connection_options
def create(
    conn: Connection,
    topic: str,
    partitions: int | None,
    replication_factor: int | None,
    configs: tuple[str, ...],
    if_not_exists: bool,
    validate_only: bool,
) -> None:
    """Create topic TOPIC."""
    name = topic
    new_topic = NewTopic(
        name,
        num_partitions=-1 if partitions is None else partitions,
        replication_factor=-1 if replication_factor is None else replication_factor,
        config=parse_assignments(configs, "--config"),
    )
    try:
        create_topic(conn, conn.admin(), new_topic, validate_only=validate_only)
    except TopicExists:
        if not if_not_exists:
            raise
        click.echo(f"Topic {name} already exists.")
        return
    if validate_only:
        click.echo(f"Topic {name} would be created (validate only).")
    else:
        click.echo(f"Created topic {name}.")


def topic_names(conn: Connection, admin: AdminClient, internal: bool) -> list[str]:
    """Sorted topic names, without internal topics unless ``internal``."""
    try:
        metadata = admin.list_topics(timeout=conn.timeout)
    except KafkaException as exc:
        raise as_cli_error(exc, "cannot list topics") from exc
    names = sorted(metadata.topics)
    if not internal and names:
        # Only the broker knows which topics are internal; Metadata carries the flag.
        futures = admin.describe_topics(TopicCollection(names), request_timeout=conn.timeout)
        names = [
            n for n in names if not conn.result(futures[n], f"cannot describe {n!r}").is_internal
        ]
    return names


@topic_group.command("list")
@click.option("--internal", is_flag=True, help="Also list internal topics (__consumer_offsets...).")
@connection_options
def list_topics(conn: Connection, internal: bool) -> None:
    """Print topic names, one per line."""
    for name in topic_names(conn, conn.admin(), internal):
        click.echo(name)


@topic_group.command("describe")
@topic_argument(required=False)
@click.option("--internal", is_flag=True,
              help="Without TOPIC: also describe internal topics (__consumer_offsets...).")
@connection_options
def describe(conn: Connection, topic: str | None, internal: bool) -> None:
    """Partitions (leader, replicas, ISR, offsets) and non-default configs of TOPIC.

    Without TOPIC every topic is described, as ``kafka-topics --describe`` does
    (internal ones only with --internal, as in ``topic list``).
    """
    admin = conn.admin()
    if topic is not None:
        _describe_one(conn, admin, describe_topic(conn, admin, topic))
        return
    names = topic_names(conn, admin, internal)
    if not names:
        click.echo("No topics.")
        return
    futures = admin.describe_topics(TopicCollection(names), request_timeout=conn.timeout)
    for number, name in enumerate(names):
        if number:
            click.echo()
        _describe_one(conn, admin, conn.result(futures[name], f"cannot describe {name!r}"))


def _offset(offset: int) -> str:
    """An offset, or ``unknown`` when the partition's leader could not answer (-1001)."""
    return str(offset) if offset >= 0 else "unknown"


def _describe_one(conn: Connection, admin: AdminClient, topic: TopicDescription) -> None:
    """One topic's header, partition table and configs.

    Offline replicas (Kafka's ``Offline:``) are those on brokers missing from the Metadata
    response's broker list: the client gives them a node without a host. The column is shown
    only when a partition has one.
    """
    name = topic.name
    partitions = sorted(topic.partitions, key=lambda p: p.id)
    offsets = partition_offsets(conn, admin, name, [p.id for p in partitions])
    replication = len(partitions[0].replicas) if partitions else 0
    console = stdout_console()
    print_line(
        console,
        f"Topic: {name}  PartitionCount: {len(partitions)}  "
        f"ReplicationFactor: {replication}  Internal: {'yes' if topic.is_internal else 'no'}",
    )
    offline = {p.id: [n.id for n in p.replicas if not n.host] for p in partitions}
    columns: tuple[str, ...] = ("Partition", "Leader", "Replicas", "ISR")
    columns += ("Offline",) if any(offline.values()) else ()
    rows = table(*columns, "Earliest", "Latest")
    for p in partitions:
        earliest, latest = offsets[p.id]
        cells = [
            str(p.id),
            "none" if p.leader is None else str(p.leader.id),
            ",".join(str(n.id) for n in p.replicas),
            ",".join(str(n.id) for n in p.isr),
        ]
        if "Offline" in columns:
            cells.append(",".join(map(str, offline[p.id])))
        rows.add_row(*cells, _offset(earliest), _offset(latest))
    print_table(console, rows)
    resource = ConfigResource(ResourceType.TOPIC, name)
    print_configs(fetch_configs(conn, admin, resource, include_defaults=False), "Configs")


@topic_group.command("alter")
@topic_argument()
@click.option("--partitions", type=click.IntRange(min=1), help="New total partition count.")
@click.option("--config", "configs", multiple=True, metavar="KEY=VALUE", help="Set a config.")
@click.option("--delete-config", multiple=True, metavar="KEY", help="Revert a config to default.")
@connection_options
def alter(
    conn: Connection,
    topic: str,
    partitions: int | None,
    configs: tuple[str, ...],
    delete_config: tuple[str, ...],
) -> None:
    """Add partitions to TOPIC and/or change its configs."""
    name = topic
    to_set = parse_assignments(configs, "--config")
    if partitions is None and not to_set and not delete_config:
        raise CliError("nothing to alter: give --partitions, --config or --delete-config")
    admin = conn.admin()
    describe_topic(conn, admin, name)  # a clear "does not exist" before anything changes
    if partitions is not None:
        add_partitions(conn, admin, name, partitions)
        click.echo(f"Topic {name} now has {partitions} partitions.")
    if to_set or delete_config:
        resource = ConfigResource(ResourceType.TOPIC, name)
        alter_configs(conn, admin, resource, to_set, delete_config)
        changes = [f"{k}={v}" for k, v in to_set.items()] + [f"-{k}" for k in delete_config]
        click.echo(f"Altered configs of topic {name}: {', '.join(changes)}")


@topic_group.command("delete")
@topic_argument()
@click.option("--if-exists", is_flag=True, help="Succeed if the topic does not exist.")
@connection_options
def delete(conn: Connection, topic: str, if_exists: bool) -> None:
    """Delete topic TOPIC and its data."""
    name = topic
    try:
        delete_topic(conn, conn.admin(), name)
    except TopicMissing:
        if not if_exists:
            raise
        click.echo(f"Topic {name} does not exist.")
        return
    click.echo(f"Deleted topic {name}.")
