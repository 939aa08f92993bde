"""``moldau verify``: check a Kafka-compatible cluster keeps what it acknowledges.

Producers send unique values with acks=all (idempotent by default), consumers read every
partition back, and the checker (``moldau.verify.checker``) reports lost, duplicated,
reordered, inconsistent and unexpected records. Exit status 0 means the run was clean, 1
that anomalies were found (or that nothing was acknowledged, so nothing was checked).
The command is a plain client: point it at any cluster.
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import click
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import NewTopic

from ..verify.checker import Verdict, check
from ..verify.local_broker import LocalBroker, LocalBrokerError
from ..verify.nemesis import DeleteRecordsNemesis, KillNemesis, Nemesis
from ..verify.report import as_json, as_text
from ..verify.workload import WorkloadConfig, run_workload
from .connection import Connection, connection_options
from .errors import CliError, as_cli_error

_NEMESES = ("none", "delete-records", "kill")


@contextlib.contextmanager
def _local_broker(wanted: bool) -> Iterator[LocalBroker | None]:
    """A broker of our own in a temporary directory, stopped and removed at the end."""
    if not wanted:
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="moldau-verify-") as workdir:
        broker = LocalBroker(Path(workdir))
        try:
            broker.start()
            yield broker
        except LocalBrokerError as exc:
            raise CliError(str(exc)) from None
        finally:
            broker.stop()


def _nemesis(name: str, broker: LocalBroker | None, interval_s: float) -> Nemesis:
    if name == "delete-records":
        return DeleteRecordsNemesis()
    if name == "kill":
        if broker is None:
            raise CliError("--nemesis kill needs --local-broker: verify kills only a broker "
                           "it started itself")
        return KillNemesis(broker, interval_s)
    return Nemesis()


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
@click.option("--nemesis", type=click.Choice(_NEMESES), default="none", show_default=True,
              help="Faults: delete-records deletes acked records (loss must be reported); "
                   "kill: kill -9 and restart the --local-broker, alternately.")
@click.option("--nemesis-interval", "nemesis_interval_s", type=click.FloatRange(min=0.1),
              default=3.0, show_default=True, metavar="SECONDS",
              help="Seconds between two strikes of a timed nemesis (kill).")
@click.option("--local-broker", is_flag=True,
              help="Start a moldau broker of our own (temporary data) instead of using -b.")
@click.option("--format", "output_format", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
@click.option("--max-examples", type=click.IntRange(min=0), default=10, show_default=True,
              help="Anomalies listed per kind (counts are always complete).")
def verify(conn: Connection, topic: str, partitions: int, replication_factor: int | None,
           producers: int, consumers: int, records: int | None, duration_s: float | None,
           rate: float, value_size: int, acks: str, idempotence: bool, isolation_level: str,
           read_timeout_s: float, nemesis: str, nemesis_interval_s: float, local_broker: bool,
           output_format: str, max_examples: int) -> None:
    """Produce unique values, read them back, report what the cluster lost or changed.

    Exit status: 0 clean, 1 anomalies found (or an error).
    """
    if idempotence and acks not in ("all", "-1"):
        raise CliError(f"--acks {acks} needs --no-idempotence (idempotent producers use acks=all)")
    if records is None and duration_s is None:
        duration_s = 10.0
    if nemesis == "kill" and not local_broker:
        _nemesis(nemesis, None, nemesis_interval_s)  # the one-line refusal
    with _local_broker(local_broker) as own:
        if own is not None:
            conn = Connection(own.bootstrap, conn.timeout)
        verdict, text = _run(
            conn, topic, partitions, replication_factor,
            WorkloadConfig(
                client_config=conn.client_config(),
                topic=topic, producers=producers, consumers=consumers, records=records,
                duration_s=duration_s, rate=rate, value_size=value_size, acks=acks,
                idempotence=idempotence, isolation_level=isolation_level,
                read_timeout_s=read_timeout_s, timeout_s=conn.timeout,
                flush_timeout_s=max(30.0, conn.timeout * 3),
            ),
            _nemesis(nemesis, own, nemesis_interval_s),
            output_format, max_examples)
    click.echo(text)
    if verdict.acked == 0:
        raise CliError("no record was acknowledged, so nothing was checked")
    sys.exit(0 if verdict.clean else 1)


def _run(conn: Connection, topic: str, partitions: int, replication_factor: int | None,
         config: WorkloadConfig, nemesis: Nemesis, output_format: str,
         max_examples: int) -> tuple[Verdict, str]:
    """Prepare the topic, run the workload, check it; the verdict and its rendering."""
    status = _ensure_topic(conn, topic, partitions, replication_factor)
    try:
        history = run_workload(config, nemesis)
    except KafkaException as exc:
        raise as_cli_error(exc, f"cannot prepare the run on topic {topic!r}") from exc
    verdict = check(history)
    settings = {"topic": status, "producers": config.producers, "consumers": config.consumers,
                "acks": config.acks, "idempotence": config.idempotence,
                "isolation": config.isolation_level, "nemesis": nemesis.name}
    render = as_json if output_format == "json" else as_text
    return verdict, render(verdict, history, settings, max_examples)
