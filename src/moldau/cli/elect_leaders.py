"""``moldau cluster elect-leaders``: ElectLeaders through confluent-kafka's AdminClient.

What Kafka's ``kafka-leader-election.sh`` does: ask the controller for a PREFERRED election
(leadership back to each partition's first replica, if it is live and in the ISR) or an
UNCLEAN one (a leader for partitions that have none, even out of sync), for one partition,
one topic or every partition, and print each partition's result. Partitions whose preferred
replica already leads are "not needed"; any other failure makes the exit status 1, as
Kafka's tool does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from confluent_kafka import ElectionType, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from .connection import Connection
from .errors import CliError, as_cli_error, describe_kafka_error, kafka_error_of
from .output import print_line, print_table, stdout_console, table

TYPES = {"preferred": ElectionType.PREFERRED, "unclean": ElectionType.UNCLEAN}


@dataclass(frozen=True)
class PartitionResult:
    topic: str
    partition: int
    elected: bool
    not_needed: bool
    detail: str


def _partitions(conn: Connection, topic: str | None,
                partition: int | None) -> list[TopicPartition] | None:
    """What to elect: None (every partition), one topic's partitions, or one partition."""
    if topic is None:
        if partition is not None:
            raise CliError("--partition needs --topic")
        return None
    if partition is not None:
        return [TopicPartition(topic, partition)]
    try:  # all topics: naming one in Metadata could auto-create it
        metadata = conn.admin().list_topics(timeout=conn.timeout)
    except KafkaException as exc:
        raise as_cli_error(exc, "cannot list topics") from exc
    if topic not in metadata.topics:
        raise CliError(f"topic {topic!r} does not exist")
    return [TopicPartition(topic, p) for p in sorted(metadata.topics[topic].partitions)]


def _result(tp: TopicPartition, error: KafkaError | KafkaException | None) -> PartitionResult:
    """confluent-kafka 2.16 gives a KafkaError per partition (it documents a KafkaException)."""
    if error is None:
        return PartitionResult(tp.topic, tp.partition, True, False, "elected")
    kafka_error = error if isinstance(error, KafkaError) else kafka_error_of(error)
    if kafka_error is not None and kafka_error.code() == KafkaError.ELECTION_NOT_NEEDED:
        return PartitionResult(tp.topic, tp.partition, False, True,
                               "not needed: the right leader already leads")
    detail = describe_kafka_error(kafka_error) if kafka_error is not None else str(error)
    return PartitionResult(tp.topic, tp.partition, False, False, detail)


def elect(conn: Connection, election_type: str, topic: str | None,
          partition: int | None) -> list[PartitionResult]:
    """Send ElectLeaders to the controller and return one result per partition reported."""
    partitions = _partitions(conn, topic, partition)
    conn.check_reachable()
    # confluent-kafka 2.16's elect_leaders refuses its request_timeout and operation_timeout
    # keywords; both default to socket.timeout.ms.
    admin = AdminClient(conn.client_config(**{"socket.timeout.ms": conn.timeout_ms}))
    future = admin.elect_leaders(TYPES[election_type], partitions)
    outcome: Mapping[TopicPartition, KafkaError | KafkaException | None] = conn.result(
        future, f"{election_type} leader election failed")
    return sorted((_result(tp, err) for tp, err in outcome.items()),
                  key=lambda r: (r.topic, r.partition))


def print_results(results: list[PartitionResult], election_type: str) -> None:
    """A table of results; exit status 1 when a partition could not be elected."""
    console = stdout_console()
    if not results:
        print_line(console, f"No partition needed a {election_type} leader election.")
        return
    rows = table("Topic", "Partition", "Result")
    for r in results:
        rows.add_row(r.topic, str(r.partition), r.detail)
    print_table(console, rows)
    failed = [r for r in results if not r.elected and not r.not_needed]
    if failed:
        raise CliError(f"{len(failed)} of {len(results)} partitions could not be elected")
