"""Fetch: serve record bytes straight from segment files, long-polling when there is too little.

Record bytes are never copied into Python on the way out: each partition's slice of a segment
file becomes a file range in the response, which the connection sends with ``sendfile``. kio
still encodes the response structure; every records field is first encoded as a unique
placeholder, which is then swapped for the real length prefix and the file range.

Reads go through the partition's :meth:`~moldau.replica.partition.Partition.read`, which checks
the client's leader epoch and leadership and stops consumers at the high watermark; waiting
fetches park in the replica manager's fetch purgatory.

read_committed fetches (isolation level 1, v4+) stop at the last stable offset instead and
carry the aborted transactions overlapping what they return (from the segments'
``.txnindex``), so clients can drop aborted records; every response partition carries the
last stable offset. Nothing here looks at records: the aborted list comes from memory.

Followers get incremental fetch sessions (KIP-227, :mod:`..fetch_sessions`): their requests
name only what changed and the responses carry only partitions with news, while every
partition of the session is still read. Consumers get session id 0 (no session), which tells
them to keep sending full requests; that is always correct.
"""

from __future__ import annotations

import os
import struct
import time
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from ...config.client_quotas import CONSUMER_BYTE_RATE
from ...log.errors import OffsetOutOfRangeError, StorageError
from ...metrics.counters import BrokerCounters
from ...protocol import codec
from ...protocol.codec import build
from ...replica import ReplicaError
from .. import authz, fetch_sessions, offload
from ..broker import Broker, RequestContext, now_ms
from ..quota_throttle import client_of
from ..response import FileRange, Response
from .api_versions import NO_THROTTLE
from .pacing import Pacer

_MARKER_LEN = 16
_INT32 = struct.Struct(">i")


@dataclass(slots=True)
class _PartitionRead:
    topic: str | None
    partition: int
    code: ErrorCode
    high_watermark: int = -1
    log_start_offset: int = -1
    last_stable_offset: int = -1
    data: FileRange | None = None
    #: read_committed only: (producer id, first offset) of the aborted transactions.
    aborted: list[tuple[int, int]] | None = None
    #: Held back by the leader's replication throttle (not counted for waking the fetch).
    held: bool = False


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _resolve_topic(broker: Broker, fetch_topic: Any) -> tuple[str | None, ErrorCode]:
    topic_id = getattr(fetch_topic, "topic_id", None)
    if topic_id is not None:
        found = broker.metadata.topic_by_id(topic_id)
        return (found.name, ErrorCode.none) if found else (None, ErrorCode.unknown_topic_id)
    name: str | None = getattr(fetch_topic, "topic", None)
    if name is None:  # v13+ names topics by id only: the zero id names no topic
        return None, ErrorCode.unknown_topic_id
    if broker.metadata.topic(name) is None:
        return name, ErrorCode.unknown_topic_or_partition
    return name, ErrorCode.none


def replica_id(request: Any) -> int:
    """The fetching follower's broker id (v15+ in ``replica_state``), -1 for consumers."""
    state = getattr(request, "replica_state", None)
    found = getattr(state, "replica_id", None) if state is not None else \
        getattr(request, "replica_id", -1)
    return -1 if found is None else int(found)


def _denied(ctx: RequestContext, request: Any, follower: int) -> frozenset[str]:
    """The requested topics the client may not fetch: a follower needs CLUSTER_ACTION on
    the cluster, a consumer READ on each topic (checked once per topic per request)."""
    if follower >= 0 and not authz.allowed(ctx, authz.Op.CLUSTER_ACTION, authz.CLUSTER):
        everything = (_resolve_topic(ctx.broker, t)[0] for t in request.topics)
        return frozenset(name for name in everything if name is not None)
    names = {_resolve_topic(ctx.broker, t)[0] for t in request.topics}
    return frozenset(name for name in names if name is not None
                     and not authz.allowed(ctx, authz.Op.READ, authz.TOPIC, name))


async def _read_all(broker: Broker, request: Any, topics: Any, follower: int = -1,
                    denied: frozenset[str] = frozenset(), cap: int | None = None
                    ) -> tuple[list[tuple[Any, list[_PartitionRead]]], int]:
    """Read every partition of ``topics`` (the request's, or its fetch session's) within the
    request's byte limits (KIP-74 rules).

    A follower (``follower`` >= 0, a broker of the cluster) reads up to the log end, not
    the high watermark, and its fetch offset is its log end offset: the leader records it,
    which may grow the ISR and move the high watermark.
    """
    budget = request.max_bytes if request.max_bytes > 0 else 0x7FFFFFFF
    if cap is not None:  # a consumer quota: at most one quota window's worth (as Kafka)
        budget = min(budget, cap)
    total = 0
    reads: list[tuple[Any, list[_PartitionRead]]] = []
    pacer = Pacer()
    quota = broker.replicas.throttles.leader
    throttling = follower >= 0 and quota.active
    committed = follower < 0 and getattr(request, "isolation_level", 0) == 1
    for fetch_topic in topics:
        name, topic_code = _resolve_topic(broker, fetch_topic)
        if denied and name in denied:
            topic_code = ErrorCode.topic_authorization_failed
        parts: list[_PartitionRead] = []
        for p in fetch_topic.partitions:
            await pacer.tick()
            if topic_code is not ErrorCode.none or name is None:
                parts.append(_PartitionRead(name, p.partition, topic_code))
                continue
            partition = broker.partition(name, p.partition)
            if partition is None or partition.offline:
                parts.append(_PartitionRead(name, p.partition,
                                            ErrorCode.kafka_storage_error if partition
                                            else broker.not_hosted_error(name, p.partition)))
                continue
            read = _PartitionRead(name, p.partition, ErrorCode.none, partition.high_watermark,
                                  partition.log_start_offset, partition.last_stable_offset)
            limit = min(p.partition_max_bytes, budget - total)
            current_epoch = getattr(p, "current_leader_epoch", -1)
            data = None
            # A throttled follower outside the ISR gets nothing once the budget is spent.
            held = throttling and follower not in partition.isr and \
                quota.is_throttled(partition.key)
            try:
                if held:
                    limit = min(limit, quota.available())
                if held and limit <= 0:
                    read.held = True
                    partition.check_epoch(current_epoch)
                elif committed and (limit > 0 or total == 0):
                    data, aborted = partition.read_committed(
                        p.fetch_offset, max(limit, 0), min_one_batch=total == 0,
                        current_leader_epoch=current_epoch)
                    read.aborted = [(t.producer_id, t.first_offset) for t in aborted]
                elif follower >= 0 and p.fetch_offset == partition.log_end_offset:
                    # A follower at the log end (most partitions of most of its fetches):
                    # nothing to read, only the epoch to check.
                    partition.check_epoch(current_epoch)
                elif limit > 0 or total == 0:
                    data = partition.read(p.fetch_offset, max(limit, 0),
                                          min_one_batch=total == 0,
                                          fetch_only_committed=follower < 0,
                                          current_leader_epoch=current_epoch)
                else:  # the response is full: nothing is read, the epoch is still checked
                    partition.check_epoch(current_epoch)
                if follower >= 0:
                    partition.update_follower_position(follower, p.fetch_offset, now_ms())
                    partition.update_follower_log_start(
                        follower, getattr(p, "log_start_offset", -1))
                    read.high_watermark = partition.high_watermark
                    read.last_stable_offset = partition.last_stable_offset
            except ReplicaError as exc:
                read = _PartitionRead(name, p.partition, exc.code)
            except OffsetOutOfRangeError:
                read.code = ErrorCode.offset_out_of_range
            except StorageError:  # an offline log dir, or a failed read (logged once)
                read.code = ErrorCode.kafka_storage_error
            if data is not None and data.size > 0:
                read.data = data
                total += data.size
                if held:
                    quota.record(data.size)
            parts.append(read)
        reads.append((fetch_topic, parts))
    return reads, total


def _has_error(reads: list[tuple[Any, list[_PartitionRead]]]) -> bool:
    return any(r.code is not ErrorCode.none for _, parts in reads for r in parts)


async def _encode(ctx: RequestContext, reads: list[tuple[Any, list[_PartitionRead]]],
                  session_id: int = 0) -> Response:
    m = ctx.resp
    salt = os.urandom(8)
    ranges: list[tuple[bytes, FileRange]] = []
    topics = []
    for fetch_topic, parts in reads:
        partitions = []
        for r in parts:
            records = b""
            if r.data is not None:
                marker = salt + len(ranges).to_bytes(8, "big")
                ranges.append((marker, r.data))
                records = marker
            partitions.append(build(
                m.PartitionData,
                partition_index=r.partition,
                error_code=r.code,
                high_watermark=r.high_watermark,
                last_stable_offset=r.last_stable_offset,
                log_start_offset=r.log_start_offset,
                aborted_transactions=None if r.aborted is None else tuple(
                    build(m.AbortedTransaction, producer_id=pid, first_offset=first)
                    for pid, first in r.aborted),
                preferred_read_replica=-1,
                records=records,
            ))
        topics.append(build(
            m.FetchableTopicResponse,
            topic=getattr(fetch_topic, "topic", None),
            topic_id=getattr(fetch_topic, "topic_id", None),
            partitions=tuple(partitions),
        ))
    response = build(
        m.FetchResponse,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        session_id=session_id,
        responses=tuple(topics),
        node_endpoints=(),
    )
    body = await offload.encode_body(ctx.header.api_key, ctx.version, response)
    if not ranges:
        return Response.of_bytes(body)
    flexible = codec.is_flexible(ctx.header.api_key, ctx.version)
    # The placeholder's own length prefix: uvarint(16 + 1) when flexible, int32 16 otherwise.
    prefix_len = 1 if flexible else 4
    chunks: list[bytes | FileRange] = []
    size = 0
    start = 0
    for marker, data in ranges:
        at = body.index(marker, start)
        head = body[start : at - prefix_len]
        length = _uvarint(data.size + 1) if flexible else _INT32.pack(data.size)
        chunks.append(head + length)
        chunks.append(data)
        size += len(head) + len(length) + data.size
        start = at + _MARKER_LEN
    tail = body[start:]
    chunks.append(tail)
    size += len(tail)
    return Response(chunks, size)


def _appended_since(broker: Broker, topics: Any, held: set[tuple[str, int]]) -> bool:
    """Whether a follower's fetch now has data past the offsets it asked from (partitions
    held back by the throttle do not count)."""
    for fetch_topic in topics:
        name, _ = _resolve_topic(broker, fetch_topic)
        if name is None:
            continue
        for p in fetch_topic.partitions:
            if (name, p.partition) in held:
                continue
            partition = broker.partition(name, p.partition)
            if partition is not None and partition.log_end_offset > p.fetch_offset:
                return True
    return False


def _session_updates(reads: list[tuple[Any, list[_PartitionRead]]], incremental: bool
                     ) -> list[tuple[Any, list[_PartitionRead]]]:
    """A session's response: an incremental one carries only the partitions with records, an
    error or a changed watermark; a full one carries all. Either notes what was told."""
    kept: list[tuple[Any, list[_PartitionRead]]] = []
    for session_topic, parts in reads:
        news = [read for part, read in zip(session_topic.partitions, parts, strict=True)
                if fetch_sessions.has_updates(part, read.code, read.data is not None,
                                              read.high_watermark, read.last_stable_offset,
                                              read.log_start_offset) or not incremental]
        if news:
            kept.append((session_topic, news))
    return kept


async def handle(request: Any, ctx: RequestContext) -> Any:
    broker = ctx.broker
    m = ctx.resp
    follower = replica_id(request) if broker.cluster is not None else -1
    denied = _denied(ctx, request, follower) if broker.authorizer is not None else frozenset()
    # A follower refused CLUSTER_ACTION gets no session: its full requests are refused.
    outcome = fetch_sessions.resolve(ctx.session, request, -1 if denied else follower)
    if outcome.error is not None:
        return build(m.FetchResponse, throttle_time=NO_THROTTLE, error_code=outcome.error,
                     session_id=0, responses=(), node_endpoints=())
    session = outcome.session
    topics = session.topics() if session is not None else request.topics
    ctx.quota_exempt = follower >= 0
    cap = None
    if broker.client_quotas.enabled[CONSUMER_BYTE_RATE] and follower < 0:
        cap = broker.client_quotas.fetch_window_bytes(*client_of(ctx))
    reads, total = await _read_all(broker, request, topics, follower, denied, cap)
    max_wait_s = request.max_wait.total_seconds()
    min_bytes = max(request.min_bytes, 1)
    if total < min_bytes and max_wait_s > 0 and not _has_error(reads):
        keys: list[tuple[str, int]] = [
            (r.topic, r.partition)
            for _, parts in reads
            for r in parts
            if r.topic is not None and not r.held
        ]
        started = time.perf_counter_ns()
        if follower >= 0:
            # Something appended while this fetch was being read (the loop may run the
            # produce handler in between) would not wake it: look again first. No await
            # between this check and the waiter's registration, so nothing slips through.
            held = {(r.topic, r.partition) for _, parts in reads for r in parts
                    if r.held and r.topic is not None}
            if not _appended_since(broker, topics, held):
                await broker.replicas.replica_fetch_purgatory.wait(keys, min_bytes - total,
                                                                   max_wait_s)
        else:
            await broker.replicas.wait_for_data(keys, min_bytes - total, max_wait_s,
                                                getattr(request, "isolation_level", 0) == 1)
        waited = time.perf_counter_ns() - started
        ctx.waited_s = waited / 1e9
        if ctx.timing is not None:
            ctx.timing.remote_ns += waited
        reads, total = await _read_all(broker, request, topics, follower, denied, cap)
    if broker.metrics is not None:
        _count(broker.metrics, reads, follower)
    if session is None:
        response = await _encode(ctx, reads)
    else:
        response = await _encode(ctx, _session_updates(reads, outcome.incremental),
                                  session.id)
    if broker.client_quotas.enabled[CONSUMER_BYTE_RATE] and follower < 0:
        return _consumer_quota(ctx, response)
    return response


def _consumer_quota(ctx: RequestContext, response: Response) -> Any:
    """Count the response against ``consumer_byte_rate``; over quota, answer empty with the
    throttle time instead, as Kafka does (its bytes are not counted then)."""
    quotas = ctx.broker.client_quotas
    user, client = client_of(ctx)
    throttle_ms = quotas.record_fetch(user, client, response.size)
    if throttle_ms <= 0:
        return response
    quotas.unrecord_fetch(user, client, response.size)
    ctx.throttle_ms = max(ctx.throttle_ms, throttle_ms)
    return build(ctx.resp.FetchResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
                 session_id=0, responses=(), node_endpoints=())


def _count(metrics: BrokerCounters, reads: list[tuple[Any, list[_PartitionRead]]],
           follower: int) -> None:
    """Bytes out per topic (a follower's go to replication), failed partitions per topic."""
    for _, parts in reads:
        for read in parts:
            if read.topic is None:
                continue
            if read.code is not ErrorCode.none:
                metrics.topic(read.topic).failed_fetch += 1
            elif read.data is not None:
                if follower >= 0:
                    metrics.replication_bytes_out += read.data.size
                else:
                    metrics.topic(read.topic).bytes_out += read.data.size
