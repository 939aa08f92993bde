"""Consumer groups end to end: real clients in a group against a real broker.

The confluent-kafka members run as separate processes (``group_worker.py``) so that one can be
``kill -9``-ed: a crashed consumer sends no LeaveGroup, and only its session timeout tells the
coordinator it is gone. Each worker commits every record it processes before polling again
and reports each commit that succeeded, which gives the central check of this module: over
joins, rebalances and crashes, the group's *committed* progress covers every record exactly
once. A record committed twice would mean two members owned a partition at the same time (or
a member resumed before the committed offset); a record never committed would mean the group
skipped it.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer
from confluent_kafka import Consumer, TopicPartition
from kafka import KafkaConsumer
from kio.schema.errors import ErrorCode
from kio.schema.heartbeat.v4.request import HeartbeatRequest
from kio.schema.join_group.v9.request import JoinGroupRequest, JoinGroupRequestProtocol
from kio.schema.leave_group.v5.request import LeaveGroupRequest, MemberIdentity
from kio.schema.offset_commit.v9.request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kio.schema.offset_fetch.v9.request import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopics,
)
from kio.schema.sync_group.v5.request import SyncGroupRequest, SyncGroupRequestAssignment

from tests.helpers import terminate
from tests.integration.clients import create_topic, producer
from tests.integration.wire import WireClient

WORKER = Path(__file__).with_name("group_worker.py")
BOUND_S = 40.0  # every wait here gives up after this long
SESSION_MS = 6000
#: kafka-python and aiokafka heartbeat from Python threads/tasks, which a loaded test machine
#: can stall for seconds; nothing here waits for their sessions to expire.
PY_SESSION_MS = 20000


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def wait_for(what: str, condition: Callable[[], Any], timeout: float = BOUND_S,
             detail: Callable[[], str] | None = None) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = condition()
        if result:
            return result
        time.sleep(0.05)
    extra = f": {detail()}" if detail is not None else ""
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}{extra}")


def produce_numbered(bootstrap: str, topic: str, partitions: int, per_partition: int,
                     tag: str) -> set[tuple[int, str]]:
    """``per_partition`` records into each partition; returns (partition, value) pairs."""
    p = producer(bootstrap)
    sent = set()
    for partition in range(partitions):
        for i in range(per_partition):
            value = f"{tag}-{partition}-{i}"
            p.produce(topic, value.encode(), partition=partition)
            sent.add((partition, value))
    assert p.flush(15) == 0
    return sent


class Worker:
    """A ``group_worker.py`` process and the events it reported so far."""

    def __init__(self, bootstrap: str, topic: str, group: str, workdir: Path, name: str,
                 **config: Any) -> None:
        self.name = name
        settings = {"bootstrap": bootstrap, "topic": topic, "group": group, "config": config}
        self._stderr = (workdir / f"{name}.stderr").open("wb")
        self.proc = subprocess.Popen([sys.executable, str(WORKER), json.dumps(settings)],
                                     stdout=subprocess.PIPE, stderr=self._stderr, text=True)
        self.events: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._lock:
                self.events.append(json.loads(line))

    def snapshot(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.events)

    def assignment(self) -> frozenset[int]:
        """The current assignment, replayed from the callbacks (eager or incremental)."""
        owned: set[int] = set()
        for event in self.snapshot():
            if event["event"] == "assign":
                owned |= set(event["partitions"])
            elif event["event"] in ("revoke", "lost"):
                owned -= set(event["partitions"])
        return frozenset(owned)

    def count(self, kind: str) -> int:
        return sum(1 for e in self.snapshot() if e["event"] == kind)

    def committed(self) -> list[tuple[int, int]]:
        return [(e["partition"], e["offset"]) for e in self.snapshot()
                if e["event"] == "committed"]

    def kill9(self) -> None:
        self.proc.kill()
        self.proc.wait()
        self._reader.join(5)

    def stop(self) -> None:
        terminate(self.proc, 20)
        self._reader.join(5)
        self._stderr.close()


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Callable[..., Worker]]:
    started: list[Worker] = []

    def start(bootstrap: str, topic: str, group: str, **config: Any) -> Worker:
        worker = Worker(bootstrap, topic, group, tmp_path, f"w{len(started)}", **config)
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.stop()


def balanced(members: Iterable[Worker], partitions: int) -> bool:
    """Every member owns something, nobody shares, and all partitions are owned."""
    owned = [w.assignment() for w in members]
    union = frozenset().union(*owned)
    return (all(owned) and sum(len(o) for o in owned) == len(union)
            and union == frozenset(range(partitions)))


def commit_report(members: Iterable[Worker], expected: Counter[int]) -> str:
    """What is missing, and every failed commit or error the members reported."""
    got = {rec for w in members for rec in w.committed()}
    missing = sorted((p, o) for p, n in expected.items() for o in range(n) if (p, o) not in got)
    trouble = [(w.name, e) for w in members for e in w.snapshot()
               if e["event"] in ("commit_failed", "error")]
    return f"missing {missing}; failures {trouble}"


def committed_exactly_once(members: Iterable[Worker], expected: Counter[int]) -> bool:
    """Whether every record (partition, offset) has been committed, once: ``expected`` maps
    partition -> number of records produced to it."""
    counts = Counter(rec for w in members for rec in w.committed())
    wanted = Counter({(p, o): 1 for p, n in expected.items() for o in range(n)})
    duplicates = {rec: n for rec, n in counts.items() if n > 1}
    assert not duplicates, f"records committed more than once: {duplicates}"
    return counts == wanted


# -- confluent-kafka ----------------------------------------------------------------------------


def test_members_share_partitions_and_commit_every_record_once(
        broker: Any, topic_name: str, workers: Callable[..., Worker]) -> None:
    bootstrap = broker.bootstrap
    create_topic(bootstrap, topic_name, partitions=6)
    group = unique("g")
    produced: Counter[int] = Counter()
    produce_numbered(bootstrap, topic_name, 6, 10, "a")
    produced.update({p: 10 for p in range(6)})

    first = [workers(bootstrap, topic_name, group) for _ in range(3)]
    wait_for("three members with disjoint assignments covering the topic",
             lambda: balanced(first, 6))
    wait_for("every record committed", lambda: committed_exactly_once(first, produced),
             detail=lambda: commit_report(first, produced))

    # A fourth member joins while records arrive: the work is spread over four.
    fourth = workers(bootstrap, topic_name, group)
    produce_numbered(bootstrap, topic_name, 6, 10, "b")
    produced.update({p: 10 for p in range(6)})
    everybody = [*first, fourth]
    wait_for("four balanced members", lambda: balanced(everybody, 6))
    assert sorted(len(w.assignment()) for w in everybody) == [1, 1, 2, 2]
    wait_for("every record committed", lambda: committed_exactly_once(everybody, produced),
             detail=lambda: commit_report(everybody, produced))

    # One member crashes (no LeaveGroup). Its partitions stay unowned for a session timeout.
    victim = first[1]
    orphaned = victim.assignment()
    victim.kill9()
    killed_at = time.monotonic()
    survivors = [w for w in everybody if w is not victim]
    produce_numbered(bootstrap, topic_name, 6, 10, "c")
    produced.update({p: 10 for p in range(6)})
    wait_for("the survivors to take over", lambda: balanced(survivors, 6))
    moved_after = time.monotonic() - killed_at
    assert moved_after >= (SESSION_MS - 1000) / 1000, (
        f"partitions {sorted(orphaned)} moved {moved_after:.1f} s after the crash, "
        "before the session timeout")
    wait_for("every record committed", lambda: committed_exactly_once(everybody, produced),
             detail=lambda: commit_report(everybody, produced))


def test_cooperative_sticky_rebalances_incrementally(
        broker: Any, topic_name: str, workers: Callable[..., Worker]) -> None:
    bootstrap = broker.bootstrap
    create_topic(bootstrap, topic_name, partitions=6)
    group = unique("coop")
    produce_numbered(bootstrap, topic_name, 6, 5, "a")
    sticky = {"partition.assignment.strategy": "cooperative-sticky"}
    a, b = (workers(bootstrap, topic_name, group, **sticky) for _ in range(2))
    wait_for("two balanced members", lambda: balanced([a, b], 6))
    # Let the first records be committed before the group rebalances again: a commit sent
    # while the coordinator waits for the leader's assignment fails (REBALANCE_IN_PROGRESS,
    # as in Kafka), and a cooperative member that keeps the partition never retries it.
    first = Counter({p: 5 for p in range(6)})
    wait_for("the first records committed", lambda: committed_exactly_once([a, b], first),
             detail=lambda: commit_report([a, b], first))
    before = {a: a.assignment(), b: b.assignment()}
    seen_events = {a: len(a.snapshot()), b: len(b.snapshot())}
    c = workers(bootstrap, topic_name, group, **sticky)
    wait_for("three balanced members", lambda: balanced([a, b, c], 6))
    # Incremental: the old members only gave partitions away, and kept the rest throughout
    # (cooperative members never revoke everything as eager ones do).
    for member in (a, b):
        assert member.assignment() <= before[member]
        revoked = [set(e["partitions"]) for e in member.snapshot()[seen_events[member]:]
                   if e["event"] == "revoke"]
        assert all(r <= before[member] - member.assignment() for r in revoked), revoked
    produce_numbered(bootstrap, topic_name, 6, 5, "b")
    everything = Counter({p: 10 for p in range(6)})
    wait_for("every record committed", lambda: committed_exactly_once([a, b, c], everything),
             detail=lambda: commit_report([a, b, c], everything))


def test_static_member_restarts_without_rebalancing_the_others(
        broker: Any, topic_name: str, workers: Callable[..., Worker]) -> None:
    bootstrap = broker.bootstrap
    create_topic(bootstrap, topic_name, partitions=6)
    group = unique("static")
    config = {"session.timeout.ms": 15000}
    members = [workers(bootstrap, topic_name, group, **{"group.instance.id": f"i{i}"}, **config)
               for i in range(3)]
    wait_for("three balanced static members", lambda: balanced(members, 6))
    time.sleep(1.5)  # let the last rebalance's heartbeats settle
    rebalances = {w: (w.count("assign"), w.count("revoke")) for w in members}
    restarted_assignment = members[1].assignment()
    members[1].kill9()  # a static member sends no LeaveGroup anyway
    again = workers(bootstrap, topic_name, group, **{"group.instance.id": "i1"}, **config)
    wait_for("the restarted member's assignment", lambda: again.assignment())
    assert again.assignment() == restarted_assignment
    time.sleep(2)  # several heartbeat intervals: a rebalance would show by now
    for w in (members[0], members[2]):
        assert (w.count("assign"), w.count("revoke")) == rebalances[w], w.snapshot()
    produce_numbered(bootstrap, topic_name, 6, 3, "x")
    wait_for("every record committed",
             lambda: committed_exactly_once([members[0], again, members[2]],
                                            Counter({p: 3 for p in range(6)})))


def test_committed_offsets_survive_a_broker_crash(make_broker: Any, topic_name: str) -> None:
    server = make_broker()
    create_topic(server.bootstrap, topic_name, partitions=2)
    produce_numbered(server.bootstrap, topic_name, 2, 10, "a")
    group = unique("durable")
    conf = {"bootstrap.servers": server.bootstrap, "group.id": group,
            "enable.auto.commit": False, "auto.offset.reset": "earliest"}
    first = Consumer(conf)
    first.subscribe([topic_name])
    seen: list[tuple[int, int]] = []
    deadline = time.monotonic() + BOUND_S
    while len(seen) < 12 and time.monotonic() < deadline:
        msg = first.poll(0.2)
        if msg is not None and msg.error() is None:
            seen.append((msg.partition(), msg.offset()))
            first.commit(message=msg, asynchronous=False)
    assert len(seen) == 12
    first.close()
    expected = {p: max(o for q, o in seen if q == p) + 1 for p in (0, 1) if any(
        q == p for q, _ in seen)}
    server.kill9()  # no clean shutdown: the commits must already be on disk
    server.start()
    second = Consumer(conf)
    try:
        committed = second.committed([TopicPartition(topic_name, p) for p in (0, 1)],
                                     timeout=15)
        assert {tp.partition: tp.offset for tp in committed if tp.offset >= 0} == expected
        second.subscribe([topic_name])
        rest: list[tuple[int, int]] = []
        deadline = time.monotonic() + BOUND_S
        while len(rest) < 8 and time.monotonic() < deadline:
            msg = second.poll(0.2)
            if msg is not None and msg.error() is None:
                rest.append((msg.partition(), msg.offset()))
        # It resumes exactly where the first consumer committed: nothing twice, nothing lost.
        assert sorted(seen + rest) == [(p, o) for p in (0, 1) for o in range(10)]
    finally:
        second.close()


def test_group_admin_through_adminclient(broker: Any, topic_name: str) -> None:
    from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions
    from confluent_kafka.admin import AdminClient

    bootstrap = broker.bootstrap
    create_topic(bootstrap, topic_name, partitions=2)
    produce_numbered(bootstrap, topic_name, 2, 3, "a")
    group = unique("admin")
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "client.id": "admin-test-client"})
    consumer.subscribe([topic_name])
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        got = 0
        deadline = time.monotonic() + BOUND_S
        while got < 6 and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                got += 1
        consumer.commit(asynchronous=False)
        listed = admin.list_consumer_groups().result(10)
        assert group in {g.group_id for g in listed.valid}
        described = admin.describe_consumer_groups([group])[group].result(10)
        assert described.state == ConsumerGroupState.STABLE
        assert described.partition_assignor == "range"
        (member,) = described.members
        assert member.client_id == "admin-test-client" and member.host == "/127.0.0.1"
        assert {tp.partition for tp in member.assignment.topic_partitions} == {0, 1}
        offsets = admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group)])[group].result(10)
        assert {tp.partition: tp.offset for tp in offsets.topic_partitions} == {0: 3, 1: 3}
        # Not while it has members.
        failed = admin.delete_consumer_groups([group])[group]
        with pytest.raises(Exception, match="NON_EMPTY_GROUP"):
            failed.result(10)
    finally:
        consumer.close()
    admin.delete_consumer_groups([group])[group].result(10)
    assert group not in {g.group_id for g in admin.list_consumer_groups().result(10).valid}


# -- kafka-python and aiokafka -------------------------------------------------------------------


def test_kafka_python_group(broker: Any, topic_name: str) -> None:
    bootstrap = broker.bootstrap
    create_topic(bootstrap, topic_name, partitions=4)
    produce_numbered(bootstrap, topic_name, 4, 10, "a")
    group = unique("kp")
    stop = threading.Event()
    seen: list[tuple[int, int]] = []
    owned: dict[int, frozenset[int]] = {}
    lock = threading.Lock()

    def member(index: int) -> None:
        consumer = KafkaConsumer(topic_name, bootstrap_servers=bootstrap, group_id=group,
                                 enable_auto_commit=False, auto_offset_reset="earliest",
                                 session_timeout_ms=PY_SESSION_MS, heartbeat_interval_ms=500)
        # Learn the topic's partitions before the first poll joins the group. kafka-python
        # 3.0.12 has a race: a leader that assigned before its metadata arrived rejoins when
        # it does; if that JoinGroup outlives the poll timeout, the finished join is never
        # applied (need_rejoin() turns false first), heartbeats stay off and the member is
        # evicted. Seen in CI with debug logs; the broker answered every request correctly.
        assert consumer.partitions_for_topic(topic_name) == set(range(4))
        try:
            while not stop.is_set():
                batches = consumer.poll(timeout_ms=200)
                with lock:
                    for records in batches.values():
                        seen.extend((r.partition, r.offset) for r in records)
                    owned[index] = frozenset(tp.partition for tp in consumer.assignment())
                if batches:
                    consumer.commit()
        finally:
            consumer.close()

    threads = [threading.Thread(target=member, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    try:
        def done() -> bool:
            with lock:
                parts = list(owned.values())
                return (len(parts) == 2 and all(parts) and not parts[0] & parts[1]
                        and parts[0] | parts[1] == frozenset(range(4))
                        and {r for r in seen} == {(p, o) for p in range(4) for o in range(10)})
        wait_for("two kafka-python members sharing the topic and all records", done)
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
    produce_numbered(bootstrap, topic_name, 4, 2, "b")
    late = KafkaConsumer(topic_name, bootstrap_servers=bootstrap, group_id=group,
                         enable_auto_commit=False, auto_offset_reset="earliest")
    assert late.partitions_for_topic(topic_name) == set(range(4))  # see member() above
    rest: list[tuple[int, int]] = []
    try:
        deadline = time.monotonic() + BOUND_S
        while len(rest) < 8 and time.monotonic() < deadline:
            for records in late.poll(timeout_ms=200).values():
                rest.extend((r.partition, r.offset) for r in records)
        time.sleep(0.5)
        for records in late.poll(timeout_ms=200).values():  # nothing more may come
            rest.extend((r.partition, r.offset) for r in records)
    finally:
        late.close()
    assert sorted(rest) == [(p, o) for p in range(4) for o in (10, 11)]  # resumes at commits


def test_aiokafka_group(broker: Any, topic_name: str) -> None:
    bootstrap = broker.bootstrap
    create_topic(bootstrap, topic_name, partitions=4)
    produce_numbered(bootstrap, topic_name, 4, 10, "a")
    group = unique("aio")

    def make() -> AIOKafkaConsumer:
        return AIOKafkaConsumer(topic_name, bootstrap_servers=bootstrap, group_id=group,
                                enable_auto_commit=False, auto_offset_reset="earliest",
                                session_timeout_ms=PY_SESSION_MS, heartbeat_interval_ms=500)

    async def run() -> list[tuple[int, int]]:
        consumers = [make(), make()]
        seen: set[tuple[int, int]] = set()
        for c in consumers:
            await c.start()
        try:
            deadline = time.monotonic() + BOUND_S
            while time.monotonic() < deadline:
                for c in consumers:
                    batches = await c.getmany(timeout_ms=100)
                    for records in batches.values():
                        seen.update((r.partition, r.offset) for r in records)
                    if batches:
                        await c.commit()
                parts = [frozenset(tp.partition for tp in c.assignment()) for c in consumers]
                if (all(parts) and not parts[0] & parts[1]
                        and parts[0] | parts[1] == frozenset(range(4)) and len(seen) == 40):
                    break
            else:
                raise AssertionError(f"aiokafka group did not settle: {parts}, {len(seen)}")
        finally:
            for c in consumers:
                await c.stop()
        produce_numbered(bootstrap, topic_name, 4, 2, "b")
        late = make()
        await late.start()
        rest: list[tuple[int, int]] = []
        try:
            deadline = time.monotonic() + BOUND_S
            while len(rest) < 8 and time.monotonic() < deadline:
                for records in (await late.getmany(timeout_ms=200)).values():
                    rest.extend((r.partition, r.offset) for r in records)
        finally:
            await late.stop()
        return sorted(rest)

    assert asyncio.run(run()) == [(p, o) for p in range(4) for o in (10, 11)]


# -- bad input, on the wire -----------------------------------------------------------------------


def _ms(ms: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=ms)


def _commit(c: WireClient, group: str, member: str, generation: int, topic: str,
            partition: int, offset: int, metadata: str | None = "") -> ErrorCode:
    resp = c.request(OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=generation, member_id=member,
        group_instance_id=None,
        topics=(OffsetCommitRequestTopic(name=topic, partitions=(OffsetCommitRequestPartition(
            partition_index=partition, committed_offset=offset, committed_leader_epoch=-1,
            committed_metadata=metadata),)),)))
    (topic_resp,) = resp.topics
    (part,) = topic_resp.partitions
    return ErrorCode(part.error_code)


def test_bad_group_requests_get_kafka_errors_and_the_group_keeps_working(
        broker: Any, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, partitions=1)
    group = unique("wire")
    with WireClient.to(broker.bootstrap) as c:
        def join(member_id: str) -> Any:
            return c.request(JoinGroupRequest(
                group_id=group, session_timeout=_ms(SESSION_MS), rebalance_timeout=_ms(10000),
                member_id=member_id, group_instance_id=None, protocol_type="consumer",
                protocols=(JoinGroupRequestProtocol(name="range", metadata=b"m"),),
                reason=None))

        first = join("")
        assert first.error_code == ErrorCode.member_id_required
        joined = join(first.member_id)
        assert joined.error_code == ErrorCode.none and joined.leader == first.member_id
        me, generation = joined.member_id, joined.generation_id

        def sync(member_id: str, gen: int) -> ErrorCode:
            return ErrorCode(c.request(SyncGroupRequest(
                group_id=group, generation_id=gen, member_id=member_id, group_instance_id=None,
                protocol_type="consumer", protocol_name="range",
                assignments=(SyncGroupRequestAssignment(member_id=me, assignment=b"mine"),),
            )).error_code)

        def heartbeat(member_id: str = me, gen: int = generation) -> ErrorCode:
            return ErrorCode(c.request(HeartbeatRequest(
                group_id=group, generation_id=gen, member_id=member_id,
                group_instance_id=None)).error_code)

        assert sync("who-is-this", generation) == ErrorCode.unknown_member_id
        assert heartbeat() == ErrorCode.none  # still CompletingRebalance, still a member
        assert sync(me, generation - 1) == ErrorCode.illegal_generation
        assert sync(me, generation) == ErrorCode.none
        checks: list[tuple[Callable[[], ErrorCode], ErrorCode]] = [
            (lambda: heartbeat("who-is-this"), ErrorCode.unknown_member_id),
            (lambda: heartbeat(me, generation + 5), ErrorCode.illegal_generation),
            (lambda: _commit(c, group, "who-is-this", generation, topic_name, 0, 1),
             ErrorCode.unknown_member_id),
            (lambda: _commit(c, group, me, generation - 1, topic_name, 0, 1),
             ErrorCode.illegal_generation),
            (lambda: _commit(c, group, me, generation, topic_name, 7, 1),
             ErrorCode.unknown_topic_or_partition),
            (lambda: _commit(c, group, me, generation, unique("no-such-topic"), 0, 1),
             ErrorCode.unknown_topic_or_partition),
            (lambda: _commit(c, group, me, generation, topic_name, 0, 1, "x" * 4097),
             ErrorCode.offset_metadata_too_large),
            (lambda: _commit(c, group, "", -1, topic_name, 0, 1),
             ErrorCode.unknown_member_id),  # simple commits only while the group is Empty
        ]
        for check, expected in checks:
            assert check() == expected
            assert heartbeat() == ErrorCode.none  # the group keeps working
        assert _commit(c, group, me, generation, topic_name, 0, 42, "x" * 4096) == ErrorCode.none
        fetched = c.request(OffsetFetchRequest(groups=(OffsetFetchRequestGroup(
            group_id=group, member_id=None, member_epoch=-1,
            topics=(OffsetFetchRequestTopics(name=topic_name, partition_indexes=(0,)),)),),
            require_stable=False))
        (part,) = fetched.groups[0].topics[0].partitions
        assert (part.committed_offset, part.metadata) == (42, "x" * 4096)
        left = c.request(LeaveGroupRequest(group_id=group, members=(MemberIdentity(
            member_id=me, group_instance_id=None, reason=None),)))
        assert [m.error_code for m in left.members] == [ErrorCode.none]
        assert heartbeat() == ErrorCode.unknown_member_id
        # An Empty group takes simple commits again.
        assert _commit(c, group, "", -1, topic_name, 0, 50) == ErrorCode.none


# -- __consumer_offsets as a topic ----------------------------------------------------------------


def test_offsets_topic_is_internal_and_clients_cannot_write_to_it(broker: Any) -> None:
    from confluent_kafka import KafkaError
    from kio.schema.metadata.v12.request import MetadataRequest

    admin_consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": unique("m")})
    try:  # any group lookup creates the topic
        admin_consumer.committed([TopicPartition("whatever", 0)], timeout=10)
    finally:
        admin_consumer.close()
    with WireClient.to(broker.bootstrap) as c:
        meta = c.request(MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                         include_topic_authorized_operations=False))
    (offsets_topic,) = [t for t in meta.topics if t.name == "__consumer_offsets"]
    assert offsets_topic.is_internal and len(offsets_topic.partitions) == 50
    failures: list[Any] = []
    p = producer(broker.bootstrap)
    p.produce("__consumer_offsets", b"junk", partition=0,
              on_delivery=lambda err, _msg: failures.append(err))
    p.flush(15)
    assert [f.code() for f in failures] == [KafkaError.TOPIC_EXCEPTION]


def test_deleting_a_topic_deletes_its_committed_offsets(broker: Any, topic_name: str) -> None:
    from confluent_kafka.admin import AdminClient

    create_topic(broker.bootstrap, topic_name, partitions=1)
    group = unique("deleted")
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        consumer.commit(offsets=[TopicPartition(topic_name, 0, 5)], asynchronous=False)
        assert consumer.committed([TopicPartition(topic_name, 0)], timeout=10)[0].offset == 5
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.delete_topics([topic_name])[topic_name].result(15)
        create_topic(broker.bootstrap, topic_name, partitions=1)
        assert consumer.committed([TopicPartition(topic_name, 0)], timeout=10)[0].offset < 0
    finally:
        consumer.close()


def test_members_carry_on_after_a_broker_restart(
        make_broker: Any, topic_name: str, workers: Callable[..., Worker]) -> None:
    """Members are restored from ``__consumer_offsets``: a consumer that keeps running while
    the broker restarts stays in its generation, with no rebalance."""
    server = make_broker()
    create_topic(server.bootstrap, topic_name, partitions=2)
    produce_numbered(server.bootstrap, topic_name, 2, 3, "a")
    member = workers(server.bootstrap, topic_name, unique("restored"))
    wait_for("the whole topic", lambda: member.assignment() == {0, 1})
    wait_for("every record committed",
             lambda: committed_exactly_once([member], Counter({0: 3, 1: 3})))
    server.kill9()
    server.start()
    produce_numbered(server.bootstrap, topic_name, 2, 3, "b")
    wait_for("every record committed",
             lambda: committed_exactly_once([member], Counter({0: 6, 1: 6})))
    assert (member.count("assign"), member.count("revoke"), member.count("lost")) == (1, 0, 0)


def test_consumer_offsets_topic_compacts(make_broker: Any, topic_name: str) -> None:
    """Repeated commits of one key shrink to the latest in ``__consumer_offsets`` (compaction)."""
    node = make_broker("offsets.topic.num.partitions=1", "offsets.topic.segment.bytes=4096",
                       "log.cleaner.backoff.ms=200")
    create_topic(node.bootstrap, topic_name, partitions=1)
    group = unique("compacting")
    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": group,
                         "enable.auto.commit": False})
    commits = 300
    try:
        for offset in range(1, commits + 1):
            consumer.commit(offsets=[TopicPartition(topic_name, 0, offset)], asynchronous=False)
    finally:
        consumer.close()

    def stored_commits() -> int:
        reader = Consumer({"bootstrap.servers": node.bootstrap, "group.id": unique("reader"),
                           "enable.auto.commit": False, "enable.partition.eof": True})
        reader.assign([TopicPartition("__consumer_offsets", 0, 0)])
        count = 0
        try:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                msg = reader.poll(0.5)
                if msg is None:
                    continue
                if msg.error():
                    break  # partition EOF
                if msg.key() and topic_name.encode() in msg.key():
                    count += 1
        finally:
            reader.close()
        return count

    wait_for("the cleaner to compact __consumer_offsets", lambda: stored_commits() < commits // 2)
    check = Consumer({"bootstrap.servers": node.bootstrap, "group.id": group})
    try:
        (committed,) = check.committed([TopicPartition(topic_name, 0)], timeout=10)
    finally:
        check.close()
    assert committed.offset == commits  # the latest commit survived the cleaning
