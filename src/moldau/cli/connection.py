"""How CLI commands reach a broker: shared options, a fast reachability check, clients.

Every client command takes ``--bootstrap-server/-b`` and ``--timeout``. librdkafka on its
own waits for the full timeout before admitting that nobody is listening, and meanwhile
logs retry noise to stderr; so we first try a plain TCP connect to the bootstrap
addresses (fails in milliseconds when the port is closed) and route librdkafka's own log
lines into a silent Python logger (``MOLDAU_CLIENT_LOG=1`` shows them when debugging).
"""

from __future__ import annotations

import concurrent.futures
import functools
import logging
import os
import socket
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, TypeVar

import click
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from .client_security import ClientSecurity
from .errors import CliError, as_cli_error

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
DEFAULT_TIMEOUT_S = 10.0

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


def _client_logger() -> logging.Logger:
    """The logger handed to librdkafka: silent unless MOLDAU_CLIENT_LOG is set."""
    logger = logging.getLogger("moldau.cli.librdkafka")
    if not logger.handlers:
        logger.propagate = False
        if os.environ.get("MOLDAU_CLIENT_LOG"):
            logger.addHandler(logging.StreamHandler(sys.stderr))
            logger.setLevel(logging.DEBUG)
        else:
            logger.addHandler(logging.NullHandler())
    return logger


@dataclass(frozen=True)
class Connection:
    """Where the broker is, how long we are willing to wait for it, and the client settings
    (TLS, SASL) of ``--command-config``/``-X`` for commands that take them."""

    bootstrap: str
    timeout: float
    #: librdkafka client settings, given to every client made here.
    settings: Mapping[str, Any] = field(default_factory=dict)

    @cached_property
    def security(self) -> ClientSecurity | None:
        """The TLS and SASL the settings ask for, for the CLI's own raw requests; worked out
        only when one is sent (librdkafka's clients can do more, GSSAPI for one)."""
        return ClientSecurity.from_settings(self.settings)

    @property
    def timeout_ms(self) -> int:
        return max(1, int(self.timeout * 1000))

    def client_config(self, **extra: Any) -> dict[str, Any]:
        """librdkafka settings shared by the admin client, producers and consumers."""
        config: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap,
            "logger": _client_logger(),
            "socket.connection.setup.timeout.ms": self.timeout_ms,
            "client.id": "moldau-cli",
        }
        config.update(self.settings)
        config.update(extra)
        return config

    def addresses(self) -> list[tuple[str, int]]:
        """The bootstrap list as (host, port) pairs, rejecting malformed entries early."""
        result = []
        for item in self.bootstrap.split(","):
            entry = item.strip()
            if "://" in entry:
                entry = entry.split("://", 1)[1]
            host, sep, port = entry.rpartition(":")
            host = host.strip("[]")
            if not sep or not host or not port.isdigit():
                raise CliError(f"invalid bootstrap server {item.strip()!r}: expected HOST:PORT")
            result.append((host, int(port)))
        return result

    def check_reachable(self) -> None:
        """Fail fast with one clear line when no bootstrap address accepts a connection."""
        last_error = "no address given"
        for host, port in self.addresses():
            try:
                with socket.create_connection((host, port), timeout=self.timeout):
                    return
            except OSError as exc:
                last_error = f"{host}:{port}: {exc.strerror or exc}"
        raise CliError(
            f"cannot reach a broker at {self.bootstrap} within {self.timeout:g} s ({last_error})"
        )

    def admin(self) -> AdminClient:
        """An AdminClient, after checking that somebody is listening."""
        self.check_reachable()
        try:
            return AdminClient(self.client_config())
        except Exception as exc:  # librdkafka refuses unknown or bad settings here
            raise CliError(f"invalid client setting: {exc}") from None

    def result(self, future: concurrent.futures.Future[T], context: str) -> T:
        """Wait for an admin future, turning client errors into a CliError with ``context``."""
        try:
            return future.result(timeout=self.timeout + 5)
        except KafkaException as exc:
            raise as_cli_error(exc, context) from exc
        except concurrent.futures.TimeoutError:
            raise CliError(f"{context}: no answer within {self.timeout:g} s") from None


def connection_options(command: F) -> F:
    """Add ``-b/--bootstrap-server`` and ``--timeout``; pass them on as ``conn``."""

    @click.option(
        "-b",
        "--bootstrap-server",
        "bootstrap_server",
        envvar="MOLDAU_BOOTSTRAP_SERVER",
        default=DEFAULT_BOOTSTRAP,
        show_default=True,
        metavar="HOST:PORT[,...]",
        help="Broker(s) to contact first (env MOLDAU_BOOTSTRAP_SERVER).",
    )
    @click.option(
        "--timeout",
        "timeout_s",
        type=click.FloatRange(min=0.1),
        envvar="MOLDAU_TIMEOUT",
        default=DEFAULT_TIMEOUT_S,
        show_default=True,
        metavar="SECONDS",
        help="How long to wait for the broker before giving up.",
    )
    @functools.wraps(command)
    def wrapper(*args: Any, bootstrap_server: str, timeout_s: float, **kwargs: Any) -> Any:
        return command(*args, conn=Connection(bootstrap_server, timeout_s), **kwargs)

    return wrapper  # type: ignore[return-value]
