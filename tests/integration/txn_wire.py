"""Raw transactions for tests of the partition side, before any coordinator is involved.

A test picks a producer id, writes transactional batches with Produce (transactional id
null, so no coordinator is asked) and ends them with WriteTxnMarkers as a coordinator would.
"""

from __future__ import annotations

import datetime
import time
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.list_offsets.v5.request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.write_txn_markers.v1.request import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
)

from tests.unit.batchgen import Record, build_batch

from .wire import WireClient


def _ms(ms: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=ms)


def produce_txn(client: WireClient, topic: str, pid: int, seq: int, values: list[str],
                partition: int = 0, epoch: int = 0, *, transactional: bool = True) -> int:
    """Append one (transactional) batch; its base offset."""
    now = int(time.time() * 1000)
    records = build_batch([Record(b"k", v.encode(), now) for v in values], producer_id=pid,
                          producer_epoch=epoch, base_sequence=seq, transactional=transactional)
    resp = client.request(ProduceRequest(
        transactional_id=None, acks=-1, timeout=_ms(10_000),
        topic_data=(TopicProduceData(name=topic, partition_data=(
            PartitionProduceData(index=partition, records=records),)),)))
    part = resp.responses[0].partition_responses[0]
    assert part.error_code == ErrorCode.none, part
    return int(part.base_offset)


def write_markers(client: WireClient, topic: str, pid: int, commit: bool,
                  partitions: tuple[int, ...] = (0,), epoch: int = 0,
                  coordinator_epoch: int = 0) -> list[ErrorCode]:
    """WriteTxnMarkers v1 for one producer; the error code per partition."""
    resp = client.request(WriteTxnMarkersRequest(markers=(WritableTxnMarker(
        producer_id=pid, producer_epoch=epoch, transaction_result=commit,
        topics=(WritableTxnMarkerTopic(name=topic, partition_indexes=partitions),),
        coordinator_epoch=coordinator_epoch),)))
    (marker,) = resp.markers
    assert marker.producer_id == pid
    return [p.error_code for t in marker.topics for p in t.partitions]


def fetch(client: WireClient, topic: str, offset: int, *, isolation: int, partition: int = 0,
          max_wait_ms: int = 0) -> Any:
    """One Fetch v12 of one partition; the partition's response."""
    resp = client.request(FetchRequest(
        max_wait=_ms(max_wait_ms), min_bytes=1, max_bytes=1_000_000, isolation_level=isolation,
        forgotten_topics_data=(), topics=(FetchTopic(topic=topic, partitions=(
            FetchPartition(partition=partition, fetch_offset=offset,
                           partition_max_bytes=1_000_000),)),)))
    return resp.responses[0].partitions[0]


def latest(client: WireClient, topic: str, *, isolation: int, partition: int = 0) -> int:
    """ListOffsets v5 LATEST for one partition at an isolation level."""
    resp = client.request(ListOffsetsRequest(
        replica_id=-1, isolation_level=isolation, topics=(ListOffsetsTopic(
            name=topic, partitions=(ListOffsetsPartition(
                partition_index=partition, current_leader_epoch=-1, timestamp=-1),)),)))
    part = resp.topics[0].partitions[0]
    assert part.error_code == ErrorCode.none, part
    return int(part.offset)
