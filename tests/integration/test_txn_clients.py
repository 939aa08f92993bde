"""Transactions with real clients on one broker: confluent-kafka, kafka-python, aiokafka.

The same flow with each client: a committed transaction is visible to read_committed
consumers, an aborted one is hidden from them (read_uncommitted consumers still see its
records), a second producer with the same transactional.id fences the first (its open
transaction is aborted, its later commit refused), offsets sent with the transaction are
committed or dropped with it, and the COMMIT/ABORT control batches in the log never reach an
application: every client skips the offsets the markers occupy. With confluent-kafka also:
an open transaction holds read_committed readers and ListOffsets(read_committed) at its first
offset, a transaction left open past its timeout is aborted by the broker, and a timeout
above ``transaction.max.timeout.ms`` is refused with INVALID_TRANSACTION_TIMEOUT.

One broker for the module; every test uses topics and transactional ids of its own. Before
the transaction coordinator existed, ``init_transactions()`` failed on
COORDINATOR_NOT_AVAILABLE and every test here failed at its first step.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka import TopicPartition as AioTopicPartition
from aiokafka.errors import ProducerFenced as AioProducerFenced
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition
from kafka.errors import KafkaError as KpKafkaError
from kafka.structs import OffsetAndMetadata

from tests.conftest import TEST_BROKER_OVERRIDES
from tests.helpers import BrokerProcess, run_moldau
from tests.helpers.eos import committed_offsets, end_offsets, read_all

from .clients import create_topic, unique

pytestmark = pytest.mark.timeout(90)

MAX_TIMEOUT_MS = 60_000
CLEANUP_INTERVAL_MS = 500
FENCED = {KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH}


@pytest.fixture(scope="module")
def txn_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker for the module; hanging transactions are looked for every 0.5 s."""
    process = BrokerProcess(tmp_path_factory.mktemp("txn-broker"), overrides=(
        *TEST_BROKER_OVERRIDES,
        f"transaction.max.timeout.ms={MAX_TIMEOUT_MS}",
        f"transaction.abort.timed.out.transaction.cleanup.interval.ms={CLEANUP_INTERVAL_MS}",
    )).start()
    try:
        yield process
    finally:
        process.stop()


def _tid(name: str) -> str:
    return unique(f"txn-{name}")


def _txn_producer(bootstrap: str, tid: str, **extra: Any) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 5,
                     **extra})


def _produce(p: Producer, topic: str, values: list[bytes], partitions: int = 2) -> None:
    for i, value in enumerate(values):
        p.produce(topic, value=value, partition=i % partitions)


def _values(prefix: str, n: int) -> list[bytes]:
    return [f"{prefix}-{i}".encode() for i in range(n)]


def _by_partition(values: list[bytes], partitions: int = 2) -> dict[int, list[bytes]]:
    return {p: values[p::partitions] for p in range(partitions)}


def _seen(got: dict[int, list[tuple[int, bytes]]]) -> dict[int, list[bytes]]:
    return {p: [v for _, v in recs] for p, recs in got.items()}


def _log_markers(broker: BrokerProcess, topic: str, partition: int) -> list[tuple[int, str]]:
    """(offset, COMMIT/ABORT) of every control record in the partition's segments on disk."""
    result = run_moldau("log", "dump", str(broker.data_dir / f"{topic}-{partition}"),
                        "--print-records", "--format", "json")
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    return [(line["offset"], line["control"]) for line in lines if "control" in line]


# -- confluent-kafka ------------------------------------------------------------------------


def test_commit_visible_abort_hidden_markers_skipped(txn_broker: BrokerProcess) -> None:
    topic = unique("txn-cf")
    create_topic(txn_broker.bootstrap, topic, 2)
    p = _txn_producer(txn_broker.bootstrap, _tid("cf"))
    p.init_transactions(30)
    committed_1, aborted, committed_2 = _values("c1", 10), _values("a", 10), _values("c2", 10)
    for values, commit in ((committed_1, True), (aborted, False), (committed_2, True)):
        p.begin_transaction()
        _produce(p, topic, values)
        if commit:
            p.commit_transaction(30)
        else:
            assert p.flush(10) == 0  # else the abort drops them before they are sent
            p.abort_transaction(30)
    # Per partition: 5 records + marker, 5 + marker, 5 + marker.
    assert end_offsets(txn_broker.bootstrap, topic, 2, committed=False) == [18, 18]
    assert end_offsets(txn_broker.bootstrap, topic, 2, committed=True) == [18, 18]
    rc = read_all(txn_broker.bootstrap, topic, 2, committed=True)
    ru = read_all(txn_broker.bootstrap, topic, 2, committed=False)
    c1, a, c2 = _by_partition(committed_1), _by_partition(aborted), _by_partition(committed_2)
    assert _seen(rc) == {p_: c1[p_] + c2[p_] for p_ in (0, 1)}
    assert _seen(ru) == {p_: c1[p_] + a[p_] + c2[p_] for p_ in (0, 1)}
    # The markers take offsets 5, 11 and 17; no consumer is ever handed them.
    data_offsets = [*range(0, 5), *range(6, 11), *range(12, 17)]
    assert [o for o, _ in ru[0]] == data_offsets and [o for o, _ in ru[1]] == data_offsets
    assert [o for o, _ in rc[0]] == [*range(0, 5), *range(12, 17)]
    assert _log_markers(txn_broker, topic, 0) == [(5, "COMMIT"), (11, "ABORT"), (17, "COMMIT")]


def test_open_transaction_holds_read_committed_at_its_first_offset(
        txn_broker: BrokerProcess) -> None:
    topic = unique("txn-lso")
    create_topic(txn_broker.bootstrap, topic, 1)
    plain = Producer({"bootstrap.servers": txn_broker.bootstrap})
    plain.produce(topic, value=b"before")
    assert plain.flush(10) == 0
    p = _txn_producer(txn_broker.bootstrap, _tid("lso"))
    p.init_transactions(30)
    p.begin_transaction()
    for v in _values("open", 3):
        p.produce(topic, value=v, partition=0)
    assert p.flush(10) == 0
    plain.produce(topic, value=b"after")  # behind the open transaction
    assert plain.flush(10) == 0
    # The LSO is the open transaction's first offset; the high watermark is past "after".
    assert end_offsets(txn_broker.bootstrap, topic, 1, committed=False) == [5]
    assert end_offsets(txn_broker.bootstrap, topic, 1, committed=True) == [1]
    assert _seen(read_all(txn_broker.bootstrap, topic, 1, committed=True)) == {0: [b"before"]}
    assert _seen(read_all(txn_broker.bootstrap, topic, 1, committed=False)) == {
        0: [b"before", *_values("open", 3), b"after"]}
    # A read_committed consumer waiting at the LSO gets the rest as soon as it commits.
    c = Consumer({"bootstrap.servers": txn_broker.bootstrap, "group.id": "unused",
                  "isolation.level": "read_committed", "fetch.wait.max.ms": 100})
    c.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 1.5
    while time.monotonic() < deadline:
        msg = c.poll(0.1)
        if msg is not None and msg.error() is None:
            got.append(msg.value())
    assert got == [b"before"]
    p.commit_transaction(30)
    deadline = time.monotonic() + 20
    while len(got) < 5 and time.monotonic() < deadline:
        msg = c.poll(0.2)
        if msg is not None and msg.error() is None:
            got.append(msg.value())
    c.close()
    assert got == [b"before", *_values("open", 3), b"after"]
    assert end_offsets(txn_broker.bootstrap, topic, 1, committed=True) == [6]


def test_second_producer_with_the_same_id_fences_the_first(txn_broker: BrokerProcess) -> None:
    topic = unique("txn-fence")
    create_topic(txn_broker.bootstrap, topic, 2)
    tid = _tid("fence")
    zombie = _txn_producer(txn_broker.bootstrap, tid)
    zombie.init_transactions(30)
    zombie.begin_transaction()
    _produce(zombie, topic, _values("zombie", 4))
    assert zombie.flush(10) == 0
    successor = _txn_producer(txn_broker.bootstrap, tid)
    successor.init_transactions(30)  # aborts the zombie's open transaction
    successor.begin_transaction()
    _produce(successor, topic, _values("new", 4))
    successor.commit_transaction(30)
    with pytest.raises(KafkaException) as info:
        _produce(zombie, topic, _values("late", 2))
        zombie.commit_transaction(30)
    error = info.value.args[0]
    assert error.fatal() and error.code() in FENCED, error
    rc = _seen(read_all(txn_broker.bootstrap, topic, 2, committed=True))
    assert rc == _by_partition(_values("new", 4))
    ru = _seen(read_all(txn_broker.bootstrap, topic, 2, committed=False))
    assert ru == {p_: z + n for (p_, z), n in zip(_by_partition(_values("zombie", 4)).items(),
                                                  _by_partition(_values("new", 4)).values(),
                                                  strict=True)}


def test_hanging_transaction_is_aborted_after_its_timeout(txn_broker: BrokerProcess) -> None:
    topic = unique("txn-hang")
    create_topic(txn_broker.bootstrap, topic, 1)
    timeout_ms = 3000
    p = _txn_producer(txn_broker.bootstrap, _tid("hang"), **{"transaction.timeout.ms": timeout_ms})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, value=b"hanging", partition=0)
    assert p.flush(10) == 0
    started = time.monotonic()
    plain = Producer({"bootstrap.servers": txn_broker.bootstrap})
    plain.produce(topic, value=b"after")
    assert plain.flush(10) == 0
    # The producer stays alive and silent: only the broker can end the transaction.
    while end_offsets(txn_broker.bootstrap, topic, 1, committed=True) != [3]:
        assert time.monotonic() - started < timeout_ms / 1000 + 30, "never aborted"
        time.sleep(0.1)
    stuck = time.monotonic() - started
    print(f"read_committed held {stuck:.1f} s behind a transaction with a "
          f"{timeout_ms / 1000:.0f} s timeout (cleanup every {CLEANUP_INTERVAL_MS} ms)")
    assert stuck >= timeout_ms / 1000 - 0.5
    assert stuck <= timeout_ms / 1000 + CLEANUP_INTERVAL_MS / 1000 + 10
    assert _log_markers(txn_broker, topic, 0) == [(2, "ABORT")]
    assert _seen(read_all(txn_broker.bootstrap, topic, 1, committed=True)) == {0: [b"after"]}
    with pytest.raises(KafkaException):  # its epoch was bumped by the abort
        p.commit_transaction(30)


def test_timeout_above_the_maximum_is_refused(txn_broker: BrokerProcess) -> None:
    p = _txn_producer(txn_broker.bootstrap, _tid("badtimeout"),
                      **{"transaction.timeout.ms": MAX_TIMEOUT_MS + 1})
    with pytest.raises(KafkaException) as info:
        p.init_transactions(30)
    assert info.value.args[0].code() == KafkaError.INVALID_TRANSACTION_TIMEOUT


def test_offsets_sent_with_a_transaction_commit_and_abort_with_it(
        txn_broker: BrokerProcess) -> None:
    source, sink, group = unique("txn-src"), unique("txn-sink"), unique("txn-group")
    create_topic(txn_broker.bootstrap, source, 1)
    create_topic(txn_broker.bootstrap, sink, 1)
    plain = Producer({"bootstrap.servers": txn_broker.bootstrap})
    for v in _values("in", 10):
        plain.produce(source, value=v)
    assert plain.flush(10) == 0
    c = Consumer({"bootstrap.servers": txn_broker.bootstrap, "group.id": group,
                  "isolation.level": "read_committed", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "session.timeout.ms": 6000})
    p = _txn_producer(txn_broker.bootstrap, _tid("offsets"))
    p.init_transactions(30)
    c.subscribe([source])
    got: list[Any] = []
    deadline = time.monotonic() + 30
    while len(got) < 4 and time.monotonic() < deadline:
        got += [m for m in c.consume(4 - len(got), 0.5) if m.error() is None]
    assert [m.value() for m in got] == _values("in", 4)

    def transact(commit: bool) -> None:
        p.begin_transaction()
        for m in got:
            p.produce(sink, value=b"out:" + m.value(), partition=0)
        p.send_offsets_to_transaction([TopicPartition(source, 0, got[-1].offset() + 1)],
                                      c.consumer_group_metadata(), 30)
        (p.commit_transaction if commit else p.abort_transaction)(30)

    transact(commit=False)
    assert committed_offsets(txn_broker.bootstrap, group, source, 1) == [-1001]
    transact(commit=True)
    assert committed_offsets(txn_broker.bootstrap, group, source, 1) == [4]
    c.close()
    assert _seen(read_all(txn_broker.bootstrap, sink, 1, committed=True)) == {
        0: [b"out:" + v for v in _values("in", 4)]}


# -- kafka-python -------------------------------------------------------------------------


def _kp_read(bootstrap: str, topic: str, partitions: int, committed: bool
             ) -> dict[int, list[tuple[int, bytes]]]:
    ends = end_offsets(bootstrap, topic, partitions, committed)
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                      auto_offset_reset="earliest", fetch_max_wait_ms=100,
                      isolation_level="read_committed" if committed else "read_uncommitted")
    tps = [KpTopicPartition(topic, p) for p in range(partitions)]
    c.assign(tps)
    c.seek_to_beginning(*tps)
    got: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(partitions)}
    deadline = time.monotonic() + 30
    try:
        while any(c.position(tp) < ends[tp.partition] for tp in tps):
            assert time.monotonic() < deadline, f"kafka-python read {got}, ends {ends}"
            for tp, records in c.poll(timeout_ms=200).items():
                got[tp.partition] += [(r.offset, r.value) for r in records]
    finally:
        c.close()
    return got


def test_kafka_python_transactions(txn_broker: BrokerProcess) -> None:
    topic = unique("txn-kp")
    create_topic(txn_broker.bootstrap, topic, 2)
    tid = _tid("kp")

    def make() -> KafkaProducer:
        return KafkaProducer(bootstrap_servers=txn_broker.bootstrap, transactional_id=tid,
                             request_timeout_ms=10_000, max_block_ms=30_000)

    p = make()
    p.init_transactions()
    for prefix, commit in (("c1", True), ("a", False), ("c2", True)):
        p.begin_transaction()
        for i, v in enumerate(_values(prefix, 6)):
            p.send(topic, value=v, partition=i % 2)
        if commit:
            p.commit_transaction()
        else:
            p.flush()  # else the abort drops them before they are sent
            p.abort_transaction()
    # Fencing: a second producer with the same id aborts the first one's open transaction.
    p.begin_transaction()
    for i, v in enumerate(_values("zombie", 2)):
        p.send(topic, value=v, partition=i % 2)
    p.flush()
    successor = make()
    successor.init_transactions()
    with pytest.raises(KpKafkaError):
        p.send(topic, value=b"late", partition=0)
        p.commit_transaction()
    p.close(timeout=5)
    successor.close(timeout=5)
    rc = _kp_read(txn_broker.bootstrap, topic, 2, committed=True)
    ru = _kp_read(txn_broker.bootstrap, topic, 2, committed=False)
    c1, a, c2 = _by_partition(_values("c1", 6)), _by_partition(_values("a", 6)), \
        _by_partition(_values("c2", 6))
    z = _by_partition(_values("zombie", 2))
    assert _seen(rc) == {p_: c1[p_] + c2[p_] for p_ in (0, 1)}
    assert _seen(ru) == {p_: c1[p_] + a[p_] + c2[p_] + z[p_] for p_ in (0, 1)}
    # 3 records + marker per transaction, then the zombie's record (aborted at offset 13).
    assert [o for o, _ in ru[0]] == [0, 1, 2, 4, 5, 6, 8, 9, 10, 12]
    assert _log_markers(txn_broker, topic, 0) == [(3, "COMMIT"), (7, "ABORT"), (11, "COMMIT"),
                                                  (13, "ABORT")]


def test_kafka_python_sends_offsets_with_the_transaction(txn_broker: BrokerProcess) -> None:
    source, sink, group = unique("txn-kp-src"), unique("txn-kp-sink"), unique("txn-kp-g")
    create_topic(txn_broker.bootstrap, source, 1)
    create_topic(txn_broker.bootstrap, sink, 1)
    p = KafkaProducer(bootstrap_servers=txn_broker.bootstrap, transactional_id=_tid("kp-off"),
                      request_timeout_ms=10_000, max_block_ms=30_000)
    p.init_transactions()
    offsets = {KpTopicPartition(source, 0): OffsetAndMetadata(7, "", -1)}
    for commit in (False, True):
        p.begin_transaction()
        p.send(sink, value=b"x", partition=0)
        p.send_offsets_to_transaction(offsets, group)
        if commit:
            p.commit_transaction()
        else:
            p.abort_transaction()
        expected = [7] if commit else [-1001]
        assert committed_offsets(txn_broker.bootstrap, group, source, 1) == expected
    p.close(timeout=5)


# -- aiokafka -----------------------------------------------------------------------------


async def _aio_read(bootstrap: str, topic: str, partitions: int, committed: bool
                    ) -> dict[int, list[tuple[int, bytes]]]:
    ends = end_offsets(bootstrap, topic, partitions, committed)
    c = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                         auto_offset_reset="earliest", fetch_max_wait_ms=100,
                         isolation_level="read_committed" if committed else "read_uncommitted")
    await c.start()
    tps = [AioTopicPartition(topic, p) for p in range(partitions)]
    got: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(partitions)}
    try:
        c.assign(tps)
        await c.seek_to_beginning(*tps)
        deadline = time.monotonic() + 30
        while any([await c.position(tp) < ends[tp.partition] for tp in tps]):
            assert time.monotonic() < deadline, f"aiokafka read {got}, ends {ends}"
            for tp, records in (await c.getmany(timeout_ms=200)).items():
                got[tp.partition] += [(r.offset, r.value) for r in records]
    finally:
        await c.stop()
    return got


def test_aiokafka_transactions(txn_broker: BrokerProcess) -> None:
    topic = unique("txn-aio")
    create_topic(txn_broker.bootstrap, topic, 2)
    tid = _tid("aio")
    source, group = unique("txn-aio-src"), unique("txn-aio-g")
    create_topic(txn_broker.bootstrap, source, 1)

    async def run() -> None:
        p = AIOKafkaProducer(bootstrap_servers=txn_broker.bootstrap, transactional_id=tid,
                             request_timeout_ms=10_000)
        await p.start()
        try:
            for prefix, commit in (("c1", True), ("a", False), ("c2", True)):
                await p.begin_transaction()
                for i, v in enumerate(_values(prefix, 6)):
                    await p.send(topic, value=v, partition=i % 2)
                if prefix == "c2":  # offsets go with this committed transaction
                    await p.send_offsets_to_transaction({AioTopicPartition(source, 0): 3},
                                                        group)
                if commit:
                    await p.commit_transaction()
                else:
                    await p.abort_transaction()
            # Fencing: the context manager aborts on the error the fenced commit raises.
            await p.begin_transaction()
            await (await p.send(topic, value=b"zombie", partition=0))
            successor = AIOKafkaProducer(bootstrap_servers=txn_broker.bootstrap,
                                         transactional_id=tid, request_timeout_ms=10_000)
            await successor.start()
            with pytest.raises(AioProducerFenced):
                await p.send(topic, value=b"late", partition=1)
                await p.commit_transaction()
            await successor.stop()
        finally:
            await p.stop()

    asyncio.run(asyncio.wait_for(run(), 60))
    rc = asyncio.run(_aio_read(txn_broker.bootstrap, topic, 2, committed=True))
    ru = asyncio.run(_aio_read(txn_broker.bootstrap, topic, 2, committed=False))
    c1, a, c2 = _by_partition(_values("c1", 6)), _by_partition(_values("a", 6)), \
        _by_partition(_values("c2", 6))
    assert _seen(rc) == {p_: c1[p_] + c2[p_] for p_ in (0, 1)}
    assert _seen(ru) == {0: c1[0] + a[0] + c2[0] + [b"zombie"], 1: c1[1] + a[1] + c2[1]}
    assert [o for o, _ in ru[1]] == [0, 1, 2, 4, 5, 6, 8, 9, 10]
    assert _log_markers(txn_broker, topic, 1)[:3] == [(3, "COMMIT"), (7, "ABORT"),
                                                      (11, "COMMIT")]
    assert committed_offsets(txn_broker.bootstrap, group, source, 1) == [3]
