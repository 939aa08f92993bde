"""``moldau cluster up`` as a real subprocess, and ``moldau cluster status`` against it and
against the single broker.

One 3-broker cluster serves the module (a ZooKeeper JVM start costs a few seconds); the last
tests stop it with SIGINT, start it again on the same directory and stop it with SIGTERM.
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient

from moldau.cluster.processes import bind_error, port_accepts
from moldau.cluster.zk_server import four_letter_word, missing_reason
from tests.helpers import free_port, moldau_executable, ok, one_line_error, run_moldau
from tests.helpers.broker_process import reserve_ports

START_TIMEOUT = 90.0


def free_port_run(count: int) -> int:
    """The first of ``count`` consecutive loopback ports that are free now."""
    for _ in range(50):
        base = free_port()
        if base + count <= 65535 and all(bind_error(base + i) is None for i in range(count)):
            reserve_ports(range(base, base + count))
            return base
    raise RuntimeError(f"no {count} consecutive free ports")


def free_port_outside(base: int, count: int) -> int:
    """A free loopback port outside ``base .. base + count - 1`` (the OS may hand those out)."""
    for _ in range(50):
        port = free_port()
        if not base <= port < base + count:
            return port
    raise RuntimeError(f"the OS keeps handing out ports in {base}..{base + count - 1}")


def cluster_ports(count: int) -> tuple[int, int]:
    """A base port for ``count`` brokers and a ZooKeeper port outside their run."""
    base = free_port_run(count)
    return base, free_port_outside(base, count)


class ClusterUp:
    """``moldau cluster up`` running in the background, its stdout read line by line."""

    def __init__(self, directory: Path, brokers: int, base_port: int, zk_port: int,
                 *extra: str) -> None:
        self.directory, self.brokers, self.extra = directory, brokers, extra
        self.base_port, self.zk_port = base_port, zk_port
        env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
        self.proc = subprocess.Popen(
            [moldau_executable(), "cluster", "up", "--brokers", str(brokers),
             "--dir", str(directory), "--base-port", str(base_port),
             "--zookeeper-port", str(zk_port), *extra],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
            text=True, env=env)
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.output: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def wait_for(self, prefix: str, timeout: float = START_TIMEOUT) -> str:
        """The first stdout line containing ``prefix`` (fails with all output otherwise)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                break
            self.output.append(line)
            if prefix in line:
                return line
        raise AssertionError(f"no {prefix!r} from cluster up; stdout: {self.output}; "
                             f"stderr: {self.stderr() if self.proc.poll() is not None else ''}")

    def stderr(self) -> str:
        assert self.proc.stderr is not None
        return self.proc.stderr.read()

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{self.base_port + i}" for i in range(self.brokers))

    def children(self) -> list[int]:
        """Pids of the processes ``cluster up`` started (ZooKeeper's JVM and the brokers).

        Children are forked by one spawner thread (``moldau.cluster.processes.spawn``), so
        every thread's list is read."""
        tasks = Path(f"/proc/{self.proc.pid}/task")
        return [int(pid) for task in tasks.iterdir()
                for pid in (task / "children").read_text().split()]

    def ports(self) -> list[int]:
        return [self.zk_port] + [self.base_port + i for i in range(self.brokers)]

    def stop(self, signum: int = signal.SIGINT, timeout: float = 60.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signum)
        return self.proc.wait(timeout)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except FileNotFoundError:
        return False
    return state != "Z"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterUp]:
    reason = missing_reason()
    if reason:
        pytest.skip(reason)
    running = ClusterUp(tmp_path_factory.mktemp("cluster"), 3, *cluster_ports(3),
                        "--rack-aware")
    try:
        running.wait_for("Bootstrap:")
        yield running
    finally:
        running.stop(signal.SIGKILL if running.proc.poll() is None else signal.SIGINT)


def test_cluster_up_prints_the_bootstrap_and_every_part_answers(cluster: ClusterUp) -> None:
    line = next(x for x in cluster.output if "Bootstrap:" in x)
    assert line.endswith(f"Bootstrap: {cluster.bootstrap}"), line
    assert f"moldau cluster status -b {cluster.bootstrap}" in cluster.wait_for("Check it:")
    assert four_letter_word(cluster.zk_port, "ruok") == "imok"
    for i in range(3):
        assert port_accepts(cluster.base_port + i), f"broker {i} does not listen"
        log = cluster.directory / f"broker-{i}" / "broker.log"
        # The broker prints that line just after its port accepts, which is what cluster up
        # waits for: give it a moment on a loaded machine.
        wanted = f"moldau broker {i} listening on 127.0.0.1:{cluster.base_port + i}"
        deadline = time.monotonic() + 10
        while wanted not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert wanted in log.read_text(), log.read_text()[-2000:]
        assert (cluster.directory / f"broker-{i}" / "data" / "meta.properties").exists()
    assert (cluster.directory / "zookeeper" / "zoo.cfg").exists()


def _status(bootstrap: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(
        ok(run_moldau("cluster", "status", "--format", "json", "-b", bootstrap)).stdout)
    return document


def test_every_broker_registers_in_zookeeper(cluster: ClusterUp) -> None:
    zk = KazooClient(hosts=f"127.0.0.1:{cluster.zk_port}", timeout=10)
    zk.start(timeout=10)
    try:
        deadline = time.monotonic() + 30
        while sorted(zk.get_children("/brokers/ids") if zk.exists("/brokers/ids") else []) != [
                "0", "1", "2"] and time.monotonic() < deadline:
            time.sleep(0.2)
        assert sorted(zk.get_children("/brokers/ids")) == ["0", "1", "2"]
    finally:
        zk.stop()
        zk.close()


def test_cluster_status_lists_the_three_brokers_and_a_controller(cluster: ClusterUp) -> None:
    deadline = time.monotonic() + 30
    while len((status := _status(cluster.bootstrap))["brokers"]) < 3 and (
            time.monotonic() < deadline):
        time.sleep(0.5)
    assert [(b["id"], b["port"], b["rack"]) for b in status["brokers"]] == [
        (i, cluster.base_port + i, f"rack-{i}") for i in range(3)], status  # --rack-aware
    assert status["controller"] in (0, 1, 2)
    assert status["offline"] == [] and status["under_replicated"] == []


def test_status_of_a_single_broker(broker: Any, topic_name: str) -> None:
    ok(run_moldau("topic", "create", topic_name, "--partitions", "2", bootstrap=broker.bootstrap))
    status = _status(broker.bootstrap)
    assert len(status["brokers"]) == 1
    only = status["brokers"][0]
    assert only["port"] == broker.port and status["controller"] == only["id"]
    assert status["partitions"] >= 2 and status["topics"] >= 1
    assert status["offline"] == [] and status["under_replicated"] == []
    text = ok(run_moldau("cluster", "status", "-b", broker.bootstrap)).stdout
    assert f"Controller: {only['id']}  Brokers: 1" in text
    assert "Under-replicated: 0  Offline: 0" in text
    assert f"127.0.0.1   {broker.port}" in text, text


def test_cluster_status_of_nothing_is_one_line() -> None:
    port = free_port()
    one_line_error(run_moldau("cluster", "status", "-b", f"127.0.0.1:{port}", "--timeout", "2"),
                   f"127.0.0.1:{port}")


def test_ports_in_use_are_one_line_errors(cluster: ClusterUp, tmp_path: Path) -> None:
    base = free_port_run(2)
    # The running cluster's ZooKeeper port, then one of its broker ports.
    result = run_moldau("cluster", "up", "--brokers", "2", "--dir", str(tmp_path / "a"),
                        "--base-port", str(base), "--zookeeper-port", str(cluster.zk_port))
    one_line_error(result, f"127.0.0.1:{cluster.zk_port} for ZooKeeper", "--zookeeper-port")
    result = run_moldau("cluster", "up", "--brokers", "2", "--dir", str(tmp_path / "b"),
                        "--base-port", str(cluster.base_port + 2),
                        "--zookeeper-port", str(free_port_outside(cluster.base_port + 2, 2)))
    one_line_error(result, f"127.0.0.1:{cluster.base_port + 2} for broker 0", "--base-port")
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_bad_inputs_are_one_line_errors(tmp_path: Path) -> None:
    common = ["cluster", "up", "--dir", str(tmp_path), "--zookeeper-port", str(free_port())]
    one_line_error(run_moldau(*common, "--override", "nonsense"), "KEY=VALUE")
    one_line_error(run_moldau(*common, "--base-port", "65535", "--brokers", "2"),
                   "no room for 2 brokers")
    if missing_reason() is None:  # without java on PATH, ZooKeeper cannot run
        result = run_moldau(*common, env={"PATH": "/nonexistent"})
        one_line_error(result, "java is not installed", "moldau cluster up --install")


def test_a_broker_that_refuses_to_start_is_one_line_and_nothing_is_left(tmp_path: Path) -> None:
    if missing_reason():
        pytest.skip(missing_reason())
    base, zk_port = cluster_ports(2)
    result = run_moldau("cluster", "up", "--brokers", "2", "--dir", str(tmp_path),
                        "--base-port", str(base), "--zookeeper-port", str(zk_port),
                        "--override", "num.partitions=0", timeout=120)
    line = one_line_error(result, "did not start", "num.partitions")
    # Both brokers refuse the same config; whichever exits first is the one named.
    named = re.search(r"broker (\d) did not start", line)
    assert named is not None, line
    assert str(tmp_path / f"broker-{named.group(1)}" / "broker.log") in line, line
    ports = (zk_port, base, base + 1)
    deadline = time.monotonic() + 10  # ZooKeeper's JVM may take a moment to let go
    while any(bind_error(p) for p in ports) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert [p for p in ports if bind_error(p)] == []


def _assert_all_gone(children: list[int], ports: list[int]) -> None:
    assert children, "cluster up started no processes"
    assert not [pid for pid in children if _alive(pid)], "children survived"
    deadline = time.monotonic() + 10  # TIME_WAIT does not block a listener; be generous anyway
    while any(bind_error(p) for p in ports) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert [p for p in ports if bind_error(p)] == []


def test_sigint_stops_everything_and_a_restart_reuses_the_data(
        cluster: ClusterUp, topic_name: str) -> None:
    ok(run_moldau("topic", "create", topic_name, "-b", f"127.0.0.1:{cluster.base_port}"))
    children = cluster.children()
    assert len(children) == 4, children  # ZooKeeper and three brokers
    assert cluster.stop(signal.SIGINT) == 0
    cluster.wait_for("Cluster stopped.", timeout=5)
    _assert_all_gone(children, cluster.ports())
    for i in range(3):
        assert "shut down cleanly" in (
            cluster.directory / f"broker-{i}" / "broker.log").read_text()

    again = ClusterUp(cluster.directory, 3, cluster.base_port, cluster.zk_port, *cluster.extra)
    try:
        again.wait_for("Bootstrap:")
        topics = ok(run_moldau("topic", "list", "-b", f"127.0.0.1:{cluster.base_port}")).stdout
        assert topic_name in topics.split()
        children = again.children()
        assert again.stop(signal.SIGTERM) == 0
        _assert_all_gone(children, again.ports())
    finally:
        again.stop(signal.SIGKILL)


def test_children_die_with_a_killed_cluster_up(tmp_path: Path) -> None:
    if missing_reason():
        pytest.skip(missing_reason())
    running = ClusterUp(tmp_path, 1, *cluster_ports(1))
    running.wait_for("Bootstrap:")
    children = running.children()
    running.stop(signal.SIGKILL)
    deadline = time.monotonic() + 10
    while any(_alive(pid) for pid in children) and time.monotonic() < deadline:
        time.sleep(0.1)
    _assert_all_gone(children, running.ports())




def test_status_and_describe_show_a_partition_in_an_offline_log_dir(
        make_broker: Any, tmp_path: Path, topic_name: str) -> None:
    """A single broker whose second log dir failed: its partitions there have no leader."""
    from tests.faults.small_disk import remount_read_only, tmpfs
    from tests.faults.test_log_dir_failure import partitions_in, produce_code
    from tests.integration.wire import WireClient

    healthy = tmp_path / "healthy"
    with tmpfs(tmp_path / "failing", "16m") as failing:
        broker = make_broker(f"log.dirs={healthy},{failing}")
        ok(run_moldau("topic", "create", topic_name, "--partitions", "4",
                      bootstrap=broker.bootstrap))
        on_failing = sorted(partitions_in(failing, topic_name))
        assert on_failing and len(on_failing) < 4
        broker.restart()  # closes every file, so the tmpfs can be remounted read-only
        remount_read_only(failing)
        with WireClient.to(broker.bootstrap) as c:
            produce_code(c, topic_name, on_failing[0])  # the failed write takes the dir offline
        status = _status(broker.bootstrap)
        offline = [(p["topic"], p["partition"], p["leader"]) for p in status["offline"]]
        assert offline == [(topic_name, p, -1) for p in on_failing], status
        text = ok(run_moldau("topic", "describe", topic_name, bootstrap=broker.bootstrap)).stdout
        rows = {line.split()[0]: line.split() for line in text.splitlines()
                if line.split() and line.split()[0].isdigit()}
        for p in range(4):  # no leader and unknown offsets where the dir failed
            assert rows[str(p)][1] == ("none" if p in on_failing else "0"), text
            assert (rows[str(p)][-1] == "unknown") == (p in on_failing), text
        broker.stop()


def _broker_pid(running: ClusterUp, broker_id: int) -> int:
    for pid in running.children():
        args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        if f"broker.id={broker_id}".encode() in args:
            return pid
    raise AssertionError(f"no process for broker {broker_id}")


def test_a_stopped_broker_shows_in_status_and_describe(tmp_path: Path) -> None:
    if missing_reason():
        pytest.skip(missing_reason())
    running = ClusterUp(tmp_path, 2, *cluster_ports(2))
    try:
        running.wait_for("Bootstrap:")
        first = f"127.0.0.1:{running.base_port}"
        ok(run_moldau("topic", "create", "r2", "--partitions", "2", "--replication-factor", "2",
                      "-b", first))
        ok(run_moldau("topic", "create", "r1", "--partitions", "2", "--replication-factor", "1",
                      "-b", first))
        os.kill(_broker_pid(running, 1), signal.SIGTERM)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            status = _status(first)
            if len(status["brokers"]) == 1 and len(status["offline"]) == 1 and len(
                    [p for p in status["under_replicated"] if p["topic"] == "r2"]) == 2:
                break
            time.sleep(0.5)
        assert [b["id"] for b in status["brokers"]] == [0], status
        assert [(p["topic"], p["leader"], p["replicas"]) for p in status["offline"]] == [
            ("r1", -1, [1])], status
        text = ok(run_moldau("cluster", "status", "-b", first)).stdout
        assert "Under-replicated: 2  Offline: 1" in text, text  # r1 keeps ISR [1]
        described = ok(run_moldau("topic", "describe", "r2", "-b", first)).stdout
        header = next(line for line in described.splitlines() if line.startswith("Partition"))
        assert header.split() == ["Partition", "Leader", "Replicas", "ISR", "Offline",
                                  "Earliest", "Latest"], described
        rows = [line.split() for line in described.splitlines() if line[:1].isdigit()]
        assert [(r[1], r[3], r[4]) for r in rows] == [("0", "0", "1"), ("0", "0", "1")], described
    finally:
        assert running.stop(signal.SIGINT) == 0
    assert "broker 1 exited with status 0" in running.stderr()
