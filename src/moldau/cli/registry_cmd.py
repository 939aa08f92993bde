"""``moldau registry``: run the Schema Registry (Confluent's REST API) in the foreground.

Imports the registry (Starlette, uvicorn, fastavro: the ``moldau[registry]`` extra) only
when it runs, so the other commands work without the extra installed.
"""

from __future__ import annotations

import logging
import socket
import sys

import click

from .connection import Connection, connection_options
from .errors import CliError

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def _listen_address(listen: str) -> tuple[str, int]:
    host, sep, port = listen.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise CliError(f"invalid --listen {listen!r}: expected HOST:PORT")
    return host.strip("[]"), int(port)


def _check_bindable(host: str, port: int) -> None:
    """One clear line when the port is taken, instead of uvicorn's traceback-free exit."""
    try:
        with socket.create_server((host, port)):
            pass
    except OSError as exc:
        raise CliError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


@click.command("registry")
@connection_options
@click.option("--listen", default="127.0.0.1:8081", show_default=True, metavar="HOST:PORT",
              help="Where to serve the HTTP API.")
@click.option("--advertised-url", metavar="URL",
              help="How other registry processes reach this one (default http://LISTEN).")
@click.option("--group-id", default="schema-registry", show_default=True,
              help="Consumer group the registry processes elect their primary in.")
@click.option("--topic", default="_schemas", show_default=True,
              help="The compacted topic schemas are stored in.")
def registry(conn: Connection, listen: str, advertised_url: str | None, group_id: str,
             topic: str) -> None:
    """Run a Schema Registry until Ctrl-C or SIGTERM."""
    host, port = _listen_address(listen)
    conn.check_reachable()
    _check_bindable(host, port)
    try:
        import uvicorn

        from ..registry.app import build_app
    except ImportError as exc:
        raise CliError(f"the registry needs the 'registry' extra "
                       f"(pip install 'moldau[registry]'): {exc}") from None
    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT, stream=sys.stderr)
    client_config = conn.client_config(**{"client.id": "moldau-registry"})
    app = build_app(client_config, advertised_url or f"http://{host}:{port}", group_id, topic)
    uvicorn.run(app, host=host, port=port, log_level="warning", lifespan="on")
