"""ConsumerGroupHeartbeat/ConsumerGroupDescribe handlers and their interplay with the offsets
and classic group APIs, called the way the broker calls them (every version must encode)."""

from __future__ import annotations

from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from moldau.broker.broker import Broker
from moldau.broker.handlers import consumer_groups, group_admin, groups, offsets
from moldau.protocol import apis
from moldau.protocol.codec import build

from .test_group_handlers import MS, Client, broker, join_request, run, versions

__all__ = ["broker"]  # the fixture, re-used


def heartbeat(member_id: str, epoch: int, topics: tuple[str, ...] | None = ("orders",),
              regex: str | None = None, owned: Any = None) -> Any:
    def make(m: Any) -> Any:
        return build(m.ConsumerGroupHeartbeatRequest, group_id="grp", member_id=member_id,
                     member_epoch=epoch, instance_id=None, rack_id=None,
                     rebalance_timeout=(30_000 if epoch == 0 else -1) * MS,
                     subscribed_topic_names=topics, subscribed_topic_regex=regex,
                     server_assignor=None, topic_partitions=owned)
    return make


def commit(epoch: int, member_id: str) -> Any:
    def make(m: Any) -> Any:
        return build(
            m.OffsetCommitRequest, group_id="grp", generation_id_or_member_epoch=epoch,
            member_id=member_id, group_instance_id=None, retention_time=-1 * MS,
            topics=(build(m.OffsetCommitRequestTopic, name="orders", partitions=(
                build(m.OffsetCommitRequestPartition, partition_index=0, committed_offset=7,
                      committed_leader_epoch=-1, committed_metadata=""),)),))
    return make


def fetch(member_id: str, epoch: int) -> Any:
    def make(m: Any) -> Any:
        return build(m.OffsetFetchRequest, require_stable=False, groups=(
            build(m.OffsetFetchRequestGroup, group_id="grp", member_id=member_id,
                  member_epoch=epoch, topics=None),))
    return make


@pytest.mark.parametrize("version", versions(apis.CONSUMER_GROUP_HEARTBEAT))
def test_heartbeat_describe_offsets_and_exclusion(broker: Broker, version: int) -> None:
    broker.create_topic("orders", 2, {})
    topic = broker.metadata.topic("orders")
    assert topic is not None
    given = "client-made-id" if version >= 1 else ""

    async def scenario(c: Client) -> None:
        hb = consumer_groups.handle_consumer_group_heartbeat
        resp = await c.call(apis.CONSUMER_GROUP_HEARTBEAT, version, hb, heartbeat(given, 0))
        assert resp.error_code == ErrorCode.none, resp.error_message
        member = resp.member_id
        assert member and (version == 0 or member == given)
        assert resp.member_epoch == 1 and resp.heartbeat_interval == 5000 * MS
        assert resp.assignment is not None
        (entry,) = resp.assignment.topic_partitions
        assert (entry.topic_id, entry.partitions) == (topic.topic_id, (0, 1))

        if version >= 1:
            bad = await c.call(apis.CONSUMER_GROUP_HEARTBEAT, version, hb,
                               heartbeat("other", 0, None, regex="ord.*"))
            assert bad.error_code == ErrorCode.invalid_request
        unknown = await c.call(apis.CONSUMER_GROUP_HEARTBEAT, version, hb,
                               heartbeat("nobody", 3))
        assert unknown.error_code == ErrorCode.unknown_member_id

        for v in versions(apis.CONSUMER_GROUP_DESCRIBE):
            desc = await c.call(
                apis.CONSUMER_GROUP_DESCRIBE, v, consumer_groups.handle_consumer_group_describe,
                lambda m: build(m.ConsumerGroupDescribeRequest, group_ids=("grp", "none"),
                                include_authorized_operations=False))
            found, missing = desc.groups
            assert (found.error_code, found.group_state, found.group_epoch) == (
                ErrorCode.none, "Stable", 1)
            assert found.assignor_name == "uniform"
            assert [mem.member_id for mem in found.members] == [member]
            assert found.members[0].assignment.topic_partitions[0].partitions == (0, 1)
            assert missing.error_code == ErrorCode.group_id_not_found

        resp = await c.call(apis.OFFSET_COMMIT, 9, offsets.handle_offset_commit,
                            commit(0, member))
        assert resp.topics[0].partitions[0].error_code == ErrorCode.stale_member_epoch
        resp = await c.call(apis.OFFSET_COMMIT, 9, offsets.handle_offset_commit,
                            commit(1, member))
        assert resp.topics[0].partitions[0].error_code == ErrorCode.none
        resp = await c.call(apis.OFFSET_FETCH, 9, offsets.handle_offset_fetch, fetch(member, 0))
        assert resp.groups[0].error_code == ErrorCode.stale_member_epoch
        resp = await c.call(apis.OFFSET_FETCH, 9, offsets.handle_offset_fetch, fetch(member, 1))
        assert resp.groups[0].error_code == ErrorCode.none
        assert resp.groups[0].topics[0].partitions[0].committed_offset == 7

        joined = await c.call(apis.JOIN_GROUP, 9, groups.handle_join_group,
                              join_request(9, ""))
        assert joined.error_code == ErrorCode.inconsistent_group_protocol
        listed = await c.call(apis.LIST_GROUPS, 5, group_admin.handle_list_groups,
                              lambda m: build(m.ListGroupsRequest, states_filter=(),
                                              types_filter=("consumer",)))
        assert [(g.group_id, g.group_type) for g in listed.groups] == [("grp", "consumer")]

        left = await c.call(apis.CONSUMER_GROUP_HEARTBEAT, version, hb,
                            heartbeat(member, -1, None))
        assert (left.error_code, left.member_epoch) == (ErrorCode.none, -1)

    run(broker, scenario)
