"""A private network of Linux network namespaces, where real links can be cut.

Loopback cannot be partitioned: every process on one machine reaches every other. A
``NetworkLab`` builds a small switched LAN out of network namespaces instead, so brokers and
ZooKeeper can be cut off from each other exactly as on separate machines. ``moldau verify
--local-cluster`` runs its cluster in one (when root) for its partition nemesis, and the
fault tests build theirs with it (``tests/helpers/netns.py`` adds brokers and clients):

- one *switch* namespace holds a Linux bridge (``br0``); nothing is added to the host's own
  namespace, so the machine's interfaces, routes and firewall are never touched;
- each *host* is a namespace with loopback and one ``eth0``, the far end of a veth pair whose
  near end (``p<i>``) is a port of the bridge; ``eth0`` gets a private address from the lab's
  subnet (``10.213.0.0/24`` by default). The addresses exist only inside the lab, so two labs
  (parallel runs) may use the same subnet without ever meeting;
- every host knows every other host's MAC address (permanent neighbour entries), so a cut
  link behaves like a dead wire: packets vanish, with no ARP failures or ICMP errors;
- faults are nftables rules in the switch's ``bridge`` table, matched on bridge ports:
  ``partition`` and ``isolate`` drop frames between ports (symmetric and silent: established
  TCP connections stop delivering, connects time out, nobody gets a RST), ``loss`` drops a
  share of a host's frames at random (``numgen``); ``delay`` is ``tc netem`` on both ends of
  the host's veth pair, where the kernel has netem. ``heal`` removes every fault.

Processes run in a host with ``host.popen``/``host.run``/``host.command`` (``ip netns
exec``). A process reaches hosts by creating sockets inside one: ``host.call`` runs a
function on a short-lived thread that has joined the namespace (sockets keep the namespace
they were made in), and ``host.enter`` moves the calling thread into it (threads it starts
afterwards, a client library's included, are born there).

Names are ``mlab-<pid>-<n>-...``: unique per process, and a later lab deletes the labs of
processes that no longer exist (``cleanup_stale``), so a run killed with SIGKILL leaves
nothing behind for long. Needs root and iproute2; nftables for faults.
"""

from __future__ import annotations

import contextlib
import ctypes
import ipaddress
import itertools
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

PREFIX = "mlab-"
DEFAULT_SUBNET = "10.213.0.0/24"
NETNS_DIR = Path("/run/netns")
_CLONE_NEWNET = 0x40000000
_labs = itertools.count()
T = TypeVar("T")


class LabError(RuntimeError):
    """A command that builds or changes the lab failed; the message has its stderr."""


class Unsupported(LabError):
    """This machine cannot do what was asked (e.g. the kernel has no ``sch_netem``)."""


def unavailable_reason() -> str | None:
    """Why no lab can be built here, in one sentence, or None when it can."""
    if os.geteuid() != 0:
        return "network namespace tests need root (ip netns, veth, nftables)"
    if shutil.which("ip") is None:
        return "iproute2's `ip` is not installed (apt-get install iproute2)"
    probe = f"{PREFIX}probe-{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"`ip netns add` does not work here: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def faults_unavailable_reason() -> str | None:
    """Why partitions cannot be made here (no nft binary), or None."""
    if shutil.which("nft") is None:
        return "nftables' `nft` is not installed (apt-get install nftables)"
    return None


def _sh(args: Sequence[str], stdin: str | None = None, check: bool = True) -> str:
    done = subprocess.run(list(args), input=stdin, capture_output=True, text=True)
    if check and done.returncode != 0:
        raise LabError(f"{' '.join(args)} failed ({done.returncode}): {done.stderr.strip()}")
    return done.stdout


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def lab_namespaces() -> list[str]:
    """Every namespace name that belongs to some lab (of any process)."""
    if not NETNS_DIR.is_dir():
        return []
    return sorted(name for name in os.listdir(NETNS_DIR) if name.startswith(PREFIX))


def _delete_namespace(name: str) -> None:
    """Kill what still runs in it, then delete it (the veth/bridge go with the namespace)."""
    for pid in _sh(["ip", "netns", "pids", name], check=False).split():
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), signal.SIGKILL)
    _sh(["ip", "netns", "del", name], check=False)


def cleanup_stale() -> list[str]:
    """Delete the labs of test processes that are gone (killed runs); returns their names."""
    stale = []
    for name in lab_namespaces():
        owner = name[len(PREFIX) :].split("-", 1)[0]
        if owner.isdigit() and not _pid_alive(int(owner)):
            _delete_namespace(name)
            stale.append(name)
    return stale


def _setns(path: str) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(path, os.O_RDONLY)
    try:
        if libc.setns(fd, _CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns({path}): {os.strerror(err)}")
    finally:
        os.close(fd)


class Host:
    """One namespace of the lab: a machine with loopback and ``eth0`` at ``address``."""

    def __init__(self, lab: NetworkLab, name: str, index: int, address: str) -> None:
        self.lab = lab
        self.name = name
        self.index = index
        self.address = address
        self.netns = f"{lab.prefix}-{name}"
        self.port = f"p{index}"  # its bridge port in the switch namespace
        self.mac = f"02:13:00:00:{index // 256:02x}:{index % 256:02x}"

    def command(self, args: Sequence[str]) -> list[str]:
        """``args`` wrapped to run inside this host (``ip netns exec``)."""
        return ["ip", "netns", "exec", self.netns, *args]

    def popen(self, args: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]:
        """Start a process in this host; ``ip netns exec`` execs it, so the pid is its own."""
        return subprocess.Popen(self.command(args), **kwargs)

    def run(self, args: Sequence[str], **kwargs: Any) -> subprocess.CompletedProcess[Any]:
        """Run a process in this host to completion (``subprocess.run`` arguments)."""
        return subprocess.run(self.command(args), **kwargs)

    def python(self, args: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]:
        """This interpreter (same venv, same PYTHONPATH) running ``args`` in this host."""
        return self.popen([sys.executable, *args], **kwargs)

    def call(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` on a thread that has joined this host's namespace; return its result.

        Network namespaces are per thread, so only that thread moves; sockets it creates
        stay in this host for their whole life and can be used from any thread after. The
        thread is left when ``fn`` returns.
        """
        result: list[T] = []
        error: list[BaseException] = []

        def body() -> None:
            try:
                _setns(f"{NETNS_DIR}/{self.netns}")
                result.append(fn())
            except BaseException as exc:  # handed to the caller's thread
                error.append(exc)

        thread = threading.Thread(target=body, name=f"netns-{self.netns}")
        thread.start()
        thread.join()
        if error:
            raise error[0]
        return result[0]

    @contextlib.contextmanager
    def enter(self) -> Iterator[Host]:
        """Move the calling thread into this host until the block ends.

        Threads started inside the block are born in the host and stay there (a client
        library's I/O threads included); the calling thread returns to its own namespace.
        """
        own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        try:
            _setns(f"{NETNS_DIR}/{self.netns}")
            try:
                yield self
            finally:
                _setns(f"/proc/self/fd/{own}")
        finally:
            os.close(own)

    def connect(self, address: tuple[str, int], timeout: float) -> socket.socket:
        """A TCP connection made from this host (the socket lives in its namespace)."""
        return self.call(lambda: socket.create_connection(address, timeout=timeout))

    def listen(self, port: int = 0, backlog: int = 16) -> socket.socket:
        """A listening TCP socket on this host's address (port 0: the kernel picks)."""

        def make() -> socket.socket:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.address, port))
            sock.listen(backlog)
            return sock

        return self.call(make)

    def accepts(self, address: tuple[str, int], timeout: float = 0.5) -> bool:
        """True when a TCP connect from this host to ``address`` succeeds."""
        try:
            self.connect(address, timeout).close()
        except OSError:
            return False
        return True

    def __repr__(self) -> str:
        return f"<Host {self.name} {self.address} netns={self.netns}>"


class NetworkLab:
    """A switch namespace and one namespace per host name; see the module docstring.

    Use it as a context manager (or the ``network_lab`` fixture): leaving it deletes every
    namespace, and with them every interface and rule, even when the test failed.
    """

    def __init__(self, names: Iterable[str], subnet: str = DEFAULT_SUBNET) -> None:
        self.prefix = f"{PREFIX}{os.getpid()}-{next(_labs)}"
        self.switch = f"{self.prefix}-sw"
        self.network = ipaddress.ip_network(subnet)
        addresses = self.network.hosts()
        self.hosts: dict[str, Host] = {}
        for index, name in enumerate(names, start=1):
            if name in self.hosts:
                raise ValueError(f"host name {name!r} given twice")
            self.hosts[name] = Host(self, name, index, str(next(addresses)))
        self._blocked: set[frozenset[str]] = set()  # pairs of bridge ports
        self._loss: dict[str, int] = {}
        self._delayed: set[str] = set()
        self._created: list[str] = []

    def __getitem__(self, name: str) -> Host:
        return self.hosts[name]

    def namespaces(self) -> list[str]:
        return [self.switch, *(host.netns for host in self.hosts.values())]

    # -- building and tearing down -------------------------------------------------------

    def start(self) -> NetworkLab:
        cleanup_stale()
        try:
            self._build()
        except BaseException:
            self.close()
            raise
        return self

    def _build(self) -> None:
        prefix_len = self.network.prefixlen
        self._add_namespace(self.switch)
        switch = ["link add br0 type bridge", "link set br0 up", "link set lo up"]
        for host in self.hosts.values():
            self._add_namespace(host.netns)
            switch.append(f"link add {host.port} type veth peer name eth0 netns {host.netns}")
            switch.append(f"link set {host.port} master br0 up")
        _sh(["ip", "-n", self.switch, "-batch", "-"], "\n".join(switch) + "\n")
        for host in self.hosts.values():
            cmds = [
                "link set lo up",
                f"link set eth0 address {host.mac}",
                f"addr add {host.address}/{prefix_len} dev eth0",
                "link set eth0 up",
            ]
            cmds += [
                f"neigh replace {other.address} lladdr {other.mac} dev eth0 nud permanent"
                for other in self.hosts.values()
                if other is not host
            ]
            _sh(["ip", "-n", host.netns, "-batch", "-"], "\n".join(cmds) + "\n")

    def _add_namespace(self, name: str) -> None:
        _sh(["ip", "netns", "add", name])
        self._created.append(name)

    def close(self) -> None:
        """Kill every process left in the lab and delete all its namespaces."""
        for name in reversed(self._created):
            _delete_namespace(name)
        self._created = []

    def __enter__(self) -> NetworkLab:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- faults --------------------------------------------------------------------------

    def _hosts(self, hosts: Iterable[Host | str]) -> list[Host]:
        return [h if isinstance(h, Host) else self.hosts[h] for h in hosts]

    def partition(self, side_a: Iterable[Host | str], side_b: Iterable[Host | str]) -> None:
        """Drop every frame between any host of ``side_a`` and any of ``side_b``, both ways.

        Adds to faults already in place; hosts named on neither side keep their links.
        """
        for a in self._hosts(side_a):
            for b in self._hosts(side_b):
                if a is not b:
                    self._blocked.add(frozenset((a.port, b.port)))
        self._apply_rules()

    def split(self, *sides: Iterable[Host | str]) -> None:
        """Partition into the given groups: no host can reach a host of another group."""
        groups = [self._hosts(side) for side in sides]
        for i, group in enumerate(groups):
            for other in groups[i + 1 :]:
                self.partition(group, other)

    def isolate(self, host: Host | str) -> None:
        """Cut ``host`` off from every other host of the lab."""
        (alone,) = self._hosts([host])
        self.partition([alone], [h for h in self.hosts.values() if h is not alone])

    def loss(self, host: Host | str, percent: int) -> None:
        """Drop ``percent`` % of the frames from and to ``host`` at random (0 removes it)."""
        (target,) = self._hosts([host])
        if not 0 <= percent <= 100:
            raise ValueError("percent must be within 0..100")
        if percent:
            self._loss[target.port] = percent
        else:
            self._loss.pop(target.port, None)
        self._apply_rules()

    def delay(self, host: Host | str, ms: float) -> None:
        """Delay every packet to and from ``host`` by ``ms`` each way (tc netem).

        The round trip between it and any other host grows by twice ``ms``. Raises
        ``Unsupported`` when the kernel has no netem qdisc.
        """
        (target,) = self._hosts([host])
        self._delayed.add(target.name)  # heal removes whatever got installed
        for netns, dev in ((self.switch, target.port), (target.netns, "eth0")):
            done = subprocess.run(
                [
                    "ip",
                    "netns",
                    "exec",
                    netns,
                    "tc",
                    "qdisc",
                    "replace",
                    "dev",
                    dev,
                    "root",
                    "netem",
                    "delay",
                    f"{ms}ms",
                    "limit",
                    "100000",
                ],
                capture_output=True,
                text=True,
            )
            if done.returncode != 0:
                if "unknown" in done.stderr.lower() or "not supported" in done.stderr.lower():
                    raise Unsupported(
                        "the kernel has no netem qdisc (CONFIG_NET_SCH_NETEM): "
                        + done.stderr.strip()
                    )
                raise LabError(f"tc netem on {netns}/{dev} failed: {done.stderr.strip()}")

    def heal(self) -> None:
        """Remove every fault: partitions, isolation, loss and delay."""
        self._blocked.clear()
        self._loss.clear()
        self._apply_rules()
        for name in sorted(self._delayed):
            host = self.hosts[name]
            for netns, dev in ((self.switch, host.port), (host.netns, "eth0")):
                _sh(
                    ["ip", "netns", "exec", netns, "tc", "qdisc", "del", "dev", dev, "root"],
                    check=False,
                )
        self._delayed.clear()

    def ruleset(self) -> str:
        """The nftables table the switch filters with (for a failing test's message)."""
        lines = [
            "table bridge lab {",
            "  chain forward {",
            "    type filter hook forward priority 0; policy accept;",
        ]
        for pair in sorted(sorted(p) for p in self._blocked):
            a, b = pair
            lines.append(f'    iifname "{a}" oifname "{b}" drop')
            lines.append(f'    iifname "{b}" oifname "{a}" drop')
        for port, percent in sorted(self._loss.items()):
            chance = "" if percent >= 100 else f"numgen random mod 100 < {percent} "
            lines.append(f'    iifname "{port}" {chance}drop')
            lines.append(f'    oifname "{port}" {chance}drop')
        lines += ["  }", "}"]
        return "\n".join(lines) + "\n"

    def _apply_rules(self) -> None:
        reason = faults_unavailable_reason()
        if reason:
            raise Unsupported(reason)
        # One transaction: create-if-missing, delete, re-create; never half a rule set.
        script = "table bridge lab {}\ndelete table bridge lab\n" + self.ruleset()
        _sh(["ip", "netns", "exec", self.switch, "nft", "-f", "-"], script)

    def __repr__(self) -> str:
        return f"<NetworkLab {self.prefix} {self.network} hosts={list(self.hosts)}>"
