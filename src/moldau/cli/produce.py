"""``moldau produce``: send lines from stdin or a file as records.

One line is one record (a trailing ``\\r\\n`` or ``\\n`` is removed; an empty line is an
empty value, as with kafka-console-producer). With ``--key-separator`` each line is
``KEY<SEP>VALUE`` split at the first separator. Lines are read as bytes, so any payload
that contains no newline passes through unchanged.

The command exits non-zero if even one record was not acknowledged: a script that pipes
data in must be able to trust a zero exit status.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import click
from confluent_kafka import KafkaError, KafkaException, Message, Producer
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

from .assignments import parse_header_pairs
from .connection import Connection, connection_options
from .errors import CliError, as_cli_error, describe_kafka_error
from .kafka_compat import parse_properties, topic_argument
from .output import stderr_console

_MAX_REPORTED_FAILURES = 5


@dataclass
class DeliveryReport:
    """Counts acknowledgements and failures as librdkafka reports them."""

    delivered: int = 0
    failed: int = 0
    first_error: str | None = None

    def callback(self, line_number: int) -> Callable[[KafkaError | None, Message], None]:
        def on_delivery(error: KafkaError | None, _message: Message) -> None:
            if error is None:
                self.delivered += 1
                return
            self.failed += 1
            text = error.str()
            self.first_error = self.first_error or text
            if self.failed <= _MAX_REPORTED_FAILURES:
                click.echo(f"record from line {line_number} not delivered: {text}", err=True)

        return on_delivery


def split_lines(
    stream: IO[bytes], key_separator: bytes | None
) -> Iterator[tuple[int, bytes | None, bytes, int]]:
    """Yield ``(line_number, key, value, bytes_read)`` for each input line."""
    for number, raw in enumerate(stream, start=1):
        line = raw[:-1] if raw.endswith(b"\n") else raw
        line = line[:-1] if line.endswith(b"\r") else line
        if key_separator is None:
            yield number, None, line, len(raw)
            continue
        key, sep, value = line.partition(key_separator)
        if not sep:
            raise CliError(f"line {number} has no key separator {key_separator.decode()!r}")
        yield number, key, value, len(raw)


def _check_topic(producer: Producer, conn: Connection, topic: str, partition: int | None) -> None:
    """Refuse early, rather than after the delivery timeout, when the target is wrong.

    The metadata request names the topic and allows auto-creation, as any producer's
    does: a broker with ``auto.create.topics.enable`` creates a new topic here, and only
    a broker that would refuse the records gets the producer refused.
    """
    try:
        metadata = producer.list_topics(topic, timeout=conn.timeout)
    except KafkaException as exc:
        raise as_cli_error(exc, "cannot fetch metadata") from exc
    found = metadata.topics.get(topic)
    error = None if found is None else found.error
    if found is None or (error is not None and error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
        raise CliError(
            f"topic {topic!r} does not exist and the broker does not create topics on first "
            f"use (auto.create.topics.enable=false): moldau topic create {topic}"
        )
    if error is not None and error.code() != KafkaError.LEADER_NOT_AVAILABLE:
        raise CliError(f"cannot produce to topic {topic!r}: {describe_kafka_error(error)}")
    if partition is not None and found.partitions and partition not in found.partitions:
        raise CliError(f"topic {topic!r} has no partition {partition}")


def _progress(path: Path | None) -> Progress | contextlib.nullcontext[None]:
    """A byte-count progress bar for files shown on a terminal; nothing for stdin."""
    console = stderr_console()
    if path is None or not console.is_terminal:
        return contextlib.nullcontext()
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TextColumn("{task.fields[records]} records"),
        TimeRemainingColumn(),
        console=console,
    )


def _produce_one(producer: Producer, topic: str, kwargs: dict[str, Any]) -> None:
    """Hand one record to librdkafka, waiting for queue space when it is full."""
    while True:
        try:
            producer.produce(topic, **kwargs)
            break
        except BufferError:
            producer.poll(0.1)
    producer.poll(0)


@click.command("produce")
@topic_argument()
@click.option(
    "--file", "path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Read lines from this file instead of stdin.",
)
@click.option("--key-separator", metavar="SEP", help="Split each line into KEY SEP VALUE.")
@click.option("--partition", type=click.IntRange(min=0), help="Send every record here.")
@click.option("--acks", type=click.Choice(["0", "1", "all"]), default="all", show_default=True)
@click.option(
    "--compression",
    type=click.Choice(["none", "gzip", "snappy", "lz4", "zstd"]),
    default="none",
    show_default=True,
)
@click.option(
    "--header", "headers", multiple=True, metavar="KEY=VALUE", help="Add to every record."
)
@click.option("--property", "properties", multiple=True, metavar="KEY=VALUE",
              help="kafka-console-producer's parse.key=true and key.separator (default TAB).")
@click.option("--linger-ms", type=click.IntRange(min=0), default=5, show_default=True)
@click.option(
    "--delivery-timeout-ms", type=click.IntRange(min=1), default=30_000, show_default=True,
    help="Give up on a record not acknowledged within this time.",
)
@connection_options
def produce(
    conn: Connection,
    topic: str,
    path: Path | None,
    key_separator: str | None,
    partition: int | None,
    acks: str,
    compression: str,
    headers: tuple[str, ...],
    properties: tuple[str, ...],
    linger_ms: int,
    delivery_timeout_ms: int,
) -> None:
    """Send each input line to TOPIC as one record."""
    if key_separator == "":
        raise CliError("--key-separator must not be empty")
    props = parse_properties(properties, consumer=False)
    if props.parse_key and key_separator is None:
        # kafka-console-producer splits at key.separator only with parse.key=true (TAB default)
        key_separator = props.key_separator or "\t"
    header_pairs = parse_header_pairs(headers, "--header")
    conn.check_reachable()
    producer = Producer(conn.client_config(**{
        "acks": acks,
        "compression.type": compression,
        "linger.ms": linger_ms,
        "delivery.timeout.ms": delivery_timeout_ms,
    }))
    _check_topic(producer, conn, topic, partition)
    report = DeliveryReport()
    separator = None if key_separator is None else key_separator.encode()
    stream: IO[bytes] = path.open("rb") if path else sys.stdin.buffer
    extra: dict[str, Any] = {}
    if partition is not None:
        extra["partition"] = partition
    if header_pairs:
        extra["headers"] = header_pairs
    flush_timeout = delivery_timeout_ms / 1000 + conn.timeout
    try:
        sent = _send_lines(producer, topic, stream, path, separator, extra, report)
    except (CliError, KeyboardInterrupt) as exc:
        # Records handed over before the problem still count: deliver them, then say so.
        producer.flush(flush_timeout)
        reason = exc.message if isinstance(exc, CliError) else "interrupted"
        raise CliError(f"{reason} ({report.delivered} records produced before that)") from None
    undelivered = producer.flush(flush_timeout)
    if report.failed or undelivered:
        missing = report.failed + undelivered
        reason = report.first_error or "no acknowledgement in time"
        raise CliError(f"{missing} of {sent} records were not delivered to {topic}: {reason}")
    click.echo(f"Produced {report.delivered} records to {topic}", err=True)


def _send_lines(
    producer: Producer,
    topic: str,
    stream: IO[bytes],
    path: Path | None,
    separator: bytes | None,
    extra: dict[str, Any],
    report: DeliveryReport,
) -> int:
    """Produce every line of ``stream``; returns how many records were handed over."""
    sent = 0
    with stream, _progress(path) as progress:
        task = None
        if progress is not None and path is not None:
            task = progress.add_task(path.name, total=path.stat().st_size, records=0)
        for number, key, value, size in split_lines(stream, separator):
            record: dict[str, Any] = {"value": value, "on_delivery": report.callback(number)}
            if key is not None:
                record["key"] = key
            _produce_one(producer, topic, {**record, **extra})
            sent += 1
            if progress is not None and task is not None:
                progress.update(task, advance=size, records=sent)
    return sent
