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
from .txn_wire import produce, txn_batch
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


def test_transactional_batch_without_transactional_id_is_refused(broker: Any) -> None:
    """A transactional batch in a Produce without a transactional id cannot be checked with any
    coordinator: refused as Kafka does, nothing written."""
    topic = unique("kip890-anonymous")
    create_topic(broker.bootstrap, topic, 1)
    with WireClient.to(broker.bootstrap) as wire:
        answers = produce(wire, 11, None, topic, {0: txn_batch((4242, 0), 0, b"x")})
    assert answers[0].error_code is ErrorCode.transactional_id_authorization_failed
    assert watermarks(broker.bootstrap, topic, 0) == (0, 0)
