"""Idempotent producers on one broker: a retried batch is written once, whatever happens.

Real brokers and real clients. The test-only fault hook
``moldau.test.drop.produce.response.after.append`` makes the broker close a producer's
connection after appending (instead of answering), so the producer retries batches that are
already in the log; kill -9 loses the answers to every batch in flight. Either way each
record must be in the log exactly once and in order. Before the broker checked sequence
numbers, every such retry was written a second time.
"""

from __future__ import annotations

import datetime
import threading
import time
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.init_producer_id.v0.request import InitProducerIdRequest
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData

from tests.helpers import BrokerProcess
from tests.unit.batchgen import Record, build_batch

from .clients import DeliveryLog, create_topic, producer, read_partition, unique, watermarks
from .wire import WireClient

PARTITIONS = 3
PER_PARTITION = 150


def _idempotent(bootstrap: str, **extra: Any) -> Any:
    return producer(bootstrap, **{"enable.idempotence": True, "acks": "all",
                                  "linger.ms": 2, "batch.num.messages": 10,
                                  "message.timeout.ms": 60_000, **extra})


def _produce_keyed(p: Any, topic: str, per_partition: int, reports: DeliveryLog,
                   pause_every: int = 0) -> None:
    for i in range(per_partition):
        for part in range(PARTITIONS):
            while True:
                try:
                    p.produce(topic, value=f"{part}-{i}".encode(), partition=part,
                              on_delivery=reports)
                    break
                except BufferError:
                    p.poll(0.05)
        p.poll(0)
        if pause_every and i % pause_every == 0:
            time.sleep(0.01)


def _assert_exactly_once_in_order(bootstrap: str, topic: str, per_partition: int) -> None:
    for part in range(PARTITIONS):
        low, high = watermarks(bootstrap, topic, part)
        assert high - low == per_partition, f"partition {part} holds {high - low} records"
        got = [m.value().decode() for m in read_partition(bootstrap, topic, part, low,
                                                          per_partition)]
        assert got == [f"{part}-{i}" for i in range(per_partition)]


def test_dropped_answers_are_retried_and_written_once(make_broker: Any) -> None:
    broker = make_broker("moldau.test.drop.produce.response.after.append=3")
    topic = unique("idem-drop")
    create_topic(broker.bootstrap, topic, PARTITIONS)
    p = _idempotent(broker.bootstrap)
    reports = DeliveryLog()
    _produce_keyed(p, topic, PER_PARTITION, reports)
    assert p.flush(90) == 0
    assert not reports.failed, reports.failed[:3]
    assert len(reports.acked) == PARTITIONS * PER_PARTITION
    assert broker.stderr_text().count("test fault hook: dropping the response") >= 5
    _assert_exactly_once_in_order(broker.bootstrap, topic, PER_PARTITION)


def test_kill9_mid_flight_then_restart_writes_nothing_twice(make_broker: Any) -> None:
    # The broker stops itself right after dropping an answer (the hook's stop mode), so the
    # kill -9 surely comes between an append and its answer; the restarted broker has no
    # producer snapshot at its log end and must rebuild the state from the log's headers.
    broker = make_broker("moldau.test.drop.produce.response.after.append=40",
                         "moldau.test.stop.after.dropped.response=true")
    topic = unique("idem-kill")
    create_topic(broker.bootstrap, topic, PARTITIONS)
    p = _idempotent(broker.bootstrap, **{"reconnect.backoff.max.ms": 500})
    reports = DeliveryLog()
    total = 300
    done = threading.Event()

    def run() -> None:
        try:
            _produce_keyed(p, topic, total, reports, pause_every=5)
        finally:
            done.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while "stopping the broker (SIGSTOP)" not in broker.stderr_text():
        assert time.monotonic() < deadline, "the hook never fired"
        time.sleep(0.02)
    broker.kill9()
    broker.overrides = [o for o in broker.overrides if not o.startswith("moldau.test.")]
    broker.restart()
    thread.join(60)
    assert done.is_set()
    assert p.flush(90) == 0
    assert not reports.failed, reports.failed[:3]
    _assert_exactly_once_in_order(broker.bootstrap, topic, total)


# -- the rules on the wire ------------------------------------------------------------------


def _produce_request(topic: str, pid: int, epoch: int, seq: int, count: int = 1) -> Any:
    now = int(time.time() * 1000)
    records = build_batch([Record(None, f"v{seq + i}".encode(), now) for i in range(count)],
                          producer_id=pid, producer_epoch=epoch, base_sequence=seq)
    return ProduceRequest(
        transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=10),
        topic_data=(TopicProduceData(name=topic, partition_data=(
            PartitionProduceData(index=0, records=records),),),))


def _answer(client: WireClient, request: Any) -> tuple[ErrorCode, int]:
    part = client.request(request).responses[0].partition_responses[0]
    return part.error_code, int(part.base_offset)


def test_sequence_and_epoch_errors_are_kafkas(broker: BrokerProcess) -> None:
    topic = unique("idem-wire")
    create_topic(broker.bootstrap, topic, 1)
    with WireClient.to(broker.bootstrap) as client:
        pid = int(client.request(InitProducerIdRequest(
            transactional_id=None, transaction_timeout=datetime.timedelta(seconds=60),
        )).producer_id)
        assert _answer(client, _produce_request(topic, pid, 1, 0, 2)) == (ErrorCode.none, 0)
        assert _answer(client, _produce_request(topic, pid, 1, 2)) == (ErrorCode.none, 2)
        # A retry of either batch gets its original offset; nothing is written again.
        assert _answer(client, _produce_request(topic, pid, 1, 0, 2)) == (ErrorCode.none, 0)
        assert _answer(client, _produce_request(topic, pid, 1, 2)) == (ErrorCode.none, 2)
        code, _ = _answer(client, _produce_request(topic, pid, 1, 5))
        assert code == ErrorCode.out_of_order_sequence_number
        code, _ = _answer(client, _produce_request(topic, pid, 0, 3))
        assert code == ErrorCode.invalid_producer_epoch
        code, _ = _answer(client, _produce_request(topic, pid, 2, 3))  # new epoch: from 0
        assert code == ErrorCode.out_of_order_sequence_number
        assert _answer(client, _produce_request(topic, pid, 2, 0)) == (ErrorCode.none, 3)
    assert watermarks(broker.bootstrap, topic) == (0, 4)


def test_producer_ids_are_never_reused_after_a_restart(make_broker: Any) -> None:
    broker = make_broker()
    request = InitProducerIdRequest(transactional_id=None,
                                    transaction_timeout=datetime.timedelta(seconds=60))
    seen: list[int] = []
    for restart in range(3):
        with WireClient.to(broker.bootstrap) as client:
            seen += [int(client.request(request).producer_id) for _ in range(3)]
        if restart == 0:
            broker.kill9()  # the block was persisted before its first id was handed out
            broker.restart()
        elif restart == 1:
            broker.stop()
            broker.restart()
    assert len(set(seen)) == len(seen) and seen == sorted(seen), seen


def test_idle_producers_expire_and_may_then_start_anew(make_broker: Any) -> None:
    broker = make_broker("producer.id.expiration.ms=500",
                         "producer.id.expiration.check.interval.ms=100")
    topic = unique("idem-expiry")
    create_topic(broker.bootstrap, topic, 1)
    with WireClient.to(broker.bootstrap) as client:
        assert _answer(client, _produce_request(topic, 77, 0, 0)) == (ErrorCode.none, 0)
        code, _ = _answer(client, _produce_request(topic, 77, 0, 9))
        assert code == ErrorCode.out_of_order_sequence_number  # still known
        deadline = time.monotonic() + 20
        while True:  # expired after 500 ms (checked every 100 ms): any sequence is accepted
            time.sleep(0.3)
            code, offset = _answer(client, _produce_request(topic, 77, 0, 9))
            if code == ErrorCode.none:
                break
            assert time.monotonic() < deadline, code
    assert offset == 1
