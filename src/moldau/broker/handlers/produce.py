"""Produce: validate each partition's record batches, append them, acknowledge.

Batches stay opaque bytes: the partition's leader appends them through
:meth:`~moldau.replica.partition.Partition.append_as_leader` (the log parses their 61-byte
headers, checks CRC32C in C, patches the base offset and appends). ``acks=all`` answers once
every partition's high watermark passed its records (the replica manager parks the request
until then, at most the request's timeout); on a single broker the ISR is {self}, so that is
at once after the append. Once its records are appended, a waiting request hands the wait back
as a :class:`~..response.Deferred`, so that its connection can append the client's next
Produce meanwhile instead of leaving it unread for a whole replication round trip.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
from typing import Any

from kio.schema.errors import ErrorCode

from ...log.errors import (
    CorruptRecordError,
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTimestampError,
    InvalidTxnStateError,
    LogError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    RecordListTooLargeError,
    RecordTooLargeError,
    StorageError,
)
from ...log.partition_log import AppendOrigin, AppendResult
from ...protocol.codec import build
from ...protocol.frames import FrameError
from ...replica import Partition, ReplicaError
from .. import authz
from ..broker import Broker, RequestContext, now_ms
from ..errors import ApiError
from ..response import Deferred
from ..schema_validation import validator_for
from ..test_faults import ProduceResponseDropper
from ..topic_names import INTERNAL_TOPICS
from ..txn_verification import (
    Candidate,
    Refusal,
    guard_broken,
    needs_check,
    producer_stamp,
    transactional_producer,
    verify,
)
from .api_versions import NO_THROTTLE
from .pacing import Pacer

log = logging.getLogger(__name__)

#: Kafka lets only this client id append to internal topics (its AdminUtils.AdminClientId).
ADMIN_CLIENT_ID = "__admin_client"
#: Longest a produce request waits for a leadership hand-over (controlled shutdown) to end.
HANDOVER_WAIT_S = 5.0

# Most specific first: the first matching class decides the code.
_LOG_ERRORS: dict[type[LogError], ErrorCode] = {
    StorageError: ErrorCode.kafka_storage_error,  # logged once per event, not per request
    RecordListTooLargeError: ErrorCode.record_list_too_large,
    CorruptRecordError: ErrorCode.corrupt_message,
    InvalidTimestampError: ErrorCode.invalid_timestamp,
    InvalidRecordError: ErrorCode.invalid_record,
    RecordTooLargeError: ErrorCode.message_too_large,
    OffsetOutOfRangeError: ErrorCode.offset_out_of_range,
    OutOfOrderSequenceError: ErrorCode.out_of_order_sequence_number,
    InvalidTxnStateError: ErrorCode.invalid_txn_state,
    InvalidProducerEpochError: ErrorCode.invalid_producer_epoch,
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


class _Appended:
    """A partition whose records are written, waiting for its high watermark (acks=all)."""

    __slots__ = ("index", "partition", "result")

    def __init__(self, index: int, partition: Partition, result: AppendResult) -> None:
        self.index = index
        self.partition = partition
        self.result = result


def _append(ctx: RequestContext, topic: str, data: Any, partition: Partition | None,
            acks: int, written: list[bool]) -> Any:
    """The partition's response, or an :class:`_Appended` when acks=all must still wait.
    Appends True to ``written`` when new records were written (not a producer's retry)."""
    m = ctx.resp
    index = data.index
    metrics = ctx.broker.metrics
    if partition is None:
        if metrics is not None:
            metrics.topic(topic).failed_produce += 1
        return _partition_response(m, index, ctx.broker.not_hosted_error(topic, index),
                                   "This server does not host this topic-partition.")
    if data.records is None:
        if metrics is not None:
            metrics.topic(topic).failed_produce += 1
        return _partition_response(m, index, ErrorCode.corrupt_message, "records are null")
    try:
        result = partition.append_as_leader(data.records, AppendOrigin.CLIENT, acks, now_ms())
    except ReplicaError as exc:
        if metrics is not None:
            metrics.topic(topic).failed_produce += 1
        return _partition_response(m, index, exc.code, exc.message)
    except LogError as exc:
        if metrics is not None:
            metrics.topic(topic).failed_produce += 1
        if not isinstance(exc, StorageError):
            log.info("rejected produce to %s-%d: %s", topic, index, exc)
        code = next((c for cls, c in _LOG_ERRORS.items() if isinstance(exc, cls)),
                    ErrorCode.unknown_server_error)
        record_errors = exc.record_errors if isinstance(exc, InvalidRecordError) else ()
        return _partition_response(m, index, code, str(exc), record_errors=record_errors)
    if not result.duplicate:
        written.append(True)
        if metrics is not None:
            counters = metrics.topic(topic)
            counters.bytes_in += len(data.records)
            counters.messages_in += result.record_count
    if acks == -1:
        reached = partition.acks_reached(result.last_offset + 1)
        if reached is not ErrorCode.none:  # not there yet (or it failed): answer after the wait
            return _Appended(index, partition, result)
    return _appended_response(m, index, ErrorCode.none, result)


async def _wait_for_handover(handover: asyncio.Future[None]) -> None:
    """A partition whose leadership this broker is handing over (controlled shutdown) is
    answered once it moved, so that the client's retry finds the new leader in Metadata at
    once instead of backing off longer with every NOT_LEADER_OR_FOLLOWER from here."""
    if not handover.done():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(handover), HANDOVER_WAIT_S)


def _appended_response(m: Any, index: int, code: ErrorCode, result: AppendResult) -> Any:
    return _partition_response(
        m, index, code, None, result.base_offset, result.log_append_time_ms,
        result.log_start_offset,
    )


def _waiting(topics: list[tuple[str, list[Any]]]) -> list[tuple[list[Any], int, _Appended]]:
    """Every :class:`_Appended` entry, with its list and index (to be replaced there)."""
    return [(entries, i, entry) for _, entries in topics for i, entry in enumerate(entries)
            if isinstance(entry, _Appended)]


async def _await_acks(ctx: RequestContext, request: Any, topics: list[tuple[str, list[Any]]],
                      waiting: list[tuple[list[Any], int, _Appended]]) -> Any:
    """Replace every :class:`_Appended` by its response once its ISR has the records; the
    whole response."""
    codes = await ctx.broker.replicas.wait_for_acks(
        [(entry.partition, entry.result.last_offset + 1) for _, _, entry in waiting],
        request.timeout.total_seconds())
    for (entries, i, entry), code in zip(waiting, codes, strict=True):
        entries[i] = _appended_response(ctx.resp, entry.index, code, entry.result)
    return _response(ctx, request, topics)


def _response(ctx: RequestContext, request: Any,
              appended_topics: list[tuple[str, list[Any]]]) -> Any:
    m = ctx.resp
    # v13 names each topic by the id the request gave (echoed even when it is unknown).
    topics = [build(m.TopicProduceResponse, name=name, topic_id=getattr(data, "topic_id", None),
                    partition_responses=tuple(entries))
              for data, (name, entries) in zip(request.topic_data, appended_topics, strict=True)]
    return build(m.ProduceResponse, responses=tuple(topics), throttle_time=NO_THROTTLE)


def _what(ctx: RequestContext) -> str:
    return f"Produce {ctx.header.correlation_id} from {ctx.client_id!r}"


async def _dropped(pending: Any, dropper: ProduceResponseDropper, ctx: RequestContext) -> Any:
    """Test fault hook: wait until the records are replicated, then drop the answer."""
    await pending
    raise dropper.drop(_what(ctx))


def _topic_name(broker: Broker, topic_data: Any) -> tuple[str, ErrorCode | None, str | None]:
    """The topic's name, and an error when v13's topic id names no topic (UNKNOWN_TOPIC_ID,
    as Kafka). Once per topic of a request, never per record."""
    if not hasattr(topic_data, "topic_id"):
        return topic_data.name, None, None
    found = None if topic_data.topic_id is None else \
        broker.metadata.topic_by_id(topic_data.topic_id)
    if found is None:
        return (f"topic id {topic_data.topic_id}", ErrorCode.unknown_topic_id,
                f"Topic id {topic_data.topic_id} does not exist.")
    return found.name, None, None


async def _verify_transactional(ctx: RequestContext, request: Any
                                ) -> tuple[dict[tuple[str, int], Refusal],
                                           dict[tuple[str, int], Candidate]]:
    """KIP-890: the partitions whose transactional batch the transaction coordinator does
    not vouch for, and those it does (to check their guard right before the append; see
    broker/txn_verification.py); only a transaction's first batch on a partition is checked."""
    broker = ctx.broker
    candidates = {}
    for topic_data in request.topic_data:
        name, code, _ = _topic_name(broker, topic_data)
        if code is not None:
            continue
        for p in topic_data.partition_data:
            producer = transactional_producer(p.records)
            if producer is not None and needs_check(broker, name, p.index, *producer):
                partition = broker.partition(name, p.index)
                assert partition is not None  # needs_check: led here
                stamp = producer_stamp(partition.log.producers, producer[0])
                candidates[(name, p.index)] = Candidate(name, p.index, *producer, stamp)
    if not candidates:
        return {}, {}
    refused = await verify(broker, ctx.version, request.transactional_id, candidates.values())
    return refused, {k: c for k, c in candidates.items() if k not in refused}


async def _schema_refusal(ctx: RequestContext, partition: Partition, records: Any
                          ) -> tuple[str, tuple[tuple[int, str], ...]] | None:
    """Why a topic with ``confluent.*.schema.validation`` refuses the batch, if it does."""
    config = partition.config
    invalid = await validator_for(ctx.broker).invalid_records(
        records, keys=config.confluent_key_schema_validation,
        values=config.confluent_value_schema_validation)
    if not invalid:
        return None
    message = (f"{len(invalid)} record(s) failed schema validation on the broker: "
               f"{invalid[0][1]}")
    return message, tuple(invalid)


async def handle(request: Any, ctx: RequestContext) -> Any:
    m = ctx.resp
    broker = ctx.broker
    acks = request.acks
    appended_topics: list[tuple[str, list[Any]]] = []
    pacer = Pacer()
    written: list[bool] = []
    refused: dict[tuple[str, int], Refusal] = {}
    verified: dict[tuple[str, int], Candidate] = {}
    if request.transactional_id is not None:
        authz.require(ctx, authz.Op.WRITE, authz.TXN_ID, request.transactional_id)
        refused, verified = await _verify_transactional(ctx, request)
    for topic_data in request.topic_data:
        name, code, message = _topic_name(broker, topic_data)
        if code is None and broker.authorizer is not None:
            code, message = authz.produce_refusal(ctx, name)
        if code is None and acks not in (0, 1, -1):
            code, message = ErrorCode.invalid_required_acks, f"acks={acks} is not 0, 1 or -1"
        elif code is None and name in INTERNAL_TOPICS and ctx.client_id != ADMIN_CLIENT_ID:
            # Only the coordinators write there; a stray record would corrupt group state.
            code = ErrorCode.invalid_topic_exception
            message = f"Cannot append to internal topic {name}"
        elif code is None:
            try:
                if broker.ensure_topic(name) is None:
                    code = ErrorCode.unknown_topic_or_partition
                    message = f"Topic '{name}' does not exist."
            except ApiError as exc:
                code, message = exc.code, exc.message
        if code is not None:
            entries = [_partition_response(m, p.index, code, message)
                       for p in topic_data.partition_data]
        else:
            entries = []
            for p in topic_data.partition_data:
                if refused and (name, p.index) in refused:
                    refusal = refused[(name, p.index)]
                    entries.append(_partition_response(m, p.index, refusal.code,
                                                       refusal.message))
                    continue
                partition = broker.partition(name, p.index)
                if partition is not None and partition.handover is not None:
                    # Only during a controlled shutdown: no coroutine per partition otherwise.
                    await _wait_for_handover(partition.handover)
                    partition = broker.partition(name, p.index)  # may be gone meanwhile
                if partition is not None and p.records is not None and (
                        partition.config.confluent_value_schema_validation
                        or partition.config.confluent_key_schema_validation):
                    invalid = await _schema_refusal(ctx, partition, p.records)
                    if invalid is not None:
                        entries.append(_partition_response(
                            m, p.index, ErrorCode.invalid_record, invalid[0],
                            record_errors=invalid[1]))
                        continue
                    partition = broker.partition(name, p.index)  # may have moved meanwhile
                if verified and (name, p.index) in verified:
                    # No await from here to the append: nothing can end the transaction
                    # between this check and the write.
                    broken = guard_broken(broker, name, p.index, verified[(name, p.index)])
                    if broken is not None:
                        entries.append(_partition_response(m, p.index, broken.code,
                                                           broken.message))
                        continue
                entries.append(_append(ctx, name, p, partition, acks, written))
                await pacer.tick()
        appended_topics.append((name, entries))
    waiting = _waiting(appended_topics)
    dropper = broker.produce_dropper
    drop = bool(written) and dropper.should_drop()
    if waiting:
        pending = _await_acks(ctx, request, appended_topics, waiting)
        if drop:
            pending = _dropped(pending, dropper, ctx)
        # Appended: the connection may go on to the client's next Produce while the ISR
        # catches up (its response still goes out after this one).
        return Deferred(pending) if ctx.may_defer else await pending
    if drop:
        raise dropper.drop(_what(ctx))
    if acks == 0:
        failed = [
            # error_message exists from v8 on; acks=0 is legal in every version.
            f"{name}-{p.index}: {getattr(p, 'error_message', None) or p.error_code.name}"
            for name, entries in appended_topics
            for p in entries
            if p.error_code is not ErrorCode.none
        ]
        if failed:
            # acks=0 has no response to carry the error; like Kafka, close the connection so
            # the producer notices and refreshes its metadata.
            raise FrameError("acks=0 produce failed: " + "; ".join(failed))
        return None
    return _response(ctx, request, appended_topics)
