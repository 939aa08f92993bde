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
    from ..broker.log_level import ENV_VAR, LogLevelError, parse_log_level

    try:
        level = parse_log_level(os.environ.get(ENV_VAR))
    except LogLevelError as exc:
        raise CliError(str(exc)) from None
    # Configure logging before the config is read: it logs the keys it ignores.
    logging.basicConfig(level=level, format=LOG_FORMAT, stream=sys.stderr)
    from ..config import BrokerConfig, ConfigError

    try:
        config = BrokerConfig.load(config_path, overrides)
    except ConfigError as exc:
        raise CliError(f"invalid configuration: {exc}") from None

    from ..broker.errors import ClusterStartError
    from ..broker.server import run_broker
    from ..cluster.local import MetadataStoreError
    from ..log.errors import LogError

    try:
        run_broker(config)
    except OSError as exc:  # the port is taken (named by its listener), a data dir unusable
        where = f"{exc.filename}: " if exc.filename else ""
        raise CliError(f"broker stopped: {where}{exc.strerror or exc}") from None
    except (LogError, MetadataStoreError, ClusterStartError) as exc:
        # a log dir locked, not ours, unreadable; ZooKeeper unreachable, our id taken
        raise CliError(f"broker stopped: {exc}") from None
    except ConfigError as exc:  # a stored value a start-up check refuses
        raise CliError(f"broker stopped: invalid configuration: {exc}") from None
