"""An AdminClient for commands that may talk to a secured broker (``moldau user``,
``moldau acl``; ``moldau quota`` uses the same settings for its raw requests):
``--command-config FILE`` reads client settings (librdkafka keys such as
``security.protocol``, ``sasl.mechanism``, ``sasl.username``, ``sasl.password``,
``ssl.ca.location``) from a properties file, ``-X KEY=VALUE`` sets one."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
from confluent_kafka.admin import AdminClient

from ..config.properties import load_properties
from .assignments import parse_assignments
from .connection import Connection, connection_options
from .errors import CliError


@dataclass(frozen=True)
class SecuredAdmin:
    conn: Connection
    admin: AdminClient


def client_settings(command_config: Path | None, settings: tuple[str, ...]) -> dict[str, Any]:
    """The client settings of ``--command-config FILE`` overridden by each ``-X KEY=VALUE``."""
    extra: dict[str, Any] = {}
    if command_config is not None:
        try:
            extra.update(load_properties(command_config))
        except OSError as exc:
            raise CliError(f"cannot read {command_config}: {exc.strerror or exc}") from None
    extra.update(parse_assignments(settings, "-X"))
    return extra


def secured_admin(conn: Connection, command_config: Path | None, settings: tuple[str, ...]
                  ) -> SecuredAdmin:
    extra = client_settings(command_config, settings)
    conn.check_reachable()
    try:
        return SecuredAdmin(conn, AdminClient(conn.client_config(**extra)))
    except Exception as exc:  # librdkafka refuses unknown or bad settings here
        raise CliError(f"invalid client setting: {exc}") from None


def secured_admin_options(command: Any) -> Any:
    """``--command-config``, ``-X`` and the connection options."""
    return connection_options(client_settings_options(command))


def client_settings_options(command: Any) -> Any:
    """``--command-config FILE`` and ``-X KEY=VALUE`` (see :func:`client_settings`)."""
    command = click.option("--command-config", type=click.Path(path_type=Path),
                           help="Properties file of client settings (security.protocol, "
                                "sasl.*, ssl.*).")(command)
    command = click.option("-X", "settings", multiple=True, metavar="KEY=VALUE",
                           help="One client setting (repeatable).")(command)
    return command
