"""The transaction coordinator's APIs: InitProducerId (with a transactional id),
AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, DescribeTransactions, ListTransactions.

Thin translations between kio's versioned messages and
:class:`~moldau.broker.transaction_service.TransactionService`; the rules live in
:mod:`moldau.coordinator.transactions`.

PRODUCER_FENCED exists from InitProducerId v4, AddPartitionsToTxn v2, AddOffsetsToTxn v2 and
EndTxn v2 on (KIP-588); older versions get INVALID_PRODUCER_EPOCH instead, as Kafka sends.
"""

from __future__ import annotations

import datetime
import re
from typing import Any

from kio.schema.errors import ErrorCode

from ...coordinator.hashing import partition_for
from ...coordinator.transactions import TxnState
from ...protocol.codec import build
from .. import authz
from ..broker import RequestContext, now_ms
from ..errors import ApiError
from ..group_service import OFFSETS_TOPIC
from ..transaction_service import start_time
from .api_versions import NO_THROTTLE
from .groups import millis


def _fenced(code: ErrorCode, version: int, first: int) -> ErrorCode:
    """PRODUCER_FENCED for versions that know it, INVALID_PRODUCER_EPOCH before."""
    if code is ErrorCode.producer_fenced and version < first:
        return ErrorCode.invalid_producer_epoch
    return code


# -- InitProducerId ----------------------------------------------------------------------------


async def init_producer_id(request: Any, ctx: RequestContext) -> tuple[ErrorCode, int, int]:
    """InitProducerId with a transactional id (producer_ids.handle delegates here)."""
    producer_id = getattr(request, "producer_id", -1)
    epoch = getattr(request, "producer_epoch", -1)
    if (producer_id == -1) != (epoch == -1):
        return ErrorCode.invalid_request, -1, -1
    expected = None if producer_id == -1 else (int(producer_id), int(epoch))
    code, pid, new_epoch = await ctx.broker.transactions.init_producer_id(
        request.transactional_id, millis(request.transaction_timeout), expected)
    return _fenced(code, ctx.version, 4), pid, new_epoch


# -- AddPartitionsToTxn ------------------------------------------------------------------------


def _unknown(ctx: RequestContext, partitions: list[tuple[str, int]]
             ) -> dict[tuple[str, int], ErrorCode]:
    topics = ctx.broker.metadata
    found = {}
    for topic, partition in partitions:
        known = topics.topic(topic)
        if known is None or not 0 <= partition < known.partitions:
            found[(topic, partition)] = ErrorCode.unknown_topic_or_partition
    return found


async def _add_one(ctx: RequestContext, transactional_id: str, producer_id: int, epoch: int,
                   partitions: list[tuple[str, int]], verify_only: bool
                   ) -> dict[tuple[str, int], ErrorCode]:
    """One transaction's partitions: an unknown partition fails the whole request, the others
    being OPERATION_NOT_ATTEMPTED, as Kafka answers."""
    unknown = _unknown(ctx, partitions)
    if unknown and not verify_only:
        return {tp: unknown.get(tp, ErrorCode.operation_not_attempted) for tp in partitions}
    return await ctx.broker.transactions.add_partitions(
        transactional_id, producer_id, epoch, partitions, verify_only=verify_only)


def _topic_results(m: Any, results: dict[tuple[str, int], ErrorCode]) -> tuple[Any, ...]:
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), code in results.items():
        by_topic.setdefault(topic, []).append(build(
            m.AddPartitionsToTxnPartitionResult, partition_index=partition,
            partition_error_code=code))
    return tuple(build(m.AddPartitionsToTxnTopicResult, name=topic,
                       results_by_partition=tuple(parts))
                 for topic, parts in by_topic.items())


def _partitions_of(topics: Any) -> list[tuple[str, int]]:
    seen: dict[tuple[str, int], None] = {}
    for topic in topics:
        for partition in topic.partitions:
            seen[(str(topic.name), int(partition))] = None
    return list(seen)


def _refused(ctx: RequestContext, transactional_id: str, partitions: list[tuple[str, int]]
             ) -> dict[tuple[str, int], ErrorCode] | None:
    """Kafka's answer when the client may not write to the transactional id or to some
    topic (the other partitions then OPERATION_NOT_ATTEMPTED); None when allowed."""
    if ctx.broker.authorizer is None:
        return None
    if not authz.allowed(ctx, authz.Op.WRITE, authz.TXN_ID, transactional_id):
        return dict.fromkeys(partitions, ErrorCode.transactional_id_authorization_failed)
    denied = {tp for tp in partitions
              if not authz.allowed(ctx, authz.Op.WRITE, authz.TOPIC, tp[0])}
    if not denied:
        return None
    return {tp: ErrorCode.topic_authorization_failed if tp in denied
            else ErrorCode.operation_not_attempted for tp in partitions}


async def handle_add_partitions(request: Any, ctx: RequestContext) -> Any:
    m = ctx.resp
    if ctx.version < 4:
        partitions = _partitions_of(request.v3_and_below_topics)
        results = _refused(ctx, request.v3_and_below_transactional_id, partitions) or \
            await _add_one(ctx, request.v3_and_below_transactional_id,
                                 request.v3_and_below_producer_id,
                                 request.v3_and_below_producer_epoch, partitions, False)
        results = {tp: _fenced(code, ctx.version, 2) for tp, code in results.items()}
        return build(m.AddPartitionsToTxnResponse, throttle_time=NO_THROTTLE,
                     results_by_topic_v3_and_below=_topic_results(m, results))
    # v4+ is for brokers verifying a transaction (KIP-890).
    authz.require(ctx, authz.Op.CLUSTER_ACTION, authz.CLUSTER)
    answers = []
    for txn in request.transactions:
        results = await _add_one(ctx, txn.transactional_id, txn.producer_id,
                                 txn.producer_epoch, _partitions_of(txn.topics), txn.verify_only)
        answers.append(build(m.AddPartitionsToTxnResult, transactional_id=txn.transactional_id,
                             topic_results=_topic_results(m, results)))
    return build(m.AddPartitionsToTxnResponse, throttle_time=NO_THROTTLE,
                 error_code=ErrorCode.none, results_by_transaction=tuple(answers))


# -- AddOffsetsToTxn ---------------------------------------------------------------------------


async def handle_add_offsets(request: Any, ctx: RequestContext) -> Any:
    """The group's ``__consumer_offsets`` partition joins the transaction (TxnOffsetCommit
    then writes there, and the markers complete those offsets)."""
    broker = ctx.broker
    code = broker.transactions.owner_error(request.transactional_id)
    if code is None:
        try:
            topic = broker.groups.offsets_topic(create=True)
        except ApiError:
            topic = None
        if topic is None:
            code = ErrorCode.coordinator_not_available
        else:
            partition = partition_for(request.group_id, topic.partitions)
            results = await broker.transactions.add_partitions(
                request.transactional_id, request.producer_id, request.producer_epoch,
                [(OFFSETS_TOPIC, partition)], verify_only=False)
            code = results[(OFFSETS_TOPIC, partition)]
    return build(ctx.resp.AddOffsetsToTxnResponse, throttle_time=NO_THROTTLE,
                 error_code=_fenced(code, ctx.version, 2))


# -- EndTxn ------------------------------------------------------------------------------------


async def handle_end_txn(request: Any, ctx: RequestContext) -> Any:
    code, producer_id, epoch = await ctx.broker.transactions.end_txn(
        request.transactional_id, request.producer_id, request.producer_epoch,
        request.committed, version2=ctx.version >= 5)
    return build(ctx.resp.EndTxnResponse, throttle_time=NO_THROTTLE,
                 error_code=_fenced(code, ctx.version, 2), producer_id=producer_id,
                 producer_epoch=epoch)


# -- DescribeTransactions / ListTransactions ---------------------------------------------------


async def handle_describe(request: Any, ctx: RequestContext) -> Any:
    """An id that cannot be described carries its error and the schema's zero values, as
    Kafka's; a described id without a transaction has start time -1, as Kafka's too."""
    m = ctx.resp
    states = []
    for transactional_id in request.transactional_ids:
        code, meta = ctx.broker.transactions.describe(transactional_id)
        if not authz.allowed(ctx, authz.Op.DESCRIBE, authz.TXN_ID, transactional_id):
            code, meta = ErrorCode.transactional_id_authorization_failed, None
        if meta is None:
            states.append(build(m.TransactionState, error_code=code,
                                transactional_id=transactional_id, transaction_state="",
                                transaction_timeout=datetime.timedelta(0),
                                transaction_start_time=start_time(0),
                                producer_id=0, producer_epoch=0, topics=()))
            continue
        cur = meta.current
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(cur.partitions):
            by_topic.setdefault(topic, []).append(partition)
        states.append(build(
            m.TransactionState, error_code=ErrorCode.none, transactional_id=transactional_id,
            transaction_state=meta.state.display,
            transaction_timeout=datetime.timedelta(milliseconds=cur.timeout_ms),
            transaction_start_time=start_time(cur.start_ms), producer_id=cur.producer_id,
            producer_epoch=cur.producer_epoch,
            topics=tuple(build(m.TopicData, topic=t, partitions=tuple(ps))
                         for t, ps in by_topic.items())))
    return build(m.DescribeTransactionsResponse, throttle_time=NO_THROTTLE,
                 transaction_states=tuple(states))


async def handle_list(request: Any, ctx: RequestContext) -> Any:
    """This broker's transactions (admin clients ask every broker), filtered by state,
    producer id, running time (v1: longer than ``duration_filter`` ms) and id pattern (v2)."""
    m = ctx.resp
    service = ctx.broker.transactions
    wanted_states = set()
    unknown = []
    for name in request.state_filters:
        state = TxnState.from_display(name)
        if state is None:
            unknown.append(name)
        else:
            wanted_states.add(state)
    producers = set(request.producer_id_filters)
    duration = getattr(request, "duration_filter", -1)
    pattern_text = getattr(request, "transactional_id_pattern", None)
    code = ErrorCode.coordinator_load_in_progress if service.loading else ErrorCode.none
    pattern = None
    if pattern_text:
        try:
            pattern = re.compile(pattern_text)
        except re.error:
            code = ErrorCode.invalid_regular_expression
    found = []
    if code is ErrorCode.none and not (unknown and not wanted_states and request.state_filters):
        now = now_ms()
        for meta in service.list():
            cur = meta.current
            if wanted_states and meta.state not in wanted_states:
                continue
            if producers and cur.producer_id not in producers:
                continue
            if duration >= 0 and now - cur.start_ms <= duration:
                continue  # Kafka's test, on the start time whatever the state
            if pattern is not None and pattern.fullmatch(meta.transactional_id) is None:
                continue
            if not authz.allowed(ctx, authz.Op.DESCRIBE, authz.TXN_ID, meta.transactional_id):
                continue  # Kafka lists only the ids one may describe
            found.append(build(m.TransactionState, transactional_id=meta.transactional_id,
                               producer_id=cur.producer_id,
                               transaction_state=meta.state.display))
    return build(m.ListTransactionsResponse, throttle_time=NO_THROTTLE, error_code=code,
                 unknown_state_filters=tuple(unknown), transaction_states=tuple(found))
