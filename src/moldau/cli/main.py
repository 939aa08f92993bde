"""The ``moldau`` command: one root group, one module per command group."""

from __future__ import annotations

import click
import confluent_kafka

from .. import __version__
from .acl import acl_group
from .broker_cmd import broker
from .cluster import cluster_group
from .configs import config_group
from .console_cmd import console
from .consume import consume
from .errors import ErrorReportingGroup
from .group import group_group
from .log_tools import log_group
from .pipeline import pipeline_group
from .produce import produce
from .quota import quota_group
from .registry_cmd import registry
from .rest_cmd import rest
from .top import top
from .topic import topic_group
from .transaction import transaction_group
from .user import user_group
from .verify import verify


def _client_versions() -> str:
    # version() is typed as (str, int) but returns a bare string in some releases.
    client: object = confluent_kafka.version()
    client = client[0] if isinstance(client, tuple) else client
    return f"confluent-kafka {client}, librdkafka {confluent_kafka.libversion()[0]}"


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """``--version``, as Kafka's tools take it: the same lines as ``moldau version``."""
    if not value or ctx.resilient_parsing:
        return
    click.echo(f"moldau {__version__}")
    click.echo(_client_versions())
    ctx.exit()


@click.group(cls=ErrorReportingGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True,
              callback=_print_version, help="Print the version and exit.")
def cli() -> None:
    """moldau: a Kafka-compatible streaming platform (broker and client tools)."""


@cli.command("version")
def version() -> None:
    """Print the moldau version and the Kafka client library it uses."""
    click.echo(f"moldau {__version__}")
    click.echo(_client_versions())


cli.add_command(broker)
cli.add_command(topic_group)
cli.add_command(config_group)
cli.add_command(produce)
cli.add_command(consume)
cli.add_command(group_group)
cli.add_command(pipeline_group)
cli.add_command(log_group)
cli.add_command(verify)
cli.add_command(cluster_group)
cli.add_command(transaction_group)
cli.add_command(registry)
cli.add_command(console)
cli.add_command(top)
cli.add_command(rest)
cli.add_command(user_group)
cli.add_command(acl_group)
cli.add_command(quota_group)


def main() -> None:
    """Console-script entry point (``moldau`` and ``python -m moldau``)."""
    cli(prog_name="moldau")
