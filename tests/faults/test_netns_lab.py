"""The network namespace lab that partition tests build on (tests/helpers/netns.py).

Each test checks one promise the cluster fault tests rely on: hosts talk over TCP; a
partition is silent and symmetric (connects time out, an open connection stops delivering
without a reset) and cuts only the chosen pairs; heal brings both back, and the open
connection delivers what was sent meanwhile; delay and loss change what a real socket sees;
teardown leaves no namespace and no interface behind. The last tests run a real moldau
broker in one host and confluent-kafka in another and partition them, and a real ZooKeeper
in a host that ``isolate`` cuts off.
"""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.helpers import netns
from tests.helpers.netns import NetnsBroker, NetnsKafkaClient, NetnsZooKeeper, NetworkLab
from tests.helpers.zookeeper import four_letter_word, missing_reason

MakeLab = Callable[..., NetworkLab]
# A lab link delivers in well under a millisecond; a cut one must not deliver within this.
CUT_WAIT = 1.0


@pytest.fixture(autouse=True)
def _faults_possible() -> None:
    reason = netns.faults_unavailable_reason()
    if reason:
        pytest.skip(reason)


def echo_server(listener: socket.socket) -> threading.Thread:
    """Echo every byte of the first connection back (until it closes)."""

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            while data := conn.recv(4096):
                conn.sendall(data)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return thread


def connected_pair(lab: NetworkLab, a: str, b: str) -> tuple[socket.socket, socket.socket]:
    """A TCP connection from host ``a`` to a listener on host ``b``: (client, server) ends."""
    listener = lab[b].listen()
    port = listener.getsockname()[1]
    client = lab[a].connect((lab[b].address, port), timeout=10)
    server, _ = listener.accept()
    listener.close()
    return client, server


def delivers(sender: socket.socket, receiver: socket.socket, payload: bytes, wait: float) -> bool:
    """Send ``payload`` and report whether the other end got it within ``wait`` seconds."""
    sender.sendall(payload)
    receiver.settimeout(wait)
    try:
        return receiver.recv(len(payload)) == payload
    except TimeoutError:
        return False


def test_hosts_talk_tcp_over_their_lab_addresses(network_lab: MakeLab) -> None:
    lab = network_lab("a", "b")
    assert lab["a"].address != lab["b"].address
    client, server = connected_pair(lab, "a", "b")
    with client, server:
        assert delivers(client, server, b"ping", 10)
        assert delivers(server, client, b"pong", 10)
        # Each end sees the other's lab address, not loopback: a real link was used.
        assert client.getpeername()[0] == lab["b"].address
        assert server.getpeername()[0] == lab["a"].address


def test_partition_is_silent_symmetric_and_heals(network_lab: MakeLab) -> None:
    lab = network_lab("a", "b", "c")
    client, server = connected_pair(lab, "a", "b")
    listener = lab["b"].listen()
    port = listener.getsockname()[1]
    with client, server, listener:
        lab.partition(["a"], ["b"])
        # The open connection stops delivering in both directions, with no reset: a send
        # is buffered and a read just waits, as when a cable is cut.
        assert not delivers(client, server, b"a-to-b", CUT_WAIT)
        assert not delivers(server, client, b"b-to-a", CUT_WAIT)
        # A new connection times out (a refusal or reset would come from b's kernel).
        with pytest.raises(TimeoutError):
            lab["a"].connect((lab["b"].address, port), timeout=CUT_WAIT)
        with pytest.raises(TimeoutError):
            lab["b"].connect((lab["a"].address, 9), timeout=CUT_WAIT)
        # Only the chosen pair is cut: c still reaches both.
        assert lab["c"].accepts((lab["b"].address, port), timeout=5)
        listener.accept()[0].close()

        lab.heal()
        # TCP retransmits what was sent during the partition: nothing was reset.
        server.settimeout(30)
        assert server.recv(6) == b"a-to-b"
        client.settimeout(30)
        assert client.recv(6) == b"b-to-a"
        assert lab["a"].accepts((lab["b"].address, port), timeout=10)


def test_isolate_cuts_one_host_from_all_others(network_lab: MakeLab) -> None:
    lab = network_lab("a", "b", "c")
    listeners = {name: lab[name].listen() for name in ("a", "b", "c")}
    ports = {name: sock.getsockname()[1] for name, sock in listeners.items()}
    try:
        lab.isolate("a")
        for other in ("b", "c"):
            assert not lab["a"].accepts((lab[other].address, ports[other]), CUT_WAIT)
            assert not lab[other].accepts((lab["a"].address, ports["a"]), CUT_WAIT)
        assert lab["b"].accepts((lab["c"].address, ports["c"]), timeout=5)
        lab.heal()
        assert lab["a"].accepts((lab["b"].address, ports["b"]), timeout=10)
    finally:
        for sock in listeners.values():
            sock.close()


def test_split_into_groups(network_lab: MakeLab) -> None:
    lab = network_lab("a", "b", "c", "d")
    listeners = {name: lab[name].listen() for name in lab.hosts}
    ports = {name: sock.getsockname()[1] for name, sock in listeners.items()}
    try:
        lab.split(["a", "b"], ["c", "d"])
        assert lab["a"].accepts((lab["b"].address, ports["b"]), timeout=5)
        assert lab["c"].accepts((lab["d"].address, ports["d"]), timeout=5)
        assert not lab["a"].accepts((lab["c"].address, ports["c"]), CUT_WAIT)
        assert not lab["d"].accepts((lab["b"].address, ports["b"]), CUT_WAIT)
    finally:
        for sock in listeners.values():
            sock.close()


def round_trip(client: socket.socket, rounds: int = 20) -> float:
    """Median seconds for one byte to go to the echo server and back."""
    times = []
    client.settimeout(10)
    for _ in range(rounds):
        start = time.perf_counter()
        client.sendall(b"x")
        assert client.recv(1) == b"x"
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


def test_delay_adds_measured_latency(network_lab: MakeLab) -> None:
    lab = network_lab("a", "b")
    listener = lab["b"].listen()
    echo_server(listener)
    client = lab["a"].connect((lab["b"].address, listener.getsockname()[1]), timeout=10)
    client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    with client, listener:
        before = round_trip(client)
        try:
            lab.delay("a", 50)
        except netns.Unsupported as exc:
            pytest.skip(str(exc))
        after = round_trip(client)
        lab.heal()
        healed = round_trip(client)
    # 50 ms each way on a's link: at least 100 ms more per round trip.
    assert after >= before + 0.095, (before, after)
    assert healed < after, (after, healed)


def test_loss_drops_a_share_of_packets(network_lab: MakeLab) -> None:
    lab = network_lab("a", "b")
    listener = lab["b"].listen(backlog=128)
    address = (lab["b"].address, listener.getsockname()[1])
    with listener:
        lab.loss("a", 100)
        assert not lab["a"].accepts(address, CUT_WAIT)
        lab.loss("a", 0)
        assert lab["a"].accepts(address, timeout=10)
        # 40 % each way: a connect within 0.3 s (before SYN's first retransmit at 1 s) needs
        # its SYN and SYN-ACK through, 36 % of the time. Out of 24, some must succeed and some
        # fail (both fail to happen with a chance under 1e-4).
        lab.loss("a", 40)
        made = sum(lab["a"].accepts(address, timeout=0.3) for _ in range(24))
        assert 0 < made < 24, made
        assert "numgen random mod 100 < 40" in lab.ruleset()


def own_namespaces(lab: NetworkLab) -> set[str]:
    return set(lab.namespaces()) & set(netns.lab_namespaces())


def root_links() -> str:
    out = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True)
    return "\n".join(sorted(line.split(":")[1].strip() for line in out.stdout.splitlines()))


def test_teardown_removes_namespaces_processes_and_links() -> None:
    reason = netns.unavailable_reason()
    if reason:
        pytest.skip(reason)
    links_before = root_links()
    lab = NetworkLab(["a", "b"])
    with lab:
        assert own_namespaces(lab) == set(lab.namespaces())
        sleeper = lab["a"].popen(["sleep", "600"])
        lab.partition(["a"], ["b"])
        # Nothing of the lab shows in the root namespace, even while it runs.
        assert root_links() == links_before
    assert own_namespaces(lab) == set()
    assert sleeper.wait(10) is not None  # killed with its namespace
    assert root_links() == links_before


def test_stale_labs_of_dead_runs_are_deleted() -> None:
    reason = netns.unavailable_reason()
    if reason:
        pytest.skip(reason)
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = f"{netns.PREFIX}{dead.pid}-0-sw"
    subprocess.run(["ip", "netns", "add", stale], check=True)
    try:
        assert stale in netns.cleanup_stale()
        assert stale not in netns.lab_namespaces()
    finally:
        subprocess.run(["ip", "netns", "del", stale], capture_output=True)


@pytest.fixture
def kafka_lab(network_lab: MakeLab, tmp_path: Path) -> Iterator[tuple[NetworkLab, NetnsBroker]]:
    lab = network_lab("broker", "client")
    broker = NetnsBroker(
        lab["broker"],
        tmp_path / "broker",
        overrides=("group.initial.rebalance.delay.ms=0",),
    )
    broker.start()
    try:
        yield lab, broker
    finally:
        broker.stop()


def test_real_broker_in_a_namespace_through_partition_and_heal(
    kafka_lab: tuple[NetworkLab, NetnsBroker], topic_name: str
) -> None:
    lab, broker = kafka_lab
    assert broker.bootstrap.startswith(lab["broker"].address)
    # The broker's address exists only in the lab, not in the root namespace.
    root = subprocess.run(["ip", "-o", "addr"], capture_output=True, text=True, check=True)
    assert f" {broker.host}/" not in root.stdout
    config = {"message.timeout.ms": 3000, "retries": 1000000, "linger.ms": 0}
    with NetnsKafkaClient(lab["client"], broker.bootstrap, config) as client:
        assert client.request("create_topic", topic=topic_name)["error"] is None
        first = client.request("produce", topic=topic_name, values=["before"])["results"]
        assert first[0]["error"] is None, first

        lab.partition(["client"], ["broker"])
        cut = client.request("produce", topic=topic_name, values=["during"], timeout=20)
        assert cut["results"][0]["error"] is not None, cut
        assert "timed out" in cut["results"][0]["error"].lower(), cut

        lab.heal()
        # The same producer recovers once TCP retransmits again; a few attempts may still
        # time out while its backed-off retransmission timer runs.
        deadline = time.monotonic() + 60
        while True:
            healed = client.request("produce", topic=topic_name, values=["after"], timeout=20)
            if healed["results"][0]["error"] is None or time.monotonic() > deadline:
                break
        assert healed["results"][0]["error"] is None, healed
        # "during" may be there too: a request sent before its timeout can arrive after the
        # heal (the producer cannot know), which is why partitions make acks ambiguous.
        read = client.request("consume", topic=topic_name, until="after", count=100, timeout=30)
        assert read["values"][0] == "before"
        assert read["values"][-1] == "after"


def test_zookeeper_in_a_namespace_is_cut_by_isolate(network_lab: MakeLab, tmp_path: Path) -> None:
    reason = missing_reason()
    if reason:
        pytest.skip(reason)
    lab = network_lab("zk", "broker")
    zk = NetnsZooKeeper(lab["zk"], tmp_path / "zk").start()
    try:
        assert zk.connect_string().startswith(f"{lab['zk'].address}:")

        def ruok(timeout: float) -> str:
            return lab["broker"].call(
                lambda: four_letter_word(zk.port, "ruok", timeout, lab["zk"].address)
            )

        assert ruok(10) == "imok"
        lab.isolate("zk")
        assert ruok(CUT_WAIT) == ""
        assert zk.word("ruok") == "imok"  # still serving inside its own host
        lab.heal()
        assert ruok(10) == "imok"
    finally:
        zk.stop()
