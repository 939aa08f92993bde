"""Followers copy their leaders' logs: one fetcher per leader broker (Kafka's ReplicaFetcherThread).

A ``LeaderFetcher`` is an asyncio task with one connection to one leader broker, multiplexing
every partition this broker follows there. Before a partition is fetched it is truncated:
OffsetForLeaderEpoch asks the leader where the follower's latest epoch ends in the leader's
log, and anything past that (a tail the old leader wrote but never committed) is cut; a
leader that does not know the epoch makes the follower fall back to its high watermark, and
an answer naming an older epoch the follower lacks makes it cut back and ask again
(``truncation_offset``). Then
it sends Fetch requests (``replica_id`` = this broker, ``fetch_offset`` = the follower's log
end, ``current_leader_epoch`` = the epoch it follows) that the leader parks until it has new
data; each response's batches are appended as they are (``Partition.append_as_follower``:
no patching, no per-record work) and the leader's high watermark is taken as far as the log
reaches, and so is its log start offset (``Partition.follow_log_start``: what DeleteRecords or
retention removed on the leader goes here too). The leader learns the follower's position
from the next fetch offset, and its log start from the next fetch's ``log_start_offset``.
The requests run in an incremental fetch session (KIP-227, :mod:`.follower_session`): after
the first, each names only the partitions whose offsets or epoch changed.

Errors: a fenced or unknown epoch, or NOT_LEADER_OR_FOLLOWER, leaves the partition waiting
for the new state from ZooKeeper (the cluster link moves it); a lost connection is retried
after a short pause.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic, ForgottenTopic
from kio.schema.offset_for_leader_epoch.v4.request import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)

from ..log.errors import LogError, StorageError
from ..protocol.codec import build
from .broker_connection import BrokerConnection, plaintext_connect
from .errors import ReplicaError
from .follower_session import FollowerSession, Wanted
from .partition import Partition, Role, TopicPartition
from .throttle import ReplicationQuota

log = logging.getLogger(__name__)

#: How long the leader may park a fetch with nothing new (Kafka's replica.fetch.wait.max.ms).
FETCH_WAIT_MS = 500
#: Bytes per partition and per response (replica.fetch.max.bytes / response.max.bytes).
PARTITION_MAX_BYTES = 1 << 20
RESPONSE_MAX_BYTES = 10 << 20
#: Pause before reconnecting to a leader that cannot be reached.
RETRY_S = 0.5
#: Pause after a fetch whose partitions the leader refused (epochs not agreed yet).
ERROR_PAUSE_S = 0.1

Endpoint = Callable[[int], tuple[str, int] | None]
#: Opens an (authenticated) connection to a peer's inter-broker listener at an address.
Connect = Callable[[tuple[str, int]], Awaitable["BrokerConnection"]]


class LeaderFetcher:
    """Fetches every partition this broker follows on one leader."""

    def __init__(self, local_id: int, leader_id: int, endpoint: Endpoint,
                 now_ms: Callable[[], int], quota: ReplicationQuota | None = None,
                 connect: Connect = plaintext_connect) -> None:
        self.local_id = local_id
        self._connect = connect
        #: follower.replication.throttled.rate: throttled partitions not in sync wait for it.
        self._quota = quota
        #: The leader's high watermark of each partition at its last response (in sync: the
        #: follower's log end reached it).
        self._leader_hw: dict[TopicPartition, int] = {}
        self.leader_id = leader_id
        self._endpoint = endpoint
        self._now_ms = now_ms
        self.partitions: dict[TopicPartition, Partition] = {}
        #: Partitions still to be truncated before their first fetch.
        self._unchecked: set[TopicPartition] = set()
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        #: The incremental fetch session on the current connection.
        self._session = FollowerSession()

    def add(self, partition: Partition) -> None:
        self.partitions[partition.key] = partition
        self._unchecked.add(partition.key)
        self._changed.set()
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    def remove(self, key: TopicPartition) -> None:
        self.partitions.pop(key, None)
        self._unchecked.discard(key)
        self._leader_hw.pop(key, None)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def _following(self) -> dict[TopicPartition, Partition]:
        """The partitions that still follow this leader (states may have moved them)."""
        for key, p in list(self.partitions.items()):
            if p.role is not Role.FOLLOWER or p.leader_id != self.leader_id:
                self.remove(key)
        return self.partitions

    async def _run(self) -> None:
        while self._following():
            address = self._endpoint(self.leader_id)
            if address is None:
                await asyncio.sleep(RETRY_S)
                continue
            try:
                conn = await self._connect(address)
            except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
                # OSError covers TLS failures, time-outs and a refused authentication.
                log.info("fetcher: cannot reach leader %d at %s:%d (%s)", self.leader_id,
                         *address, exc or type(exc).__name__)
                await asyncio.sleep(RETRY_S)
                continue
            self._session.reset()
            try:
                while self._following():
                    if self._unchecked:
                        await self._truncate(conn)
                    await self._fetch(conn)
            except (OSError, ConnectionError, asyncio.IncompleteReadError, ValueError) as exc:
                log.info("fetcher: connection to leader %d lost (%s)", self.leader_id, exc)
                await asyncio.sleep(RETRY_S)
            finally:
                conn.close()

    async def _truncate(self, conn: BrokerConnection) -> None:
        """OffsetForLeaderEpoch for every partition not checked yet, then truncate."""
        keys = [k for k in self._unchecked if k in self.partitions]
        self._unchecked.clear()
        by_topic: dict[str, list[Partition]] = {}
        for key in keys:
            by_topic.setdefault(key[0], []).append(self.partitions[key])
        request = build(OffsetForLeaderEpochRequest, replica_id=self.local_id, topics=tuple(
            build(OffsetForLeaderTopic, topic=topic, partitions=tuple(
                build(OffsetForLeaderPartition, partition=p.partition,
                      current_leader_epoch=p.leader_epoch, leader_epoch=p.log.latest_epoch)
                for p in parts))
            for topic, parts in by_topic.items()))
        response = await conn.request(request)
        for topic in response.topics:
            for result in topic.partitions:
                partition = self.partitions.get((topic.topic, result.partition))
                if partition is None or partition.role is not Role.FOLLOWER:
                    continue
                if result.error_code != ErrorCode.none:
                    log.info("fetcher: %s-%d: OffsetForLeaderEpoch %s; retried", topic.topic,
                             result.partition, result.error_code.name)
                    self._unchecked.add(partition.key)
                    continue
                target, complete = truncation_offset(partition, result.leader_epoch,
                                                     result.end_offset)
                if target <= partition.log_end_offset:
                    # At the log end too: the epoch cache may end with an epoch this broker
                    # led without writing, which the leader's history contradicts.
                    partition.truncate_to(target)
                if not complete:
                    self._unchecked.add(partition.key)
        if self._unchecked:
            # Typically a new leader that has not applied its state yet: ask again soon.
            await asyncio.sleep(ERROR_PAUSE_S)

    def _throttled(self) -> set[TopicPartition]:
        """Partitions fetched under the follower throttle (named in the topic's
        follower.replication.throttled.replicas and not in sync)."""
        quota = self._quota
        if quota is None or not quota.active:
            return set()
        return {k for k, p in self.partitions.items()
                if quota.is_throttled(k) and p.log_end_offset < self._leader_hw.get(k, 1 << 62)}

    async def _fetch(self, conn: BrokerConnection) -> None:
        throttled = self._throttled()
        held = throttled if throttled and self._quota is not None and self._quota.exceeded() \
            else set()
        # Throttled partitions ask for no more than the budget has left (one batch at least).
        budget = max(min(PARTITION_MAX_BYTES, self._quota.available()), 1) \
            if throttled and self._quota is not None else PARTITION_MAX_BYTES
        wanted: dict[TopicPartition, Wanted] = {
            key: (p.leader_epoch, p.log_end_offset, p.log_start_offset,
                  budget if key in throttled else PARTITION_MAX_BYTES)
            for key, p in self.partitions.items()
            if key not in self._unchecked and key not in held}
        if not wanted:
            await asyncio.sleep(self._quota.delay_s() if held and self._quota else RETRY_S)
            return
        session = self._session
        named, forgotten = session.changes(wanted)
        response = await conn.request(self._request(wanted, named, forgotten))
        session.answered(response.session_id, response.error_code, wanted)
        if response.error_code != ErrorCode.none:
            log.debug("fetcher: leader %d answered %s; starting a new session",
                      self.leader_id, response.error_code.name)
            return
        now = self._now_ms()
        failed = 0
        for topic in response.responses:
            for data in topic.partitions:
                partition = self.partitions.get((topic.topic, data.partition_index))
                if partition is None or partition.role is not Role.FOLLOWER:
                    continue
                if data.error_code != ErrorCode.none:
                    failed += 1
                else:
                    self._leader_hw[partition.key] = data.high_watermark
                    if partition.key in throttled and self._quota is not None:
                        self._quota.record(len(data.records or b""))
                self._apply(partition, data, now)
        if failed:
            # The leader answered at once (it has not applied the new state yet, or this
            # broker has not): do not hammer it.
            await asyncio.sleep(ERROR_PAUSE_S)

    def _request(self, wanted: dict[TopicPartition, Wanted], named: list[TopicPartition],
                 forgotten: list[TopicPartition]) -> FetchRequest:
        """A Fetch in the session: the ``named`` partitions as ``wanted`` says, and the
        ``forgotten`` ones to drop."""
        by_topic: dict[str, list[FetchPartition]] = {}
        for key in named:
            epoch, offset, log_start, max_bytes = wanted[key]
            by_topic.setdefault(key[0], []).append(build(
                FetchPartition, partition=key[1], current_leader_epoch=epoch,
                fetch_offset=offset, last_fetched_epoch=-1, log_start_offset=log_start,
                partition_max_bytes=max_bytes))
        dropped: dict[str, list[int]] = {}
        for topic, index in forgotten:
            dropped.setdefault(topic, []).append(index)
        return build(
            FetchRequest,
            cluster_id=None, replica_id=self.local_id,
            max_wait=datetime.timedelta(milliseconds=FETCH_WAIT_MS), min_bytes=1,
            max_bytes=RESPONSE_MAX_BYTES, isolation_level=0, session_id=self._session.id,
            session_epoch=self._session.epoch,
            topics=tuple(build(FetchTopic, topic=topic, partitions=tuple(parts))
                         for topic, parts in by_topic.items()),
            forgotten_topics_data=tuple(build(ForgottenTopic, topic=topic,
                                              partitions=tuple(indexes))
                                        for topic, indexes in dropped.items()),
            rack_id="")

    def _apply(self, partition: Partition, data: Any, now: int) -> None:
        code = data.error_code
        if code == ErrorCode.offset_out_of_range:
            # Behind the leader's log start (retention moved it): start over there.
            log.warning("%s-%d: fetch offset %d out of range on leader %d; starting at its "
                        "log start %d", partition.topic, partition.partition,
                        partition.log_end_offset, self.leader_id, data.log_start_offset)
            if data.log_start_offset > partition.log_end_offset:
                partition.log.truncate_fully_and_start_at(data.log_start_offset, now)
            else:
                self._unchecked.add(partition.key)
            return
        if code != ErrorCode.none:
            # Fenced, unknown epoch, not the leader: the state in ZooKeeper will say more.
            log.debug("%s-%d: fetch from %d: %s", partition.topic, partition.partition,
                      self.leader_id, code.name)
            return
        records = data.records or b""
        try:
            partition.append_as_follower(records, data.high_watermark, now)
            # DeleteRecords (or retention) moved the leader's log start: follow it, and the
            # next fetch tells the leader, whose DeleteRecords waits for the ISR's.
            partition.follow_log_start(data.log_start_offset)
        except (ReplicaError, LogError, StorageError) as exc:
            log.warning("%s-%d: cannot append what leader %d sent: %s", partition.topic,
                        partition.partition, self.leader_id, exc)
            self._unchecked.add(partition.key)


def truncation_offset(partition: Partition, leader_epoch: int,
                      leader_end_offset: int) -> tuple[int, bool]:
    """Where a follower truncates after the leader's OffsetForLeaderEpoch answer, and whether
    that is final (Kafka's AbstractFetcherThread.getOffsetTruncationState).

    The leader answers with the largest epoch it knows that is not above the one asked for
    (the follower's latest) and where that epoch ends in its log. When the follower knows
    that epoch too, the logs agree up to the smaller of the two ends. When it does not, the
    two replicas took different histories before that point (the follower has records of an
    older epoch where the leader has records of this one), so the follower cuts back to where
    its own epoch below that one ends and asks again with its new latest epoch; each round
    goes to an older epoch, down to one both know. An unknown epoch (-1) means the leader
    has nothing to compare: the follower keeps only what was committed (its high watermark).
    """
    end = partition.log_end_offset
    if leader_end_offset < 0:
        return partition.high_watermark, True
    own_epoch, own_end = partition.log.end_offset_for_epoch(leader_epoch)
    if own_end < 0:
        return leader_end_offset, True  # no epochs here to compare: trust the leader's
    if own_epoch != leader_epoch:
        return min(own_end, end), False
    return min(own_end, leader_end_offset, end), True


class ReplicaFetchers:
    """The fetchers of one broker, by leader; ``follow`` moves a partition between them."""

    def __init__(self, local_id: int, endpoint: Endpoint, now_ms: Callable[[], int],
                 quota: ReplicationQuota | None = None,
                 connect: Connect = plaintext_connect) -> None:
        self._quota = quota
        self._connect = connect
        self._local_id = local_id
        self._endpoint = endpoint
        self._now_ms = now_ms
        self._fetchers: dict[int, LeaderFetcher] = {}

    def follow(self, partition: Partition) -> None:
        """Fetch ``partition`` from its leader (truncating first); stop fetching it elsewhere."""
        self.unfollow(partition.key)
        if partition.leader_id < 0 or partition.leader_id == self._local_id:
            return
        fetcher = self._fetchers.get(partition.leader_id)
        if fetcher is None:
            fetcher = LeaderFetcher(self._local_id, partition.leader_id, self._endpoint,
                                    self._now_ms, self._quota, self._connect)
            self._fetchers[partition.leader_id] = fetcher
        fetcher.add(partition)

    def unfollow(self, key: TopicPartition) -> None:
        for fetcher in self._fetchers.values():
            fetcher.remove(key)

    async def stop(self) -> None:
        await asyncio.gather(*(f.stop() for f in self._fetchers.values()))
        self._fetchers.clear()
