"""``moldau verify``: check a Kafka-compatible cluster keeps what it acknowledges.

Producers send unique values with acks=all (idempotent by default), consumers read every
partition back, and the checker (``moldau.verify.checker``) reports lost, duplicated,
reordered, inconsistent and unexpected records. Exit status 0 means the run was clean, 1
that anomalies were found (or that nothing was acknowledged, so nothing was checked).
The command is a plain client: point it at any cluster.
"""

from __future__ import annotations

import sys

import click
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import NewTopic

from ..verify.checker import check
from ..verify.nemesis import DeleteRecordsNemesis, Nemesis
from ..verify.report import as_json, as_text
from ..verify.workload import WorkloadConfig, run_workload
from .connection import Connection, connection_options
from .errors import CliError, as_cli_error

_NEMESES = {"none": Nemesis, "delete-records": DeleteRecordsNemesis}


def _ensure_topic(conn: Connection, topic: str, partitions: int,
                  replication_factor: int | None) -> str:
    """Create ``topic`` when it does not exist; say which of the two happened."""
    admin = conn.admin()
    new_topic = NewTopic(topic, num_partitions=partitions,
                         replication_factor=-1 if replication_factor is None
                         else replication_factor)
    futures = admin.create_topics([new_topic], request_timeout=conn.timeout)
    try:
        futures[topic].result(timeout=conn.timeout + 5)
    except KafkaException as exc:
        error = exc.args[0] if exc.args else None
        if isinstance(error, KafkaError) and error.code() == KafkaError.TOPIC_ALREADY_EXISTS:
            return "existing"
        raise as_cli_error(exc, f"cannot create topic {topic!r}") from exc
    return "created"


@click.command("verify")
@connection_options
@click.option("--topic", default="moldau-verify", show_default=True,
              help="Topic to write and read; created when missing, used as it is otherwise.")
@click.option("--partitions", type=click.IntRange(min=1), default=3, show_default=True,
              help="Partitions of a topic created by this run.")
@click.option("--replication-factor", type=click.IntRange(min=1), default=None,
              help="Replication factor of a created topic [default: the broker's].")
@click.option("--producers", type=click.IntRange(min=1, max=64), default=2, show_default=True)
@click.option("--consumers", type=click.IntRange(min=1, max=64), default=2, show_default=True,
              help="Each consumer reads every partition; their reads are compared.")
@click.option("--records", type=click.IntRange(min=1), default=None,
              help="Records to send in all (split among producers).")
@click.option("--duration", "duration_s", type=click.FloatRange(min=0.1), default=None,
              metavar="SECONDS",
              help="Stop sending after this long [default: 10 s unless --records is given].")
@click.option("--rate", type=click.FloatRange(min=0), default=0.0, show_default=True,
              help="Records per second over all producers; 0: as fast as acknowledged.")
@click.option("--value-size", type=click.IntRange(min=0, max=1_000_000), default=64,
              show_default=True, help="Bytes per value (ids are never cut).")
@click.option("--acks", type=click.Choice(["all", "-1", "1"]), default="all", show_default=True)
@click.option("--idempotence/--no-idempotence", default=True, show_default=True,
              help="Idempotent producers (needs --acks all).")
@click.option("--isolation-level", type=click.Choice(["read_uncommitted", "read_committed"]),
              default="read_uncommitted", show_default=True)
@click.option("--read-timeout", "read_timeout_s", type=click.FloatRange(min=0.1), default=30.0,
              show_default=True, metavar="SECONDS",
              help="Longest read phase: consumers stop earlier once past every acked offset.")
@click.option("--nemesis", type=click.Choice(sorted(_NEMESES)), default="none",
              show_default=True,
              help="Faults to inject; delete-records deletes acked records to show loss is caught.")
@click.option("--format", "output_format", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
@click.option("--max-examples", type=click.IntRange(min=0), default=10, show_default=True,
              help="Anomalies listed per kind (counts are always complete).")
def verify(conn: Connection, topic: str, partitions: int, replication_factor: int | None,
           producers: int, consumers: int, records: int | None, duration_s: float | None,
           rate: float, value_size: int, acks: str, idempotence: bool, isolation_level: str,
           read_timeout_s: float, nemesis: str, output_format: str, max_examples: int) -> None:
    """Produce unique values, read them back, report what the cluster lost or changed.

    Exit status: 0 clean, 1 anomalies found (or an error).
    """
    if idempotence and acks not in ("all", "-1"):
        raise CliError(f"--acks {acks} needs --no-idempotence (idempotent producers use acks=all)")
    if records is None and duration_s is None:
        duration_s = 10.0
    status = _ensure_topic(conn, topic, partitions, replication_factor)
    config = WorkloadConfig(
        client_config=conn.client_config(),
        topic=topic, producers=producers, consumers=consumers, records=records,
        duration_s=duration_s, rate=rate, value_size=value_size, acks=acks,
        idempotence=idempotence, isolation_level=isolation_level,
        read_timeout_s=read_timeout_s, timeout_s=conn.timeout,
        flush_timeout_s=max(30.0, conn.timeout * 3),
    )
    try:
        history = run_workload(config, _NEMESES[nemesis]())
    except KafkaException as exc:
        raise as_cli_error(exc, f"cannot prepare the run on topic {topic!r}") from exc
    verdict = check(history)
    settings = {"topic": status, "producers": producers, "consumers": consumers, "acks": acks,
                "idempotence": idempotence, "isolation": isolation_level, "nemesis": nemesis}
    render = as_json if output_format == "json" else as_text
    click.echo(render(verdict, history, settings, max_examples))
    if verdict.acked == 0:
        raise CliError("no record was acknowledged, so nothing was checked")
    sys.exit(0 if verdict.clean else 1)
