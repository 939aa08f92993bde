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

