"""A local cluster for ``moldau cluster up``: one ZooKeeper and N brokers under one directory.

Layout of ``DIR`` (starting again with the same ``DIR`` reuses everything):

- ``DIR/zookeeper/``: ``zoo.cfg``, ``data/``, ``zookeeper.log``;
- ``DIR/broker-<id>/``: ``data/`` (the broker's ``log.dirs``) and ``broker.log`` (its
  stdout and stderr, appended to across starts).

Broker ``i`` (``broker.id=i``, from 0) listens on ``127.0.0.1:base_port+i`` with
``zookeeper.connect`` pointing at the ZooKeeper; ``--rack-aware`` spreads the brokers over
three racks (``broker.rack=rack-<i mod 3>``). Brokers are ``python -m moldau broker`` children
of this process, each in its own process group (a terminal's Ctrl-C reaches only us, so we
stop them in order: brokers first, while ZooKeeper still answers them) and killed by Linux
should this process die.

Faults need single brokers: ``start_broker``, ``kill_broker`` (SIGKILL), ``terminate_broker``
(SIGTERM), ``pause_broker``/``resume_broker`` (SIGSTOP/SIGCONT), and ZooKeeper's own
``stop``/``start``, which ``moldau verify --local-cluster`` uses for its nemesis. A spec with
``broker_hosts`` gives each broker (and ZooKeeper) an address of its own, and a ``launcher``
runs each child inside its host (the network namespaces of ``moldau.cluster.netns``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from .processes import HOST, bind_error, port_accepts, spawn, terminate
from .zk_server import ZooKeeperError, ZooKeeperServer

RACKS = 3


class ClusterError(RuntimeError):
    """The cluster cannot start (one line for the user; ``detail`` is a log tail)."""

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.detail = detail


@dataclass(frozen=True)
class ClusterSpec:
    """What to start: how many brokers, where, on which ports, with which extra configs."""

    directory: Path
    brokers: int = 3
    base_port: int = 9092
    zookeeper_port: int = 2181
    overrides: Sequence[str] = ()
    rack_aware: bool = False
    host: str = HOST
    #: Broker i's address when brokers live on hosts of their own (else all on ``host``).
    broker_hosts: Sequence[str] = ()
    #: ZooKeeper's address when it lives on a host of its own (else ``host``).
    zookeeper_host: str | None = None

    def broker_host(self, broker_id: int) -> str:
        return self.broker_hosts[broker_id] if self.broker_hosts else self.host

    def broker_address(self, broker_id: int) -> str:
        return f"{self.broker_host(broker_id)}:{self.base_port + broker_id}"

    @property
    def bootstrap(self) -> str:
        return ",".join(self.broker_address(i) for i in range(self.brokers))

    @property
    def zookeeper_connect(self) -> str:
        return f"{self.zookeeper_host or self.host}:{self.zookeeper_port}"


@dataclass
class BrokerChild:
    """One broker of the cluster and its process (None while stopped)."""

    broker_id: int
    host: str
    port: int
    directory: Path
    command: list[str]
    proc: subprocess.Popen[bytes] | None = None
    log: IO[bytes] | None = field(default=None, repr=False)
    reported_exit: bool = False

    @property
    def log_path(self) -> Path:
        return self.directory / "broker.log"

    def log_tail(self, lines: int = 20) -> str:
        if not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def last_error_line(self) -> str:
        """The broker's own one-line refusal (``Error: ...``), if it printed one."""
        for line in reversed(self.log_tail(40).splitlines()):
            if line.startswith("Error: "):
                return line[len("Error: "):]
        return ""


def broker_overrides(spec: ClusterSpec, broker_id: int) -> list[str]:
    """The broker's configs: identity, listener, data, ZooKeeper, rack; the user's win."""
    overrides = [
        f"broker.id={broker_id}",
        f"listeners=PLAINTEXT://{spec.broker_address(broker_id)}",
        f"log.dirs={spec.directory / f'broker-{broker_id}' / 'data'}",
        f"zookeeper.connect={spec.zookeeper_connect}",
    ]
    if spec.rack_aware:
        overrides.append(f"broker.rack=rack-{broker_id % RACKS}")
    return overrides + list(spec.overrides)


#: Wraps a child's command line to run it elsewhere: (role, command) -> command, where role
#: is ``zookeeper`` or ``broker-<id>``.
Launcher = Callable[[str, list[str]], list[str]]


class LocalCluster:
    """Start, watch and stop the ZooKeeper and brokers of one :class:`ClusterSpec`."""

    def __init__(self, spec: ClusterSpec, launcher: Launcher | None = None) -> None:
        self.spec = spec
        self.directory = spec.directory
        self._launcher = launcher
        zk_launcher = None if launcher is None else (lambda cmd: launcher("zookeeper", cmd))
        self.zookeeper = ZooKeeperServer(spec.directory / "zookeeper", spec.zookeeper_port,
                                         host=spec.zookeeper_host or spec.host,
                                         launcher=zk_launcher)
        self.brokers = [
            BrokerChild(i, spec.broker_host(i), spec.base_port + i,
                        spec.directory / f"broker-{i}", self._broker_command(i))
            for i in range(spec.brokers)
        ]

    def _broker_command(self, broker_id: int) -> list[str]:
        command = [sys.executable, "-m", "moldau", "broker"]
        for override in broker_overrides(self.spec, broker_id):
            command += ["--override", override]
        if self._launcher is not None:
            command = self._launcher(f"broker-{broker_id}", command)
        return command

    def check_ports(self) -> None:
        """One line naming the first port that cannot be listened on, before anything starts.

        Brokers on hosts of their own (``broker_hosts``) have private addresses nobody else
        uses: nothing to check.
        """
        if self.spec.broker_hosts:
            return
        wanted = [(self.spec.zookeeper_port, "ZooKeeper", "--zookeeper-port")] + [
            (b.port, f"broker {b.broker_id}", "--base-port") for b in self.brokers]
        seen: set[int] = set()
        for port, who, option in wanted:
            if port in seen:
                raise ClusterError(f"port {port} is wanted twice (ZooKeeper and a broker); "
                                   f"choose another {option}")
            seen.add(port)
            if not 0 < port < 65536:
                raise ClusterError(f"port {port} for {who} is out of range; choose another "
                                   f"{option}")
            reason = bind_error(port, self.spec.host)
            if reason is not None:
                raise ClusterError(f"cannot listen on {self.spec.host}:{port} for {who}: "
                                   f"{reason}; choose another {option}")

    def start(self, timeout: float = 60.0) -> None:
        """ZooKeeper, then every broker at once; returns when all listen, else ClusterError
        (having stopped whatever it started)."""
        self.check_ports()
        try:
            self.zookeeper.start(timeout)
            for broker in self.brokers:
                self._start_broker(broker)
            self._wait_listening(timeout)
        except ZooKeeperError as exc:
            self.stop()
            raise ClusterError(exc.message, exc.detail) from None
        except BaseException:  # a ClusterError, or Ctrl-C while starting
            self.stop()
            raise

    def broker(self, broker_id: int) -> BrokerChild:
        return self.brokers[broker_id]

    def start_broker(self, broker_id: int, timeout: float = 60.0) -> None:
        """Start one stopped broker (same port and data) and wait until it listens."""
        broker = self.brokers[broker_id]
        if broker.proc is not None and broker.proc.poll() is None:
            return
        self._start_broker(broker)
        self._wait_listening(timeout, [broker])

    def kill_broker(self, broker_id: int) -> None:
        """SIGKILL one broker: nothing flushed, nothing closed, its ZooKeeper session left to
        expire."""
        proc = self.brokers[broker_id].proc
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()

    def terminate_broker(self, broker_id: int, timeout: float = 30.0) -> None:
        """SIGTERM one broker (its clean shutdown), SIGKILL after ``timeout``."""
        proc = self.brokers[broker_id].proc
        if proc is not None:
            terminate(proc, timeout)

    def pause_broker(self, broker_id: int) -> None:
        """SIGSTOP one broker: its connections stay open, nothing answers."""
        proc = self.brokers[broker_id].proc
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGSTOP)

    def resume_broker(self, broker_id: int) -> None:
        proc = self.brokers[broker_id].proc
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGCONT)

    def broker_running(self, broker_id: int) -> bool:
        proc = self.brokers[broker_id].proc
        return proc is not None and proc.poll() is None

    def _start_broker(self, broker: BrokerChild) -> None:
        broker.directory.mkdir(parents=True, exist_ok=True)
        if broker.log is not None:
            broker.log.close()
        broker.log = broker.log_path.open("ab")
        broker.log.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} moldau cluster up: "
                         f"broker {broker.broker_id} starting\n".encode())
        broker.log.flush()
        broker.reported_exit = False
        broker.proc = spawn(
            broker.command, stdin=subprocess.DEVNULL, stdout=broker.log,
            stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"},
            process_group=0)

    def _wait_listening(self, timeout: float, brokers: list[BrokerChild] | None = None) -> None:
        deadline = time.monotonic() + timeout
        waiting = list(self.brokers if brokers is None else brokers)
        while waiting:
            for broker in list(waiting):
                assert broker.proc is not None
                code = broker.proc.poll()
                if code is not None:
                    broker.reported_exit = True
                    why = broker.last_error_line() or f"exited with status {code}"
                    raise ClusterError(f"broker {broker.broker_id} did not start: {why} "
                                       f"(log: {broker.log_path})", broker.log_tail())
                if port_accepts(broker.port, broker.host):
                    waiting.remove(broker)
            if waiting and time.monotonic() > deadline:
                names = ", ".join(str(b.broker_id) for b in waiting)
                raise ClusterError(f"broker(s) {names} did not listen within {timeout:g} s "
                                   f"(logs in {self.directory})")
            if waiting:
                time.sleep(0.05)

    def exited(self) -> list[str]:
        """One line for each child that exited on its own since the last call."""
        lines = []
        for broker in self.brokers:
            if broker.proc is not None and not broker.reported_exit and (
                    code := broker.proc.poll()) is not None:
                broker.reported_exit = True
                lines.append(f"broker {broker.broker_id} exited with status {code} "
                             f"(log: {broker.log_path})")
        code = self.zookeeper.exit_status()
        if code is not None:
            lines.append(f"ZooKeeper exited with status {code} (log: {self.zookeeper.log_path})")
            self.zookeeper.stop()
        return lines

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM every broker, wait (SIGKILL after ``timeout``), then stop ZooKeeper."""
        running = [b for b in self.brokers if b.proc is not None and b.proc.poll() is None]
        for broker in running:
            assert broker.proc is not None
            broker.proc.send_signal(signal.SIGCONT)  # a paused broker cannot handle SIGTERM
            broker.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for broker in running:
            assert broker.proc is not None
            try:
                broker.proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                broker.proc.kill()
                broker.proc.wait()
        for broker in self.brokers:
            if broker.log is not None:
                broker.log.close()
                broker.log = None
            broker.proc = None
        self.zookeeper.stop()
