"""``moldau pipeline``: run the example Spark pipelines against a broker.

Spark and PostgreSQL support come from the ``spark`` extra; without it the command says
how to install it instead of failing with an import error. Without ``--postgres`` a
throw-away PostgreSQL server is started in a temporary directory (Debian's
``postgresql`` package) and removed on exit, so one command runs the whole demo.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path

import click

from .connection import Connection, connection_options
from .errors import CliError


@click.group("pipeline")
def pipeline_group() -> None:
    """Example Structured Streaming pipelines (needs moldau[spark])."""


TEMPORARY_POSTGRES_NOTE = ("a temporary server, removed when the pipeline stops; "
                           "pass --postgres DSN to keep the counts")


@contextlib.contextmanager
def _postgres(dsn: str | None) -> Iterator[tuple[str, str | None]]:
    """The DSN to write to and what to tell the user about that server."""
    if dsn:
        yield dsn, None
        return
    from ..spark.pipelines.local_postgres import LocalPostgres, PostgresUnavailable

    try:
        server = LocalPostgres().start()
    except PostgresUnavailable as exc:
        raise CliError(f"{exc}; or pass --postgres DSN") from None
    click.echo(f"started a temporary PostgreSQL at {server.dsn}", err=True)
    try:
        yield server.dsn, TEMPORARY_POSTGRES_NOTE
    finally:
        server.stop()


@pipeline_group.command("activity")
@connection_options
@click.option("--postgres", "postgres_dsn", envvar="MOLDAU_POSTGRES_DSN", metavar="DSN",
              help="PostgreSQL for the counts (env MOLDAU_POSTGRES_DSN); default: a "
                   "temporary local server.")
@click.option("--state-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Checkpoints and the Parquet archive (default: a new temporary directory).")
@click.option("--rate", type=click.FloatRange(min=0), default=50.0, show_default=True,
              help="Page views per second to generate; 0 generates none.")
@click.option("--malformed", "malformed_fraction", type=click.FloatRange(0, 1), default=0.01,
              show_default=True, help="Fraction of generated events that are malformed.")
@click.option("--duration", type=click.FloatRange(min=1), metavar="SECONDS",
              help="Stop after this long (default: run until Ctrl-C).")
@click.option("--available-now", is_flag=True,
              help="Process what is in the topic now, then exit (Trigger.AvailableNow).")
@click.option("--max-offsets-per-trigger", type=click.IntRange(min=1),
              help="Cap on records per micro-batch.")
@click.option("--trigger-seconds", type=click.FloatRange(min=0.1), default=5.0,
              show_default=True, help="Micro-batch interval.")
def activity(conn: Connection, postgres_dsn: str | None, state_dir: Path | None, rate: float,
             malformed_fraction: float, duration: float | None, available_now: bool,
             max_offsets_per_trigger: int | None, trigger_seconds: float) -> None:
    """Website activity tracking: page views -> per-minute counts, DLQ and archive.

    Generates page-view events to `page-views`, counts views and unique users per page
    per minute into `page-view-counts` and PostgreSQL, sends malformed events to
    `page-views-dlq` and archives raw events as Parquet. Ctrl-C stops cleanly.
    """
    try:
        from ..spark.pipelines.activity.job import ActivityConfig
        from ..spark.pipelines.activity.runner import GeneratorConfig, QueryFailed, run
    except ImportError as exc:
        raise CliError(f"Spark support is not installed ({exc.name}): "
                       "pip install 'moldau[spark]'") from None
    conn.check_reachable()
    state = state_dir or Path(tempfile.mkdtemp(prefix="moldau-activity-"))
    with _postgres(postgres_dsn) as (dsn, postgres_note):
        config = ActivityConfig(
            bootstrap=conn.bootstrap, postgres_dsn=dsn, checkpoint_dir=state / "checkpoints",
            archive_dir=state / "archive", max_offsets_per_trigger=max_offsets_per_trigger,
            trigger_seconds=trigger_seconds, available_now=available_now)
        generator = GeneratorConfig(rate, malformed_fraction) if rate > 0 else None
        click.echo(f"state in {state}", err=True)
        try:
            run(config, None if available_now else generator, click.echo,
                duration_s=duration, postgres_note=postgres_note)
        except QueryFailed as exc:
            raise CliError(str(exc)) from None
