"""Incremental fetch sessions (KIP-227): the leader's bookkeeping and the follower's, without
I/O. The cluster tests (tests/cluster/test_fetch_sessions.py) run them between real brokers."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from kio.schema.errors import ErrorCode

from moldau.broker.fetch_sessions import FetchSession, has_updates, resolve
from moldau.replica.follower_session import FollowerSession


def _part(index: int, offset: int, epoch: int = 3) -> Any:
    return SimpleNamespace(partition=index, fetch_offset=offset, partition_max_bytes=1 << 20,
                           current_leader_epoch=epoch, log_start_offset=0)


def _request(session_id: int, epoch: int, topics: dict[str, list[Any]] | None = None,
             forgotten: dict[str, list[int]] | None = None) -> Any:
    return SimpleNamespace(
        session_id=session_id, session_epoch=epoch,
        topics=[SimpleNamespace(topic=t, partitions=ps) for t, ps in (topics or {}).items()],
        forgotten_topics_data=[SimpleNamespace(topic=t, partitions=ps)
                               for t, ps in (forgotten or {}).items()])


def _holder() -> Any:
    return SimpleNamespace(fetch_session=None)


def _offsets(session: FetchSession) -> dict[tuple[str | None, int], int]:
    return {(t.topic, p.partition): p.fetch_offset for t in session.topics()
            for p in t.partitions}


def test_a_follower_opens_a_session_and_fetches_incrementally() -> None:
    holder = _holder()
    opened = resolve(holder, _request(0, 0, {"a": [_part(0, 5), _part(1, 7)]}), follower=2)
    assert opened.error is None and not opened.incremental
    session = opened.session
    assert session is not None and holder.fetch_session is session and session.id > 0
    assert _offsets(session) == {("a", 0): 5, ("a", 1): 7}
    # The first incremental fetch changes one offset and adds a topic.
    step = resolve(holder, _request(session.id, 1, {"a": [_part(1, 9)], "b": [_part(0, 0)]}),
                   follower=2)
    assert step.session is session and step.incremental
    assert _offsets(session) == {("a", 0): 5, ("a", 1): 9, ("b", 0): 0}
    # Forgetting a partition, and the last of a topic, drops them.
    resolve(holder, _request(session.id, 2, forgotten={"a": [0], "b": [0]}), follower=2)
    assert _offsets(session) == {("a", 1): 9}
    assert [t.topic for t in session.topics()] == ["a"]
    assert session.epoch == 3


def test_session_errors_read_nothing() -> None:
    holder = _holder()
    session = resolve(holder, _request(0, 0, {"a": [_part(0, 0)]}), follower=2).session
    assert session is not None
    assert resolve(holder, _request(session.id, 2), 2).error is \
        ErrorCode.invalid_fetch_session_epoch
    assert resolve(holder, _request(session.id + 1, 1), 2).error is \
        ErrorCode.fetch_session_id_not_found
    # Another broker id, or a consumer, cannot use the session.
    assert resolve(holder, _request(session.id, 1), 3).error is \
        ErrorCode.fetch_session_id_not_found
    assert resolve(holder, _request(session.id, 1), -1).error is \
        ErrorCode.fetch_session_id_not_found
    # None of that moved the epoch: the right request is still served.
    assert resolve(holder, _request(session.id, 1), 2).session is session
    # Another connection never had it.
    assert resolve(_holder(), _request(session.id, 2), 2).error is \
        ErrorCode.fetch_session_id_not_found


def test_closing_replacing_and_consumers() -> None:
    holder = _holder()
    first = resolve(holder, _request(0, 0, {"a": [_part(0, 0)]}), follower=2).session
    assert first is not None
    # (id, 0) closes it and opens a new one with only the request's partitions.
    second = resolve(holder, _request(first.id, 0, {"b": [_part(0, 1)]}), follower=2).session
    assert second is not None and second.id != first.id and holder.fetch_session is second
    assert _offsets(second) == {("b", 0): 1}
    # (id, -1) closes it: a full fetch without a session.
    closed = resolve(holder, _request(second.id, -1, {"b": [_part(0, 1)]}), follower=2)
    assert closed.session is None and closed.error is None and holder.fetch_session is None
    # Consumers, and requests made in-process (no connection), get none.
    assert resolve(holder, _request(0, 0, {"b": [_part(0, 1)]}), follower=-1).session is None
    assert resolve(None, _request(0, 0, {"b": [_part(0, 1)]}), follower=2).session is None


def test_incremental_answers_carry_only_news() -> None:
    session = FetchSession(2)
    session.apply(_request(0, 0, {"a": [_part(0, 0)]}))
    (part,) = session.topics()[0].partitions
    # The first answer always carries it; then only records, errors or moved watermarks.
    assert has_updates(part, ErrorCode.none, False, 10, 10, 0)
    assert not has_updates(part, ErrorCode.none, False, 10, 10, 0)
    assert has_updates(part, ErrorCode.none, True, 10, 10, 0)
    assert has_updates(part, ErrorCode.none, False, 11, 10, 0)
    assert has_updates(part, ErrorCode.none, False, 11, 11, 0)
    assert has_updates(part, ErrorCode.none, False, 11, 11, 4)
    assert not has_updates(part, ErrorCode.none, False, 11, 11, 4)
    assert has_updates(part, ErrorCode.fenced_leader_epoch, False, 11, 11, 4)
    assert has_updates(part, ErrorCode.fenced_leader_epoch, False, 11, 11, 4)


def test_the_follower_names_only_changes() -> None:
    session = FollowerSession()
    wanted = {("a", 0): (3, 5, 0, 100), ("a", 1): (3, 7, 0, 100)}
    # Opening: everything, nothing forgotten, epoch 0.
    assert session.changes(wanted) == ([("a", 0), ("a", 1)], [])
    assert (session.id, session.epoch) == (0, 0)
    session.answered(41, ErrorCode.none, wanted)
    assert (session.id, session.epoch) == (41, 1)
    assert session.changes(wanted) == ([], [])
    moved = {("a", 0): (3, 5, 0, 100), ("a", 1): (3, 9, 0, 100), ("b", 0): (1, 0, 0, 100)}
    assert session.changes(moved) == ([("a", 1), ("b", 0)], [])
    session.answered(41, ErrorCode.none, moved)
    assert session.epoch == 2
    # A partition no longer fetched (truncating, moved away) is forgotten.
    fewer = {("b", 0): (1, 0, 0, 100)}
    assert session.changes(fewer) == ([], [("a", 0), ("a", 1)])
    # A new leader epoch is a change too.
    assert session.changes({("a", 0): (4, 5, 0, 100), ("a", 1): (3, 9, 0, 100),
                            ("b", 0): (1, 0, 0, 100)}) == ([("a", 0)], [])


def test_the_follower_starts_over_when_the_leader_lost_the_session() -> None:
    session = FollowerSession()
    wanted = {("a", 0): (3, 5, 0, 100)}
    session.answered(7, ErrorCode.none, wanted)
    session.answered(0, ErrorCode.invalid_fetch_session_epoch, wanted)
    assert (session.id, session.epoch) == (0, 0)
    assert session.changes(wanted) == ([("a", 0)], [])
    # A leader that gives no session: every request stays a full one.
    session.answered(0, ErrorCode.none, wanted)
    assert (session.id, session.epoch) == (0, 0)
    assert session.changes(wanted) == ([("a", 0)], [])
