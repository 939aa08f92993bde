"""Raw transactional requests for tests: what a client of transactions version 1 or 2 sends,
encoded by kio (independent of the broker's own use of it)."""

from __future__ import annotations

import datetime
import importlib
import time
from typing import Any

from confluent_kafka import TopicPartition
from kio.schema.add_partitions_to_txn.v3.request import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
)
from kio.schema.end_txn.v3.request import EndTxnRequest as EndTxnV3
from kio.schema.end_txn.v5.request import EndTxnRequest as EndTxnV5
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v3.request import FindCoordinatorRequest
from kio.schema.init_producer_id.v5.request import InitProducerIdRequest

from tests.unit.batchgen import Record, build_batch

from .clients import assert_no_more, consume, consumer
from .wire import WireClient

_RETRIABLE = {ErrorCode.coordinator_not_available, ErrorCode.not_coordinator,
              ErrorCode.coordinator_load_in_progress, ErrorCode.concurrent_transactions}


def _retry(call: Any, deadline_s: float = 30.0) -> Any:
    """``call()`` until its error code is not a retriable coordinator error (bounded)."""
    deadline = time.monotonic() + deadline_s
    while True:
        response = call()
        if response.error_code not in _RETRIABLE or time.monotonic() > deadline:
            return response
        time.sleep(0.1)


def init_producer(wire: WireClient, transactional_id: str,
                  timeout_ms: int = 60_000) -> tuple[int, int]:
    """FindCoordinator until the coordinator serves, then InitProducerId: (id, epoch)."""
    found = _retry(lambda: wire.request(FindCoordinatorRequest(key=transactional_id,
                                                                key_type=1)))
    assert found.error_code is ErrorCode.none, found
    response = _retry(lambda: wire.request(InitProducerIdRequest(
        transactional_id=transactional_id,
        transaction_timeout=datetime.timedelta(milliseconds=timeout_ms))))
    assert response.error_code is ErrorCode.none, response
    return int(response.producer_id), int(response.producer_epoch)


def add_partitions(wire: WireClient, transactional_id: str, producer: tuple[int, int],
                   topic: str, partitions: tuple[int, ...]) -> list[ErrorCode]:
    """AddPartitionsToTxn v3 (a client's): each partition's code, retried while retriable."""
    deadline = time.monotonic() + 30
    while True:
        response = wire.request(AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=transactional_id,
            v3_and_below_producer_id=producer[0], v3_and_below_producer_epoch=producer[1],
            v3_and_below_topics=(AddPartitionsToTxnTopic(name=topic, partitions=partitions),)))
        codes = [p.partition_error_code for t in response.results_by_topic_v3_and_below
                 for p in t.results_by_partition]
        if not set(codes) & _RETRIABLE or time.monotonic() > deadline:
            return codes
        time.sleep(0.1)


def txn_batch(producer: tuple[int, int], sequence: int, *values: bytes) -> bytes:
    now = int(time.time() * 1000)
    return build_batch([Record(key=None, value=v, timestamp=now) for v in values],
                       producer_id=producer[0], producer_epoch=producer[1],
                       base_sequence=sequence, transactional=True)


def produce(wire: WireClient, version: int, transactional_id: str | None, topic: str,
            batches: dict[int, bytes]) -> dict[int, Any]:
    """A Produce of ``version`` with one batch per partition; the partition answers."""
    m = importlib.import_module(f"kio.schema.produce.v{version}.request")
    request = m.ProduceRequest(
        transactional_id=transactional_id, acks=-1, timeout=datetime.timedelta(seconds=10),
        topic_data=(m.TopicProduceData(name=topic, partition_data=tuple(
            m.PartitionProduceData(index=p, records=b) for p, b in batches.items())),))
    correlation = wire.send_request(request)
    response = wire.read_response(0, version, correlation)
    return {p.index: p for t in response.responses for p in t.partition_responses}


def end_txn(wire: WireClient, version: int, transactional_id: str, producer: tuple[int, int],
            commit: bool) -> Any:
    cls = EndTxnV5 if version == 5 else EndTxnV3
    return _retry(lambda: wire.request(cls(transactional_id=transactional_id,
                                           producer_id=producer[0], producer_epoch=producer[1],
                                           committed=commit)))


def read_committed(bootstrap: str, topic: str, partition: int, count: int,
                   timeout: float = 20.0) -> list[bytes]:
    """Exactly ``count`` values read with isolation.level=read_committed, and no more."""
    c = consumer(bootstrap, **{"isolation.level": "read_committed",
                               "enable.partition.eof": False})
    try:
        c.assign([TopicPartition(topic, partition, 0)])
        got = [m.value() for m in consume(c, count, timeout)]
        assert_no_more(c)
        return got
    finally:
        c.close()


def produce_retrying(wire: WireClient, version: int, transactional_id: str, topic: str,
                     batches: dict[int, bytes], deadline_s: float = 20.0) -> dict[int, Any]:
    """:func:`produce` again while the leader answers NOT_ENOUGH_REPLICAS (its coordinator
    is still ending the previous transaction), as a client retries it (bounded)."""
    deadline = time.monotonic() + deadline_s
    while True:
        answers = produce(wire, version, transactional_id, topic, batches)
        if (all(a.error_code is not ErrorCode.not_enough_replicas for a in answers.values())
                or time.monotonic() > deadline):
            return answers
        time.sleep(0.05)
