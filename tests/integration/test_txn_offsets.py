"""Transactional offset commits on a real broker, over raw requests (KIP-98, KIP-447).

TxnOffsetCommit is what a transactional producer's ``send_offsets_to_transaction`` sends.
Its offsets must stay invisible to OffsetFetch until the producer's COMMIT marker reaches the
group's ``__consumer_offsets`` partition: a client that asks for stable offsets (v7+) is told
UNSTABLE_OFFSET_COMMIT meanwhile, any other sees the last committed value; a restart keeps
them pending. The COMMIT marker (WriteTxnMarkers, as the transaction coordinator sends it)
makes them committed, an ABORT drops them, and a restart replays both. The error answers
follow Kafka's for bad input.
"""

from __future__ import annotations

import datetime
from typing import Any

from confluent_kafka import TopicPartition
from kio.schema.errors import ErrorCode
from kio.schema.init_producer_id.v0.request import InitProducerIdRequest
from kio.schema.metadata.v12 import request as metadata_v12
from kio.schema.offset_commit.v8 import request as commit_v8
from kio.schema.offset_fetch.v7 import request as fetch_v7
from kio.schema.offset_fetch.v8 import request as fetch_v8
from kio.schema.txn_offset_commit.v0 import request as txn_v0
from kio.schema.txn_offset_commit.v3 import request as txn_v3
from kio.schema.txn_offset_commit.v5 import request as txn_v5

from moldau.broker.group_service import OFFSETS_TOPIC
from moldau.coordinator.hashing import partition_for
from tests.helpers import BrokerProcess

from .clients import consume, consumer, create_topic, produce_all, producer, unique
from .txn_wire import write_markers
from .wire import WireClient


def new_producer_id(client: WireClient) -> int:
    return int(client.request(InitProducerIdRequest(
        transactional_id=None, transaction_timeout=datetime.timedelta(seconds=60),
    )).producer_id)


def plain_commit(client: WireClient, group: str, topic: str, offsets: dict[int, int]) -> None:
    response = client.request(commit_v8.OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=-1, member_id="",
        group_instance_id=None, topics=(commit_v8.OffsetCommitRequestTopic(
            name=topic, partitions=tuple(commit_v8.OffsetCommitRequestPartition(
                partition_index=p, committed_offset=o, committed_metadata="")
                for p, o in offsets.items())),)))
    assert all(p.error_code is ErrorCode.none
               for t in response.topics for p in t.partitions), response


def txn_commit(client: WireClient, group: str, pid: int, offsets: dict[tuple[str, int], int],
               *, mod: Any = txn_v5, generation: int = -1, member: str = "",
               metadata: str = "", epoch: int = 0) -> dict[tuple[str, int], ErrorCode]:
    """TxnOffsetCommit; each partition's error."""
    topics: dict[str, list[Any]] = {}
    for (topic, partition), offset in offsets.items():
        topics.setdefault(topic, []).append(mod.TxnOffsetCommitRequestPartition(
            partition_index=partition, committed_offset=offset, committed_metadata=metadata))
    member_fields = {"generation_id": generation, "member_id": member,
                     "group_instance_id": None} if mod is not txn_v0 else {}  # KIP-447: v3+
    response = client.request(mod.TxnOffsetCommitRequest(
        transactional_id="txn-offsets-test", group_id=group, producer_id=pid,
        producer_epoch=epoch, **member_fields, topics=tuple(
            mod.TxnOffsetCommitRequestTopic(name=name, partitions=tuple(parts))
            for name, parts in topics.items())))
    return {(t.name, p.partition_index): p.error_code
            for t in response.topics for p in t.partitions}


def fetch(client: WireClient, group: str, topic: str, partitions: tuple[int, ...], *,
          stable: bool, v8: bool = False) -> dict[int, tuple[int, ErrorCode]]:
    """OffsetFetch (v7, or v8 with its group array): partition -> (offset, error)."""
    if v8:
        response = client.request(fetch_v8.OffsetFetchRequest(
            groups=(fetch_v8.OffsetFetchRequestGroup(group_id=group, topics=(
                fetch_v8.OffsetFetchRequestTopics(name=topic, partition_indexes=partitions),
            )),), require_stable=stable))
        assert response.groups[0].error_code is ErrorCode.none
        topics = response.groups[0].topics
    else:
        response = client.request(fetch_v7.OffsetFetchRequest(
            group_id=group, topics=(fetch_v7.OffsetFetchRequestTopic(
                name=topic, partition_indexes=partitions),), require_stable=stable))
        assert response.error_code is ErrorCode.none
        topics = response.topics
    return {p.partition_index: (int(p.committed_offset), p.error_code)
            for t in topics for p in t.partitions}


def test_pending_offsets_are_unstable_until_the_marker(broker: BrokerProcess) -> None:
    topic, group = unique("txo-in"), unique("txo-group")
    create_topic(broker.bootstrap, topic, 2)
    with WireClient.to(broker.bootstrap) as client:
        pid = new_producer_id(client)
        plain_commit(client, group, topic, {0: 5})
        assert txn_commit(client, group, pid, {(topic, 0): 10, (topic, 1): 3}) == {
            (topic, 0): ErrorCode.none, (topic, 1): ErrorCode.none}
        unstable = ErrorCode.unstable_offset_commit
        assert fetch(client, group, topic, (0, 1), stable=True) == {
            0: (-1, unstable), 1: (-1, unstable)}
        assert fetch(client, group, topic, (0, 1), stable=True, v8=True) == {
            0: (-1, unstable), 1: (-1, unstable)}
        # Without require_stable: the last committed value.
        assert fetch(client, group, topic, (0, 1), stable=False) == {
            0: (5, ErrorCode.none), 1: (-1, ErrorCode.none)}
        # Abort (no open transaction left behind on the shared broker's offsets partition).
        end_transaction(client, group, pid, commit=False)
        assert fetch(client, group, topic, (0, 1), stable=True) == {
            0: (5, ErrorCode.none), 1: (-1, ErrorCode.none)}


def test_bad_commits_get_kafkas_errors(broker: BrokerProcess) -> None:
    topic, group = unique("txo-bad"), unique("txo-group")
    create_topic(broker.bootstrap, topic, 1)
    with WireClient.to(broker.bootstrap) as client:
        pid = new_producer_id(client)
        assert txn_commit(client, group, pid, {(topic, 0): 1, (topic, 7): 1,
                                               ("no-such-topic", 0): 1}) == {
            (topic, 0): ErrorCode.none,
            (topic, 7): ErrorCode.unknown_topic_or_partition,
            ("no-such-topic", 0): ErrorCode.unknown_topic_or_partition}
        assert txn_commit(client, "", pid, {(topic, 0): 1}) == {
            (topic, 0): ErrorCode.invalid_group_id}
        assert txn_commit(client, group, pid, {(topic, 0): 1}, metadata="m" * 5000) == {
            (topic, 0): ErrorCode.offset_metadata_too_large}
        # KIP-447 (v3+): a generation or member the group does not have.
        assert txn_commit(client, group, pid, {(topic, 0): 1}, mod=txn_v3,
                          generation=7) == {(topic, 0): ErrorCode.illegal_generation}
        assert txn_commit(client, group, pid, {(topic, 0): 1}, mod=txn_v3,
                          member="ghost") == {(topic, 0): ErrorCode.unknown_member_id}
        assert txn_commit(client, group, -1, {(topic, 0): 1}) == {
            (topic, 0): ErrorCode.invalid_producer_id_mapping}
        # v0 (aiokafka's version) works like the others.
        assert txn_commit(client, group, pid, {(topic, 0): 2}, mod=txn_v0) == {
            (topic, 0): ErrorCode.none}
        # The broker still serves the good ones.
        assert txn_commit(client, group, pid, {(topic, 0): 2}) == {(topic, 0): ErrorCode.none}
        # Once the offsets partition has seen epoch 1 of the producer, epoch 0 is fenced.
        assert txn_commit(client, group, pid, {(topic, 0): 3}, epoch=1) == {
            (topic, 0): ErrorCode.none}
        assert txn_commit(client, group, pid, {(topic, 0): 4}, epoch=0) == {
            (topic, 0): ErrorCode.invalid_producer_epoch}
        end_transaction(client, group, pid, commit=False, epoch=1)


def test_restart_keeps_offsets_pending(make_broker: Any) -> None:
    broker = make_broker()
    topic, group = unique("txo-restart"), unique("txo-group")
    create_topic(broker.bootstrap, topic, 1)
    with WireClient.to(broker.bootstrap) as client:
        pid = new_producer_id(client)
        plain_commit(client, group, topic, {0: 5})
        assert txn_commit(client, group, pid, {(topic, 0): 10}) == {(topic, 0): ErrorCode.none}
    broker.restart()
    with WireClient.to(broker.bootstrap) as client:
        assert fetch(client, group, topic, (0,), stable=True) == {
            0: (-1, ErrorCode.unstable_offset_commit)}
        assert fetch(client, group, topic, (0,), stable=False) == {0: (5, ErrorCode.none)}


def _offsets_partition(client: WireClient, group: str) -> int:
    """The ``__consumer_offsets`` partition of a group (Kafka's hashing of the group id)."""
    response = client.request(metadata_v12.MetadataRequest(
        topics=(metadata_v12.MetadataRequestTopic(name=OFFSETS_TOPIC, topic_id=None),),
        allow_auto_topic_creation=False, include_topic_authorized_operations=False))
    return partition_for(group, len(response.topics[0].partitions))


def end_transaction(client: WireClient, group: str, pid: int, commit: bool,
                    epoch: int = 0) -> None:
    """WriteTxnMarkers for the group's offsets partition, as the transaction coordinator."""
    partition = _offsets_partition(client, group)
    assert write_markers(client, OFFSETS_TOPIC, pid, commit, (partition,),
                         epoch=epoch) == [ErrorCode.none]


def test_markers_commit_or_drop_and_a_restart_replays_them(make_broker: Any) -> None:
    broker = make_broker()
    topic = unique("txo-markers")
    committed, aborted, open_ = (unique("txo-commit"), unique("txo-abort"), unique("txo-open"))
    create_topic(broker.bootstrap, topic, 1)
    tp = (topic, 0)
    with WireClient.to(broker.bootstrap) as client:
        pids = [new_producer_id(client) for _ in range(3)]
        for group, pid in zip((committed, aborted, open_), pids, strict=True):
            plain_commit(client, group, topic, {0: 5})
            assert txn_commit(client, group, pid, {tp: 10 + pid % 7}) == {tp: ErrorCode.none}
        end_transaction(client, committed, pids[0], commit=True)
        end_transaction(client, aborted, pids[1], commit=False)
        expected = {committed: (10 + pids[0] % 7, ErrorCode.none),
                    aborted: (5, ErrorCode.none),
                    open_: (-1, ErrorCode.unstable_offset_commit)}
        for group, answer in expected.items():
            assert fetch(client, group, topic, (0,), stable=True) == {0: answer}, group
    broker.restart()
    with WireClient.to(broker.bootstrap) as client:
        for group, answer in expected.items():
            assert fetch(client, group, topic, (0,), stable=True) == {0: answer}, group
        # The open transaction ends after the restart: its offsets become committed.
        end_transaction(client, open_, pids[2], commit=True)
        assert fetch(client, open_, topic, (0,), stable=True) == {
            0: (10 + pids[2] % 7, ErrorCode.none)}


# -- end to end: confluent-kafka's send_offsets_to_transaction --------------------------------


def _committed(bootstrap: str, group: str, tp: TopicPartition) -> int:
    """The group's committed offset as a read_committed consumer sees it (librdkafka then
    asks for stable offsets and retries while they are unstable)."""
    c = consumer(bootstrap, **{"group.id": group, "isolation.level": "read_committed"})
    try:
        (found,) = c.committed([tp], timeout=30)
        return int(found.offset)
    finally:
        c.close()


def _transaction(c: Any, p: Any, sink: str, count: int, *, commit: bool) -> None:
    """Consume ``count`` records, produce them to ``sink`` and send the consumer's position
    with the transaction, then commit or abort it."""
    records = consume(c, count, timeout=30)
    p.begin_transaction()
    for record in records:
        p.produce(sink, value=record.value())
    p.send_offsets_to_transaction(c.position(c.assignment()), c.consumer_group_metadata(), 30)
    if commit:
        p.commit_transaction(30)
    else:
        p.abort_transaction(30)


def test_send_offsets_to_transaction_commits_only_with_the_transaction(make_broker: Any
                                                                       ) -> None:
    broker = make_broker()
    source, sink, group = unique("txo-src"), unique("txo-sink"), unique("txo-eos")
    create_topic(broker.bootstrap, source, 1)
    create_topic(broker.bootstrap, sink, 1)
    produce_all(producer(broker.bootstrap), source,
                [{"value": f"v{i}".encode()} for i in range(15)])
    tp = TopicPartition(source, 0)
    c = consumer(broker.bootstrap, **{"group.id": group, "auto.offset.reset": "earliest",
                                      "isolation.level": "read_committed"})
    p = producer(broker.bootstrap, **{"transactional.id": unique("txo-tid")})
    try:
        c.subscribe([source])
        p.init_transactions(30)

        _transaction(c, p, sink, 10, commit=True)
        assert _committed(broker.bootstrap, group, tp) == 10
        _transaction(c, p, sink, 5, commit=False)  # consumed up to 15, but the offsets are aborted
        assert _committed(broker.bootstrap, group, tp) == 10
    finally:
        c.close()
    del p  # librdkafka's producer goes before its broker restarts
    broker.restart()
    assert _committed(broker.bootstrap, group, tp) == 10
