"""KIP-890 on one real broker: the ``transaction.version`` feature in ApiVersions, the leader's
verification of transactional produce (raw requests: real clients never send a batch to a
partition they did not add), and transactions version 2 end to end (Produce v12 without
AddPartitionsToTxn, EndTxn v5's epoch bump). No Python client speaks transactions version 2
(librdkafka 2.16, kafka-python 3.0 and aiokafka all stop at EndTxn v3/v4), so the TV2 flow is
driven with kio-encoded requests."""

from __future__ import annotations

from typing import Any

from kafka import KafkaAdminClient
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.errors import ErrorCode

from .clients import create_topic, unique, watermarks
from .kip890_wire import (
    add_partitions,
    end_txn,
    init_producer,
    produce,
    produce_retrying,
    read_committed,
    txn_batch,
)
from .wire import WireClient


def test_api_versions_advertise_transaction_version_2(broker: Any) -> None:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=15_000)
    try:
        features = admin.describe_features()
    finally:
        admin.close()
    assert features["transaction.version"] == {
        "supported": (0, 2), "finalized": (2, 2), "finalized_epoch": 1}
    with WireClient.to(broker.bootstrap) as wire:
        response = wire.request(ApiVersionsRequest(client_software_name="moldau-tests",
                                                   client_software_version="1"))
    assert [(f.name, f.min_version_level, f.max_version_level)
            for f in response.finalized_features] == [("transaction.version", 2, 2)]


def test_transactional_batch_to_a_partition_not_added_is_refused(broker: Any) -> None:
    """Transactions version 1: AddPartitionsToTxn named partition 0 only; the leader asks the
    coordinator about partition 1 and refuses, with the code each Produce version knows, and
    writes nothing there. Without verification the batch opened a transaction no coordinator
    would ever end."""
    topic = unique("kip890-verify")
    create_topic(broker.bootstrap, topic, 2)
    tid = unique("kip890-verify-txn")
    with WireClient.to(broker.bootstrap) as wire:
        producer = init_producer(wire, tid)
        assert add_partitions(wire, tid, producer, topic, (0,)) == [ErrorCode.none]
        answers = produce(wire, 9, tid, topic, {0: txn_batch(producer, 0, b"a"),
                                                1: txn_batch(producer, 0, b"b")})
        assert answers[0].error_code is ErrorCode.none
        assert answers[1].error_code is ErrorCode.invalid_txn_state
        assert answers[1].error_message == "Partition was not added to the transaction"
        answers = produce(wire, 11, tid, topic, {1: txn_batch(producer, 0, b"b")})
        assert answers[1].error_code is ErrorCode.transaction_abortable
        # The partition already in the transaction takes the next batch without a question.
        answers = produce(wire, 11, tid, topic, {0: txn_batch(producer, 1, b"c")})
        assert answers[0].error_code is ErrorCode.none
        assert end_txn(wire, 3, tid, producer, commit=False).error_code is ErrorCode.none
    assert watermarks(broker.bootstrap, topic, 1) == (0, 0)


def test_transactions_version_2_end_to_end(broker: Any) -> None:
    """Transactions version 2 as a Kafka 4.x client speaks it: Produce v12 adds its partitions
    itself (no AddPartitionsToTxn), EndTxn v5 answers a bumped epoch, and the next
    transaction runs with it; read_committed sees the committed one only."""
    topic = unique("kip890-tv2")
    create_topic(broker.bootstrap, topic, 2)
    tid = unique("kip890-tv2-txn")
    with WireClient.to(broker.bootstrap) as wire:
        pid, epoch = init_producer(wire, tid)
        answers = produce(wire, 12, tid, topic, {0: txn_batch((pid, epoch), 0, b"c0"),
                                                 1: txn_batch((pid, epoch), 0, b"c1")})
        assert [answers[p].error_code for p in (0, 1)] == [ErrorCode.none] * 2
        answers = produce(wire, 12, tid, topic, {0: txn_batch((pid, epoch), 1, b"c2")})
        assert answers[0].error_code is ErrorCode.none
        committed = end_txn(wire, 5, tid, (pid, epoch), commit=True)
        assert committed.error_code is ErrorCode.none
        assert (committed.producer_id, committed.producer_epoch) == (pid, epoch + 1)
        # The next transaction, with the bumped epoch (sequences start again at 0).
        # (Until the commit's markers are written the coordinator answers the leader's add
        # CONCURRENT_TRANSACTIONS, which the producer gets as the retriable NOT_ENOUGH_REPLICAS.)
        answers = produce_retrying(wire, 12, tid, topic,
                                   {0: txn_batch((pid, epoch + 1), 0, b"a0")})
        assert answers[0].error_code is ErrorCode.none
        aborted = end_txn(wire, 5, tid, (pid, epoch + 1), commit=False)
        assert aborted.error_code is ErrorCode.none
        assert aborted.producer_epoch == epoch + 2
        # The old epoch is fenced now.
        stale = produce(wire, 12, tid, topic, {1: txn_batch((pid, epoch), 5, b"zombie")})
        assert stale[1].error_code is not ErrorCode.none
    assert read_committed(broker.bootstrap, topic, 0, 2) == [b"c0", b"c2"]
    assert read_committed(broker.bootstrap, topic, 1, 1) == [b"c1"]

