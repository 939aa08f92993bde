"""A broker's link to its cluster: ZooKeeper metadata, registration, controller, leadership.

Made by the broker only when ``zookeeper.connect`` is set (a broker without it never imports
kazoo's client or touches ZooKeeper). It owns:

- the ``ZkMetadataStore`` (the broker's ``metadata``), this broker's registration
  (/brokers/ids/<id>, endpoints from the advertised listeners, ``broker.rack``), the
  controller election and the ``Controller`` that acts while this broker holds the lease;
- a ``PartitionStateCache``: a data watch on every partition's state znode. Leadership reaches
  brokers this way (no LeaderAndIsr requests): a state naming this broker as leader makes
  the hosted ``Partition`` lead at that epoch with that ISR, any other makes it follow. Older
  epochs are ignored by ``Partition`` itself, so a late watch event cannot undo a newer one;
- the hosting of partitions: when a topic appears, grows or is deleted in ZooKeeper, this
  broker makes (or deletes) the logs of the partitions assigned to it;
- the ``LeaderElector`` (preferred and requested elections, ElectLeaders), which also acts
  only on the controller.

ZooKeeper calls block, so they run on kazoo's threads (watch callbacks), the controller's
thread or ``asyncio.to_thread``; whatever touches partitions is handed to the event loop with
``call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError
from kio.schema.errors import ErrorCode

from ..cluster import reassignment, znodes
from ..cluster.assignment import AssignmentError
from ..cluster.controlled_shutdown import ShutdownAnswer
from ..cluster.controller import Controller
from ..cluster.controller_election import ControllerElection
from ..cluster.leader_election import ElectionOutcome, LeaderElector
from ..cluster.metadata import TopicMetadata
from ..cluster.zk_states import PartitionStateCache
from ..cluster.zookeeper import (
    ControllerMovedError,
    TopicExistsError,
    ZkMetadataStore,
    ZkStoreError,
)
from ..config import effective_topic_config
from ..config.client_quotas import parse_entity_path
from ..replica import Partition
from ..replica.fetcher import ReplicaFetchers
from . import partition_files
from .errors import ApiError, ClusterStartError
from .group_service import OFFSETS_TOPIC
from .peer_connection import PeerConnector
from .transaction_service import TXN_TOPIC

if TYPE_CHECKING:
    from .broker import Broker

log = logging.getLogger(__name__)

#: How long a replica fetcher's connection and authentication to its leader may take.
PEER_CONNECT_TIMEOUT_S = 10.0


class PartitionView:
    """What Metadata reports of one partition in a cluster."""

    __slots__ = ("isr", "leader", "leader_epoch", "offline", "replicas")

    def __init__(self, leader: int, leader_epoch: int, replicas: tuple[int, ...],
                 isr: tuple[int, ...], offline: tuple[int, ...]) -> None:
        self.leader = leader
        self.leader_epoch = leader_epoch
        self.replicas = replicas
        self.isr = isr
        self.offline = offline


class ClusterLink:
    """See the module docstring."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker
        config = broker.config
        assert config.zookeeper_connect is not None
        self.node_id = config.node_id
        self._loop: asyncio.AbstractEventLoop | None = None
        self._dirty: set[str] = set()
        self._syncing = False
        self._deleted: dict[str, asyncio.Event] = {}
        self._proposing: set[tuple[str, int]] = set()
        self._store_started = False
        self._registered = False
        #: Set when a controlled shutdown begins: partitions no longer fetch, so this broker
        #: cannot rejoin an ISR the controller just took it out of.
        self.shutting_down = False
        self.fetchers: ReplicaFetchers | None = None
        #: Every connection to a peer goes through it (inter-broker TLS and SASL).
        self.connector = PeerConnector(config)
        self.store = ZkMetadataStore(
            config.zookeeper_connect, self.node_id,
            session_timeout_ms=config.zookeeper_session_timeout_ms,
            connection_timeout_ms=config.zookeeper_connection_timeout_ms,
            on_topic_change=self._on_topic_change, on_brokers_change=self._on_brokers_change)
        self.states = PartitionStateCache(self.store.client, on_change=self._on_state)
        self.election = ControllerElection(self.store, on_elected=self._on_elected)
        self.controller = Controller(self.store, self.election,
                                     unclean_default=self._unclean_enabled)
        self.elector = LeaderElector(
            self.store, self.election, self.states,
            auto_rebalance=config.auto_leader_rebalance_enable,
            check_interval_s=config.leader_imbalance_check_interval_seconds,
            imbalance_percentage=config.leader_imbalance_per_broker_percentage,
            shutting_down=self.controller.shutdowns.excluded)
        #: ElectLeaders requests waiting until this broker's cache has their new states.
        self._state_waiters: dict[tuple[str, int], list[tuple[int, asyncio.Future[None]]]] = {}

    # -- life cycle ----------------------------------------------------------------------------

    def start_store(self) -> ZkMetadataStore:
        """Connect and load the topics (blocking: the broker is not serving yet)."""
        try:
            self.store.start()
        except KazooTimeoutError:
            self.store.session.close()
            raise ClusterStartError(
                f"cannot reach ZooKeeper at {self._broker.config.zookeeper_connect} within "
                f"{self._broker.config.zookeeper_connection_timeout_ms} ms "
                "(zookeeper.connection.timeout.ms)") from None
        self.states.start()
        self._store_started = True
        for name, topic in self.store.topics().items():
            self.states.watch_topic(name, range(topic.partitions))
        return self.store

    def register(self) -> None:
        """Register this broker and run for controller (once its logs are open)."""
        endpoints = tuple(
            znodes.Endpoint(listener.name, listener.host, listener.port,
                            listener.security_protocol)
            for listener in self._broker.config.advertised_listeners)
        registration = znodes.BrokerRegistration(self.node_id, endpoints,
                                                 self._broker.config.broker_rack)
        # After a kill -9 the old registration lives until its session expires: wait for it
        # (at most a session timeout), as a restarted Kafka broker must.
        deadline = time.monotonic() + self._broker.config.zookeeper_session_timeout_ms / 1000 + 2
        while True:
            try:
                self.store.register_broker(registration)
                break
            except ZkStoreError as exc:
                if time.monotonic() > deadline:
                    raise ClusterStartError(str(exc)) from None
                log.info("%s; waiting for its session to expire", exc)
                time.sleep(0.5)
        self.controller.start()
        self.elector.start()
        self.election.start()
        self._registered = True

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        """The event loop runs: apply every known state and catch up on topic changes."""
        self._loop = loop
        self.fetchers = ReplicaFetchers(
            self.node_id, self._endpoint_of, broker_now_ms,
            self._broker.replicas.throttles.follower,
            lambda address: self.connector.connect(address, PEER_CONNECT_TIMEOUT_S))
        self._broker.replicas.propose_isr = self._propose_isr
        self._dirty.update(self.store.topics())
        self._schedule_sync()
        # Client quotas set through any broker: applied here on their change notification.
        self.store.watch_config_changes(self._on_config_change)
        self._broker.client_quotas.load(self.store.client_quotas())
        for (topic, partition), state in self.states.states.items():
            self._apply(topic, partition, state)

    async def stop_fetchers(self) -> None:
        if self.fetchers is not None:
            await self.fetchers.stop()

    async def begin_controlled_shutdown(self, drain_timeout_s: float) -> None:
        """The first step of a controlled shutdown: stop following leaders for good, refuse
        appends to the replicated partitions this broker leads and wait (at most
        ``drain_timeout_s``) until their followers have everything. The leaders the
        controller then picks hold every record written here, and no producer retries a
        batch that was written but not acknowledged (it would be written twice)."""
        self.shutting_down = True
        await self.stop_fetchers()
        led = [p for p in self._broker.replicas.all_partitions()
               if p.is_leader and len(p.isr) > 1]
        assert self._loop is not None
        for p in led:
            p.handover = self._loop.create_future()
        started = time.monotonic()
        codes = await self._broker.replicas.wait_for_acks(
            [(p, p.log_end_offset) for p in led], drain_timeout_s)
        behind = sum(code == ErrorCode.request_timed_out for code in codes)
        log.info("controlled shutdown: appends to %d led partitions stopped, followers caught "
                 "up in %.3f s%s", len(led), time.monotonic() - started,
                 f" ({behind} still behind)" if behind else "")

    def follower_fetched(self, topic: str, partition: int, since_ms: int) -> bool:
        """Whether a follower of a partition led here fetched at ``since_ms`` or later."""
        hosted = self._broker.partition(topic, partition)
        if hosted is None or not hosted.is_leader:
            return False
        return any(state is not None and state.last_fetch_ms >= since_ms
                   for r in hosted.replicas if r != self.node_id
                   for state in (hosted.follower(r),))

    def follower_registered(self, topic: str, partition: int) -> bool:
        """Whether another replica of the partition is on a registered broker."""
        live = self.store.brokers()
        return any(r != self.node_id and r in live
                   for r in self.store.assignment(topic).get(partition, ()))

    def resume_appends(self, partitions: Sequence[tuple[str, int]]) -> None:
        """Partitions the controller left here (no other in-sync replica) take appends again."""
        for key in partitions:
            hosted = self._broker.partition(*key)
            if hosted is not None and hosted.handover is not None:
                handover, hosted.handover = hosted.handover, None
                if not handover.done():
                    handover.set_result(None)

    def end_handover(self) -> None:
        """The hand-over is over (leadership moved, or it failed): produce requests waiting
        for it are answered now, NOT_LEADER_OR_FOLLOWER for what is still fenced."""
        for p in self._broker.replicas.all_partitions():
            if p.handover is not None and not p.handover.done():
                p.handover.set_result(None)

    async def apply_led_states(self) -> None:
        """Read the states of the partitions this broker leads from ZooKeeper and apply them
        now, without waiting for the watches: leadership the controller moved takes effect
        here (produce and fetch answered NOT_LEADER_OR_FOLLOWER) before the broker stops."""
        led = [p.key for p in self._broker.replicas.all_partitions() if p.is_leader]

        def read() -> dict[tuple[str, int], znodes.PartitionState | None]:
            return {key: self.store.partition_state(*key) for key in led}

        for (topic, partition), state in (await asyncio.to_thread(read)).items():
            if state is not None:
                self._apply(topic, partition, state)

    def resign_controller(self) -> None:
        """Leave the controller election and give /controller up at once, so that another
        broker takes over while this one finishes shutting down (blocks on ZooKeeper)."""
        self.controller.stop()
        if self._registered:
            self.election.resign()

    async def controlled_shutdown_request(self, broker_id: int,
                                          broker_epoch: int) -> ShutdownAnswer:
        """Answer a ControlledShutdown request: only the controller acts on it."""
        if not self.election.is_controller:
            return ShutdownAnswer(ErrorCode.not_controller)
        return await asyncio.wrap_future(
            self.controller.controlled_shutdown(broker_id, broker_epoch))

    def close(self) -> None:
        """End the session (registration and /controller go at once); safe at any stage."""
        self.controller.stop()
        self.elector.stop()
        if self._registered:
            self.election.stop()
        if self._store_started:
            self.states.stop()
            self.store.close()

    # -- what this broker hosts ----------------------------------------------------------------

    def assigned(self, name: str) -> list[int]:
        """The partitions of ``name`` that have a replica on this broker."""
        return sorted(p for p, replicas in self.store.assignment(name).items()
                      if self.node_id in replicas)

    def _unclean_enabled(self, name: str) -> bool:
        topic = self.store.topic(name)
        configs = topic.configs if topic is not None else {}
        return bool(effective_topic_config(self._broker.config, configs)
                    .unclean_leader_election_enable)

    # -- ZooKeeper events (kazoo's or the controller's threads) --------------------------------

    def _on_topic_change(self, name: str) -> None:
        topic = self.store.topic(name)
        if topic is None:
            self.states.unwatch_topic(name)
        else:
            self.states.watch_topic(name, range(topic.partitions))
        self.controller.poke()
        self._call(self._topic_changed, name)

    def _on_config_change(self, entity_path: str) -> None:
        """A /config/changes notification (kazoo thread): re-read a changed quota entity."""
        quota_entity = parse_entity_path(entity_path)
        if quota_entity is not None:
            self._call(self._broker.client_quotas.set, quota_entity,
                       self.store.client_quota(quota_entity))

    def _on_brokers_change(self, _brokers: object) -> None:
        self.controller.poke()

    def _on_elected(self, lease: object) -> None:
        self.controller.elected(lease)  # type: ignore[arg-type]
        self.elector.poke()

    def _on_state(self, topic: str, partition: int, state: znodes.PartitionState | None) -> None:
        if state is not None:
            self._call(self._state_changed, topic, partition, state)
            if self.store.is_reassigning(topic, partition):
                self.controller.poke()  # an ISR change may complete the reassignment

    def _call(self, func: Any, *args: Any) -> None:
        loop = self._loop
        if loop is None:
            return  # before the loop runs: ``attach`` catches up
        with contextlib.suppress(RuntimeError):  # the loop is closed: the broker is stopping
            loop.call_soon_threadsafe(func, *args)

    # -- on the event loop ---------------------------------------------------------------------

    def _state_changed(self, topic: str, partition: int, state: znodes.PartitionState) -> None:
        self._apply(topic, partition, state)
        if self._state_waiters:
            self._wake_state_waiters(topic, partition, state.zk_version)

    def _apply(self, topic: str, partition: int, state: znodes.PartitionState) -> None:
        """Make the hosted partition lead or follow as ``state`` says."""
        hosted = self._broker.partition(topic, partition)
        if hosted is None:
            return
        replicas = self.store.assignment(topic).get(partition, [self.node_id])
        same_epoch = hosted.leader_epoch == state.leader_epoch
        if state.leader == self.node_id:
            if hosted.is_leader and same_epoch:
                hosted.set_isr(state.isr)  # an ISR change (ours, come back) at this epoch
                return
            if self.fetchers is not None:
                self.fetchers.unfollow(hosted.key)
            if hosted.make_leader(state.leader_epoch, state.isr, replicas,
                                  now_ms=broker_now_ms()):
                log.info("%s-%d: leader at epoch %d, ISR %s", topic, partition,
                         state.leader_epoch, list(state.isr))
                if topic == OFFSETS_TOPIC:  # this broker now coordinates its groups
                    self._broker.groups.load_partition(partition, broker_now_ms())
                elif topic == TXN_TOPIC:  # ... or these transactions
                    self._broker.transactions.load_partition(partition)
            return
        if not hosted.is_leader and same_epoch and hosted.leader_id == state.leader:
            return
        was_leader = hosted.is_leader
        if hosted.make_follower(state.leader, state.leader_epoch):
            hosted.replicas = tuple(replicas)
            if was_leader and topic == OFFSETS_TOPIC:
                self._broker.groups.unload_partition(partition)
            elif was_leader and topic == TXN_TOPIC:
                self._broker.transactions.unload_partition(partition)
            log.info("%s-%d: follower of %d at epoch %d", topic, partition, state.leader,
                     state.leader_epoch)
            if self.fetchers is not None and not self.shutting_down:
                self.fetchers.follow(hosted)

    def endpoint_of(self, broker_id: int) -> tuple[str, int] | None:
        return self._endpoint_of(broker_id)

    def _endpoint_of(self, broker_id: int) -> tuple[str, int] | None:
        registration = self.store.brokers().get(broker_id)
        if registration is None:
            return None
        # Peers talk over inter.broker.listener.name, as Kafka's do.
        endpoint = registration.endpoint(self._broker.config.inter_broker_listener_name)
        return None if endpoint is None else (endpoint.host or "127.0.0.1", endpoint.port)

    def _propose_isr(self, partition: Partition, isr: frozenset[int]) -> None:
        """A leader's ISR change: written to the state znode, conditionally on its version
        (Kafka's partition epoch); it takes effect when the watch brings it back."""
        key = partition.key
        state = self.states.get(*key)
        if key in self._proposing or state is None or state.leader != self.node_id \
                or state.leader_epoch != partition.leader_epoch or set(isr) == set(state.isr):
            return
        self._proposing.add(key)
        new = znodes.PartitionState(self.node_id, state.leader_epoch, tuple(sorted(isr)),
                                    state.controller_epoch)

        async def write() -> None:
            try:
                await asyncio.to_thread(self.store.update_partition_state, key[0], key[1], new,
                                        expected_zk_version=state.zk_version)
                log.info("%s-%d: ISR %s -> %s written at epoch %d", key[0], key[1],
                         list(state.isr), list(new.isr), new.leader_epoch)
            except Exception as exc:  # stale version, ZooKeeper away: proposed again later
                log.info("%s-%d: ISR change to %s not written: %s", key[0], key[1],
                         list(new.isr), exc)
            finally:
                self._proposing.discard(key)

        assert self._loop is not None
        self._broker._track(self._loop.create_task(write()))

    def _topic_changed(self, name: str) -> None:
        self._dirty.add(name)
        event = self._deleted.get(name)
        if event is not None and self.store.topic(name) is None:
            event.set()
        self._schedule_sync()

    def _schedule_sync(self) -> None:
        if not self._syncing and self._dirty and self._loop is not None:
            self._syncing = True
            task = self._loop.create_task(self._sync_dirty())
            self._broker._track(task)

    async def _sync_dirty(self) -> None:
        """Make local logs agree with the assignments, one topic at a time."""
        try:
            while self._dirty:
                name = self._dirty.pop()
                try:
                    await self._sync_topic(name)
                except Exception:
                    log.exception("cannot host the partitions of %s", name)
        finally:
            self._syncing = False

    async def _sync_topic(self, name: str) -> None:
        broker = self._broker
        topic = self.store.topic(name)
        hosted = set(broker.logs.topic_logs(name))
        wanted = set(self.assigned(name)) if topic is not None else set()
        gone = sorted(hosted - wanted)
        if gone:
            if self.fetchers is not None:
                for p in gone:
                    self.fetchers.unfollow((name, p))
            detached = broker.replicas.detach(name, gone)
            renamed = await asyncio.to_thread(partition_files.rename_partitions, detached)
            await asyncio.to_thread(partition_files.remove_renamed, renamed)
            log.info("deleted %d local partitions of %s", len(gone), name)
            if topic is None:
                broker.groups.topic_deleted(name, broker_now_ms())
        missing = sorted(wanted - hosted)
        if topic is None:
            broker.replicas.throttles.drop_topic(name)
        else:
            effective = effective_topic_config(broker.config, topic.configs)
            broker.replicas.throttles.set_topic(
                name, effective.leader_replication_throttled_replicas,
                effective.follower_replication_throttled_replicas)
            assignment = self.store.assignment(name)
            now = broker_now_ms()
            for p in sorted(wanted & hosted):
                partition = broker.partition(name, p)
                if partition is not None:  # a reassignment may have changed the replicas
                    partition.update_replicas(assignment.get(p, ()), now)
            log_config = broker.log_config(topic)
            broker.logs.update_config(name, log_config)
            if missing:
                placed = broker.logs.place(name, missing)
                made = await asyncio.to_thread(partition_files.make_partitions, name, placed,
                                               log_config, topic.topic_id)
                if self.store.topic(name) is not topic:  # deleted or replaced meanwhile
                    broker._discard_made(made)
                    self._dirty.add(name)
                    return
                broker.replicas.adopt(made)
                log.info("hosting partitions %s of %s", missing, name)
                for p in missing:
                    state = self.states.get(name, p)
                    if state is not None:
                        self._apply(name, p, state)

    # -- admin requests ------------------------------------------------------------------------

    def live_broker_ids(self) -> list[int]:
        return sorted(self.store.brokers())

    async def create_topic(self, topic: TopicMetadata, replication_factor: int,
                           assignment: Mapping[int, Sequence[int]] | None) -> None:
        """Write the topic's assignment (placed rack-aware over the live brokers)."""
        try:
            await asyncio.to_thread(self.store.create_topic, topic, assignment,
                                    replication_factor)
        except TopicExistsError:
            raise ApiError(ErrorCode.topic_already_exists,
                           f"Topic '{topic.name}' already exists.") from None
        except AssignmentError as exc:
            raise ApiError(exc.code, exc.message) from None
        except ZkStoreError as exc:
            raise ApiError(ErrorCode.unknown_server_error, str(exc)) from None
        log.info("created topic %s with %d partitions (replication factor %d) in ZooKeeper",
                 topic.name, topic.partitions, replication_factor)

    def auto_create(self, name: str, partitions: int, replication_factor: int,
                    configs: dict[str, str]) -> None:
        """Create a topic in the background; the caller answers LEADER_NOT_AVAILABLE."""
        assert self._loop is not None
        topic = TopicMetadata(name, uuid.uuid4(), partitions, configs)
        factor = min(replication_factor, max(len(self.store.brokers()), 1))

        async def work() -> None:
            try:
                await self.create_topic(topic, factor, None)
            except ApiError as exc:
                if exc.code != ErrorCode.topic_already_exists:
                    log.warning("cannot auto-create topic %s: %s", name, exc)

        self._broker._track(self._loop.create_task(work()))

    async def add_partitions(self, name: str, count: int,
                             assignment: Mapping[int, Sequence[int]] | None) -> None:
        try:
            await asyncio.to_thread(self.store.set_partitions, name, count, assignment)
        except AssignmentError as exc:
            raise ApiError(exc.code, exc.message) from None
        except ZkStoreError as exc:
            raise ApiError(ErrorCode.invalid_partitions, str(exc)) from None

    async def delete_topic(self, name: str, timeout_s: float = 30.0) -> None:
        """Request the deletion and wait (bounded) until the controller completed it."""
        event = self._deleted.setdefault(name, asyncio.Event())
        try:
            await asyncio.to_thread(self.store.request_topic_deletion, name)
            if self.store.topic(name) is not None:
                await asyncio.wait_for(event.wait(), timeout_s)
        except TimeoutError:
            raise ApiError(ErrorCode.request_timed_out,
                           f"Topic '{name}' is marked for deletion; the controller has not "
                           "completed it yet.") from None
        finally:
            self._deleted.pop(name, None)

    async def elect_leaders(self, election_type: int,
                            partitions: set[tuple[str, int]] | None,
                            timeout_s: float) -> dict[tuple[str, int], ElectionOutcome]:
        """ElectLeaders: the controller elects, then the answer waits (at most ``timeout_s``)
        until this broker's state cache, and so its Metadata, shows the new leaders."""
        assert self._loop is not None
        deadline = self._loop.time() + timeout_s
        future = asyncio.wrap_future(self.elector.elect(election_type, partitions))
        try:
            outcomes = await asyncio.wait_for(future, timeout_s)
        except TimeoutError:
            return dict.fromkeys(partitions or (), ElectionOutcome(ErrorCode.request_timed_out))
        except Exception as exc:  # ZooKeeper unreachable
            log.info("ElectLeaders failed: %s: %s", type(exc).__name__, exc)
            return dict.fromkeys(partitions or (), ElectionOutcome(
                ErrorCode.unknown_server_error, None))
        waits = {key: self._state_seen(key, o.zk_version)
                 for key, o in outcomes.items() if o.code == ErrorCode.none}
        if waits:
            await asyncio.wait(waits.values(), timeout=max(0.0, deadline - self._loop.time()))
        for key, seen in waits.items():
            if not seen.done():
                seen.cancel()
                outcomes[key] = ElectionOutcome(ErrorCode.request_timed_out)
        return outcomes

    def _state_seen(self, key: tuple[str, int], zk_version: int) -> asyncio.Future[None]:
        """Done once the cached state of ``key`` is at ``zk_version`` or later."""
        assert self._loop is not None
        future: asyncio.Future[None] = self._loop.create_future()
        state = self.states.get(*key)
        if state is not None and state.zk_version >= zk_version:
            future.set_result(None)
        else:
            self._state_waiters.setdefault(key, []).append((zk_version, future))
        return future

    def _wake_state_waiters(self, topic: str, partition: int, zk_version: int) -> None:
        waiting = self._state_waiters.pop((topic, partition), [])
        still = [(v, f) for v, f in waiting if not f.done() and v > zk_version]
        for v, f in waiting:
            if v <= zk_version and not f.done():
                f.set_result(None)
        if still:
            self._state_waiters[(topic, partition)] = still

    def is_controller(self) -> bool:
        return self.election.lease is not None

    async def alter_reassignments(self, changes: Mapping[tuple[str, int], Sequence[int] | None],
                                  allow_replication_factor_change: bool
                                  ) -> dict[tuple[str, int], tuple[ErrorCode, str | None]]:
        """AlterPartitionReassignments on the controller (NOT_CONTROLLER elsewhere)."""
        lease = self.election.lease
        if lease is None:
            raise ApiError(ErrorCode.not_controller,
                           "This is not the correct controller for this cluster.")
        try:
            results = await asyncio.to_thread(reassignment.alter, self.store, lease, changes,
                                              allow_replication_factor_change)
        except ControllerMovedError:
            raise ApiError(ErrorCode.not_controller,
                           "This is not the correct controller for this cluster.") from None
        except (ZkStoreError, KazooException) as exc:
            raise ApiError(ErrorCode.unknown_server_error, str(exc)) from None
        self.controller.poke()
        return results

    async def next_producer_id(self) -> int:
        return await asyncio.to_thread(self.store.next_producer_id)

    # -- Metadata ------------------------------------------------------------------------------

    def partition_view(self, name: str, partition: int) -> PartitionView:
        replicas = tuple(self.store.assignment(name).get(partition, ()))
        live = self.store.brokers()
        offline = tuple(r for r in replicas if r not in live)
        state = self.states.get(name, partition)
        if state is None:
            return PartitionView(-1, -1, replicas, (), offline)
        leader = state.leader if state.leader in live else -1
        return PartitionView(leader, state.leader_epoch, replicas, state.isr, offline)

    def nodes(self, listener: str) -> list[tuple[int, str, int, str | None]]:
        """(id, host, port, rack) of every live broker that has an endpoint on ``listener``
        (Kafka leaves a broker without one out of the answer)."""
        nodes = []
        for node_id, registration in self.store.brokers().items():
            endpoint = registration.endpoint(listener)
            if endpoint is not None:
                nodes.append((node_id, endpoint.host, endpoint.port, registration.rack))
        return nodes

    def controller_id(self) -> int:
        return self.election.controller_id


def broker_now_ms() -> int:
    from .broker import now_ms

    return now_ms()
