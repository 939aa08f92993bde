"""A leader cut off from ZooKeeper and the other brokers, on a real network (namespaces).

Three brokers and ZooKeeper each run in a host of their own in a ``NetworkLab``
(tests/helpers/netns.py); clients run in two more hosts. The leader of an RF 3 topic
(``min.insync.replicas=2``) is cut off from ZooKeeper, the other brokers and the far client,
while a near client still reaches it (and only it). Then:

- the cut-off leader stops acknowledging ``acks=all``: its followers cannot fetch, and its
  ISR shrink cannot be written to ZooKeeper, so the high watermark stays where it was;
- the others elect a new leader once the old one's session expired, and the far client's
  writes are acknowledged again;
- after the heal the old leader (its session gone) registers again, follows the new leader,
  truncates what it took alone and rejoins the ISR;
- every acknowledged record is read back exactly once in order (``moldau verify``'s checker)
  and none of the writes the old leader took alone is in the final log.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from moldau.verify.checker import Verdict, check
from moldau.verify.history import Ack, Failure, History, Read, decode_value, encode_value
from tests.cluster.acked import new_history
from tests.helpers import netns
from tests.helpers.netns import NetnsBroker, NetnsKafkaClient, NetnsZooKeeper, NetworkLab
from tests.helpers.zookeeper import missing_reason

SESSION_MS = 4000
CLIENT_CONFIG = {"enable.idempotence": True, "linger.ms": 5, "message.timeout.ms": 6000,
                 "request.timeout.ms": 4000}


@pytest.fixture(autouse=True)
def _possible() -> None:
    reason = netns.faults_unavailable_reason() or missing_reason()
    if reason:
        pytest.skip(reason)


class Client:
    """A NetnsKafkaClient whose sends are producer ``number`` of ``history``."""

    def __init__(self, client: NetnsKafkaClient, history: History, number: int) -> None:
        self.client = client
        self.history = history
        self.number = number
        self.seq = 0

    def produce(self, count: int, timeout: float = 30) -> tuple[list[str], list[str]]:
        """Send ``count`` values; (acknowledged, not acknowledged) values."""
        values = []
        for _ in range(count):
            values.append(encode_value(self.history.run_id, self.number, self.seq).decode())
            self.history.sent.add((self.number, self.seq))
            self.seq += 1
        answer = self.client.request("produce", topic=self.history.topic, values=values,
                                     timeout=timeout)
        acked = []
        for result in answer["results"]:
            if result["error"] is None:
                ident = decode_value(result["value"].encode())
                assert ident is not None
                self.history.acks.append(Ack(ident[1:], result["partition"], result["offset"],
                                             0.0))
                acked.append(result["value"])
        failed = [v for v in values if v not in acked]
        for value in failed:
            ident = decode_value(value.encode())
            assert ident is not None
            self.history.failures.append(Failure(ident[1:], "not acknowledged"))
        return acked, failed

    def metadata(self) -> dict[str, Any]:
        return self.client.request("metadata", topic=self.history.topic, timeout=10)


def eventually(check_: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check_():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.2)


def partition0(client: Client) -> dict[str, Any]:
    md = client.metadata()
    return dict(md.get("partitions", {}).get("0", {"leader": -1, "isr": []}))


# About 33 s; in `make test-long-faults` (the nemesis of `make verify` cuts leaders off too).
@pytest.mark.long_faults
def test_cut_off_leader_stops_acking_and_its_lone_writes_do_not_survive(
        network_lab: Callable[..., NetworkLab], tmp_path: Path, topic_name: str) -> None:
    lab = network_lab("zk", "b1", "b2", "b3", "near", "far")
    zk = NetnsZooKeeper(lab["zk"], tmp_path / "zk").start()
    brokers: dict[int, NetnsBroker] = {}
    try:
        connect = zk.connect_string("/moldau")
        for i in (1, 2, 3):
            brokers[i] = NetnsBroker(lab[f"b{i}"], tmp_path / f"b{i}", overrides=(
                "group.initial.rebalance.delay.ms=0", f"node.id={i}",
                f"zookeeper.connect={connect}", f"zookeeper.session.timeout.ms={SESSION_MS}",
                "min.insync.replicas=2", "replica.lag.time.max.ms=2000")).start()
        everyone = ",".join(b.bootstrap for b in brokers.values())
        history = new_history(topic_name, 1)
        with NetnsKafkaClient(lab["far"], everyone, CLIENT_CONFIG) as far_client:
            far = Client(far_client, history, 1)
            created = far_client.request("create_topic", topic=topic_name, partitions=1,
                                         replication_factor=3, timeout=30)
            assert created["error"] is None, created
            eventually(lambda: sorted(partition0(far)["isr"]) == [1, 2, 3]
                       and partition0(far)["leader"] > 0, 30, "an ISR of three")
            leader = int(partition0(far)["leader"])
            others = [f"b{i}" for i in (1, 2, 3) if i != leader]
            old = brokers[leader]
            with NetnsKafkaClient(lab["near"], old.bootstrap, CLIENT_CONFIG) as near_client:
                near = Client(near_client, history, 0)
                assert near.produce(20)[1] == [] and far.produce(20)[1] == []

                # The leader and the near client on one side, everything else on the other.
                lab.split([f"b{leader}", "near"], ["zk", "far", *others])
                acked, lone = near.produce(20, timeout=30)
                assert acked == [], "a leader cut off from its ISR acknowledged acks=all"
                started = time.monotonic()
                acked_far: list[str] = []
                while not acked_far and time.monotonic() < started + 40:
                    acked_far = far.produce(10, timeout=15)[0]
                assert acked_far, "the rest of the cluster never took writes again"
                print(f"far side acknowledged again {time.monotonic() - started:.1f} s after "
                      "the near side's sends timed out")
                state = partition0(far)
                assert state["leader"] not in (leader, -1) and leader not in state["isr"]

                lab.heal()
                # (The old leader's own metadata still names itself until it has heard
                # from ZooKeeper again: a view naming the new leader is a fresh one.)
                eventually(lambda: (lambda s: s["leader"] not in (leader, -1)
                                    and sorted(s["isr"]) == [1, 2, 3])(partition0(far)), 60,
                           "the old leader back in the ISR")
                assert far.produce(20)[1] == []
                assert "truncated to" in old.stderr_text()

                last = encode_value(history.run_id, 1, far.seq - 1).decode()
                read = far_client.request("consume", topic=topic_name, until=last,
                                          count=100_000, timeout=30)
        for partition, offset, value in read["records"]:
            history.reads.append(Read(0, partition, offset, value.encode()))
        verdict: Verdict = check(history)
        print(f"sent {verdict.sent}, acked {verdict.acked}, failed {verdict.failed} "
              f"({verdict.failed_but_read} of them read), read {verdict.records_read}")
        problems = {k: getattr(verdict, k)[:5] for k in Verdict.ANOMALY_KINDS
                    if getattr(verdict, k)}
        assert not problems, problems
        assert read["values"][-1] == last
        survived = set(lone) & set(read["values"])
        assert not survived, f"{len(survived)} writes the cut-off leader took alone survived"
    finally:
        for broker in brokers.values():
            broker.kill9()
        zk.stop()
