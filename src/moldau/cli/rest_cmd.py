"""``moldau rest``: run the REST Proxy (Confluent's v2/v3 HTTP API) in the foreground.

Its packages (Starlette, uvicorn, orjson) are the ``moldau[rest]`` extra, imported only when
the command runs, so the rest of the CLI works without them.
"""

from __future__ import annotations

import logging
import os
import socket
import sys

import click

from .connection import DEFAULT_BOOTSTRAP
from .errors import CliError

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def _host_port(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise CliError(f"--listen must be HOST:PORT, got {value!r}")
    return host or "127.0.0.1", int(port)


@click.command("rest")
@click.option("-b", "--bootstrap-server", "bootstrap", default=DEFAULT_BOOTSTRAP,
              envvar="MOLDAU_BOOTSTRAP_SERVER", show_default=True, metavar="HOST:PORT",
              help="The broker(s) to talk to.")
@click.option("--listen", default="127.0.0.1:8082", show_default=True, metavar="HOST:PORT",
              help="Where to serve HTTP.")
@click.option("--schema-registry", "schema_registry", metavar="URL", default=None,
              help="Schema Registry for the avro and jsonschema formats.")
@click.option("--consumer-instance-timeout-ms", "instance_timeout_ms", type=click.IntRange(1),
              default=300_000, show_default=True,
              help="Close a v2 consumer instance idle this long (it leaves its group).")
@click.option("--request-timeout-ms", type=click.IntRange(1), default=30_000, show_default=True,
              help="How long a request waits for the brokers (metadata, and each produced "
                   "record's delivery) before it is answered with error 50003.")
@click.option("--max-request-bytes", type=click.IntRange(1), default=10 * 1024 * 1024,
              show_default=True, help="Larger request bodies are refused with 413.")
def rest(bootstrap: str, listen: str, schema_registry: str | None, instance_timeout_ms: int,
         request_timeout_ms: int, max_request_bytes: int) -> None:
    """Serve Confluent's REST Proxy API (v2 and v3) until Ctrl-C or SIGTERM."""
    host, port = _host_port(listen)
    try:
        import uvicorn

        from ..rest.app import build_app
        from ..rest.config import RestConfig
    except ImportError as exc:
        raise CliError(f"the REST Proxy needs the rest extra: pip install 'moldau[rest]' "
                       f"({exc.name} is missing)") from None
    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT, stream=sys.stderr)
    # librdkafka's informational lines (telemetry, connections) are noise in a service log;
    # MOLDAU_CLIENT_LOG=1 shows them, as for the CLI's commands.
    if not os.environ.get("MOLDAU_CLIENT_LOG"):
        logging.getLogger("moldau.rest.librdkafka").setLevel(logging.WARNING)
    config = RestConfig(bootstrap=bootstrap, schema_registry_url=schema_registry,
                        instance_timeout_ms=instance_timeout_ms,
                        max_request_bytes=max_request_bytes,
                        request_timeout_s=request_timeout_ms / 1000)
    # Bind first, so a taken port or a bad address is one Error line, as for the broker.
    try:
        listener = socket.create_server((host, port))
    except OSError as exc:
        raise CliError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    server = uvicorn.Server(uvicorn.Config(build_app(config), access_log=False,
                                           log_level="info", lifespan="on"))
    server.run(sockets=[listener])
    if not server.started:
        raise CliError("the REST Proxy stopped during start-up (see the log above)")
