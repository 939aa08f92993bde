"""``moldau cluster``: run a local cluster (``up``), look at any cluster (``status``), move
its leaders (``elect-leaders``), its partition replicas (``reassign``) and replicas between a
broker's log dirs (``log-dirs``).

``up`` is a process supervisor, not a client: it starts Debian's ZooKeeper and N brokers as
child processes (``moldau.cluster.local_cluster``) and stops them on Ctrl-C or SIGTERM.
``status``, ``elect-leaders``, ``reassign`` and ``log-dirs`` are ordinary Kafka clients
(``cluster_status``, ``elect_leaders``, ``reassign``, ``log_dirs``).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from types import FrameType

import click

from . import elect_leaders, log_dirs
from . import reassign as reassign_tool
from .admin_client import secured_admin_options
from .cluster_status import gather, print_status
from .connection import Connection
from .errors import CliError

DEFAULT_DIR = "./moldau-cluster"


@click.group("cluster")
def cluster_group() -> None:
    """Run a local ZooKeeper-based cluster, and check a cluster's health."""


def _install_zookeeper() -> None:
    """``apt-get install zookeeper`` (after ``apt-get update`` if the first try fails)."""
    if shutil.which("apt-get") is None:
        raise CliError("--install needs apt-get (Debian or Ubuntu); install the ZooKeeper "
                       "server package yourself")
    if os.geteuid() != 0:
        raise CliError("--install needs root: run `sudo apt-get install zookeeper` instead")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "--no-install-recommends", "zookeeper"]
    click.echo("Installing ZooKeeper: " + " ".join(install), err=True)
    if subprocess.run(install, env=env, check=False).returncode == 0:
        return
    subprocess.run(["apt-get", "update"], env=env, check=False)
    if subprocess.run(install, env=env, check=False).returncode != 0:
        raise CliError("apt-get could not install zookeeper (see its output above)")


def _ensure_zookeeper(install: bool) -> None:
    from ..cluster.zk_server import missing_reason

    reason = missing_reason()
    if reason and install:
        _install_zookeeper()
        reason = missing_reason()
    if reason:
        raise CliError(f"{reason}; or run `moldau cluster up --install` as root")


def _raise_interrupt(signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


@cluster_group.command("up")
@click.option("--brokers", type=click.IntRange(min=1, max=64), default=3, show_default=True,
              help="How many brokers.")
@click.option("--dir", "directory", type=click.Path(file_okay=False, path_type=Path),
              default=DEFAULT_DIR, show_default=True,
              help="Where ZooKeeper and the brokers keep data and logs (reused on restart).")
@click.option("--base-port", type=click.IntRange(min=1, max=65535), default=9092,
              show_default=True, help="Broker i listens on 127.0.0.1:BASE_PORT+i.")
@click.option("--zookeeper-port", type=click.IntRange(min=1, max=65535), default=2181,
              show_default=True, help="ZooKeeper's client port on 127.0.0.1.")
@click.option("--override", "overrides", multiple=True, metavar="KEY=VALUE",
              help="A broker config for every broker. Repeatable.")
@click.option("--rack-aware", is_flag=True,
              help="Put the brokers in three racks (broker.rack=rack-<id mod 3>).")
@click.option("--install", is_flag=True,
              help="Install Debian's zookeeper package if missing (root, apt-get).")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=1), default=60.0,
              show_default=True, metavar="SECONDS", help="How long to wait for start-up.")
def up(brokers: int, directory: Path, base_port: int, zookeeper_port: int,
       overrides: tuple[str, ...], rack_aware: bool, install: bool, timeout_s: float) -> None:
    """Start ZooKeeper and BROKERS brokers on this machine; Ctrl-C stops them all."""
    from ..cluster.local_cluster import ClusterError, ClusterSpec, LocalCluster

    for item in overrides:
        if "=" not in item:
            raise CliError(f"invalid --override {item!r}: expected KEY=VALUE")
    if base_port + brokers - 1 > 65535:
        raise CliError(f"--base-port {base_port} leaves no room for {brokers} brokers")
    _ensure_zookeeper(install)
    spec = ClusterSpec(directory.resolve(), brokers, base_port, zookeeper_port, overrides,
                       rack_aware)
    cluster = LocalCluster(spec)
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _raise_interrupt)
    started = time.monotonic()
    try:
        try:
            cluster.start(timeout_s)
        except ClusterError as exc:
            raise CliError(exc.message) from None
        click.echo(f"ZooKeeper {spec.zookeeper_connect} (in {cluster.zookeeper.workdir})")
        for broker in cluster.brokers:
            click.echo(f"Broker {broker.broker_id} {spec.host}:{broker.port} "
                       f"(log {broker.log_path})")
        click.echo(f"Cluster up in {time.monotonic() - started:.1f} s. "
                   f"Bootstrap: {spec.bootstrap}")
        click.echo(f"Check it: moldau cluster status -b {spec.bootstrap}")
        click.echo("Ctrl-C stops the brokers, then ZooKeeper.")
        while True:
            time.sleep(0.5)
            for line in cluster.exited():
                click.echo(line, err=True)
    except KeyboardInterrupt:
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, signal.SIG_IGN)  # stop in order, whatever comes next
        if cluster.zookeeper.is_running():
            click.echo("Stopping the brokers, then ZooKeeper...")
        cluster.stop()
        click.echo("Cluster stopped.")
    finally:
        cluster.stop()


@cluster_group.command("status")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="A table, or one JSON document.")
@secured_admin_options
def status(conn: Connection, fmt: str) -> None:
    """Brokers, controller, under-replicated and offline partitions of a cluster."""
    result = gather(conn)
    if fmt == "json":
        click.echo(json.dumps(result.as_json(), indent=2))
    else:
        print_status(result)


@cluster_group.command("elect-leaders")
@click.option("--topic", metavar="TOPIC", help="Only this topic (default: every partition).")
@click.option("--partition", type=click.IntRange(min=0), metavar="N",
              help="Only this partition of --topic.")
@click.option("--type", "election_type",
              type=click.Choice(sorted(elect_leaders.TYPES), case_sensitive=False),
              default="preferred", show_default=True,
              help="preferred: leadership back to the first replica of each partition; "
                   "unclean: a leader for partitions without one, even out of sync "
                   "(may lose records).")
@secured_admin_options
def elect_leaders_command(conn: Connection, topic: str | None, partition: int | None,
                          election_type: str) -> None:
    """Ask the controller to elect leaders (Kafka's kafka-leader-election)."""
    election_type = election_type.lower()
    results = elect_leaders.elect(conn, election_type, topic, partition)
    elect_leaders.print_results(results, election_type)


@cluster_group.command("reassign")
@reassign_tool.options
@secured_admin_options
def reassign(conn: Connection, topic: str | None, partition: int | None,
             replicas: str | None, plan: Path | None, listing: bool, cancel: bool,
             verify: bool, throttle: int | None) -> None:
    """Move partition replicas between brokers, list or cancel moves (kafka-reassign-partitions).

    \b
    moldau cluster reassign --topic T --partition 0 --replicas 2,3 [--throttle 1000000]
    moldau cluster reassign --file plan.json      (Kafka's reassignment JSON)
    moldau cluster reassign --list
    moldau cluster reassign --cancel --topic T --partition 0
    moldau cluster reassign --verify --file plan.json
    """
    reassign_tool.run(conn, topic, partition, replicas, plan, listing, cancel, verify,
                      throttle)


@cluster_group.command("log-dirs")
@click.option("--broker", type=click.IntRange(min=0), help="Only this broker (id).")
@click.option("--topic", help="Only this topic (with --move: the replica's topic).")
@click.option("--move", "moving", is_flag=True,
              help="Move --topic/--partition on --broker to --dir (AlterReplicaLogDirs).")
@click.option("--partition", type=click.IntRange(min=0), help="With --move: the partition.")
@click.option("--dir", "path", metavar="PATH",
              help="With --move: the target, one of the broker's log.dirs (absolute).")
@secured_admin_options
def log_dirs_command(conn: Connection, broker: int | None, topic: str | None, moving: bool,
                     partition: int | None, path: str | None) -> None:
    """Show each broker's log dirs and replicas, or move a replica between them.

    \b
    moldau cluster log-dirs [--broker 0] [--topic T]      (kafka-log-dirs --describe)
    moldau cluster log-dirs --move --topic T --partition 0 --broker 0 --dir /data/d2
    """
    if not moving:
        if partition is not None or path is not None:
            raise CliError("--partition and --dir go with --move")
        log_dirs.describe(conn, broker, topic)
        return
    if topic is None or partition is None or path is None:
        raise CliError("--move needs --topic, --partition and --dir")
    log_dirs.move(conn, topic, partition, broker, path)
