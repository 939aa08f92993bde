"""State created through a new API version never breaks an answer in an old one.

Legacy (non-flexible) versions carry strings with an int16 length, at most 32,767 bytes.
Flexible versions could carry longer ones, and a group created with such an id made every
ListGroups v0-v2 fail to encode ("String is too long for legacy string format") and close its
connection, for every client. moldau does what Kafka's generated readers do: a string field
over 32,767 bytes is refused in every version, so the request's connection is closed and no
such group ever exists. Member ids are built from the client id (Kafka's ``<client id>-<uuid>``,
and a client id may itself be 32,767 bytes long), so moldau shortens the client-id part to keep
every member id within what DescribeGroups v0 and JoinGroup v0 can answer.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from moldau.protocol import codec
from tests.helpers import BrokerProcess

from .clients import create_topic, unique
from .wire import WireClient, encode_body, frame, request_header

pytestmark = pytest.mark.timeout(90)

LEGACY_LIMIT = 0x7FFF
NONE = 0


@pytest.fixture(scope="module")
def groups_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path_factory.mktemp("legacy-answers"), overrides=(
        "group.initial.rebalance.delay.ms=0",)).start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="module")
def topic(groups_broker: BrokerProcess) -> str:
    name = unique("committed")
    create_topic(groups_broker.bootstrap, name)
    return name


def _ms(ms: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=ms)


def _join_v6(group_id: str, topic: str) -> Any:
    mod = codec.request_module(11, 6)
    return mod.JoinGroupRequest(
        group_id=group_id, session_timeout=_ms(10_000), rebalance_timeout=_ms(10_000),
        member_id="", group_instance_id=None, protocol_type="consumer",
        protocols=(mod.JoinGroupRequestProtocol(name="range", metadata=b""),))


def _heartbeat_v0(group_id: str, topic: str) -> Any:
    mod = codec.request_module(68, 0)
    return mod.ConsumerGroupHeartbeatRequest(
        group_id=group_id, member_id=str(uuid.uuid4()), member_epoch=0,
        instance_id=None, rack_id=None, rebalance_timeout=_ms(10_000),
        subscribed_topic_names=(topic,), server_assignor=None, topic_partitions=())


def _commit_v8(group_id: str, topic: str) -> Any:
    mod = codec.request_module(8, 8)
    return mod.OffsetCommitRequest(
        group_id=group_id, generation_id_or_member_epoch=-1, member_id="",
        group_instance_id=None, topics=(mod.OffsetCommitRequestTopic(name=topic, partitions=(
            mod.OffsetCommitRequestPartition(partition_index=0, committed_offset=0,
                                             committed_leader_epoch=-1,
                                             committed_metadata=None),)),))


CREATORS: dict[str, Callable[[str, str], Any]] = {
    "JoinGroup-v6": _join_v6,
    "ConsumerGroupHeartbeat-v0": _heartbeat_v0,
    "OffsetCommit-v8": _commit_v8,
}


def _list_groups(bootstrap: str, version: int) -> list[str]:
    cls = codec.request_module(16, version).ListGroupsRequest
    with WireClient.to(bootstrap) as wire:
        resp = wire.request(cls() if version < 4 else cls(states_filter=()))
    assert int(resp.error_code) == NONE
    return [g.group_id for g in resp.groups]


@pytest.mark.parametrize("creator", list(CREATORS))
def test_group_id_over_32767_bytes_is_refused(groups_broker: BrokerProcess, topic: str,
                                              creator: str) -> None:
    long_id = "g" * (LEGACY_LIMIT + 1)
    with WireClient.to(groups_broker.bootstrap) as wire:
        wire.send_request(CREATORS[creator](long_id, topic))
        assert wire.wait_closed(10), f"{creator} with a {len(long_id)}-byte group id answered"
    assert groups_broker.is_running()
    for version in (0, 2, 5):
        assert long_id not in _list_groups(groups_broker.bootstrap, version)


def test_group_id_of_32767_bytes_is_listed_by_every_version(groups_broker: BrokerProcess,
                                                            topic: str) -> None:
    at_limit = unique("h").ljust(LEGACY_LIMIT, "h")
    with WireClient.to(groups_broker.bootstrap) as wire:
        resp = wire.request(_commit_v8(at_limit, topic))
    assert int(resp.topics[0].partitions[0].error_code) == NONE
    for version in (0, 2, 5):
        assert at_limit in _list_groups(groups_broker.bootstrap, version)


def test_member_ids_of_long_client_ids_fit_legacy_versions(groups_broker: BrokerProcess
                                                           ) -> None:
    client_id = "c" * LEGACY_LIMIT  # the longest a request header can carry
    group = unique("long-client")
    join = codec.request_module(11, 0).JoinGroupRequest(
        group_id=group, session_timeout=_ms(10_000), member_id="", protocol_type="consumer",
        protocols=(codec.request_module(11, 0).JoinGroupRequestProtocol(
            name="range", metadata=b""),))
    with WireClient.to(groups_broker.bootstrap) as wire:
        wire.send_raw(frame(request_header(11, 0, 7, client_id) + encode_body(join)))
        resp = wire.read_response(11, 0, 7)
    assert int(resp.error_code) == NONE
    member_id = resp.member_id
    assert len(member_id.encode()) <= LEGACY_LIMIT and member_id.startswith("ccc")
    describe = codec.request_module(15, 0).DescribeGroupsRequest(groups=(group,))
    with WireClient.to(groups_broker.bootstrap) as wire:
        described = wire.request(describe)
    assert [m.member_id for m in described.groups[0].members] == [member_id]
    assert described.groups[0].members[0].client_id == client_id
