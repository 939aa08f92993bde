"""Client settings for commands that may talk to a secured broker (``moldau acl``, ``user``,
``quota``, ``transaction``, ``cluster reassign|log-dirs|elect-leaders``):
``--command-config FILE`` reads client settings (librdkafka keys such as
``security.protocol``, ``sasl.mechanism``, ``sasl.username``, ``sasl.password``,
``ssl.ca.location``) from a properties file, ``-X KEY=VALUE`` sets one. The command's
connection carries them: its admin client uses them, and so do the CLI's raw requests."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from ..config.properties import load_properties
from .assignments import parse_assignments
from .connection import Connection, connection_options
from .errors import CliError

F = TypeVar("F", bound=Callable[..., Any])


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


def secured(conn: Connection, command_config: Path | None,
            settings: tuple[str, ...]) -> Connection:
    """``conn`` with the client settings of ``--command-config`` and ``-X``."""
    return dataclasses.replace(conn, settings=client_settings(command_config, settings))


def secured_admin_options(command: F) -> F:
    """``--command-config``, ``-X`` and the connection options: the command's ``conn``
    carries those settings (``conn.admin()`` uses them, ``conn.security`` gives them to raw
    requests)."""

    @functools.wraps(command)
    def wrapper(*args: Any, conn: Connection, command_config: Path | None,
                settings: tuple[str, ...], **kwargs: Any) -> Any:
        return command(*args, conn=secured(conn, command_config, settings), **kwargs)

    return connection_options(client_settings_options(wrapper))


def client_settings_options(command: Any) -> Any:
    """``--command-config FILE`` and ``-X KEY=VALUE`` (see :func:`client_settings`)."""
    command = click.option("--command-config", type=click.Path(path_type=Path),
                           help="Properties file of client settings (security.protocol, "
                                "sasl.*, ssl.*).")(command)
    command = click.option("-X", "settings", multiple=True, metavar="KEY=VALUE",
                           help="One client setting (repeatable).")(command)
    return command
