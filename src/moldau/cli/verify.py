"""``moldau verify``: check a Kafka-compatible cluster keeps what it acknowledges.

Producers send unique values with acks=all (idempotent by default), consumers read every
partition back, and the checker (``moldau.verify.checker``) reports lost, duplicated,
reordered, inconsistent and unexpected records. With ``--transactional`` the producers write in
transactions (some aborted on purpose), consumers read with read_committed, and a value read
of an aborted transaction is an anomaly too (aborted_read). Exit status 0 means the run was clean, 1
that anomalies were found (or that nothing was acknowledged, so nothing was checked).
The command is a plain client: point it at any cluster. With ``--local-broker`` or
``--local-cluster N`` it starts its own broker(s) in a temporary directory, the only ones its
nemesis may fault.
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import NewTopic

from ..cluster.local_cluster import ClusterError
from ..verify import cluster_nemesis
from ..verify.checker import Verdict, check
from ..verify.cluster_nemesis import ClusterNemesis, UncleanElection
from ..verify.local_broker import LocalBroker, LocalBrokerError
from ..verify.nemesis import DeleteRecordsNemesis, KillNemesis, Nemesis
from ..verify.own_cluster import OwnCluster, admin_client, netns_reason, own_cluster
from ..verify.report import as_json, as_text, failing_kinds
from ..verify.workload import WorkloadConfig, run_workload
from .connection import Connection, connection_options
from .errors import CliError, as_cli_error

_CLUSTER_ONLY = ("pause", "pause-session", "restart", "zk-restart", "partition", "rotate")
_NEMESES = ("none", "delete-records", "kill", *_CLUSTER_ONLY)
#: How long the topic of a cluster we started may take to have every replica in sync.
_IN_SYNC_TIMEOUT_S = 60.0


@contextlib.contextmanager
def _local_broker(wanted: bool) -> Iterator[LocalBroker | None]:
    """A broker of our own in a temporary directory, stopped and removed at the end."""
    if not wanted:
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="moldau-verify-") as workdir:
        broker = LocalBroker(Path(workdir))
        try:
            broker.start()
            yield broker
        except LocalBrokerError as exc:
            raise CliError(str(exc)) from None
        finally:
            broker.stop()


@contextlib.contextmanager
def _local_cluster(brokers: int | None, use_netns: bool, overrides: tuple[str, ...],
                   directory: Path | None) -> Iterator[OwnCluster | None]:
    """ZooKeeper and ``brokers`` brokers of our own, stopped (and removed unless in a
    ``directory`` of the user's) at the end."""
    if brokers is None:
        yield None
        return
    try:
        with own_cluster(brokers, use_netns=use_netns, overrides=overrides,
                         directory=directory) as cluster:
            yield cluster
    except ClusterError as exc:
        raise CliError(exc.message) from None


def _nemesis(name: str, broker: LocalBroker | None, cluster: OwnCluster | None,
             interval_s: float, unclean: bool) -> Nemesis:
    if name == "delete-records":
        return DeleteRecordsNemesis()
    if cluster is not None:
        kinds = {"none": [], "rotate": list(cluster_nemesis.KINDS)}.get(name, [name])
        if cluster.lab is None and "partition" in kinds and name == "rotate":
            kinds.remove("partition")
        first = UncleanElection(cluster, interval_s) if unclean else None
        if not kinds and first is None:
            return Nemesis()
        return ClusterNemesis(cluster, kinds, interval_s, first=first)
    if name == "kill":
        if broker is None:
            raise CliError("--nemesis kill needs --local-broker or --local-cluster: verify "
                           "kills only brokers it started itself")
        return KillNemesis(broker, interval_s)
    if name in _CLUSTER_ONLY:
        raise CliError(f"--nemesis {name} needs --local-cluster: verify faults only a cluster "
                       f"it started itself")
    return Nemesis()


def _check_options(ctx: click.Context, nemesis: str, local_broker: bool,
                   local_cluster: int | None, unclean: bool, netns: bool | None,
                   overrides: tuple[str, ...]) -> None:
    """One line for each option that cannot work with the others, before anything starts."""
    given_bootstrap = (ctx.get_parameter_source("bootstrap_server")
                       is click.core.ParameterSource.COMMANDLINE)
    if local_broker and local_cluster is not None:
        raise CliError("--local-broker and --local-cluster exclude each other")
    if given_bootstrap and (local_broker or local_cluster is not None):
        raise CliError("-b names a cluster to check; --local-broker/--local-cluster start "
                       "one of their own: give one or the other")
    if local_cluster is None:
        for flag, used in (("--unclean", unclean), ("--netns/--no-netns", netns is not None),
                           ("--override", bool(overrides))):
            if used:
                raise CliError(f"{flag} needs --local-cluster")
    for item in overrides:
        if "=" not in item:
            raise CliError(f"invalid --override {item!r}: expected KEY=VALUE")
    if nemesis == "partition" and netns is False:
        raise CliError("--nemesis partition needs --netns: loopback cannot be partitioned")
    if nemesis == "partition" or netns:
        reason = netns_reason()
        if reason and local_cluster is not None:
            why = "--nemesis partition" if nemesis == "partition" else "--netns"
            raise CliError(f"{why} needs brokers in network namespaces, and {reason}")
    if nemesis in _CLUSTER_ONLY and local_cluster is None:
        _nemesis(nemesis, None, None, 1.0, False)  # the one-line refusal
    if nemesis == "kill" and not local_broker and local_cluster is None:
        _nemesis(nemesis, None, None, 1.0, False)


def _check_transactional(ctx: click.Context, transactional: bool, idempotence: bool,
                         acks: str) -> None:
    """The transaction options need --transactional; transactions need idempotent acks=all."""
    if transactional:
        if not idempotence or acks not in ("all", "-1"):
            raise CliError("--transactional needs idempotent acks=all producers (drop "
                           "--no-idempotence and --acks 1)")
        return
    for option in ("txn_size", "abort_fraction", "transaction_timeout_ms"):
        if ctx.get_parameter_source(option) is click.core.ParameterSource.COMMANDLINE:
            flag = {"txn_size": "--txn-size", "abort_fraction": "--abort-fraction",
                    "transaction_timeout_ms": "--transaction-timeout"}[option]
            raise CliError(f"{flag} needs --transactional")


def _wait_in_sync(cluster: OwnCluster | None, conn: Connection, topic: str) -> None:
    """On a cluster we started: every partition led and fully in sync before the run."""
    if cluster is None:
        return
    admin = admin_client(conn.client_config())
    if cluster.wait_in_sync(admin, topic, _IN_SYNC_TIMEOUT_S) is None:
        raise CliError(f"topic {topic!r} did not get every replica in sync within "
                       f"{_IN_SYNC_TIMEOUT_S:g} s on the local cluster (logs in "
                       f"{cluster.workdir})")


def _ensure_topic(conn: Connection, topic: str, partitions: int,
                  replication_factor: int | None, configs: dict[str, str]) -> str:
    """Create ``topic`` when it does not exist; say which of the two happened."""
    admin = conn.admin()
    new_topic = NewTopic(topic, num_partitions=partitions,
                         replication_factor=-1 if replication_factor is None
                         else replication_factor, config=configs)
    futures = admin.create_topics([new_topic], request_timeout=conn.timeout)
    try:
        futures[topic].result(timeout=conn.timeout + 5)
    except KafkaException as exc:
        error = exc.args[0] if exc.args else None
        if isinstance(error, KafkaError) and error.code() == KafkaError.TOPIC_ALREADY_EXISTS:
            return "existing"
        raise as_cli_error(exc, f"cannot create topic {topic!r}") from exc
    return "created"


@click.command("verify")
@connection_options
@click.option("--topic", default="moldau-verify", show_default=True,
              help="Topic to write and read; created when missing, used as it is otherwise.")
@click.option("--partitions", type=click.IntRange(min=1), default=3, show_default=True,
              help="Partitions of a topic created by this run.")
@click.option("--replication-factor", type=click.IntRange(min=1), default=None,
              help="Replication factor of a created topic [default: the broker's].")
@click.option("--producers", type=click.IntRange(min=1, max=64), default=2, show_default=True)
@click.option("--consumers", type=click.IntRange(min=1, max=64), default=2, show_default=True,
              help="Each consumer reads every partition; their reads are compared.")
@click.option("--records", type=click.IntRange(min=1), default=None,
              help="Records to send in all (split among producers).")
@click.option("--duration", "duration_s", type=click.FloatRange(min=0.1), default=None,
              metavar="SECONDS",
              help="Stop sending after this long [default: 10 s unless --records is given].")
@click.option("--rate", type=click.FloatRange(min=0), default=0.0, show_default=True,
              help="Records per second over all producers; 0: as fast as acknowledged.")
@click.option("--value-size", type=click.IntRange(min=0, max=1_000_000), default=64,
              show_default=True, help="Bytes per value (ids are never cut).")
@click.option("--acks", type=click.Choice(["all", "-1", "1"]), default="all", show_default=True)
@click.option("--idempotence/--no-idempotence", default=True, show_default=True,
              help="Idempotent producers (needs --acks all).")
@click.option("--isolation-level", type=click.Choice(["read_uncommitted", "read_committed"]),
              default=None,
              help="Consumers' isolation level [default: read_committed with --transactional, "
                   "else read_uncommitted].")
@click.option("--transactional", is_flag=True,
              help="Producers write in transactions (each its own transactional.id), commit "
                   "them or abort a fraction on purpose; aborted values read are reported "
                   "(aborted_read), committed values never read are lost.")
@click.option("--txn-size", type=click.IntRange(min=1, max=100_000), default=100,
              show_default=True, help="With --transactional: values per transaction.")
@click.option("--abort-fraction", type=click.FloatRange(min=0, max=1), default=0.2,
              show_default=True,
              help="With --transactional: the share of transactions aborted on purpose.")
@click.option("--transaction-timeout", "transaction_timeout_ms",
              type=click.IntRange(min=1000), default=10_000, show_default=True, metavar="MS",
              help="With --transactional: the producers' transaction.timeout.ms (how long the "
                   "broker lets a transaction stay open, so a read_committed consumer waits "
                   "behind a producer that died at most this long).")
@click.option("--read-timeout", "read_timeout_s", type=click.FloatRange(min=0.1), default=30.0,
              show_default=True, metavar="SECONDS",
              help="Longest read phase: consumers stop earlier once past every acked offset.")
@click.option("--nemesis", type=click.Choice(_NEMESES), default=None,
              help="Faults [default: rotate with --local-cluster, else none]: delete-records "
                   "deletes acked records (loss must be reported); kill: kill -9 and restart "
                   "a broker (--local-broker or --local-cluster); with --local-cluster also "
                   "pause (SIGSTOP), pause-session (past the ZooKeeper session), restart "
                   "(SIGTERM), zk-restart, partition (network namespaces, root), and rotate: "
                   "all of them in turn.")
@click.option("--nemesis-interval", "nemesis_interval_s", type=click.FloatRange(min=0.1),
              default=3.0, show_default=True, metavar="SECONDS",
              help="Seconds between two strikes of the kill nemesis; with --local-cluster, "
                   "how long a fault is held and the quiet spell after it.")
@click.option("--local-broker", is_flag=True,
              help="Start a moldau broker of our own (temporary data) instead of using -b.")
@click.option("--local-cluster", "local_cluster", type=click.IntRange(min=3, max=9),
              default=None, metavar="N",
              help="Start ZooKeeper and N (3-9) moldau brokers of our own (temporary data) "
                   "instead of using -b; the topic gets RF 3 and min.insync.replicas=2.")
@click.option("--unclean", is_flag=True,
              help="With --local-cluster: the topic allows unclean leader elections and the "
                   "nemesis first forces one, so the run must report lost records.")
@click.option("--netns/--no-netns", "netns", default=None,
              help="With --local-cluster: run each process in a network namespace of its own "
                   "(needed by the partition nemesis; root) [default: when possible].")
@click.option("--override", "overrides", multiple=True, metavar="KEY=VALUE",
              help="With --local-cluster: a config for every broker. Repeatable.")
@click.option("--cluster-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="With --local-cluster: keep its data and logs in this directory (created "
                   "when missing) [default: a temporary directory, removed].")
@click.option("--allow", "allowed", multiple=True, type=click.Choice(Verdict.ALL_KINDS),
              help="An anomaly kind that is reported but does not fail the run (exit 0), e.g. "
                   "duplicated against a broker that does not deduplicate retries. Repeatable.")
@click.option("--format", "output_format", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
@click.option("--max-examples", type=click.IntRange(min=0), default=10, show_default=True,
              help="Anomalies listed per kind (counts are always complete).")
@click.pass_context
def verify(ctx: click.Context, conn: Connection, topic: str, partitions: int,
           replication_factor: int | None, producers: int, consumers: int, records: int | None,
           duration_s: float | None, rate: float, value_size: int, acks: str, idempotence: bool,
           isolation_level: str | None, transactional: bool, txn_size: int,
           abort_fraction: float, transaction_timeout_ms: int, read_timeout_s: float,
           nemesis: str | None,
           nemesis_interval_s: float, local_broker: bool, local_cluster: int | None,
           unclean: bool, netns: bool | None, overrides: tuple[str, ...],
           cluster_dir: Path | None, allowed: tuple[str, ...], output_format: str,
           max_examples: int) -> None:
    """Produce unique values, read them back, report what the cluster lost or changed.

    Exit status: 0 clean, 1 anomalies found (or an error).
    """
    if idempotence and acks not in ("all", "-1"):
        raise CliError(f"--acks {acks} needs --no-idempotence (idempotent producers use acks=all)")
    _check_transactional(ctx, transactional, idempotence, acks)
    if isolation_level is None:
        isolation_level = "read_committed" if transactional else "read_uncommitted"
    if records is None and duration_s is None:
        duration_s = 10.0
    if nemesis is None:
        nemesis = "rotate" if local_cluster is not None else "none"
    _check_options(ctx, nemesis, local_broker, local_cluster, unclean, netns, overrides)
    if cluster_dir is not None and local_cluster is None:
        raise CliError("--cluster-dir needs --local-cluster")
    configs: dict[str, str] = {}
    if local_cluster is not None:
        replication_factor = replication_factor or 3
        configs["min.insync.replicas"] = "2"
        if unclean:
            configs["unclean.leader.election.enable"] = "true"
        if netns is None:
            netns = netns_reason() is None
    with _local_broker(local_broker) as own, \
            _local_cluster(local_cluster, bool(netns), overrides,
                           cluster_dir and cluster_dir.resolve()) as cluster:
        if own is not None:
            conn = Connection(own.bootstrap, conn.timeout)
        if cluster is not None:
            conn = Connection(cluster.bootstrap, conn.timeout)
        verdict, text = _run(
            conn, topic, partitions, replication_factor, configs, cluster,
            WorkloadConfig(
                client_config=conn.client_config(),
                topic=topic, producers=producers, consumers=consumers, records=records,
                duration_s=duration_s, rate=rate, value_size=value_size, acks=acks,
                idempotence=idempotence, isolation_level=isolation_level,
                transactional=transactional, txn_size=txn_size, abort_fraction=abort_fraction,
                transaction_timeout_ms=transaction_timeout_ms,
                read_timeout_s=read_timeout_s, timeout_s=conn.timeout,
                flush_timeout_s=max(30.0, conn.timeout * 3),
            ),
            _nemesis(nemesis, own, cluster, nemesis_interval_s, unclean),
            output_format, max_examples, allowed)
    click.echo(text)
    if verdict.acked == 0:
        raise CliError("no record was acknowledged, so nothing was checked")
    sys.exit(1 if failing_kinds(verdict, allowed) else 0)


def _run(conn: Connection, topic: str, partitions: int, replication_factor: int | None,
         configs: dict[str, str], cluster: OwnCluster | None, config: WorkloadConfig,
         nemesis: Nemesis, output_format: str, max_examples: int,
         allowed: tuple[str, ...]) -> tuple[Verdict, str]:
    """Prepare the topic, run the workload, check it; the verdict and its rendering."""
    status = _ensure_topic(conn, topic, partitions, replication_factor, configs)
    _wait_in_sync(cluster, conn, topic)
    try:
        history = run_workload(config, nemesis)
    except KafkaException as exc:
        raise as_cli_error(exc, f"cannot prepare the run on topic {topic!r}") from exc
    verdict = check(history)
    settings: dict[str, Any] = {
        "topic": status, "producers": config.producers, "consumers": config.consumers,
        "acks": config.acks, "idempotence": config.idempotence,
        "isolation": config.isolation_level, "nemesis": nemesis.name}
    if config.transactional:
        settings.update(transactional=True, txn_size=config.txn_size,
                        abort_fraction=config.abort_fraction,
                        transaction_timeout_ms=config.transaction_timeout_ms)
    if cluster is not None:
        settings["cluster"] = cluster.describe()
        settings["topic_configs"] = ",".join(f"{k}={v}" for k, v in sorted(configs.items()))
        if cluster.lab is None and nemesis.name == "rotate":
            why = netns_reason() or "--no-netns (loopback cannot be partitioned)"
            settings["partition"] = f"not offered: {why}"
    render = as_json if output_format == "json" else as_text
    return verdict, render(verdict, history, settings, max_examples, allowed)
