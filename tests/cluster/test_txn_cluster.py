"""Transactions on three real brokers (RF 3, min.insync.replicas 2) on a real ZooKeeper.

- The confluent-kafka flow (commit visible to read_committed, abort hidden, fencing) where
  the transaction coordinator, the partition leaders and the group coordinator are spread
  over the brokers, and the COMMIT/ABORT markers reach every replica (seen on disk).
- The exactly-once consume-transform-produce loop (tests/helpers/eos_loop.py) while the loop
  is killed -9 mid-transaction, the broker of the transaction coordinator is killed -9
  mid-transaction, and the leader of an output partition is killed -9 mid-transaction (a
  long_faults test): in the end ``out`` read with read_committed holds every input exactly
  once, in order per partition, and read_committed readers were never held behind a dead
  loop's transaction much longer than its timeout.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaProducer
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest

from tests.conftest import TEST_BROKER_OVERRIDES, MakeBroker
from tests.helpers import BrokerProcess, run_moldau, unique_topic_name
from tests.helpers.eos import (
    LoopRunner,
    LoopSpec,
    assert_output_exactly_once,
    end_offsets,
    produce_input,
    read_all,
    wait_stable,
)
from tests.helpers.zookeeper import ZooKeeperServer
from tests.integration.clients import unique
from tests.integration.test_txn_clients import _aio_read, _kp_read
from tests.integration.wire import WireClient

from .helpers import eventually
from .test_cluster_brokers import SESSION_TIMEOUT_MS, describe

PARTITIONS = 3
CLEANUP_INTERVAL_MS = 500
TXN_TIMEOUT_MS = 5000
STUCK_SLACK_S = CLEANUP_INTERVAL_MS / 1000 + 8
TXN_STATE = "__transaction_state"
STARTUP_TIMEOUT_S = 60.0
CLUSTER_OVERRIDES = (
    f"zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}",
    "default.replication.factor=3",
    "min.insync.replicas=2",
    "offsets.topic.num.partitions=3",
    "transaction.state.log.num.partitions=3",
    f"transaction.abort.timed.out.transaction.cleanup.interval.ms={CLEANUP_INTERVAL_MS}",
)


def _bootstrap(brokers: list[BrokerProcess]) -> str:
    return ",".join(b.bootstrap for b in brokers)


def _create(brokers: list[BrokerProcess], *topics: str) -> None:
    admin = AdminClient({"bootstrap.servers": _bootstrap(brokers)})
    futures = admin.create_topics([NewTopic(t, PARTITIONS, 3) for t in topics],
                                  operation_timeout=15)
    for t in topics:
        futures[t].result(timeout=30)
    for t in topics:
        _wait_in_sync(brokers, t)


def _live(brokers: list[BrokerProcess]) -> BrokerProcess:
    return next(b for b in brokers if b.is_running())


def _wait_in_sync(brokers: list[BrokerProcess], topic: str, timeout: float = 60.0) -> None:
    live = _live(brokers)

    def in_sync() -> bool:
        parts = describe(live, topic)[2]
        return bool(parts) and all(len(isr) == 3 for _, _, isr in parts.values())
    eventually(in_sync, timeout=timeout, what=f"{topic} in sync on three brokers")


def txn_coordinator(brokers: list[BrokerProcess], transactional_id: str,
                    timeout: float = 60.0) -> int:
    """The broker id of the transaction coordinator of ``transactional_id`` (FindCoordinator
    key type 1, asked of any live broker)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for b in brokers:
            if not b.is_running():
                continue
            try:
                with WireClient.to(b.bootstrap) as client:
                    answer = client.request(FindCoordinatorRequest(
                        key_type=1, coordinator_keys=(transactional_id,))).coordinators[0]
            except OSError:
                continue
            if answer.error_code == ErrorCode.none:
                return int(answer.node_id)
        time.sleep(0.2)
    raise AssertionError(f"no transaction coordinator for {transactional_id} in {timeout} s")


def _markers(broker: BrokerProcess, topic: str, partition: int) -> list[tuple[int, str]]:
    result = run_moldau("log", "dump", str(broker.data_dir / f"{topic}-{partition}"),
                        "--print-records", "--format", "json")
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    return [(line["offset"], line["control"]) for line in lines if "control" in line]


@pytest.fixture(scope="module")
def cluster(zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[list[BrokerProcess]]:
    """Three brokers for the module's short tests (the fault test makes its own)."""
    connect = zookeeper.connect_string("/" + unique_topic_name("moldau-txn-cluster"))
    workdir = tmp_path_factory.mktemp("txn-cluster")
    brokers = [BrokerProcess(workdir / f"broker-{i}", overrides=(
        *TEST_BROKER_OVERRIDES, f"node.id={i}", f"zookeeper.connect={connect}",
        *CLUSTER_OVERRIDES), startup_timeout=STARTUP_TIMEOUT_S) for i in (1, 2, 3)]
    try:
        for b in brokers:
            b.start()
        eventually(lambda: describe(brokers[0], "none")[0] == [1, 2, 3], what="three brokers")
        yield brokers
    finally:
        for b in brokers:
            b.stop()


def test_commit_abort_and_fencing_on_three_brokers(cluster: list[BrokerProcess]) -> None:
    topic = unique("txn-rf3")
    _create(cluster, topic)
    tid = unique("txn-rf3-t")
    bootstrap = _bootstrap(cluster)
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 5})
    p.init_transactions(60)
    for prefix, commit in (("c1", True), ("a", False), ("c2", True), ("zombie", None)):
        p.begin_transaction()
        for i in range(2 * PARTITIONS):
            p.produce(topic, value=f"{prefix}-{i}".encode(), partition=i % PARTITIONS)
        if commit is None:
            break
        assert p.flush(30) == 0  # an abort would drop records not sent yet
        (p.commit_transaction if commit else p.abort_transaction)(60)
    assert p.flush(30) == 0
    successor = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid})
    successor.init_transactions(60)  # fences p and aborts its open transaction
    with pytest.raises(KafkaException) as info:
        p.commit_transaction(30)
    assert info.value.args[0].fatal(), info.value.args[0]
    assert info.value.args[0].code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                                         KafkaError.INVALID_PRODUCER_EPOCH)
    wait_stable(bootstrap, topic, PARTITIONS, timeout=30)
    rc = read_all(bootstrap, topic, PARTITIONS, committed=True)
    ru = read_all(bootstrap, topic, PARTITIONS, committed=False)
    for part in range(PARTITIONS):
        def vals(prefix: str, part: int = part) -> list[bytes]:
            return [f"{prefix}-{i}".encode() for i in range(part, 2 * PARTITIONS, PARTITIONS)]
        assert [v for _, v in rc[part]] == vals("c1") + vals("c2")
        assert [v for _, v in ru[part]] == vals("c1") + vals("a") + vals("c2") + vals("zombie")
        assert [o for o, _ in ru[part]] == [0, 1, 3, 4, 6, 7, 9, 10]
    # Every replica holds the same markers at the same offsets.
    expected = [(2, "COMMIT"), (5, "ABORT"), (8, "COMMIT"), (11, "ABORT")]
    eventually(lambda: all(_markers(b, topic, 0) == expected for b in cluster), timeout=30,
               what=f"the markers {expected} on every replica")


def test_kafka_python_and_aiokafka_on_three_brokers(cluster: list[BrokerProcess]) -> None:
    """kafka-python commits one transaction and aborts one, aiokafka commits one (their own
    protocol versions: aiokafka's AddPartitionsToTxn/EndTxn v0); each client reads back
    what its isolation level allows."""
    topic = unique("txn-rf3-py")
    _create(cluster, topic)
    bootstrap = _bootstrap(cluster)

    def values(prefix: str) -> list[bytes]:
        return [f"{prefix}-{i}".encode() for i in range(2 * PARTITIONS)]

    kp = KafkaProducer(bootstrap_servers=bootstrap.split(","), transactional_id=unique("kp"),
                       request_timeout_ms=15_000, max_block_ms=60_000)
    kp.init_transactions()
    for prefix, commit in (("kp", True), ("kp-aborted", False)):
        kp.begin_transaction()
        for i, v in enumerate(values(prefix)):
            kp.send(topic, value=v, partition=i % PARTITIONS)
        kp.flush()
        (kp.commit_transaction if commit else kp.abort_transaction)()
    kp.close(timeout=5)

    async def aio() -> None:
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=unique("aio"),
                             request_timeout_ms=15_000)
        await p.start()
        try:
            async with p.transaction():
                for i, v in enumerate(values("aio")):
                    await p.send(topic, value=v, partition=i % PARTITIONS)
        finally:
            await p.stop()
    asyncio.run(asyncio.wait_for(aio(), 60))
    wait_stable(bootstrap, topic, PARTITIONS, timeout=30)

    def part(vals: list[bytes], p: int) -> list[bytes]:
        return vals[p::PARTITIONS]
    committed = {p: part(values("kp"), p) + part(values("aio"), p) for p in range(PARTITIONS)}
    everything = {p: part(values("kp"), p) + part(values("kp-aborted"), p) +
                  part(values("aio"), p) for p in range(PARTITIONS)}
    seen = {p: [v for _, v in recs] for p, recs in
            read_all(bootstrap, topic, PARTITIONS, committed=True).items()}
    assert seen == committed
    for reader in (_kp_read, lambda *a, **k: asyncio.run(_aio_read(*a, **k))):
        assert {p: [v for _, v in recs] for p, recs in
                reader(bootstrap, topic, PARTITIONS, committed=True).items()} == committed
        assert {p: [v for _, v in recs] for p, recs in
                reader(bootstrap, topic, PARTITIONS, committed=False).items()} == everything


# -- the loop under faults ----------------------------------------------------------------


def _kill_broker_mid_transaction(runner: LoopRunner, brokers: list[BrokerProcess],
                                 broker_id: int, what: str, events: list[str]) -> None:
    """kill -9 broker ``broker_id`` right after the loop opened a transaction; wait until
    the loop committed something without it; start it again and wait for full ISRs."""
    runner.ensure_running()
    runner.wait_open()
    victim = brokers[broker_id - 1]
    victim.kill9()
    killed = time.monotonic()
    incarnation, before = len(runner.incarnations), runner.current.committed_count()

    def committed_since() -> bool:
        runner.ensure_running()  # a loop that gave up (fatal error) is restarted
        floor = before if len(runner.incarnations) == incarnation else 0
        return runner.current.committed_count() > floor
    eventually(committed_since, timeout=120, what=f"a commit after killing {what}")
    events.append(f"kill -9 {what} (broker {broker_id}): next commit after "
                  f"{time.monotonic() - killed:.1f} s")
    victim.start()


@pytest.mark.long_faults
@pytest.mark.timeout(900)
def test_eos_loop_through_kills_of_loop_coordinator_and_leader(
        make_broker: MakeBroker, zk_connect: str, tmp_path: Path) -> None:
    brokers = [make_broker(f"node.id={i}", f"zookeeper.connect={zk_connect}",
                           *CLUSTER_OVERRIDES, start=False) for i in (1, 2, 3)]
    for b in brokers:  # restarts too: a loaded 2-core machine can take 20 s to start one
        b.startup_timeout = STARTUP_TIMEOUT_S
        b.start()
    eventually(lambda: describe(brokers[0], "none")[0] == [1, 2, 3], what="three brokers")
    source, sink = unique("eos-in"), unique("eos-out")
    _create(brokers, source, sink)
    bootstrap = _bootstrap(brokers)
    per_partition = 600
    writer = threading.Thread(target=produce_input, daemon=True, kwargs={
        "bootstrap": bootstrap, "topic": source, "partitions": PARTITIONS,
        "per_partition": per_partition, "pause_every": 10, "pause_s": 0.05})
    writer.start()
    tid = unique("eos-t")
    runner = LoopRunner(LoopSpec(bootstrap, source, sink, unique("eos-g"), tid, batch=30,
                                 pause_ms=100, transaction_timeout_ms=TXN_TIMEOUT_MS), tmp_path)
    events: list[str] = []
    stuck: list[float] = []
    started = time.monotonic()
    try:
        runner.start()
        for _ in range(2):
            for _ in range(2):
                runner.kill_mid_transaction()
                runner.start()
            _kill_broker_mid_transaction(runner, brokers, txn_coordinator(brokers, tid),
                                         "the transaction coordinator", events)
            for t in (TXN_STATE, sink, source):
                _wait_in_sync(brokers, t, timeout=120)
            leader = describe(_live(brokers), sink)[2][0][0]
            _kill_broker_mid_transaction(runner, brokers, leader, f"the leader of {sink}[0]",
                                         events)
            for t in (TXN_STATE, sink, source):
                _wait_in_sync(brokers, t, timeout=120)
            # A dead loop and no successor: the coordinator aborts after the timeout.
            runner.kill_mid_transaction()
            killed = time.monotonic()
            wait_stable(bootstrap, sink, PARTITIONS, timeout=TXN_TIMEOUT_MS / 1000 + 60)
            stuck.append(time.monotonic() - killed)
            runner.start()
        writer.join(180)
        assert not writer.is_alive()
        took = runner.finish(PARTITIONS, per_partition, timeout=300)
    finally:
        runner.stop()
    print(f"{runner.kills_mid_transaction} loop kills mid-transaction, "
          f"{len(runner.incarnations)} incarnations, {time.monotonic() - started:.0f} s "
          f"(last {took:.0f} s catching up); {'; '.join(events)}; read_committed held "
          f"{', '.join(f'{s:.1f}' for s in stuck)} s behind dead loops (timeout "
          f"{TXN_TIMEOUT_MS / 1000:.0f} s); fatal exits: {runner.fatal_exits()}; "
          f"client hangs cut by the loop's watchdog: {runner.hung_exits()}")
    assert all(s <= TXN_TIMEOUT_MS / 1000 + STUCK_SLACK_S for s in stuck), stuck
    assert end_offsets(bootstrap, sink, PARTITIONS, True) == \
        end_offsets(bootstrap, sink, PARTITIONS, False)
    assert_output_exactly_once(bootstrap, sink, PARTITIONS, per_partition)
