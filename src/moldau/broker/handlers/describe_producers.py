"""DescribeProducers (KIP-664): the active producers of partitions, as their leader knows them.

``kafka-transactions.sh describe-producers`` and ``moldau transaction abort`` use it to find
a hanging transaction: each producer's epoch, last sequence and timestamp, the epoch of the
coordinator that last wrote a marker for it, and the first offset of its open transaction on
that partition (-1 when none). The answer comes from the partition's producer state
(log/producer_state.py), only on its leader, as Kafka does: a follower or a broker hosting the
partition's topic elsewhere answers NOT_LEADER_OR_FOLLOWER, an unknown topic or partition
UNKNOWN_TOPIC_OR_PARTITION, a partition whose log dir failed KAFKA_STORAGE_ERROR.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from ...protocol.codec import build
from ...replica import Partition
from .. import authz
from ..broker import Broker, RequestContext
from .api_versions import NO_THROTTLE
from .pacing import Pacer

NO_TXN = -1
NO_COORDINATOR_EPOCH = -1


def _producers(m: Any, partition: Partition) -> tuple[Any, ...]:
    state = partition.log.producers
    ongoing = getattr(state, "ongoing_transaction", None)
    producers = []
    for pid, entry in list(state.producers.items()):
        first = ongoing(pid) if ongoing is not None else None
        producers.append(build(
            m.ProducerState,
            producer_id=pid,
            producer_epoch=entry.epoch,
            last_sequence=entry.last_seq,
            last_timestamp=entry.last_timestamp,
            coordinator_epoch=getattr(entry, "coordinator_epoch", NO_COORDINATOR_EPOCH),
            current_txn_start_offset=NO_TXN if first is None else first,
        ))
    return tuple(producers)


def _partition(m: Any, broker: Broker, topic: str, index: int) -> Any:
    partition = broker.partition(topic, index)
    if partition is None:
        code = broker.not_hosted_error(topic, index)
        message = None
    elif partition.offline:
        code, message = ErrorCode.kafka_storage_error, None
    elif not partition.is_leader:
        code = ErrorCode.not_leader_or_follower
        message = f"broker {broker.node_id} is not the leader of {topic}-{index}"
    else:
        return build(m.PartitionResponse, partition_index=index, error_code=ErrorCode.none,
                     error_message=None, active_producers=_producers(m, partition))
    return build(m.PartitionResponse, partition_index=index, error_code=code,
                 error_message=message, active_producers=())


async def handle(request: Any, ctx: RequestContext) -> Any:
    m = ctx.resp
    pacer = Pacer()
    topics = []
    for topic in request.topics:
        partitions = []
        if not authz.allowed(ctx, authz.Op.READ, authz.TOPIC, topic.name):
            # Kafka: READ on the topic.
            topics.append(build(m.TopicResponse, name=topic.name, partitions=tuple(
                build(m.PartitionResponse, partition_index=index,
                      error_code=ErrorCode.topic_authorization_failed, error_message=None,
                      active_producers=()) for index in topic.partition_indexes)))
            continue
        for index in topic.partition_indexes:
            partitions.append(_partition(m, ctx.broker, topic.name, index))
            await pacer.tick()
        topics.append(build(m.TopicResponse, name=topic.name, partitions=tuple(partitions)))
    return build(m.DescribeProducersResponse, throttle_time=NO_THROTTLE, topics=tuple(topics))
