"""``moldau broker``: run a broker in the foreground.

The only command that imports broker code, and only when it runs, so that client
commands start fast and keep working while the broker package changes underneath.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import click

from .errors import CliError

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


@click.command("broker")
@click.option(
    "--config", "config_path", type=click.Path(dir_okay=False, path_type=Path),
    help="A server.properties file (Kafka's key names).",
)
@click.option(
    "--override", "overrides", multiple=True, metavar="KEY=VALUE",
    help="Set a config key; wins over the file. Repeatable.",
)
def broker(config_path: Path | None, overrides: tuple[str, ...]) -> None:
    """Run a broker until Ctrl-C or SIGTERM."""
    # Configure logging before the config is read: it logs the keys it ignores.
    logging.basicConfig(
        level=os.environ.get("MOLDAU_LOG_LEVEL", "INFO"), format=LOG_FORMAT, stream=sys.stderr
    )
    from ..config import BrokerConfig, ConfigError

    try:
        config = BrokerConfig.load(config_path, overrides)
    except ConfigError as exc:
        raise CliError(f"invalid configuration: {exc}") from None

    from ..broker.server import run_broker
    from ..log.errors import LogError

    try:
        run_broker(config)
    except OSError as exc:  # typically the port is taken or the data dir is not writable
        raise CliError(f"broker stopped: {exc}") from None
    except LogError as exc:  # a log dir locked by another broker, or not ours
        raise CliError(f"broker stopped: {exc}") from None
