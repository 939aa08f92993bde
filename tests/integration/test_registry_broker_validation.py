"""Broker-side schema-id validation (``confluent.value.schema.validation=true``): records
must carry the id of a schema the registry knows, as on Confluent Server."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.helpers import free_port
from tests.helpers.registry_process import RegistryProcess

SCHEMA = json.dumps({"type": "record", "name": "Reading", "namespace": "validation",
                     "fields": [{"name": "value", "type": "double"}]})


def _deliveries(bootstrap: str, topic: str, values: list[bytes]) -> list[KafkaError | None]:
    results: list[KafkaError | None] = []
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "retries": 0})
    for value in values:
        producer.produce(topic, value=value, on_delivery=lambda err, _msg: results.append(err))
        producer.flush(30)  # one batch per record: each gets its own verdict
    assert len(results) == len(values)
    return results


def test_topic_with_validation_refuses_records_without_known_schema_id(
    make_broker: Any, tmp_path: Path
) -> None:
    registry_port = free_port()
    broker = make_broker(f"confluent.schema.registry.url=http://127.0.0.1:{registry_port}")
    registry = RegistryProcess(broker.bootstrap, tmp_path / "registry", topic="_schemas",
                               group_id="schema-registry", port=registry_port).start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        futures = admin.create_topics([
            NewTopic("checked", 1, 1, config={"confluent.value.schema.validation": "true"}),
            NewTopic("unchecked", 1, 1),
        ])
        for future in futures.values():
            future.result(30)
        bad = admin.create_topics([NewTopic("bad", 1, 1, config={
            "confluent.value.schema.validation": "maybe"})])["bad"]
        try:
            bad.result(30)
            raise AssertionError("an invalid boolean was accepted")
        except KafkaException as exc:
            assert exc.args[0].code() == KafkaError.INVALID_CONFIG

        described = admin.describe_configs([ConfigResource("topic", "checked")])
        entries = next(iter(described.values())).result(30)
        assert entries["confluent.value.schema.validation"].value == "true"

        serialize = AvroSerializer(SchemaRegistryClient({"url": registry.url}), SCHEMA)
        good = serialize({"value": 1.5}, SerializationContext("checked", MessageField.VALUE))
        unknown_id = b"\x00" + struct.pack(">I", 987654) + b"\x00"
        results = _deliveries(broker.bootstrap, "checked",
                              [good, b"plain text", unknown_id, good])
        assert results[0] is None and results[3] is None
        for error in results[1:3]:
            assert error is not None and error.code() == KafkaError.INVALID_RECORD, error
        # Topics without the config take anything, as before.
        assert _deliveries(broker.bootstrap, "unchecked", [b"plain text"]) == [None]
    finally:
        registry.stop()
