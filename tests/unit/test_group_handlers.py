"""Group and offset handlers called directly on a Broker, for every advertised version.

Clients each speak one version; these tests make sure every advertised version of the group
APIs gives a response kio can encode, with the version-specific shapes (nullable protocol
names from JoinGroup v7, batched LeaveGroup from v3, multi-group OffsetFetch from v8, ...).
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from moldau.broker.broker import Broker, RequestContext
from moldau.broker.group_service import OFFSETS_TOPIC
from moldau.broker.handlers import group_admin, groups, offsets
from moldau.config import BrokerConfig
from moldau.protocol import apis, codec
from moldau.protocol.codec import build

MS = datetime.timedelta(milliseconds=1)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    b = Broker(BrokerConfig({
        "log.dirs": str(tmp_path / "data"),
        "offsets.topic.num.partitions": "3",
        "group.initial.rebalance.delay.ms": "0",
    }))
    yield b
    b.close()


def versions(key: int) -> range:
    api = apis.SUPPORTED[key]
    return range(api.min_version, api.max_version + 1)


class Client:
    """Calls handlers the way the broker does, on one event loop with the group timer on."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    async def call(self, key: int, version: int, handler: Any, make: Callable[[Any], Any],
                   client_id: str = "unit") -> Any:
        request = make(codec.request_module(key, version))
        header = type("Header", (), {"client_id": client_id})()
        ctx = RequestContext(self.broker, header, version, codec.response_module(key, version),
                             "/10.0.0.1")
        response = await asyncio.wait_for(handler(request, ctx), 10)
        codec.encode_body(key, version, response)  # every version must encode
        return response


def run(broker: Broker, scenario: Callable[[Client], Coroutine[Any, Any, None]]) -> None:
    async def main() -> None:
        broker.groups.start()
        try:
            await scenario(Client(broker))
        finally:
            await broker.groups.stop()

    asyncio.run(main())


# -- FindCoordinator ---------------------------------------------------------------------------


@pytest.mark.parametrize("version", versions(apis.FIND_COORDINATOR))
def test_find_coordinator_every_version(broker: Broker, version: int) -> None:
    def make(key_type: int) -> Callable[[Any], Any]:
        return lambda m: build(m.FindCoordinatorRequest, key="grp", key_type=key_type,
                               coordinator_keys=("grp", "other"))

    async def scenario(c: Client) -> None:
        resp = await c.call(apis.FIND_COORDINATOR, version, groups.handle_find_coordinator,
                            make(0))
        found = resp.coordinators if version >= 4 else [resp]
        assert len(found) == (2 if version >= 4 else 1)
        assert all((f.error_code, f.node_id, f.port) == (ErrorCode.none, 0, 9092)
                   for f in found)
        topic = broker.metadata.topic(OFFSETS_TOPIC)
        assert topic is not None and topic.partitions == 3
        assert topic.configs["cleanup.policy"] == "compact"
        if version >= 1:
            for key_type, code, node in ((1, ErrorCode.none, 0),
                                         (7, ErrorCode.invalid_request, -1)):
                resp = await c.call(apis.FIND_COORDINATOR, version,
                                    groups.handle_find_coordinator, make(key_type))
                found = resp.coordinators if version >= 4 else [resp]
                assert {(f.error_code, f.node_id) for f in found} == {(code, node)}
            # Transactions: __transaction_state is created on first use, compacted.
            state = broker.metadata.topic("__transaction_state")
            assert state is not None and state.configs["cleanup.policy"] == "compact"

    run(broker, scenario)


# -- JoinGroup, SyncGroup, Heartbeat, LeaveGroup, DescribeGroups -------------------------------


def join_request(version: int, member_id: str) -> Callable[[Any], Any]:
    def make(m: Any) -> Any:
        return build(
            m.JoinGroupRequest, group_id="grp", session_timeout=10_000 * MS,
            rebalance_timeout=20_000 * MS, member_id=member_id, group_instance_id=None,
            protocol_type="consumer",
            protocols=(build(m.JoinGroupRequestProtocol, name="range", metadata=b"sub"),),
            reason=None,
        )
    return make


@pytest.mark.parametrize("version", versions(apis.JOIN_GROUP))
def test_membership_every_version(broker: Broker, version: int) -> None:
    sync_v, heartbeat_v = min(version, 5), min(version, 4)
    leave_v, describe_v = min(version, 5), min(version, 5)

    async def scenario(c: Client) -> None:
        join = await c.call(apis.JOIN_GROUP, version, groups.handle_join_group,
                            join_request(version, ""), client_id="app")
        if version >= 4:
            assert join.error_code == ErrorCode.member_id_required
            assert join.member_id.startswith("app-") and join.generation_id == -1
            if version < 7:
                assert join.protocol_name == ""  # not nullable yet
            join = await c.call(apis.JOIN_GROUP, version, groups.handle_join_group,
                                join_request(version, join.member_id), client_id="app")
        assert join.error_code == ErrorCode.none
        me = join.member_id
        assert (join.generation_id, join.leader, join.protocol_name) == (1, me, "range")
        assert [m.member_id for m in join.members] == [me]

        def sync(m: Any) -> Any:
            return build(m.SyncGroupRequest, group_id="grp", generation_id=1, member_id=me,
                         group_instance_id=None, protocol_type="consumer", protocol_name="range",
                         assignments=(build(m.SyncGroupRequestAssignment, member_id=me,
                                            assignment=b"all"),))

        synced = await c.call(apis.SYNC_GROUP, sync_v, groups.handle_sync_group, sync)
        assert (synced.error_code, synced.assignment) == (ErrorCode.none, b"all")

        def heartbeat(member: str) -> Callable[[Any], Any]:
            return lambda m: build(m.HeartbeatRequest, group_id="grp", generation_id=1,
                                   member_id=member, group_instance_id=None)

        beat = await c.call(apis.HEARTBEAT, heartbeat_v, groups.handle_heartbeat, heartbeat(me))
        assert beat.error_code == ErrorCode.none
        beat = await c.call(apis.HEARTBEAT, heartbeat_v, groups.handle_heartbeat,
                            heartbeat("x"))
        assert beat.error_code == ErrorCode.unknown_member_id

        described = await c.call(
            apis.DESCRIBE_GROUPS, describe_v, group_admin.handle_describe_groups,
            lambda m: build(m.DescribeGroupsRequest, groups=("grp", "nope"),
                            include_authorized_operations=True))
        group, missing = described.groups
        assert (group.group_state, group.protocol_type, group.protocol_data) == (
            "Stable", "consumer", "range")
        (member,) = group.members
        assert (member.member_id, member.client_id, member.client_host) == (
            me, "app", "/10.0.0.1")
        assert (member.member_metadata, member.member_assignment) == (b"sub", b"all")
        assert (missing.error_code, missing.group_state, missing.members) == (
            ErrorCode.none, "Dead", ())
        if describe_v >= 3:
            # READ, DELETE, DESCRIBE: every group operation, with no authorizer.
            assert group.authorized_operations == (1 << 3) | (1 << 6) | (1 << 8)

        def leave(members: tuple[str, ...]) -> Callable[[Any], Any]:
            if leave_v < 3:
                return lambda m: build(m.LeaveGroupRequest, group_id="grp",
                                       member_id=members[0])
            return lambda m: build(
                m.LeaveGroupRequest, group_id="grp",
                members=tuple(build(m.MemberIdentity, member_id=x, group_instance_id=None,
                                    reason=None) for x in members))

        if leave_v >= 3:
            left = await c.call(apis.LEAVE_GROUP, leave_v, groups.handle_leave_group,
                                leave((me, "ghost")))
            assert left.error_code == ErrorCode.none
            assert [m.error_code for m in left.members] == [ErrorCode.none,
                                                            ErrorCode.unknown_member_id]
        else:
            left = await c.call(apis.LEAVE_GROUP, leave_v, groups.handle_leave_group,
                                leave(("ghost",)))
            assert left.error_code == ErrorCode.unknown_member_id  # the member's error
            left = await c.call(apis.LEAVE_GROUP, leave_v, groups.handle_leave_group,
                                leave((me,)))
            assert left.error_code == ErrorCode.none
        group = broker.groups.describe_group("grp")
        assert group is not None and group.state.value == "Empty"

    run(broker, scenario)


# -- offsets -------------------------------------------------------------------------------------


# v10 names topics by id: tests/integration/test_protocol42.py covers it.
@pytest.mark.parametrize("version", [v for v in versions(apis.OFFSET_FETCH) if v < 10])
def test_offsets_every_version(broker: Broker, version: int) -> None:
    commit_v = min(max(version, 2), 9)
    broker.create_topic("orders", 2, {})

    def commit(m: Any) -> Any:
        return build(
            m.OffsetCommitRequest, group_id="grp", generation_id_or_member_epoch=-1,
            member_id="", group_instance_id=None, retention_time=-1 * MS,
            topics=(
                build(m.OffsetCommitRequestTopic, name="orders", partitions=(
                    build(m.OffsetCommitRequestPartition, partition_index=0,
                          committed_offset=5, committed_leader_epoch=2,
                          committed_metadata="five"),
                    build(m.OffsetCommitRequestPartition, partition_index=9,
                          committed_offset=1, committed_leader_epoch=-1,
                          committed_metadata=None),
                )),
                build(m.OffsetCommitRequestTopic, name="missing", partitions=(
                    build(m.OffsetCommitRequestPartition, partition_index=0,
                          committed_offset=1, committed_leader_epoch=-1,
                          committed_metadata="x" * 5000),)),
            ),
        )

    def fetch(topics: Any) -> Callable[[Any], Any]:
        def make(m: Any) -> Any:
            if version >= 8:
                wanted = None if topics is None else tuple(
                    build(m.OffsetFetchRequestTopics, name=n, partition_indexes=p)
                    for n, p in topics)
                return build(m.OffsetFetchRequest, require_stable=False, groups=(
                    build(m.OffsetFetchRequestGroup, group_id="grp", member_id=None,
                          member_epoch=-1, topics=wanted),))
            wanted = None if topics is None else tuple(
                build(m.OffsetFetchRequestTopic, name=n, partition_indexes=p)
                for n, p in topics)
            return build(m.OffsetFetchRequest, group_id="grp", topics=wanted,
                         require_stable=False)
        return make

    def flatten(resp: Any) -> dict[tuple[str, int], tuple[int, int, str | None]]:
        topics = resp.groups[0].topics if version >= 8 else resp.topics
        return {(t.name, p.partition_index): (p.committed_offset,
                                              getattr(p, "committed_leader_epoch", -1),
                                              p.metadata)
                for t in topics for p in t.partitions}

    async def scenario(c: Client) -> None:
        resp = await c.call(apis.OFFSET_COMMIT, commit_v, offsets.handle_offset_commit, commit)
        codes = {(t.name, p.partition_index): p.error_code
                 for t in resp.topics for p in t.partitions}
        assert codes == {("orders", 0): ErrorCode.none,
                         ("orders", 9): ErrorCode.unknown_topic_or_partition,
                         ("missing", 0): ErrorCode.unknown_topic_or_partition}
        resp = await c.call(apis.OFFSET_FETCH, version, offsets.handle_offset_fetch,
                            fetch([("orders", (0, 1))]))
        epoch = 2 if version >= 5 and commit_v >= 6 else -1  # sent from v6, read from v5
        assert flatten(resp) == {("orders", 0): (5, epoch, "five"), ("orders", 1): (-1, -1, "")}
        if version >= 2:
            resp = await c.call(apis.OFFSET_FETCH, version, offsets.handle_offset_fetch,
                                fetch(None))
            assert flatten(resp) == {("orders", 0): (5, epoch, "five")}

    run(broker, scenario)


@pytest.mark.parametrize("version", versions(apis.OFFSET_COMMIT))
def test_offset_commit_to_an_unknown_group_by_version(broker: Broker, version: int) -> None:
    broker.create_topic("orders", 1, {})
    found = broker.metadata.topic("orders")
    assert found is not None
    topic_id = found.topic_id  # v10 names the topic by id

    def commit(m: Any) -> Any:
        return build(
            m.OffsetCommitRequest, group_id="nobody", generation_id_or_member_epoch=3,
            member_id="m", group_instance_id=None, retention_time=-1 * MS,
            topics=(build(m.OffsetCommitRequestTopic, name="orders", topic_id=topic_id,
                          partitions=(
                build(m.OffsetCommitRequestPartition, partition_index=0, committed_offset=1,
                      committed_leader_epoch=-1, committed_metadata=""),)),))

    async def scenario(c: Client) -> None:
        resp = await c.call(apis.OFFSET_COMMIT, version, offsets.handle_offset_commit, commit)
        expected = ErrorCode.group_id_not_found if version >= 9 else ErrorCode.illegal_generation
        assert resp.topics[0].partitions[0].error_code == expected

    run(broker, scenario)


# -- ListGroups, DeleteGroups, OffsetDelete ------------------------------------------------------


@pytest.mark.parametrize("version", versions(apis.LIST_GROUPS))
def test_list_and_delete_every_version(broker: Broker, version: int) -> None:
    broker.create_topic("orders", 1, {})
    delete_v = min(version, 2)

    def commit(group: str) -> Callable[[Any], Any]:
        return lambda m: build(
            m.OffsetCommitRequest, group_id=group, generation_id_or_member_epoch=-1,
            member_id="", group_instance_id=None,
            topics=(build(m.OffsetCommitRequestTopic, name="orders", partitions=(
                build(m.OffsetCommitRequestPartition, partition_index=0, committed_offset=1,
                      committed_leader_epoch=-1, committed_metadata=""),)),))

    def listing(states: tuple[str, ...] = (), types: tuple[str, ...] = ()) -> Any:
        return lambda m: build(m.ListGroupsRequest, states_filter=states, types_filter=types)

    async def scenario(c: Client) -> None:
        for group in ("a", "b"):
            await c.call(apis.OFFSET_COMMIT, 9, offsets.handle_offset_commit, commit(group))
        resp = await c.call(apis.LIST_GROUPS, version, group_admin.handle_list_groups,
                            listing())
        assert [(g.group_id, g.protocol_type) for g in resp.groups] == [("a", ""), ("b", "")]
        if version >= 4:
            assert {g.group_state for g in resp.groups} == {"Empty"}
            resp = await c.call(apis.LIST_GROUPS, version, group_admin.handle_list_groups,
                                listing(("Stable",)))
            assert resp.groups == ()
        if version >= 5:
            assert {g.group_type for g in (await c.call(
                apis.LIST_GROUPS, version, group_admin.handle_list_groups,
                listing(types=("classic",)))).groups} == {"classic"}
        deleted = await c.call(
            apis.DELETE_GROUPS, delete_v, group_admin.handle_delete_groups,
            lambda m: build(m.DeleteGroupsRequest, groups_names=("a", "zzz")))
        assert [(r.group_id, r.error_code) for r in deleted.results] == [
            ("a", ErrorCode.none), ("zzz", ErrorCode.group_id_not_found)]

        def delete_offsets(m: Any) -> Any:
            return build(m.OffsetDeleteRequest, group_id="b", topics=(
                build(m.OffsetDeleteRequestTopic, name="orders", partitions=(
                    build(m.OffsetDeleteRequestPartition, partition_index=0),
                    build(m.OffsetDeleteRequestPartition, partition_index=3))),))

        resp = await c.call(apis.OFFSET_DELETE, 0, offsets.handle_offset_delete, delete_offsets)
        assert resp.error_code == ErrorCode.none
        assert [p.error_code for p in resp.topics[0].partitions] == [
            ErrorCode.none, ErrorCode.unknown_topic_or_partition]
        resp = await c.call(apis.OFFSET_DELETE, 0, offsets.handle_offset_delete, delete_offsets)
        assert (resp.error_code, resp.topics) == (ErrorCode.group_id_not_found, ())
        assert broker.groups.list_groups() == []

    run(broker, scenario)


def test_groups_come_back_after_a_restart(tmp_path: Path) -> None:
    config = BrokerConfig({"log.dirs": str(tmp_path / "data"),
                           "offsets.topic.num.partitions": "4"})
    first = Broker(config)
    first.create_topic("orders", 1, {})
    errors = asyncio.run(first.groups.commit_offsets("grp", "", None, -1, [
        _offset("orders", 0, 17)], 1000))
    assert set(errors.values()) == {ErrorCode.none}
    first.close()
    second = Broker(config)
    try:
        (fetched,) = second.groups.fetch_offsets("grp", [("orders", 0)])
        assert fetched[1] is not None and fetched[1].offset == 17
        assert not second.groups.loading
    finally:
        second.close()


def _offset(topic: str, partition: int, offset: int) -> Any:
    from moldau.coordinator.manager import CommittedOffset

    return CommittedOffset(topic, partition, offset)
