"""The group coordinator: every group of this broker, behind the API the handlers call.

:class:`GroupCoordinator` is still pure: it turns requests into answers and
:class:`~moldau.coordinator.effects.Effects` (parked answers, records to write) and knows
nothing of sockets, files or clocks. The broker's ``GroupService`` does the I/O around it:
parks requests, appends the writes to ``__consumer_offsets``, feeds completions back, and
runs one timer for :meth:`GroupCoordinator.next_deadline`.

This is also the seam for tools: the admin-facing calls (:meth:`list_groups`,
:meth:`describe_group`, :meth:`delete_groups`, :meth:`fetch_offsets`,
:meth:`delete_offsets`) return plain data, whatever API version asked.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from .consumer_protocol import PROTOCOL_TYPE as CONSUMER_PROTOCOL_TYPE
from .effects import (
    AssignmentWritten,
    Completion,
    Effects,
    JoinResponse,
    Record,
    SyncResponse,
    Write,
)
from .group import Group, GroupLimits, GroupState, JoinRequest, default_member_id
from .offsets import (
    DEFAULT_METADATA_MAX_BYTES,
    OffsetAndMetadata,
    TopicPartition,
    metadata_too_large,
    tombstone,
)
from .records import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    decode_group_value,
    decode_key,
    decode_offset_value,
)

#: ListGroups v5 group type of every group here (KIP-848 "consumer" groups are not built yet).
CLASSIC_GROUP_TYPE = "classic"
_WEEK_MS = 7 * 24 * 3600 * 1000


@dataclass(frozen=True, slots=True)
class CoordinatorConfig:
    limits: GroupLimits = field(default_factory=GroupLimits)
    offset_metadata_max_bytes: int = DEFAULT_METADATA_MAX_BYTES
    offsets_retention_ms: int = _WEEK_MS
    offsets_retention_check_interval_ms: int = 600_000


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    """One partition of an OffsetCommit request."""

    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = None


@dataclass(slots=True)
class CommitPlan:
    """An OffsetCommit decided but not yet stored: what to write, and the answers so far."""

    group_id: str
    errors: dict[TopicPartition, ErrorCode] = field(default_factory=dict)
    accepted: dict[TopicPartition, OffsetAndMetadata] = field(default_factory=dict)
    write: Write | None = None
    #: The producer of a transactional commit (TxnOffsetCommit); -1 for OffsetCommit.
    producer_id: int = -1
    #: Log offset of the written batch, once appended (orders commits; -1: unknown).
    position: int = -1


class GroupLoader:
    """Collects the latest record of every key while ``__consumer_offsets`` is replayed.

    Records of transactional batches are held per producer until that producer's marker is
    replayed: a COMMIT applies them (unless a later plain commit of the same partition was
    replayed already), an ABORT drops them; those without a marker stay pending.
    """

    def __init__(self) -> None:
        self.metadata: dict[str, GroupMetadataValue] = {}
        #: group -> partition -> (offset, log offset of its record).
        self.offsets: dict[str, dict[TopicPartition, tuple[OffsetAndMetadata, int]]] = {}
        #: producer id -> (group, partition) -> (offset, log offset of its record).
        self.pending: dict[int, dict[tuple[str, TopicPartition],
                                     tuple[OffsetAndMetadata, int]]] = {}

    def apply(self, key: bytes | None, value: bytes | None, *, position: int = -1,
              producer_id: int = -1, transactional: bool = False) -> None:
        """Apply one record (tombstones delete); raises RecordFormatError on bad bytes.

        ``position`` is the base offset of the record's batch, ``producer_id`` and
        ``transactional`` come from that batch's header."""
        if key is None:
            return
        decoded = decode_key(key)
        if isinstance(decoded, OffsetCommitKey):
            tp = (decoded.topic, decoded.partition)
            if transactional:
                pending = self.pending.setdefault(producer_id, {})
                if value is None:
                    pending.pop((decoded.group, tp), None)
                else:
                    pending[(decoded.group, tp)] = (
                        OffsetAndMetadata.from_record(decode_offset_value(value)), position)
                return
            group = self.offsets.setdefault(decoded.group, {})
            if value is None:
                group.pop(tp, None)
            else:
                group[tp] = (OffsetAndMetadata.from_record(decode_offset_value(value)),
                             position)
        elif isinstance(decoded, GroupMetadataKey):
            if value is None:
                self.metadata.pop(decoded.group, None)
            else:
                self.metadata[decoded.group] = decode_group_value(value)

    def apply_marker(self, producer_id: int, commit: bool) -> None:
        """A COMMIT or ABORT marker of ``producer_id`` was replayed."""
        pending = self.pending.pop(producer_id, {})
        if not commit:
            return
        for (group_id, tp), (offset, position) in pending.items():
            group = self.offsets.setdefault(group_id, {})
            current = group.get(tp)
            if current is None or current[1] < 0 or current[1] <= position:
                group[tp] = (offset, position)


class GroupCoordinator:
    """All groups of the broker; see the module docstring."""

    def __init__(
        self,
        config: CoordinatorConfig,
        now: int,
        *,
        new_member_id: Callable[[str], str] = default_member_id,
    ) -> None:
        self.config = config
        self.groups: dict[str, Group] = {}
        self._new_member_id = new_member_id
        self._heap: list[tuple[int, str]] = []
        self._scheduled: dict[str, int] = {}
        self._next_cleanup = now + config.offsets_retention_check_interval_ms
        #: producer id -> groups that may hold its pending transactional offsets.
        self._txn_groups: dict[int, set[str]] = {}
        #: group -> partition -> OffsetCommits decided but not yet stored (Kafka's
        #: pendingOffsetCommits): a stable OffsetFetch must not answer around them either.
        self._in_flight: dict[str, dict[TopicPartition, int]] = {}

    # -- groups and deadlines ----------------------------------------------------------------

    def group(self, group_id: str) -> Group | None:
        return self.groups.get(group_id)

    def _create(self, group_id: str, now: int) -> Group:
        group = Group(group_id, self.config.limits, now, new_member_id=self._new_member_id)
        self.groups[group_id] = group
        return group

    def _drop_if_unused(self, group: Group) -> None:
        """Forget an Empty group that holds nothing (e.g. created by a join that failed)."""
        if (group.is_empty and group.generation_id == 0 and not group.members
                and not group.pending_members and not group.offsets.has_offsets):
            self._remove_group(group)

    def unload(self, group_ids: Iterable[str]) -> Effects:
        """Forget these groups: their partition of ``__consumer_offsets`` is led elsewhere
        now, and its new leader replays them from the log. Members waiting in JoinGroup or
        SyncGroup are answered NOT_COORDINATOR (as Kafka's onGroupUnloaded does), so they look
        the coordinator up again instead of waiting for an answer that will never come."""
        out = Effects()
        for group_id in list(group_ids):
            group = self.groups.get(group_id)
            if group is not None:
                for member in group.members.values():
                    out.reply(member.join_waiter, JoinResponse(ErrorCode.not_coordinator))
                    out.reply(member.sync_waiter, SyncResponse(ErrorCode.not_coordinator))
                    member.join_waiter = member.sync_waiter = None
                self._remove_group(group)
        return out

    def _remove_group(self, group: Group) -> None:
        self.groups.pop(group.group_id, None)
        self._scheduled.pop(group.group_id, None)

    def _reschedule(self, group: Group | None) -> None:
        if group is None or group.group_id not in self.groups:
            return
        deadline = group.next_deadline()
        if deadline is None:
            self._scheduled.pop(group.group_id, None)
        elif self._scheduled.get(group.group_id) != deadline:
            self._scheduled[group.group_id] = deadline
            heapq.heappush(self._heap, (deadline, group.group_id))
            if len(self._heap) > 4 * len(self._scheduled) + 64:
                # Heartbeats move deadlines constantly; drop the stale entries now and then.
                self._heap = [(d, g) for g, d in self._scheduled.items()]
                heapq.heapify(self._heap)

    def next_deadline(self) -> int:
        """When :meth:`on_timer` should run next (there is always the offsets cleanup)."""
        heap = self._heap
        while heap and self._scheduled.get(heap[0][1]) != heap[0][0]:
            heapq.heappop(heap)
        return min(heap[0][0], self._next_cleanup) if heap else self._next_cleanup

    def on_timer(self, now: int) -> Effects:
        """Fire every passed deadline: sessions, rebalance timeouts, offset expiry."""
        out = Effects()
        heap = self._heap
        while heap and heap[0][0] <= now:
            deadline, group_id = heapq.heappop(heap)
            group = self.groups.get(group_id)
            if group is None or self._scheduled.get(group_id) != deadline:
                continue
            del self._scheduled[group_id]
            group.on_timer(now, out)
            self._reschedule(group)
        if now >= self._next_cleanup:
            out.extend(self.expire_offsets(now))
            self._next_cleanup = now + self.config.offsets_retention_check_interval_ms
        return out

    # -- JoinGroup, SyncGroup, Heartbeat, LeaveGroup -----------------------------------------

    def join_group(self, group_id: str, req: JoinRequest, token: int, now: int) -> Effects:
        out = Effects()
        limits = self.config.limits
        if not group_id:
            out.reply(token, JoinResponse(ErrorCode.invalid_group_id, member_id=req.member_id))
            return out
        if not (limits.min_session_timeout_ms <= req.session_timeout_ms
                <= limits.max_session_timeout_ms):
            out.reply(token, JoinResponse(ErrorCode.invalid_session_timeout,
                                          member_id=req.member_id))
            return out
        group = self.groups.get(group_id)
        if group is None:
            if req.member_id:
                out.reply(token, JoinResponse(ErrorCode.unknown_member_id,
                                              member_id=req.member_id))
                return out
            group = self._create(group_id, now)
        group.join(req, token, now, out)
        self._drop_if_unused(group)
        self._reschedule(group)
        return out

    def sync_group(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: Mapping[str, bytes],
        token: int,
        now: int,
    ) -> Effects:
        out = Effects()
        group = self.groups.get(group_id)
        if not group_id or group is None:
            code = ErrorCode.invalid_group_id if not group_id else ErrorCode.unknown_member_id
            out.reply(token, SyncResponse(code))
            return out
        group.sync(member_id, group_instance_id, generation_id, protocol_type, protocol_name,
                   assignments, token, now, out)
        self._reschedule(group)
        return out

    def heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None,
                  generation_id: int, now: int) -> ErrorCode:
        if not group_id:
            return ErrorCode.invalid_group_id
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.unknown_member_id
        code = group.heartbeat(member_id, group_instance_id, generation_id, now)
        self._reschedule(group)
        return code

    def leave_group(
        self, group_id: str, members: Sequence[tuple[str, str | None]], now: int
    ) -> tuple[ErrorCode, list[ErrorCode], Effects]:
        """(top-level error, one error per leaving member, effects)."""
        out = Effects()
        if not group_id:
            return ErrorCode.invalid_group_id, [], out
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.none, [ErrorCode.unknown_member_id] * len(members), out
        codes = [group.leave(member_id, instance_id, now, out)
                 for member_id, instance_id in members]
        self._reschedule(group)
        return ErrorCode.none, codes, out

    def write_completed(self, completion: Completion, error: ErrorCode | None,
                        now: int) -> Effects:
        """A write that carried ``completion`` succeeded (``error`` None) or failed."""
        out = Effects()
        group = self.groups.get(completion.group_id)
        if group is None:
            return out
        if isinstance(completion, AssignmentWritten):
            group.assignment_written(completion, error, now, out)
        else:
            group.static_member_written(completion, error, now, out)
        self._reschedule(group)
        return out

    # -- offsets ---------------------------------------------------------------------------

    def prepare_commit(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets: Sequence[CommittedOffset],
        now: int,
        *,
        retention_ms: int = -1,
        unknown_group_error: ErrorCode = ErrorCode.illegal_generation,
    ) -> CommitPlan:
        """Check an OffsetCommit and build its records; :meth:`complete_commit` applies it.

        ``unknown_group_error`` is what a member commit (generation >= 0) to a group that
        does not exist gets: ILLEGAL_GENERATION before OffsetCommit v9, GROUP_ID_NOT_FOUND
        from v9 on, as in Kafka.
        """
        plan = CommitPlan(group_id)
        group = self.groups.get(group_id)
        error: ErrorCode | None = None
        if group is None:
            if generation_id < 0:
                group = self._create(group_id, now)  # a "simple" group: offsets only
            else:
                error = unknown_group_error
        if group is not None:
            error = group.validate_offset_commit(member_id, group_instance_id, generation_id)
        if error is not None or group is None:
            plan.errors = {(o.topic, o.partition): error or ErrorCode.unknown_server_error
                           for o in offsets}
            return plan
        group.touch(member_id, now)
        self._reschedule(group)
        expire = now + retention_ms if retention_ms >= 0 else -1
        records: list[Record] = []
        for o in offsets:
            tp = (o.topic, o.partition)
            if metadata_too_large(o.metadata, self.config.offset_metadata_max_bytes):
                plan.errors[tp] = ErrorCode.offset_metadata_too_large
                continue
            committed = OffsetAndMetadata(o.offset, o.leader_epoch, o.metadata or "", now, expire)
            plan.accepted[tp] = committed
            records.append(committed.to_record(group_id, o.topic, o.partition))
        if records:
            plan.write = Write(group_id, tuple(records))
            in_flight = self._in_flight.setdefault(group_id, {})
            for tp in plan.accepted:
                in_flight[tp] = in_flight.get(tp, 0) + 1
        return plan

    def complete_commit(self, plan: CommitPlan, error: ErrorCode | None,
                        now: int) -> dict[TopicPartition, ErrorCode]:
        """Apply a planned commit once its write succeeded (``error`` None) or failed."""
        errors = dict(plan.errors)
        group = self.groups.get(plan.group_id)
        if plan.producer_id < 0 and plan.write is not None:
            self._done_in_flight(plan)
        for tp, committed in plan.accepted.items():
            if group is not None:
                if plan.producer_id >= 0:
                    if error is not None:  # already pending since the append: undo
                        group.offsets.drop_pending(plan.producer_id, tp[0], tp[1],
                                                   plan.position)
                elif error is None:
                    group.offsets.put(tp[0], tp[1], committed, plan.position)
            errors[tp] = error or ErrorCode.none
        if group is not None:
            self._drop_if_unused(group)
        return errors

    # -- transactional offsets (KIP-98, KIP-447) -------------------------------------------------

    def prepare_txn_commit(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        producer_id: int,
        producer_epoch: int,
        offsets: Sequence[CommittedOffset],
        now: int,
    ) -> CommitPlan:
        """Check a TxnOffsetCommit and build its transactional batch. The broker appends it,
        calls :meth:`txn_commit_appended` at once (the offsets are pending from then on, so
        a marker that follows finds them), then :meth:`complete_commit` when the ISR has it.

        As in Kafka, an unknown group is created (Empty) whatever the generation, and the
        member id, instance id and generation are checked only when given.
        """
        plan = CommitPlan(group_id, producer_id=producer_id)
        if producer_id < 0 or producer_epoch < 0:
            # No marker can ever end such a "transaction"; Kafka's verification of the
            # producer answers this for an id it does not know.
            plan.errors = {(o.topic, o.partition): ErrorCode.invalid_producer_id_mapping
                           for o in offsets}
            return plan
        group = self.groups.get(group_id)
        if group is None:
            group = self._create(group_id, now)
        error = group.validate_txn_offset_commit(member_id, group_instance_id, generation_id)
        if error is not None:
            plan.errors = {(o.topic, o.partition): error for o in offsets}
            self._drop_if_unused(group)
            return plan
        records: list[Record] = []
        for o in offsets:
            tp = (o.topic, o.partition)
            if metadata_too_large(o.metadata, self.config.offset_metadata_max_bytes):
                plan.errors[tp] = ErrorCode.offset_metadata_too_large
                continue
            committed = OffsetAndMetadata(o.offset, o.leader_epoch, o.metadata or "", now)
            plan.accepted[tp] = committed
            records.append(committed.to_record(group_id, o.topic, o.partition))
        if records:
            plan.write = Write(group_id, tuple(records), producer=(producer_id, producer_epoch))
        else:
            self._drop_if_unused(group)
        return plan

    def txn_commit_appended(self, plan: CommitPlan, position: int) -> None:
        """The transactional batch of ``plan`` is in the log at ``position``: its offsets
        are pending until the producer's marker."""
        plan.position = position
        group = self.groups.get(plan.group_id)
        if group is None:
            return
        for (topic, partition), offset in plan.accepted.items():
            group.offsets.add_pending(plan.producer_id, topic, partition, offset, position)
        self._txn_groups.setdefault(plan.producer_id, set()).add(plan.group_id)

    def complete_transaction(self, producer_id: int, commit: bool,
                             owns: Callable[[str], bool], now: int) -> Effects:
        """The producer's COMMIT (``commit``) or ABORT marker reached the partition holding
        the groups for which ``owns`` is true: materialise or drop their pending offsets."""
        out = Effects()
        groups = self._txn_groups.get(producer_id)
        if not groups:
            return out
        for group_id in sorted(g for g in groups if owns(g)):
            groups.discard(group_id)
            group = self.groups.get(group_id)
            if group is None or producer_id not in group.offsets.pending_producers():
                continue
            done = group.offsets.complete(producer_id, commit)
            out.notes.append(
                f"group {group_id}: transaction of producer {producer_id} "
                + (f"committed offsets of {len(done)} partitions" if commit
                   else "aborted; its offsets were dropped"))
            self._drop_if_unused(group)
        if not groups:
            del self._txn_groups[producer_id]
        return out

    def _done_in_flight(self, plan: CommitPlan) -> None:
        in_flight = self._in_flight.get(plan.group_id)
        if in_flight is None:
            return
        for tp in plan.accepted:
            count = in_flight.get(tp, 0) - 1
            if count > 0:
                in_flight[tp] = count
            else:
                in_flight.pop(tp, None)
        if not in_flight:
            del self._in_flight[plan.group_id]

    def unstable_partitions(self, group_id: str) -> set[TopicPartition]:
        """Partitions with pending transactional offsets or an OffsetCommit still being
        stored (OffsetFetch require_stable answers them UNSTABLE_OFFSET_COMMIT, as Kafka)."""
        group = self.groups.get(group_id)
        unstable = set() if group is None else group.offsets.pending_partitions()
        unstable.update(self._in_flight.get(group_id, ()))
        return unstable

    def fetch_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition] | None
    ) -> list[tuple[TopicPartition, OffsetAndMetadata | None]]:
        """Committed offsets: of ``partitions`` (None where nothing is committed), or all."""
        group = self.groups.get(group_id)
        if partitions is None:
            return [] if group is None else list(group.offsets)
        return [(tp, None if group is None else group.offsets.get(*tp)) for tp in partitions]

    def delete_offsets(
        self, group_id: str, partitions: Sequence[TopicPartition], now: int
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode], Effects]:
        """OffsetDelete: not while the group consumes the topic (GROUP_SUBSCRIBED_TO_TOPIC)."""
        out = Effects()
        group = self.groups.get(group_id)
        if group is None or group.state is GroupState.DEAD:
            return ErrorCode.group_id_not_found, {}, out
        errors: dict[TopicPartition, ErrorCode] = {}
        deletable: list[TopicPartition] = []
        if group.is_empty:
            deletable = list(partitions)
        elif group.protocol_type == CONSUMER_PROTOCOL_TYPE:
            for tp in partitions:
                if group.is_subscribed_to(tp[0]):
                    errors[tp] = ErrorCode.group_subscribed_to_topic
                else:
                    deletable.append(tp)
        else:
            return ErrorCode.non_empty_group, {}, out
        removed = [tp for tp in deletable if group.offsets.remove(*tp)]
        errors.update((tp, ErrorCode.none) for tp in deletable)
        self._cleanup(group, removed, now, out)
        return ErrorCode.none, errors, out

    def _cleanup(self, group: Group, removed: Sequence[TopicPartition], now: int,
                 out: Effects) -> None:
        """Tombstone removed offsets; an Empty group left without offsets dies with them."""
        records: list[Record] = [tombstone(group.group_id, t, p) for t, p in removed]
        if group.is_empty and not group.offsets.has_offsets and not group.pending_members:
            group.mark_dead(now, out)
            self._remove_group(group)
            if group.generation_id > 0:  # generation 0 never wrote a GroupMetadata record
                records.append(group.tombstone())
        if records:
            out.writes.append(Write(group.group_id, tuple(records)))

    def remove_topic(self, topic: str, now: int) -> Effects:
        """A topic was deleted: its committed offsets go from every group, as in Kafka."""
        out = Effects()
        for group in list(self.groups.values()):
            gone = {tp for tp, _ in group.offsets if tp[0] == topic}
            gone.update(tp for tp in group.offsets.pending_partitions() if tp[0] == topic)
            if gone:
                removed = [tp for tp in sorted(gone) if group.offsets.remove(*tp)]
                self._cleanup(group, removed, now, out)
        return out

    def expire_offsets(self, now: int) -> Effects:
        """``offsets.retention.minutes``: drop expired offsets, and Empty groups left bare."""
        out = Effects()
        retention = self.config.offsets_retention_ms
        for group in list(self.groups.values()):
            expired = group.expired_offsets(now, retention)
            for tp in expired:
                group.offsets.expire(*tp)
            self._cleanup(group, expired, now, out)
        return out

    # -- admin -------------------------------------------------------------------------------

    def list_groups(self, states: Iterable[str] = (), types: Iterable[str] = ()) -> list[Group]:
        """Groups, filtered by state names and group types (case-insensitive; empty: all)."""
        wanted_states = {s.lower() for s in states}
        wanted_types = {t.lower() for t in types}
        if wanted_types and CLASSIC_GROUP_TYPE not in wanted_types:
            return []
        return [g for _, g in sorted(self.groups.items())
                if not wanted_states or g.state.value.lower() in wanted_states]

    def describe_group(self, group_id: str) -> Group | None:
        return self.groups.get(group_id)

    def delete_groups(self, group_ids: Sequence[str],
                      now: int) -> tuple[dict[str, ErrorCode], Effects]:
        """DeleteGroups: only Empty groups go; their offsets and metadata are tombstoned."""
        out = Effects()
        results: dict[str, ErrorCode] = {}
        for group_id in group_ids:
            group = self.groups.get(group_id)
            if not group_id:
                results[group_id] = ErrorCode.invalid_group_id
            elif group is None or group.state is GroupState.DEAD:
                results[group_id] = ErrorCode.group_id_not_found
            elif not group.is_empty:
                results[group_id] = ErrorCode.non_empty_group
            else:
                removed = [tp for tp, _ in group.offsets]
                for tp in removed:
                    group.offsets.remove(*tp)
                group.offsets.clear_pending()  # the group dies: Kafka drops them with it
                self._cleanup(group, removed, now, out)
                results[group_id] = ErrorCode.none
        return results, out

    # -- loading ---------------------------------------------------------------------------

    def load(self, loader: GroupLoader, now: int) -> Effects:
        """Install the groups replayed from ``__consumer_offsets``."""
        out = Effects()
        limits = self.config.limits
        pending: dict[str, list[tuple[int, TopicPartition, OffsetAndMetadata, int]]] = {}
        for producer_id, offsets in loader.pending.items():
            for (group_id, tp), (offset, position) in offsets.items():
                pending.setdefault(group_id, []).append((producer_id, tp, offset, position))
        for group_id in sorted(set(loader.metadata) | set(loader.offsets) | set(pending)):
            value = loader.metadata.get(group_id)
            if value is not None:
                group = Group.from_record(group_id, value, limits, now,
                                          new_member_id=self._new_member_id)
            else:
                group = Group(group_id, limits, now, new_member_id=self._new_member_id)
            for (topic, partition), (offset, position) in sorted(
                    loader.offsets.get(group_id, {}).items()):
                group.offsets.put(topic, partition, offset, position)
            for producer_id, (topic, partition), offset, position in pending.get(group_id, []):
                group.offsets.add_pending(producer_id, topic, partition, offset, position)
                self._txn_groups.setdefault(producer_id, set()).add(group_id)
            if (not group.members and not group.offsets.has_offsets
                    and group.generation_id == 0):
                continue
            self.groups[group_id] = group
            group.shrink_to_max_size(now, out)
            self._reschedule(group)
        return out
