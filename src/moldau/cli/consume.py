"""``moldau consume``: print records of a topic.

Without ``--group`` the consumer assigns partitions itself and joins no group, so
looking at a topic never moves anybody's committed offsets. With ``--group`` it
subscribes like any application consumer and commits what it printed (automatically,
and once more on exit); ``--from-beginning`` then only applies when the group has no
committed offset yet, as in Kafka.

It stops after ``--max-messages`` records, after ``--timeout-ms`` without a new record,
or on Ctrl-C or SIGTERM; a stop is a success (exit 0). The ``--timeout-ms`` clock starts
when partitions are first assigned, so a group's initial rebalance delay does not count.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

import click
from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)

from .connection import Connection, connection_options
from .errors import CliError, as_cli_error, describe_kafka_error
from .kafka_compat import parse_properties, topic_argument
from .records import TextFormat, render_json

_BATCH = 500
_POLL_S = 0.5


def start_offset(offset: str | None, from_beginning: bool, partition: int | None) -> int:
    """The offset to start each assigned partition at (librdkafka's logical offsets too)."""
    if offset is not None and from_beginning:
        raise CliError("use either --from-beginning or --offset, not both")
    if from_beginning or offset == "earliest":
        return OFFSET_BEGINNING
    if offset is None or offset == "latest":
        return OFFSET_END
    if not offset.isdigit():
        raise CliError(f"invalid --offset {offset!r}: expected a number, earliest or latest")
    if partition is None:
        raise CliError("--offset N needs --partition")
    return int(offset)


def _consumer_config(
    conn: Connection, group: str | None, from_beginning: bool
) -> dict[str, Any]:
    common = {"enable.partition.eof": False}
    if group is None:
        # librdkafka insists on a group.id, but with assign() and explicit offsets it never
        # talks to a group coordinator; keep it from storing or committing anything.
        return conn.client_config(**common, **{
            "group.id": "moldau-cli-unassigned",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
        })
    return conn.client_config(**common, **{
        "group.id": group,
        "auto.offset.reset": "earliest" if from_beginning else "latest",
    })


def _partitions(consumer: Consumer, conn: Connection, topic: str) -> list[int]:
    try:
        metadata = consumer.list_topics(timeout=conn.timeout)
    except KafkaException as exc:
        raise as_cli_error(exc, "cannot fetch metadata") from exc
    found = metadata.topics.get(topic)
    if found is None or found.error is not None:
        raise CliError(f"topic {topic!r} does not exist")
    return sorted(found.partitions)


class _ErrorFilter:
    """Decides which consumer errors end the run and prints each other one once."""

    def __init__(self) -> None:
        self._seen: set[int] = set()

    def check(self, error: KafkaError, topic: str) -> None:
        code = error.code()
        if code == KafkaError._PARTITION_EOF:
            return
        if code == KafkaError.UNKNOWN_TOPIC_OR_PART:
            raise CliError(f"topic {topic!r} does not exist")
        if error.fatal():
            raise CliError(f"consumer failed: {describe_kafka_error(error)}")
        if code not in self._seen:
            self._seen.add(code)
            click.echo(f"warning: {describe_kafka_error(error)}", err=True)


@contextlib.contextmanager
def stop_requests() -> Iterator[threading.Event]:
    """An event set by Ctrl-C or SIGTERM instead of an exception.

    A KeyboardInterrupt can land between printing a record and counting it (or, with
    ``--group``, between taking it and committing it); a flag checked between polls
    cannot, at the cost of reacting within one poll interval.
    """
    stop = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    def request_stop(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, request_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


class _Printer:
    """Polls records and writes them out; ``count`` survives a Ctrl-C mid-run."""

    def __init__(self, consumer: Consumer, topic: str, render: Callable[[Message], bytes]):
        self.consumer = consumer
        self.topic = topic
        self.render = render
        self.count = 0
        self._errors = _ErrorFilter()
        self._out = sys.stdout.buffer

    def run(
        self,
        max_messages: int | None,
        idle_timeout_s: float | None,
        stop: threading.Event,
        assigned: threading.Event,
        assignment_limit_s: float,
    ) -> None:
        """Print records until ``max_messages``, ``idle_timeout_s`` without one, or ``stop``.

        The idle timer starts when partitions are first assigned (``assigned``), not at
        start-up: a group's first join waits the broker's group.initial.rebalance.delay.ms
        (3 s in Kafka), which would otherwise eat a short timeout before a single fetch.
        Waiting for that assignment is bounded by ``assignment_limit_s``.
        """
        started = time.monotonic()
        deadline: float | None = None
        while (max_messages is None or self.count < max_messages) and not stop.is_set():
            wait = _POLL_S
            if deadline is None and idle_timeout_s is not None and assigned.is_set():
                deadline = time.monotonic() + idle_timeout_s
            if deadline is not None:
                wait = min(wait, deadline - time.monotonic())
                if wait <= 0:
                    return
            elif not assigned.is_set() and time.monotonic() - started > assignment_limit_s:
                raise CliError(
                    f"no partitions assigned within {assignment_limit_s:g} s (the group is "
                    "still rebalancing); a larger --timeout waits longer"
                )
            # Never take more than we will print: with --group, what librdkafka hands us
            # is what gets committed.
            want = _BATCH if max_messages is None else min(_BATCH, max_messages - self.count)
            printed = self._print(self.consumer.consume(num_messages=want, timeout=wait))
            if printed and idle_timeout_s is not None:
                deadline = time.monotonic() + idle_timeout_s

    def _print(self, messages: list[Message]) -> int:
        printed = 0
        for message in messages:
            error = message.error()
            if error is not None:
                self._errors.check(error, self.topic)
                continue
            self._out.write(self.render(message))
            printed += 1
        if printed:
            self._out.flush()
            self.count += printed
        return printed


class _GroupStart:
    """Where a group member starts and what it commits on exit, as Kafka's consumer does.

    librdkafka resolves "no committed offset" to the start or the end of the log only
    inside its fetcher, and reports no position until a record arrives; so a new group
    that read nothing (``latest`` on a quiet topic) would leave without any committed
    offset, and ``group reset-offsets --shift-by`` would find nothing to shift. Here the
    start is resolved on assignment and committed on exit when nothing was read, as the
    Java consumer commits its position.
    """

    def __init__(self, consumer: Consumer, conn: Connection, from_beginning: bool):
        self.consumer = consumer
        self.conn = conn
        self.from_beginning = from_beginning
        self.assigned = threading.Event()
        self._start: dict[tuple[str, int], int] = {}

    def on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        try:
            committed = consumer.committed(partitions, timeout=self.conn.timeout)
        except KafkaException:
            # Unknown commits must not be overridden by a guess: librdkafka decides.
            consumer.assign(partitions)
            self.assigned.set()
            return
        chosen = []
        for tp in committed:
            if tp.offset < 0:
                try:
                    low, high = consumer.get_watermark_offsets(
                        TopicPartition(tp.topic, tp.partition), timeout=self.conn.timeout
                    )
                except KafkaException:
                    chosen.append(tp)  # auto.offset.reset decides, as without this
                    continue
                offset = low if self.from_beginning else high
                self._start[(tp.topic, tp.partition)] = offset
                tp = TopicPartition(tp.topic, tp.partition, offset)
            chosen.append(tp)
        consumer.assign(chosen)
        self.assigned.set()

    def commit_final(self) -> None:
        """Commit the position of every assigned partition (the start if none was read)."""
        try:
            assignment = self.consumer.assignment()
            positions = self.consumer.position(assignment) if assignment else []
        except KafkaException:
            return
        offsets = []
        for tp in positions:
            offset = tp.offset if tp.offset >= 0 else self._start.get((tp.topic, tp.partition))
            if offset is not None and offset >= 0:
                offsets.append(TopicPartition(tp.topic, tp.partition, offset))
        if not offsets:
            return
        try:
            self.consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as exc:
            click.echo(f"warning: final commit failed: {as_cli_error(exc, 'commit')}", err=True)


@click.command("consume")
@topic_argument()
@click.option("--from-beginning", is_flag=True, help="Start at the earliest offset.")
@click.option("--offset", metavar="N|earliest|latest", help="Start offset (without --group).")
@click.option("--partition", type=click.IntRange(min=0), help="Read only this partition.")
@click.option("--max-messages", type=click.IntRange(min=1), help="Stop after N records.")
@click.option("--group", metavar="GROUP", help="Join this consumer group and commit offsets.")
@click.option(
    "--timeout-ms", type=click.IntRange(min=0),
    help="Stop after this long without a record, counted from the first partition "
         "assignment (default: run until Ctrl-C).",
)
@click.option("--print-key", is_flag=True)
@click.option("--print-timestamp", is_flag=True)
@click.option("--print-headers", is_flag=True)
@click.option("--print-partition-offset", is_flag=True)
@click.option("--key-separator", default="\t", show_default="TAB", help="Between text fields.")
@click.option("--property", "properties", multiple=True, metavar="KEY=VALUE",
              help="kafka-console-consumer's print.key, print.timestamp, print.partition, "
                   "print.offset, print.headers, print.value (true/false) and key.separator.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
@connection_options
def consume(
    conn: Connection,
    topic: str,
    from_beginning: bool,
    offset: str | None,
    partition: int | None,
    max_messages: int | None,
    group: str | None,
    timeout_ms: int | None,
    print_key: bool,
    print_timestamp: bool,
    print_headers: bool,
    print_partition_offset: bool,
    key_separator: str,
    properties: tuple[str, ...],
    fmt: str,
) -> None:
    """Print records of TOPIC to stdout, one per line."""
    if group is not None and (offset is not None or partition is not None):
        raise CliError("--offset and --partition cannot be used with --group")
    start = start_offset(offset, from_beginning, partition)
    props = parse_properties(properties, consumer=True)

    def chosen(prop: bool | None, flag: bool) -> bool:
        return flag if prop is None else prop or flag

    render: Callable[[Message], bytes] = render_json if fmt == "json" else TextFormat(
        separator=(props.key_separator or key_separator).encode(),
        key=chosen(props.print_key, print_key),
        timestamp=chosen(props.print_timestamp, print_timestamp),
        headers=chosen(props.print_headers, print_headers),
        partition=chosen(props.print_partition, print_partition_offset),
        offset=chosen(props.print_offset, print_partition_offset),
        value=True if props.print_value is None else props.print_value,
    ).render
    conn.check_reachable()
    consumer = Consumer(_consumer_config(conn, group, from_beginning))
    printer = _Printer(consumer, topic, render)
    members = _GroupStart(consumer, conn, from_beginning)
    idle_s = None if timeout_ms is None else timeout_ms / 1000
    try:
        partitions = _partitions(consumer, conn, topic)
        if partition is not None and partition not in partitions:
            raise CliError(f"topic {topic!r} has no partition {partition}")
        if group is not None:
            consumer.subscribe([topic], on_assign=members.on_assign)
        else:
            picked = partitions if partition is None else [partition]
            consumer.assign([TopicPartition(topic, p, start) for p in picked])
            members.assigned.set()
        with stop_requests() as stop:  # Ctrl-C is the normal way to stop
            printer.run(max_messages, idle_s, stop, members.assigned,
                        conn.timeout + (idle_s or 0))
        if group is not None:
            members.commit_final()
    finally:
        consumer.close()
    click.echo(f"Consumed {printer.count} records from {topic}", err=True)
