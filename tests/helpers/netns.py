"""Brokers, ZooKeeper and Kafka clients inside a network namespace lab, for fault tests.

The lab itself (namespaces, bridge, partitions, loss, delay, heal) is
``moldau.cluster.netns``, re-exported here; ``moldau verify --local-cluster`` uses it too.
This module adds what tests run in a lab host: a broker (``NetnsBroker``), ZooKeeper
(``NetnsZooKeeper``) and a confluent-kafka client in a subprocess of its own
(``NetnsKafkaClient``, ``tests/helpers/netns_client.py``: a client library's threads must all
live in the namespace). The test process itself stays in the root namespace and reaches hosts
with ``host.call``/``host.connect``.
"""

from __future__ import annotations

import json
import select
import subprocess
from pathlib import Path
from typing import Any

from moldau.cluster.netns import (
    DEFAULT_SUBNET,
    PREFIX,
    Host,
    LabError,
    NetworkLab,
    Unsupported,
    cleanup_stale,
    faults_unavailable_reason,
    lab_namespaces,
    unavailable_reason,
)

from .broker_process import BrokerProcess
from .zookeeper import ZooKeeperServer, four_letter_word

__all__ = [
    "DEFAULT_SUBNET", "PREFIX", "Host", "LabError", "NetnsBroker", "NetnsKafkaClient",
    "NetnsZooKeeper", "NetworkLab", "Unsupported", "cleanup_stale",
    "faults_unavailable_reason", "lab_namespaces", "unavailable_reason",
]


class NetnsBroker(BrokerProcess):
    """A moldau broker running inside a lab host, listening on the host's lab address.

    Everything else (logs, kill -9, SIGSTOP, restart on the same data) is ``BrokerProcess``;
    readiness is checked from inside the host, since the root namespace cannot reach it.
    """

    def __init__(self, host: Host, workdir: Path, *, port: int = 9092, **kwargs: Any) -> None:
        super().__init__(workdir, port=port, **kwargs)
        self.netns_host = host
        self.host = host.address

    def command(self) -> list[str]:
        return self.netns_host.command(super().command())

    def accepting(self) -> bool:
        return self.netns_host.accepts((self.host, self.port))


class NetnsZooKeeper(ZooKeeperServer):
    """A ZooKeeper server running inside a lab host, its client port on the host's address.

    Brokers in other hosts connect to ``connect_string()``; ``lab.isolate`` on this host cuts
    ZooKeeper off from all of them at once.
    """

    def __init__(self, host: Host, workdir: Path, port: int = 2181) -> None:
        super().__init__(workdir, port=port)
        self.netns_host = host
        self.host = host.address

    def wrap(self, command: list[str]) -> list[str]:
        return self.netns_host.command(command)

    def word(self, word: str, timeout: float = 2.0) -> str:
        return self.netns_host.call(lambda: four_letter_word(self.port, word, timeout, self.host))


class NetnsKafkaClient:
    """A confluent-kafka producer/consumer living in a lab host (``netns_client.py``).

    ``request`` sends one JSON request and waits for its answer; the worker keeps its
    producer between requests. ``close`` ends the worker (stdin closed, then SIGKILL).
    """

    SCRIPT = Path(__file__).with_name("netns_client.py")

    def __init__(
        self, host: Host, bootstrap: str, producer_config: dict[str, Any] | None = None
    ) -> None:
        self.proc = host.python(
            [
                str(self.SCRIPT),
                "--bootstrap",
                bootstrap,
                "--producer-config",
                json.dumps(producer_config or {}),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        self._read(30.0)  # {"ready": true}: the library imported, the namespace joined

    def _read(self, timeout: float) -> dict[str, Any]:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline() if ready else ""
        if not line:
            state = "exited" if self.proc.poll() is not None else "silent"
            raise LabError(f"netns client {state} after {timeout:g} s (see stderr above)")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def request(self, op: str, timeout: float = 60.0, **fields: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"op": op, **fields}) + "\n")
        self.proc.stdin.flush()
        return self._read(timeout)

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def __enter__(self) -> NetnsKafkaClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
