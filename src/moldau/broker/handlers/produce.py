"""Produce: validate each partition's record batches, append them, acknowledge.

Batches stay opaque bytes: the log parses their 61-byte headers, checks CRC32C in C, patches the
base offset and appends. A single node is its own ISR, so the high watermark follows the log
end offset at once and ``acks=all`` completes as soon as the append is done, unless the topic
asks for more in-sync replicas than exist.
"""

from __future__ import annotations

import datetime
import logging
from typing import Any

from kio.schema.errors import ErrorCode

from ...log.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    LogError,
    OffsetOutOfRangeError,
    RecordListTooLargeError,
    RecordTooLargeError,
    StorageError,
)
from ...log.partition_log import AppendOrigin
from ...protocol.codec import build
from ...protocol.frames import FrameError
from ..broker import RequestContext, now_ms
from ..errors import ApiError
from ..topic_names import INTERNAL_TOPICS
from .api_versions import NO_THROTTLE
from .pacing import Pacer

log = logging.getLogger(__name__)

#: Kafka lets only this client id append to internal topics (its AdminUtils.AdminClientId).
ADMIN_CLIENT_ID = "__admin_client"

# Most specific first: the first matching class decides the code.
_LOG_ERRORS: dict[type[LogError], ErrorCode] = {
    StorageError: ErrorCode.kafka_storage_error,  # logged once per event, not per request
    RecordListTooLargeError: ErrorCode.record_list_too_large,
    CorruptRecordError: ErrorCode.corrupt_message,
    InvalidTimestampError: ErrorCode.invalid_timestamp,
    InvalidRecordError: ErrorCode.invalid_record,
    RecordTooLargeError: ErrorCode.message_too_large,
    OffsetOutOfRangeError: ErrorCode.offset_out_of_range,
}


def _to_datetime(ms: int) -> datetime.datetime | None:
    if ms < 0:
        return None
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)


def _partition_response(m: Any, index: int, code: ErrorCode, message: str | None = None,
                        base_offset: int = -1, log_append_time: int = -1,
                        log_start_offset: int = -1,
                        record_errors: tuple[tuple[int, str], ...] = ()) -> Any:
    return build(
        m.PartitionProduceResponse,
        index=index,
        error_code=code,
        base_offset=base_offset,
        log_append_time=_to_datetime(log_append_time),
        log_start_offset=log_start_offset,
        # Produce v8+ (KIP-467); older versions have neither the field nor its class.
        record_errors=tuple(
            build(m.BatchIndexAndErrorMessage, batch_index=i, batch_index_error_message=text)
            for i, text in record_errors
        ) if record_errors and hasattr(m, "BatchIndexAndErrorMessage") else (),
        error_message=message,
    )


def _append(ctx: RequestContext, topic: str, data: Any, acks: int) -> Any:
    m = ctx.resp
    broker = ctx.broker
    index = data.index
    plog = broker.partition_log(topic, index)
    if plog is None:
        return _partition_response(m, index, ErrorCode.unknown_topic_or_partition,
                                   "This server does not host this topic-partition.")
    if data.records is None:
        return _partition_response(m, index, ErrorCode.corrupt_message, "records are null")
    if acks == -1 and plog.config.min_insync_replicas > 1:
        return _partition_response(
            m, index, ErrorCode.not_enough_replicas,
            f"min.insync.replicas={plog.config.min_insync_replicas} but the ISR has 1 replica",
        )
    try:
        result = plog.append(data.records, leader_epoch=broker.leader_epoch, now_ms=now_ms(),
                             origin=AppendOrigin.CLIENT)
    except LogError as exc:
        if not isinstance(exc, StorageError):
            log.info("rejected produce to %s-%d: %s", topic, index, exc)
        code = next((c for cls, c in _LOG_ERRORS.items() if isinstance(exc, cls)),
                    ErrorCode.unknown_server_error)
        record_errors = exc.record_errors if isinstance(exc, InvalidRecordError) else ()
        return _partition_response(m, index, code, str(exc), record_errors=record_errors)
    plog.high_watermark = plog.log_end_offset
    broker.purgatory.notify_append((topic, index), len(data.records))
    return _partition_response(
        m, index, ErrorCode.none, None, result.base_offset, result.log_append_time_ms,
        result.log_start_offset,
    )


async def handle(request: Any, ctx: RequestContext) -> Any:
    m = ctx.resp
    broker = ctx.broker
    acks = request.acks
    topics = []
    pacer = Pacer()
    for topic_data in request.topic_data:
        name = topic_data.name
        code: ErrorCode | None = None
        message: str | None = None
        if acks not in (0, 1, -1):
            code, message = ErrorCode.invalid_required_acks, f"acks={acks} is not 0, 1 or -1"
        elif name in INTERNAL_TOPICS and ctx.client_id != ADMIN_CLIENT_ID:
            # Only the coordinators write there; a stray record would corrupt group state.
            code = ErrorCode.invalid_topic_exception
            message = f"Cannot append to internal topic {name}"
        else:
            try:
                if broker.ensure_topic(name) is None:
                    code = ErrorCode.unknown_topic_or_partition
                    message = f"Topic '{name}' does not exist."
            except ApiError as exc:
                code, message = exc.code, exc.message
        if code is not None:
            partitions = tuple(_partition_response(m, p.index, code, message)
                               for p in topic_data.partition_data)
        else:
            appended = []
            for p in topic_data.partition_data:
                appended.append(_append(ctx, name, p, acks))
                await pacer.tick()
            partitions = tuple(appended)
        topics.append(build(m.TopicProduceResponse, name=name, partition_responses=partitions))
    if acks == 0:
        failed = [
            # error_message exists from v8 on; acks=0 is legal in every version.
            f"{t.name}-{p.index}: {getattr(p, 'error_message', None) or p.error_code.name}"
            for t in topics
            for p in t.partition_responses
            if p.error_code is not ErrorCode.none
        ]
        if failed:
            # acks=0 has no response to carry the error; like Kafka, close the connection so
            # the producer notices and refreshes its metadata.
            raise FrameError("acks=0 produce failed: " + "; ".join(failed))
        return None
    return build(m.ProduceResponse, responses=tuple(topics), throttle_time=NO_THROTTLE)
