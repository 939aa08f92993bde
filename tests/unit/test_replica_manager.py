"""ReplicaManager inside a real Broker: partitions hosted and dropped with their topics, the
single node as leader with ISR = {self}, and handlers answering from the Partition."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from moldau.broker.broker import Broker, RequestContext
from moldau.broker.handlers import metadata
from moldau.config import BrokerConfig
from moldau.log.partition_log import AppendOrigin
from moldau.protocol import apis, codec
from moldau.protocol.codec import build
from moldau.replica import Role

from .batchgen import simple_batch

NODE = 7


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    b = Broker(BrokerConfig({"log.dirs": str(tmp_path / "data"), "node.id": str(NODE)}))
    yield b
    b.close()


def test_partitions_follow_topic_creation_growth_and_deletion(broker: Broker) -> None:
    broker.create_topic("t", 2, {})
    for p in range(2):
        hosted = broker.partition("t", p)
        assert hosted is not None
        assert (hosted.role, hosted.leader_id, hosted.leader_epoch) == (Role.LEADER, NODE, 0)
        assert hosted.isr == {NODE} and hosted.replicas == (NODE,)
    broker.add_partitions("t", 3)
    assert broker.partition("t", 2) is not None
    asyncio.run(broker.create_topic_async("u", 1, {}))
    assert broker.partition("u", 0) is not None
    broker.delete_topic("t")
    assert [broker.partition("t", p) for p in range(3)] == [None, None, None]
    asyncio.run(broker.delete_topic_async("u"))
    assert broker.partition("u", 0) is None


def test_restart_hosts_every_partition_with_its_high_watermark(tmp_path: Path) -> None:
    config = BrokerConfig({"log.dirs": str(tmp_path / "data"), "node.id": str(NODE)})
    first = Broker(config)
    first.create_topic("t", 1, {})
    hosted = first.partition("t", 0)
    assert hosted is not None
    hosted.append_as_leader(simple_batch(4), AppendOrigin.CLIENT, -1, 0)
    assert hosted.high_watermark == 4
    first.close()
    again = Broker(config)
    try:
        reopened = again.partition("t", 0)
        assert reopened is not None and reopened.is_leader
        assert reopened.high_watermark == 4 and reopened.isr == {NODE}
    finally:
        again.close()


def test_deleting_a_topic_answers_its_acks_all_waiters(broker: Broker) -> None:
    broker.create_topic("t", 1, {})
    hosted = broker.partition("t", 0)
    assert hosted is not None

    async def run() -> ErrorCode:
        # A follower that never fetches keeps the high watermark where it is.
        hosted.make_leader(1, (NODE, NODE + 1))
        hosted.append_as_leader(simple_batch(1), AppendOrigin.CLIENT, -1, 0)
        waiting = asyncio.ensure_future(broker.replicas.wait_for_acks([(hosted, 1)], 30))
        await asyncio.sleep(0)
        assert not waiting.done()
        broker.delete_topic("t")
        (code,) = await asyncio.wait_for(waiting, 5)
        return code

    assert asyncio.run(run()) is ErrorCode.not_leader_or_follower


def test_acks_all_times_out_as_request_timed_out(broker: Broker) -> None:
    broker.create_topic("t", 1, {})
    hosted = broker.partition("t", 0)
    assert hosted is not None

    async def run() -> list[ErrorCode]:
        hosted.make_leader(1, (NODE, NODE + 1))
        hosted.append_as_leader(simple_batch(1), AppendOrigin.CLIENT, -1, 0)
        return await broker.replicas.wait_for_acks([(hosted, 1)], 0.05)

    assert asyncio.run(run()) == [ErrorCode.request_timed_out]


def test_metadata_reports_the_partition_state(broker: Broker) -> None:
    broker.create_topic("t", 1, {})
    hosted = broker.partition("t", 0)
    assert hosted is not None
    hosted.make_leader(5, (NODE, 9), replicas=(NODE, 9, 11))
    version = apis.SUPPORTED[apis.METADATA].max_version
    m = codec.request_module(apis.METADATA, version)
    wanted = build(m.MetadataRequestTopic, name="t", topic_id=None)
    request = build(m.MetadataRequest, topics=(wanted,),
                    allow_auto_topic_creation=False,
                    include_topic_authorized_operations=False)
    ctx = RequestContext(broker, None, version, codec.response_module(apis.METADATA, version))
    response = asyncio.run(metadata.handle(request, ctx))
    (part,) = response.topics[0].partitions
    assert (part.leader_id, part.leader_epoch) == (NODE, 5)
    assert part.replica_nodes == (NODE, 9, 11) and part.isr_nodes == (NODE, 9)


def test_high_watermarks_are_checkpointed_on_their_own_interval(tmp_path: Path) -> None:
    """replica.high.watermark.checkpoint.interval.ms, not the log's 60 s checkpoint interval."""
    data = tmp_path / "data"
    broker = Broker(BrokerConfig({"log.dirs": str(data), "node.id": str(NODE),
                                  "replica.high.watermark.checkpoint.interval.ms": "20"}))
    checkpoint = data / "replication-offset-checkpoint"

    async def run() -> str:
        broker.start_background()
        try:
            broker.create_topic("t", 1, {})
            hosted = broker.partition("t", 0)
            assert hosted is not None
            hosted.append_as_leader(simple_batch(3), AppendOrigin.CLIENT, -1, 0)
            for _ in range(250):  # at most 5 s
                text = checkpoint.read_text() if checkpoint.exists() else ""
                if "t 0 3" in text:
                    return text
                await asyncio.sleep(0.02)
            return checkpoint.read_text() if checkpoint.exists() else ""
        finally:
            await broker.stop_background()

    try:
        assert "t 0 3" in asyncio.run(run())
        assert not (data / "recovery-point-offset-checkpoint").exists(), \
            "the log checkpoints keep their own (60 s) interval"
    finally:
        broker.close()
