"""Faults for a cluster ``moldau verify --local-cluster`` started itself.

One fault at a time, each held for a while, undone, then a quiet spell before the next:

- ``kill``: kill -9 a broker (its ZooKeeper session is left to expire), start it again;
- ``pause``: SIGSTOP a broker for less than its ZooKeeper session, then SIGCONT;
- ``pause-session``: SIGSTOP a broker past its ZooKeeper session (it loses its registration
  and leaderships while frozen, and must step down and re-register when it wakes);
- ``restart``: SIGTERM (a clean shutdown), start again;
- ``zk-restart``: stop ZooKeeper (SIGTERM) and start it again on the same data;
- ``partition`` (brokers in network namespaces only): alternately cut a broker off from
  everyone (clients too), and from ZooKeeper and the other brokers while clients still reach
  it (a leader that must stop acknowledging acks=all writes);
- ``rotate``: all of the above in turn, for the whole produce phase.

The broker hit is the leader of a partition (a different partition each time), so faults land
where acks are decided; when metadata is unavailable, a random running broker.

``UncleanElection`` is no rotation member: it forces an unclean leader election on a topic
with ``unclean.leader.election.enable=true`` (``--unclean``), to show the checker reports the
acknowledged records such an election throws away.

Every step is recorded in the history with its time (``ctx.note``); ``heal`` undoes the fault
in place, brings every process back and waits for every replica to be in sync again.
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from .nemesis import Nemesis, NemesisContext
from .own_cluster import OwnCluster, admin_client

KINDS = ("kill", "pause", "partition", "restart", "pause-session", "zk-restart")
#: Seconds of quiet after a broker came back before the next fault.
TICK_S = 0.25
#: Longest wait for every replica back in sync when healing.
HEAL_SYNC_TIMEOUT_S = 90.0


@dataclass
class _Active:
    """The fault in place: when to undo it, and how (returns what it did)."""

    undo: Callable[[], str]
    until: float


class ClusterNemesis(Nemesis):
    """Injects ``kinds`` in turn into ``own``; see the module docstring."""

    interval_s = TICK_S

    def __init__(self, own: OwnCluster, kinds: list[str], hold_s: float = 3.0,
                 seed: int | None = None, first: Nemesis | None = None) -> None:
        if not kinds and first is None:
            raise ValueError("a cluster nemesis needs at least one fault")
        self.own = own
        self.kinds = kinds
        names = [first.name] if first is not None else []
        names += ["rotate"] if len(kinds) > 1 else kinds
        self.name = " then ".join(names)
        self.hold_s = hold_s
        self.rng = random.Random(seed)
        self.first = first
        self._turn = 0
        self._active: _Active | None = None
        self._next_at = 0.0
        self._admin: AdminClient | None = None
        self._partition_cuts = 0

    # -- looking at the cluster ---------------------------------------------------------

    def _admin_of(self, ctx: NemesisContext) -> AdminClient:
        if self._admin is None:
            self._admin = admin_client(ctx.client_config)
        return self._admin

    def _target(self, ctx: NemesisContext) -> int:
        """The leader of the next partition in turn, else a random running broker.

        The partition moves on with every fault and once more with every round of the
        rotation, so one kind of fault does not keep landing on the same partition."""
        running = [b for b in self.own.broker_ids if self.own.cluster.broker_running(b)]
        with contextlib.suppress(KafkaException):
            states = self.own.partition_states(self._admin_of(ctx), ctx.topic, timeout=3.0)
            if states:
                turn = self._turn + self._turn // max(1, len(self.kinds))
                partition = sorted(states)[turn % len(states)]
                leader = states[partition][0]
                if leader in running:
                    return leader
        return self.rng.choice(running or self.own.broker_ids)

    # -- the hooks ----------------------------------------------------------------------

    def strike(self, ctx: NemesisContext) -> str | None:
        now = time.monotonic()
        if self._active is not None:
            if now < self._active.until:
                return None
            said = self._active.undo()
            self._active = None
            self._next_at = time.monotonic() + self.hold_s
            return said
        if now < self._next_at:
            return None
        if self.first is not None:
            first, self.first = self.first, None
            done = first.strike(ctx)
            self._next_at = time.monotonic() + self.hold_s
            return done
        if not self.kinds:
            return None
        kind = self.kinds[self._turn % len(self.kinds)]
        self._turn += 1
        return getattr(self, "_" + kind.replace("-", "_"))(ctx)

    def heal(self, ctx: NemesisContext) -> str | None:
        done = []
        if self._active is not None:
            done.append(self._active.undo())
            self._active = None
        cluster = self.own.cluster
        if self.own.lab is not None:
            self.own.lab.heal()
        if not cluster.zookeeper.is_running():
            cluster.zookeeper.start()
            done.append("started ZooKeeper")
        for broker in self.own.broker_ids:
            cluster.resume_broker(broker)
            if not cluster.broker_running(broker):
                cluster.start_broker(broker)
                done.append(f"started broker {broker}")
        took = self.own.wait_in_sync(self._admin_of(ctx), ctx.topic, HEAL_SYNC_TIMEOUT_S)
        done.append(f"every replica in sync after {took:.1f} s" if took is not None
                    else f"NOT every replica in sync within {HEAL_SYNC_TIMEOUT_S:g} s")
        return "heal: " + "; ".join(done)

    # -- the faults ---------------------------------------------------------------------

    def _hold(self, undo: Callable[[], str], hold_s: float | None = None) -> None:
        self._active = _Active(undo, time.monotonic() + (self.hold_s if hold_s is None
                                                          else hold_s))

    def _restart_after(self, broker: int, how: str) -> Callable[[], str]:
        def undo() -> str:
            began = time.monotonic()
            self.own.cluster.start_broker(broker)
            return f"{how}: started broker {broker} again (listening after " \
                   f"{time.monotonic() - began:.1f} s)"
        return undo

    def _kill(self, ctx: NemesisContext) -> str:
        broker = self._target(ctx)
        self.own.cluster.kill_broker(broker)
        self._hold(self._restart_after(broker, "kill"))
        return f"kill: kill -9 broker {broker}"

    def _restart(self, ctx: NemesisContext) -> str:
        broker = self._target(ctx)
        began = time.monotonic()
        self.own.cluster.terminate_broker(broker)
        self._hold(self._restart_after(broker, "restart"), hold_s=1.0)
        return f"restart: SIGTERM broker {broker} (exited after {time.monotonic() - began:.1f} s)"

    def _pause_for(self, ctx: NemesisContext, kind: str, hold_s: float) -> str:
        broker = self._target(ctx)
        self.own.cluster.pause_broker(broker)

        def undo() -> str:
            self.own.cluster.resume_broker(broker)
            return f"{kind}: SIGCONT broker {broker}"
        self._hold(undo, hold_s)
        return f"{kind}: SIGSTOP broker {broker} for {hold_s:.1f} s"

    def _pause(self, ctx: NemesisContext) -> str:
        return self._pause_for(ctx, "pause", min(self.hold_s, self.own.session_timeout_s / 2))

    def _pause_session(self, ctx: NemesisContext) -> str:
        return self._pause_for(ctx, "pause-session", self.own.session_timeout_s + 2.0)

    def _zk_restart(self, ctx: NemesisContext) -> str:
        zookeeper = self.own.cluster.zookeeper
        zookeeper.stop()

        def undo() -> str:
            began = time.monotonic()
            zookeeper.start()
            return f"zk-restart: ZooKeeper started again (answering after " \
                   f"{time.monotonic() - began:.1f} s)"
        self._hold(undo)
        return "zk-restart: stopped ZooKeeper (SIGTERM)"

    def _partition(self, ctx: NemesisContext) -> str:
        lab = self.own.lab
        if lab is None:
            return "partition: skipped (brokers are not in network namespaces)"
        broker = self._target(ctx)
        host = f"b{broker}"
        self._partition_cuts += 1
        if self._partition_cuts % 2:
            lab.isolate(host)
            said = f"partition: broker {broker} cut off from everyone (ZooKeeper, brokers, clients)"
        else:
            others = ["zk", *(f"b{b}" for b in self.own.broker_ids if b != broker)]
            lab.partition([host], others)
            said = (f"partition: broker {broker} cut off from ZooKeeper and the other brokers "
                    f"(clients still reach it)")

        def undo() -> str:
            lab.heal()
            return f"partition: healed (broker {broker})"
        # Past the ZooKeeper session: the cut-off broker loses its registration.
        self._hold(undo, max(self.hold_s, self.own.session_timeout_s + 2.0))
        return said


class UncleanElection(Nemesis):
    """Forces an unclean leader election on partition 0's replicas (once, as a first strike).

    1. SIGTERM a follower A; wait until it is out of the ISR; let acks flow without it;
    2. kill -9 every other replica of the partition (the whole ISR);
    3. start A: the only live replica, out of sync, becomes leader because the topic allows
       unclean elections; the records acknowledged while A was away are gone;
    4. start the others: they truncate to A's log.
    """

    name = "unclean"

    def __init__(self, own: OwnCluster, hold_s: float = 3.0) -> None:
        self.own = own
        self.hold_s = hold_s

    def strike(self, ctx: NemesisContext) -> str | None:
        admin = admin_client(ctx.client_config)
        cluster = self.own.cluster
        states = self.own.partition_states(admin, ctx.topic)
        leader, replicas, isr = states[0]
        behind = next(r for r in replicas if r != leader)
        others = [r for r in replicas if r != behind]
        ctx.note(f"unclean: SIGTERM broker {behind} (a follower of partition 0, ISR {isr})")
        cluster.terminate_broker(behind)
        out = _wait(lambda: behind not in self.own.partition_states(admin, ctx.topic)[0][2], 60)
        ctx.note(f"unclean: broker {behind} out of partition 0's ISR after {out:.1f} s; "
                 f"acks go on without it for {self.hold_s:g} s")
        time.sleep(self.hold_s)
        for broker in others:
            cluster.kill_broker(broker)
        ctx.note(f"unclean: kill -9 brokers {others} (the whole ISR of partition 0)")
        cluster.start_broker(behind)
        ctx.note(f"unclean: started broker {behind} (out of sync)")
        took = _wait(lambda: self.own.partition_states(admin, ctx.topic)[0][0] == behind,
                     self.own.session_timeout_s * 3 + 30)
        ctx.note(f"unclean: broker {behind} leads partition 0 after {took:.1f} s "
                 f"(unclean election)")
        for broker in others:
            cluster.start_broker(broker)
        return f"unclean: started brokers {others} again (they truncate to broker {behind})"


def _wait(check: Callable[[], bool], timeout: float) -> float:
    """Seconds until ``check()`` holds (metadata errors count as not yet); raises at timeout."""
    began = time.monotonic()
    while time.monotonic() - began < timeout:
        with contextlib.suppress(KafkaException, KeyError, IndexError):
            if check():
                return time.monotonic() - began
        time.sleep(0.25)
    raise TimeoutError(f"gave up after {timeout:g} s")
