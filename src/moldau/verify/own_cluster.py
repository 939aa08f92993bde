"""The cluster ``moldau verify --local-cluster N`` starts, faults, heals and removes.

A ZooKeeper and N moldau brokers (``moldau.cluster.local_cluster``, what ``moldau cluster
up`` runs) in a temporary directory. Only a cluster the tool started itself may be faulted by
its nemesis: this is that cluster.

Network partitions need links that can be cut, which loopback has not. When the process is
root and the machine has ``ip netns`` and nftables, every child runs in a network namespace of
its own (``moldau.cluster.netns``: ZooKeeper on host ``zk``, broker i on ``b<i>``) and the
tool's own clients in host ``client``: the calling thread enters that host before any client
or worker thread is made, so every thread of the run (librdkafka's included) is born there.
Otherwise everything runs on loopback and the partition nemesis is not offered (``netns_reason``
says why).

Brokers get a short ZooKeeper session (6 s, so a pause "past the session" stays short) and a
short replica lag (4 s); ``overrides`` (``--override``) win over both.
"""

from __future__ import annotations

import contextlib
import random
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from ..cluster import netns
from ..cluster.local_cluster import ClusterSpec, LocalCluster
from ..cluster.processes import HOST, bind_error

SESSION_TIMEOUT_MS = 6000
DEFAULT_OVERRIDES = (
    f"zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}",
    "replica.lag.time.max.ms=4000",
)
NETNS_ZK_PORT = 2181
NETNS_BASE_PORT = 9092


def netns_reason() -> str | None:
    """Why brokers cannot run in network namespaces here (so no partitions), or None."""
    return netns.unavailable_reason() or netns.faults_unavailable_reason()


def _free_ports(count: int, tries: int = 50) -> int:
    """A base port such that base..base+count-1 can all be listened on now (loopback)."""
    rng = random.Random()
    for _ in range(tries):
        base = rng.randrange(20000, 32000 - count)
        if all(bind_error(port) is None for port in range(base, base + count)):
            return base
    raise OSError(f"no {count} consecutive free ports found on {HOST}")


class OwnCluster:
    """ZooKeeper + ``brokers`` brokers under ``workdir``, in namespaces when ``use_netns``."""

    def __init__(self, workdir: Path, brokers: int, *, use_netns: bool,
                 overrides: Sequence[str] = ()) -> None:
        self.workdir = workdir
        self.lab: netns.NetworkLab | None = None
        all_overrides = [*DEFAULT_OVERRIDES, *overrides]
        self.session_timeout_s = SESSION_TIMEOUT_MS / 1000
        for item in all_overrides:
            key, _, value = item.partition("=")
            if key.strip() == "zookeeper.session.timeout.ms" and value.strip().isdigit():
                self.session_timeout_s = int(value) / 1000
        if use_netns:
            names = ["zk", *(f"b{i}" for i in range(brokers)), "client"]
            self.lab = netns.NetworkLab(names)
            spec = ClusterSpec(workdir, brokers, NETNS_BASE_PORT, NETNS_ZK_PORT, all_overrides,
                               broker_hosts=[self.lab[f"b{i}"].address for i in range(brokers)],
                               zookeeper_host=self.lab["zk"].address)
            lab = self.lab
            self.cluster = LocalCluster(
                spec, launcher=lambda role, cmd: lab[_host_of(role)].command(cmd))
        else:
            base = _free_ports(brokers + 1)
            spec = ClusterSpec(workdir, brokers, base + 1, base, all_overrides)
            self.cluster = LocalCluster(spec)
        self.spec = spec

    @property
    def bootstrap(self) -> str:
        return self.spec.bootstrap

    @property
    def broker_ids(self) -> list[int]:
        return [b.broker_id for b in self.cluster.brokers]

    def describe(self) -> str:
        where = ("each in a network namespace of its own" if self.lab is not None
                 else "on loopback")
        return f"ZooKeeper + {len(self.cluster.brokers)} brokers {where}"

    @contextlib.contextmanager
    def running(self, timeout: float = 60.0) -> Iterator[OwnCluster]:
        """Build the lab (and enter its client host), start everything; undo it all after."""
        with contextlib.ExitStack() as stack:
            if self.lab is not None:
                self.lab.start()
                stack.callback(self.lab.close)
                stack.enter_context(self.lab["client"].enter())
            stack.callback(self.cluster.stop)
            self.cluster.start(timeout)
            yield self

    # -- what the nemesis and the heal need ------------------------------------------------

    def partition_states(self, admin: AdminClient, topic: str,
                         timeout: float = 5.0) -> dict[int, tuple[int, list[int], list[int]]]:
        """{partition: (leader, replicas, isr)} as the cluster's metadata says now."""
        metadata = admin.list_topics(topic, timeout=timeout)
        found = metadata.topics.get(topic)
        if found is None or found.error is not None:
            return {}
        return {p: (m.leader, list(m.replicas), list(m.isrs))
                for p, m in found.partitions.items()}

    def wait_in_sync(self, admin: AdminClient, topic: str, timeout: float) -> float | None:
        """Wait until every partition has a leader and all its replicas in the ISR; the
        seconds it took, or None at the timeout."""
        began = time.monotonic()
        while time.monotonic() - began < timeout:
            with contextlib.suppress(KafkaException):
                states = self.partition_states(admin, topic)
                if states and all(leader >= 0 and sorted(isr) == sorted(replicas)
                                  for leader, replicas, isr in states.values()):
                    return time.monotonic() - began
            time.sleep(0.25)
        return None


def _host_of(role: str) -> str:
    """The lab host a child runs in: ``zookeeper`` on zk, ``broker-<i>`` on b<i>."""
    return "zk" if role == "zookeeper" else "b" + role.rsplit("-", 1)[1]


@contextlib.contextmanager
def own_cluster(brokers: int, *, use_netns: bool, overrides: Sequence[str] = (),
                directory: Path | None = None, timeout: float = 60.0) -> Iterator[OwnCluster]:
    """A running :class:`OwnCluster` in ``directory`` (kept), else in a temporary directory
    removed at the end."""
    with contextlib.ExitStack() as stack:
        if directory is None:
            directory = Path(stack.enter_context(
                tempfile.TemporaryDirectory(prefix="moldau-verify-cluster-")))
        cluster = OwnCluster(directory, brokers, use_netns=use_netns, overrides=overrides)
        with cluster.running(timeout):
            yield cluster


def admin_client(client_config: dict[str, Any]) -> AdminClient:
    """An admin client on the run's connection settings (the nemesis's eyes)."""
    return AdminClient(dict(client_config))
