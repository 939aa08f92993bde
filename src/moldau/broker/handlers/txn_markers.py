"""WriteTxnMarkers (v1-2): the transaction coordinator asks a partition leader to write COMMIT
or ABORT markers, and :func:`write_marker`, the same step for partitions this broker leads.

A marker is a control batch appended like a produce with ``acks=all``: the answer comes once
the ISR has it (min.insync.replicas applies, NOT_ENOUGH_REPLICAS otherwise), so a coordinator
that completes a transaction after its markers were acknowledged never sees one lost on a
failover. Errors are Kafka's: NOT_LEADER_OR_FOLLOWER (this broker does not lead the
partition), UNKNOWN_TOPIC_OR_PARTITION, INVALID_PRODUCER_EPOCH (a marker for an older epoch
than the partition has seen), TRANSACTION_COORDINATOR_FENCED (an older coordinator epoch),
KAFKA_STORAGE_ERROR, REQUEST_TIMED_OUT (the ISR did not confirm in time; the marker is
written and may still be replicated: the coordinator retries, and a repeated marker is
harmless). A marker on a ``__consumer_offsets`` partition also completes the producer's
pending transactional offset commits there (the group coordinator's
``complete_transaction``).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from kio.schema.errors import ErrorCode

from ...log.control_batch import ControlType
from ...log.errors import (
    InvalidProducerEpochError,
    LogError,
    StorageError,
    TransactionCoordinatorFencedError,
)
from ...protocol.codec import build
from ...replica import ReplicaError
from ..broker import Broker, RequestContext, now_ms
from ..group_service import OFFSETS_TOPIC

log = logging.getLogger(__name__)

#: How long a marker waits for its ISR (Kafka uses the broker's request.timeout.ms, 30 s).
MARKER_ACKS_TIMEOUT_S = 30.0

_LOG_ERRORS: dict[type[LogError], ErrorCode] = {
    InvalidProducerEpochError: ErrorCode.invalid_producer_epoch,
    TransactionCoordinatorFencedError: ErrorCode.transaction_coordinator_fenced,
    StorageError: ErrorCode.kafka_storage_error,
}


async def write_marker(broker: Broker, topic: str, partition: int, producer_id: int,
                       producer_epoch: int, commit: bool, coordinator_epoch: int, *,
                       timeout_s: float = MARKER_ACKS_TIMEOUT_S) -> ErrorCode:
    """Append a marker on this broker, which must lead the partition, and wait until the ISR
    has it; the error code for the coordinator (NONE once it is safe)."""
    hosted = broker.partition(topic, partition)
    if hosted is None:
        return broker.not_hosted_error(topic, partition)
    if hosted.offline:
        return ErrorCode.kafka_storage_error
    control = ControlType.COMMIT if commit else ControlType.ABORT
    try:
        result = hosted.append_marker(producer_id, producer_epoch, control, coordinator_epoch,
                                      now_ms())
    except ReplicaError as exc:
        return exc.code
    except LogError as exc:
        code = next((c for cls, c in _LOG_ERRORS.items() if isinstance(exc, cls)),
                    ErrorCode.unknown_server_error)
        if not isinstance(exc, StorageError):
            log.info("refused %s marker for producer %d on %s-%d: %s", control.name,
                     producer_id, topic, partition, exc)
        return code
    (code,) = await broker.replicas.wait_for_acks([(hosted, result.last_offset + 1)],
                                                  timeout_s)
    if code is ErrorCode.none and topic == OFFSETS_TOPIC:
        broker.groups.complete_transaction(partition, producer_id, commit)
    return code


async def handle(request: Any, ctx: RequestContext) -> Any:
    """WriteTxnMarkers: every marker of the request, each on all its partitions at once."""
    m = ctx.resp
    broker = ctx.broker

    async def one_marker(marker: Any) -> Any:
        topics = []
        for topic in marker.topics:
            codes = await asyncio.gather(*(
                write_marker(broker, topic.name, index, marker.producer_id,
                             marker.producer_epoch, marker.transaction_result,
                             marker.coordinator_epoch)
                for index in topic.partition_indexes))
            topics.append(build(
                m.WritableTxnMarkerTopicResult, name=topic.name,
                partitions=tuple(build(m.WritableTxnMarkerPartitionResult,
                                       partition_index=index, error_code=code)
                                 for index, code in zip(topic.partition_indexes, codes,
                                                        strict=True))))
        return build(m.WritableTxnMarkerResult, producer_id=marker.producer_id,
                     topics=tuple(topics))

    results = await asyncio.gather(*(one_marker(marker) for marker in request.markers))
    return build(m.WriteTxnMarkersResponse, markers=tuple(results))
