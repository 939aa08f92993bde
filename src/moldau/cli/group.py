"""``moldau group``: list, describe, delete consumer groups and reset their offsets.

Everything goes through confluent-kafka's AdminClient, the way Kafka's
``kafka-consumer-groups`` tool uses the Java Admin client, so these commands see exactly
what any client sees (ListGroups, DescribeGroups, OffsetFetch, OffsetCommit, DeleteGroups)
and work against any Kafka-compatible broker, not only moldau.

``reset-offsets`` follows Kafka's tool: it prints the plan and changes nothing unless
``--execute`` is given, it refuses while the group has members (their next commit would
silently undo the reset), and offsets given by number are clamped to what the log holds.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import click
from confluent_kafka import (
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, ConsumerGroupDescription, OffsetSpec

from .connection import Connection, connection_options
from .errors import CliError, as_cli_error, describe_kafka_error, kafka_error_of
from .output import Rows, print_line, print_table, stdout_console, table

# (topic, partition): plain tuples hash and sort, TopicPartition objects do neither usefully.
Key = tuple[str, int]

# Kafka's spelling of group states, as its tools print them and as --state accepts them.
STATE_NAMES: dict[ConsumerGroupState, str] = {
    ConsumerGroupState.STABLE: "Stable",
    ConsumerGroupState.EMPTY: "Empty",
    ConsumerGroupState.PREPARING_REBALANCING: "PreparingRebalance",
    ConsumerGroupState.COMPLETING_REBALANCING: "CompletingRebalance",
    ConsumerGroupState.DEAD: "Dead",
    ConsumerGroupState.UNKNOWN: "Unknown",
}
_STATE_BY_NAME = {name: state for state, name in STATE_NAMES.items() if name != "Unknown"}

# A group may only be reset when nobody is in it (Kafka's rule): Empty, or Dead (unknown).
_INACTIVE = {ConsumerGroupState.EMPTY, ConsumerGroupState.DEAD}


def state_name(state: ConsumerGroupState | None) -> str:
    return "Unknown" if state is None else STATE_NAMES.get(state, state.name.title())


def protocol_type(is_simple: bool) -> str:
    """librdkafka reports only whether the protocol type is empty.

    It keeps just "consumer" groups and "simple" ones (empty protocol type: offsets
    committed without ever joining), as Kafka's Admin client does, so this is exact.
    """
    return "-" if is_simple else "consumer"


def _has_code(exc: BaseException, *codes: int) -> bool:
    error = kafka_error_of(exc)
    return error is not None and error.code() in codes


# -- parsing (no broker needed) ----------------------------------------------------------


def parse_topic_partitions(text: str) -> tuple[str, list[int] | None]:
    """``TOPIC`` (all partitions) or ``TOPIC:P[,P...]``, as Kafka's ``--topic`` takes it."""
    topic, sep, rest = text.partition(":")
    if not topic:
        raise CliError(f"invalid --topic {text!r}: expected TOPIC or TOPIC:P[,P...]")
    if not sep:
        return topic, None
    partitions: list[int] = []
    for item in rest.split(","):
        item = item.strip()
        if not item.isdigit():
            raise CliError(
                f"invalid --topic {text!r}: partitions must be numbers, as in {topic}:0,1"
            )
        if int(item) not in partitions:
            partitions.append(int(item))
    return topic, partitions


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def parse_datetime_ms(text: str) -> int:
    """An ISO 8601 date-time as epoch milliseconds; without a zone it is local time.

    Kafka's tool reads ``YYYY-MM-DDTHH:mm:SS.sss`` with an optional zone and takes a
    missing zone as the local one; Python's parser accepts that and more (``Z``, a date
    alone), which only makes it easier to type.
    """
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise CliError(
            f"invalid --to-datetime {text!r}: expected ISO 8601, e.g. 2024-05-01T12:00:00Z"
        ) from None
    if moment.tzinfo is None:
        moment = moment.astimezone()  # local time, as Kafka's tool assumes
    # Integer arithmetic: a float timestamp times 1000 can land a millisecond early.
    return (moment - _EPOCH) // timedelta(milliseconds=1)


def clamp(offset: int, earliest: int, latest: int) -> int:
    """Kafka's tool moves an offset outside the log to the nearest end instead of failing."""
    return max(earliest, min(offset, latest))


def lag(committed: int | None, end: int | None) -> int | None:
    """Records the group has not committed yet; unknown when either side is unknown."""
    if committed is None or end is None:
        return None
    return max(0, end - committed)


@dataclass(frozen=True)
class Strategy:
    """Where ``reset-offsets`` moves each partition; exactly one field is set."""

    earliest: bool = False
    latest: bool = False
    offset: int | None = None
    timestamp_ms: int | None = None
    shift_by: int | None = None

    @classmethod
    def from_options(
        cls,
        to_earliest: bool,
        to_latest: bool,
        to_offset: int | None,
        to_datetime: str | None,
        shift_by: int | None,
    ) -> Strategy:
        given = [
            name
            for name, value in (
                ("--to-earliest", to_earliest),
                ("--to-latest", to_latest),
                ("--to-offset", to_offset is not None),
                ("--to-datetime", to_datetime is not None),
                ("--shift-by", shift_by is not None),
            )
            if value
        ]
        if len(given) != 1:
            choices = "--to-earliest, --to-latest, --to-offset, --to-datetime or --shift-by"
            if not given:
                raise CliError(f"say where to move the offsets: give one of {choices}")
            raise CliError(f"{' and '.join(given)} exclude each other; give one of {choices}")
        return cls(
            earliest=to_earliest,
            latest=to_latest,
            offset=to_offset,
            timestamp_ms=None if to_datetime is None else parse_datetime_ms(to_datetime),
            shift_by=shift_by,
        )


def plan_offsets(
    strategy: Strategy,
    partitions: Sequence[Key],
    committed: Mapping[Key, int],
    bounds: Mapping[Key, tuple[int, int]],
    by_time: Mapping[Key, int] | None = None,
) -> dict[Key, int]:
    """The new offset of every partition, computed the way Kafka's tool computes it.

    ``bounds`` holds (earliest, latest) per partition; ``by_time`` the ListOffsets answer
    for ``--to-datetime`` (negative when no record is that new, which means the end).
    """
    result: dict[Key, int] = {}
    for key in partitions:
        earliest, latest = bounds[key]
        if strategy.earliest:
            result[key] = earliest
        elif strategy.latest:
            result[key] = latest
        elif strategy.offset is not None:
            result[key] = clamp(strategy.offset, earliest, latest)
        elif strategy.shift_by is not None:
            if key not in committed:
                raise CliError(
                    f"cannot shift partition {key[0]}:{key[1]}: the group has no committed "
                    "offset there"
                )
            result[key] = clamp(committed[key] + strategy.shift_by, earliest, latest)
        else:
            found = -1 if by_time is None else by_time.get(key, -1)
            result[key] = latest if found < 0 else found
    return result


# -- broker queries ----------------------------------------------------------------------


def describe_group(
    conn: Connection, admin: AdminClient, group: str
) -> ConsumerGroupDescription | None:
    """The group's description, or None when the broker does not know the group.

    Kafka answers DescribeGroups for an unknown id with state Dead (older brokers) or
    GROUP_ID_NOT_FOUND (newer ones); both mean the same thing to a user.
    """
    futures = admin.describe_consumer_groups([group], request_timeout=conn.timeout)
    try:
        description: ConsumerGroupDescription = futures[group].result(timeout=conn.timeout + 5)
    except KafkaException as exc:
        if _has_code(exc, KafkaError.GROUP_ID_NOT_FOUND):
            return None
        raise as_cli_error(exc, f"cannot describe group {group!r}") from exc
    if getattr(description, "state", None) == ConsumerGroupState.DEAD:
        return None
    return description


def committed_offsets(
    conn: Connection, admin: AdminClient, group: str, partitions: Iterable[Key] | None = None
) -> dict[Key, int]:
    """Offsets the group has committed (all of them, or for ``partitions``).

    Partitions without a commit are left out, so "nothing committed" is never mistaken
    for offset 0.
    """
    wanted = None if partitions is None else [TopicPartition(t, p) for t, p in partitions]
    if wanted == []:
        return {}
    request = [ConsumerGroupTopicPartitions(group, wanted)]
    futures = admin.list_consumer_group_offsets(request, request_timeout=conn.timeout)
    answer = conn.result(futures[group], f"cannot fetch committed offsets of group {group!r}")
    result: dict[Key, int] = {}
    for tp in answer.topic_partitions or []:
        if tp.error is not None:
            raise CliError(
                f"cannot fetch the committed offset of {tp.topic}:{tp.partition} for group "
                f"{group!r}: {describe_kafka_error(tp.error)}"
            )
        if tp.offset >= 0:
            result[(tp.topic, tp.partition)] = tp.offset
    return result


def list_offsets(
    conn: Connection, admin: AdminClient, specs: Mapping[Key, OffsetSpec], strict: bool = True
) -> dict[Key, int]:
    """One ListOffsets round for many partitions of many topics.

    With ``strict=False`` a partition the broker cannot answer for (a topic deleted
    since the group committed to it) is left out instead of failing the whole command.
    """
    if not specs:
        return {}
    request = {TopicPartition(t, p): spec for (t, p), spec in specs.items()}
    futures = admin.list_offsets(request, request_timeout=conn.timeout)
    result: dict[Key, int] = {}
    for tp, future in futures.items():
        try:
            result[(tp.topic, tp.partition)] = future.result(timeout=conn.timeout + 5).offset
        except KafkaException as exc:
            if strict:
                raise as_cli_error(
                    exc, f"cannot list offsets of {tp.topic}:{tp.partition}"
                ) from exc
    return result


def topic_partitions(conn: Connection, admin: AdminClient, topic: str) -> list[int]:
    """Partition ids of ``topic``; a missing topic is a user mistake, not a crash."""
    futures = admin.describe_topics(TopicCollection([topic]), request_timeout=conn.timeout)
    try:
        description = futures[topic].result(timeout=conn.timeout + 5)
    except KafkaException as exc:
        if _has_code(exc, KafkaError.UNKNOWN_TOPIC_OR_PART):
            raise CliError(f"topic {topic!r} does not exist") from None
        raise as_cli_error(exc, f"cannot describe topic {topic!r}") from exc
    return sorted(p.id for p in description.partitions)


# -- commands ----------------------------------------------------------------------------


@click.group("group")
def group_group() -> None:
    """List, describe and delete consumer groups; reset their committed offsets."""


@group_group.command("list")
@click.option(
    "--state",
    "states",
    multiple=True,
    type=click.Choice(list(_STATE_BY_NAME), case_sensitive=False),
    help="Only groups in this state (repeatable).",
)
@connection_options
def list_groups(conn: Connection, states: tuple[str, ...]) -> None:
    """Print every consumer group with its state and protocol type."""
    admin = conn.admin()
    kwargs: dict[str, Any] = {"request_timeout": conn.timeout}
    if states:
        kwargs["states"] = {_STATE_BY_NAME[s] for s in states}
    answer = conn.result(admin.list_consumer_groups(**kwargs), "cannot list consumer groups")
    for error in answer.errors or []:
        # One broker not answering should not hide the groups the others reported.
        detail = as_cli_error(error, "a broker did not list its groups").format_message()
        click.echo(f"warning: {detail}", err=True)
    rows = table("Group", "State", "Protocol type")
    for listing in sorted(answer.valid or [], key=lambda g: g.group_id):
        _add_row(
            rows,
            listing.group_id,
            state_name(getattr(listing, "state", None)),
            protocol_type(listing.is_simple_consumer_group),
        )
    print_table(stdout_console(), rows)


@dataclass
class _OffsetRow:
    topic: str
    partition: int
    committed: int | None
    end: int | None
    member: str | None

    def as_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "committed_offset": self.committed,
            "log_end_offset": self.end,
            "lag": lag(self.committed, self.end),
            "member_id": self.member,
        }


def _add_row(rows: Rows, *cells: str) -> None:
    """Cells are plain text: a group or client id like ``[red]x`` prints as typed."""
    rows.add_row(*cells)


def _dash(value: object) -> str:
    return "-" if value is None or value == "" else str(value)


def _assignment_text(partitions: Sequence[TopicPartition]) -> str:
    """``t:0,1;u:2``: compact and free of spaces, so a table row stays one line."""
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return ";".join(f"{t}:{','.join(map(str, sorted(ps)))}" for t, ps in sorted(by_topic.items()))


@group_group.command("describe")
@click.argument("group")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
@connection_options
def describe(conn: Connection, group: str, fmt: str) -> None:
    """State, members and per-partition offsets and lag of GROUP.

    Lag is log end offset minus committed offset; a partition that is assigned but has
    no commit yet shows '-', as in Kafka's tool, since its lag is not known.
    """
    admin = conn.admin()
    description = describe_group(conn, admin, group)
    if description is None:
        raise CliError(f"group {group!r} does not exist")
    owners: dict[Key, str] = {}
    for member in description.members:
        for tp in member.assignment.topic_partitions:
            owners[(tp.topic, tp.partition)] = member.member_id
    committed = committed_offsets(conn, admin, group)
    keys = sorted(set(committed) | set(owners))
    ends = list_offsets(conn, admin, {k: OffsetSpec.latest() for k in keys}, strict=False)
    rows = [_OffsetRow(t, p, committed.get((t, p)), ends.get((t, p)), owners.get((t, p)))
            for t, p in keys]
    state = state_name(getattr(description, "state", None))
    coordinator = description.coordinator
    if fmt == "json":
        document = {
            "group": group,
            "state": state,
            "protocol_type": protocol_type(description.is_simple_consumer_group),
            "assignor": description.partition_assignor or None,
            "coordinator": None if coordinator is None else {
                "id": coordinator.id, "host": coordinator.host, "port": coordinator.port
            },
            "members": [
                {
                    "member_id": m.member_id,
                    "group_instance_id": m.group_instance_id,
                    "client_id": m.client_id,
                    "host": m.host,
                    "assignment": [
                        {"topic": tp.topic, "partition": tp.partition}
                        for tp in sorted(m.assignment.topic_partitions,
                                         key=lambda tp: (tp.topic, tp.partition))
                    ],
                }
                for m in sorted(description.members, key=lambda m: m.member_id)
            ],
            "offsets": [row.as_json() for row in rows],
        }
        click.echo(json.dumps(document, indent=2))
        return
    console = stdout_console()
    where = "unknown" if coordinator is None else (
        f"{coordinator.id} ({coordinator.host}:{coordinator.port})"
    )
    print_line(
        console,
        f"Group: {group}  State: {state}  "
        f"ProtocolType: {protocol_type(description.is_simple_consumer_group)}  "
        f"Assignor: {_dash(description.partition_assignor)}  Coordinator: {where}",
    )
    if description.members:
        members = table("Member", "Instance", "Client", "Host", "Partitions",
                        title=f"Members ({len(description.members)})")
        for m in sorted(description.members, key=lambda m: m.member_id):
            _add_row(members, m.member_id, _dash(m.group_instance_id), _dash(m.client_id),
                            _dash(m.host), _dash(_assignment_text(m.assignment.topic_partitions)))
        print_table(console, members)
    else:
        print_line(console, "Members: none (the group is not consuming)")
    offsets = table("Topic", "Partition", "Committed", "End", "Lag", "Member", title="Offsets")
    for row in rows:
        _add_row(offsets, row.topic, str(row.partition), _dash(row.committed), _dash(row.end),
                        _dash(lag(row.committed, row.end)), _dash(row.member))
    print_table(console, offsets)


@group_group.command("delete")
@click.argument("groups", nargs=-1, required=True, metavar="GROUP...")
@connection_options
def delete(conn: Connection, groups: tuple[str, ...]) -> None:
    """Delete GROUP(s) and their committed offsets; only groups without members.

    Each group succeeds or fails on its own: a failure is one ``Error:`` line and makes
    the exit status 1, after the other groups were still tried.
    """
    admin = conn.admin()
    wanted = list(dict.fromkeys(groups))
    futures = admin.delete_consumer_groups(wanted, request_timeout=conn.timeout)
    failed = 0
    for group in wanted:
        try:
            futures[group].result(timeout=conn.timeout + 5)
        except KafkaException as exc:
            failed += 1
            if _has_code(exc, KafkaError.NON_EMPTY_GROUP):
                message = (f"group {group!r} has active members; stop its consumers before "
                           "deleting it (NON_EMPTY_GROUP)")
            elif _has_code(exc, KafkaError.GROUP_ID_NOT_FOUND):
                message = f"group {group!r} does not exist (GROUP_ID_NOT_FOUND)"
            else:
                message = as_cli_error(exc, f"cannot delete group {group!r}").format_message()
            click.echo(f"Error: {message}", err=True)
            continue
        click.echo(f"Deleted group {group}.")
    if failed:
        raise SystemExit(1)


def _resolve_partitions(
    conn: Connection, admin: AdminClient, specs: Sequence[tuple[str, list[int] | None]]
) -> list[Key]:
    """Every (topic, partition) named by ``--topic``, checked against the broker."""
    keys: list[Key] = []
    for topic, partitions in specs:
        existing = topic_partitions(conn, admin, topic)
        for p in existing if partitions is None else partitions:
            if p not in existing:
                raise CliError(f"topic {topic!r} has no partition {p}")
            if (topic, p) not in keys:
                keys.append((topic, p))
    return sorted(keys)


def _require_inactive(description: ConsumerGroupDescription | None, group: str) -> None:
    if description is None:
        return
    state = getattr(description, "state", None)
    if description.members or state not in _INACTIVE:
        raise CliError(
            f"cannot reset offsets of group {group!r} while it is active (state "
            f"{state_name(state)}, {len(description.members)} member(s)): stop its consumers "
            "first, Kafka only resets inactive groups"
        )


def apply_reset(
    conn: Connection, admin: AdminClient, group: str, new: Mapping[Key, int]
) -> None:
    """Commit the new offsets as the group's (OffsetCommit without a member, like Kafka)."""
    request = [ConsumerGroupTopicPartitions(
        group, [TopicPartition(t, p, offset) for (t, p), offset in sorted(new.items())]
    )]
    futures = admin.alter_consumer_group_offsets(request, request_timeout=conn.timeout)
    try:
        answer = futures[group].result(timeout=conn.timeout + 5)
    except KafkaException as exc:
        if _has_code(exc, KafkaError.UNKNOWN_MEMBER_ID, KafkaError.REBALANCE_IN_PROGRESS,
                     KafkaError.ILLEGAL_GENERATION):
            raise CliError(
                f"group {group!r} became active before the reset was applied; nothing was "
                "reset, stop its consumers and try again"
            ) from None
        raise as_cli_error(exc, f"cannot reset offsets of group {group!r}") from exc
    for tp in answer.topic_partitions or []:
        if tp.error is not None:
            raise CliError(
                f"cannot reset {tp.topic}:{tp.partition} of group {group!r}: "
                f"{describe_kafka_error(tp.error)}"
            )


@dataclass(frozen=True)
class ResetPlan:
    """What a reset would do: the partitions, their committed and their new offsets."""

    keys: list[Key]
    committed: dict[Key, int]
    new: dict[Key, int]


def plan_reset(
    conn: Connection,
    admin: AdminClient,
    group: str,
    strategy: Strategy,
    specs: Sequence[tuple[str, list[int] | None]],
) -> ResetPlan:
    """The reset plan, after checking that the group is inactive and the topics exist.

    Shared by ``group reset-offsets`` and the web console's dry run, so both show the
    same plan for the same input.
    """
    _require_inactive(describe_group(conn, admin, group), group)
    keys = _resolve_partitions(conn, admin, specs)
    committed = committed_offsets(conn, admin, group, keys)
    earliest = list_offsets(conn, admin, {k: OffsetSpec.earliest() for k in keys})
    latest = list_offsets(conn, admin, {k: OffsetSpec.latest() for k in keys})
    by_time = None
    if strategy.timestamp_ms is not None:
        by_time = list_offsets(
            conn, admin, {k: OffsetSpec.for_timestamp(strategy.timestamp_ms) for k in keys}
        )
    bounds = {k: (earliest[k], latest[k]) for k in keys}
    return ResetPlan(keys, committed, plan_offsets(strategy, keys, committed, bounds, by_time))


@group_group.command("reset-offsets")
@click.argument("group")
@click.option("--topic", "topics", multiple=True, required=True, metavar="TOPIC[:P[,P...]]",
              help="Topic to reset, optionally only these partitions (repeatable).")
@click.option("--to-earliest", is_flag=True, help="Move to the first offset still in the log.")
@click.option("--to-latest", is_flag=True, help="Move to the end of the log (skip everything).")
@click.option("--to-offset", type=int, metavar="N", help="Move to offset N (clamped to the log).")
@click.option("--to-datetime", metavar="ISO8601",
              help="Move to the first record at or after this time (local time without a zone).")
@click.option("--shift-by", type=int, metavar="N",
              help="Move the committed offset by N, negative to re-read (clamped to the log).")
@click.option("--dry-run", is_flag=True, help="Only print the plan (the default).")
@click.option("--execute", is_flag=True, help="Apply the plan.")
@connection_options
def reset_offsets(
    conn: Connection,
    group: str,
    topics: tuple[str, ...],
    to_earliest: bool,
    to_latest: bool,
    to_offset: int | None,
    to_datetime: str | None,
    shift_by: int | None,
    dry_run: bool,
    execute: bool,
) -> None:
    """Move GROUP's committed offsets; prints the plan, applies it only with --execute."""
    if dry_run and execute:
        raise CliError("--dry-run and --execute exclude each other")
    strategy = Strategy.from_options(to_earliest, to_latest, to_offset, to_datetime, shift_by)
    specs = [parse_topic_partitions(text) for text in topics]
    admin = conn.admin()
    plan = plan_reset(conn, admin, group, strategy, specs)
    rows = table("Topic", "Partition", "Current", "New")
    for key in plan.keys:
        _add_row(rows, key[0], str(key[1]), _dash(plan.committed.get(key)), str(plan.new[key]))
    print_table(stdout_console(), rows)
    if not execute:
        click.echo("Dry run: no offsets changed (add --execute to apply).", err=True)
        return
    apply_reset(conn, admin, group, plan.new)
    click.echo(f"Reset {len(plan.new)} partition(s) of group {group}.")
