"""``moldau console``: serve the web console for a cluster (needs the ``console`` extra)."""

from __future__ import annotations

import os
import socket

import click

from .connection import Connection, connection_options
from .errors import CliError


def _listen_address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise CliError(f"invalid --listen {text!r}: expected HOST:PORT, e.g. 127.0.0.1:9021")
    return host.strip("[]"), int(port)


def _listen(host: str, port: int) -> socket.socket:
    """The console's listening socket, bound here so a busy port is one clear line."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host, port), family=family)
    except OSError as exc:
        reason = os.strerror(exc.errno) if exc.errno else str(exc)
        raise CliError(f"cannot listen on {host}:{port}: {reason}") from None


@click.command("console")
@click.option("--listen", default="127.0.0.1:9021", show_default=True, metavar="HOST:PORT",
              help="Where the console's HTTP server listens.")
@click.option("--sample-interval", type=click.FloatRange(min=0.2), default=2.0,
              show_default=True, metavar="SECONDS",
              help="How often end offsets are sampled for the throughput charts.")
@click.option("--schema-registry", metavar="URL",
              help="A schema registry: the message browser decodes Avro values through it.")
@click.option("--metrics-url", metavar="URL",
              help="A Prometheus endpoint (the broker's metrics.listener, e.g. "
                   "http://127.0.0.1:9644/metrics) shown on the metrics page.")
@click.option("--url-prefix", default="", metavar="PATH",
              help="The path the console is served under behind a reverse proxy (e.g. "
                   "/console): its links and redirects start with it.")
@connection_options
def console(conn: Connection, listen: str, sample_interval: float,
            schema_registry: str | None, metrics_url: str | None, url_prefix: str) -> None:
    """Serve the web console: cluster, topics, messages, consumer groups, throughput.

    It is a Kafka client of the cluster at --bootstrap-server, like every moldau command;
    open http://HOST:PORT/ in a browser.
    """
    host, port = _listen_address(listen)
    if url_prefix and (not url_prefix.startswith("/") or url_prefix.endswith("/")):
        raise CliError(f"invalid --url-prefix {url_prefix!r}: expected a path such as "
                       "/console (a leading slash, no trailing one)")
    try:
        import uvicorn

        from ..console.app import create_app
    except ImportError as exc:
        raise CliError(f"the web console needs the console extra ({exc.name} is missing): "
                       "pip install 'moldau[console]'") from None
    from ..console.client import LazyAdmin
    from ..console.throughput import History, Sampler

    avro = None
    if schema_registry is not None:
        try:
            from ..console.decode import AvroDecoder

            avro = AvroDecoder(schema_registry)
        except ImportError as exc:
            raise CliError(f"--schema-registry needs confluent-kafka's Avro support "
                           f"({exc.name} is missing): pip install 'moldau[console]'") from None
    history = History()
    admin = LazyAdmin(conn)
    app = create_app(conn, history, avro, admin, metrics_url, url_prefix)
    sampler = Sampler(conn, admin, history, sample_interval).start()
    listener = _listen(host, port)
    click.echo(f"moldau console on http://{host}:{port}/ for {conn.bootstrap}", err=True)
    try:
        uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[listener])
    finally:
        sampler.stop()
        listener.close()

