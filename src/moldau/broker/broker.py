"""The broker: its state, its topics, and the dispatch of decoded requests to handlers.

A ``Broker`` owns the log manager (partitions on disk), the replica manager above it (every
hosted partition's leadership, ISR and high watermark; handlers go through it), the metadata
store (which topics exist and their configs) and the background chores (retention, flush,
checkpoints, ISR expiry).
It knows nothing about sockets: :class:`~moldau.broker.connection.KafkaConnection` hands it
frames and writes back what it returns. Everything runs on the one event loop thread.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import secrets
import time
import traceback
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from kio.schema.errors import ErrorCode

from ..cluster.local import LocalMetadataStore
from ..cluster.metadata import MetadataStore, TopicMetadata
from ..config import (
    BrokerConfig,
    ConfigError,
    effective_topic_config,
    to_log_config,
    validate_topic_configs,
)
from ..log.cleaner import CleanerConfig, LogCleaner, loop_owner
from ..log.dir_failures import LogDirFailures
from ..log.dir_lock import lock_log_dirs
from ..log.errors import StorageError
from ..log.manager import LogManager, write_checkpoints
from ..log.partition_log import PartitionLog
from ..log.scrubber import LogScrubber, ScrubberConfig
from ..metrics.counters import BrokerCounters, RequestTiming
from ..protocol import codec
from ..protocol.apis import API_VERSIONS, PRODUCE, SUPPORTED, ApiRange
from ..protocol.buffer_pool import BufferPool
from ..protocol.frames import (
    FrameError,
    RequestHeader,
    parse_request_header,
    response_header,
    skip_tagged_fields,
)
from ..replica import Partition, ReplicaManager
from . import authz, offload, partition_files
from .client_metrics import ClientMetrics
from .client_quotas import ClientQuotas
from .error_responses import error_response
from .errors import ApiError
from .group_service import OFFSETS_TOPIC, GroupService
from .loop_watchdog import RunningRequests
from .peer_clients import PeerClients
from .quota_throttle import request_throttle, with_throttle
from .response import Deferred, Muted, Pending, Response
from .session import Session, session_gate
from .test_faults import DroppedResponse, ProduceResponseDropper
from .topic_names import INTERNAL_TOPICS, collision_key, validate_topic_name
from .transaction_service import TransactionService

if TYPE_CHECKING:
    from .cluster_link import ClusterLink
    from .connection import KafkaConnection

log = logging.getLogger(__name__)


#: How the metadata store is named in storage-fault log lines.
METADATA_STORE = "metadata store"

#: Prefix of the cluster-wide dynamic defaults (broker resource "") in the metadata store's one
#: flat dict of broker configs; the name is ZooKeeper's entity name for the defaults in Kafka.
DEFAULT_SCOPE = "<default>/"


def encode_dynamic_configs(config: BrokerConfig) -> dict[str, str]:
    """Both dynamic layers of ``config`` as one flat dict for the metadata store."""
    encoded = {DEFAULT_SCOPE + k: v for k, v in config.dynamic_default_configs.items()}
    encoded.update(config.dynamic_broker_configs)
    return encoded


def restore_dynamic_configs(config: BrokerConfig, stored: dict[str, str]) -> BrokerConfig:
    """``config`` with the persisted dynamic layers applied, as Kafka does at start-up.

    A persisted value that no longer validates is logged and the static config is kept, so a
    bad dynamic value can never stop the broker from starting (it can then be fixed online).
    """
    if not stored:
        return config
    default = {k[len(DEFAULT_SCOPE):]: v for k, v in stored.items() if k.startswith(DEFAULT_SCOPE)}
    own = {k: v for k, v in stored.items() if not k.startswith(DEFAULT_SCOPE)}
    try:
        return config.with_dynamic(default, cluster_default=True).with_dynamic(own)
    except ConfigError as exc:
        log.error("ignoring the stored dynamic broker configs: %s", exc)
        return config


class RequestContext:
    """What a handler needs besides the request: the broker, the header, the response classes."""

    __slots__ = ("broker", "client_host", "header", "may_defer", "quota_exempt", "resp",
                 "session", "throttle_ms", "timing", "version", "waited_s")

    def __init__(self, broker: Broker, header: Any, version: int, resp: Any,
                 client_host: str = "", may_defer: bool = False,
                 timing: RequestTiming | None = None, session: Session | None = None) -> None:
        self.broker = broker
        self.header = header
        self.version = version
        self.resp = resp
        #: The client's address as Kafka reports it in DescribeGroups ("/127.0.0.1").
        self.client_host = client_host
        #: The handler may return a :class:`~.response.Deferred` (see ``handle_frame``).
        self.may_defer = may_defer
        #: With metrics on: the request's timestamps; a handler adds its purgatory waits to
        #: ``timing.remote_ns`` (Kafka's remote time).
        self.timing = timing
        #: The connection's listener and principal (None for requests made in-process).
        self.session = session
        #: Client quotas (see quota_throttle): a handler's own throttle time (Fetch bytes,
        #: controller mutations), its purgatory wait (not handler time), and whether the
        #: request is exempt (a follower's fetch).
        self.throttle_ms = 0
        self.waited_s = 0.0
        self.quota_exempt = False

    @property
    def listener_name(self) -> str:
        """The listener the request came in on: its endpoints are the ones to answer with."""
        if self.session is not None:
            return self.session.listener.name
        return self.broker.config.advertised_listeners[0].name

    @property
    def client_id(self) -> str:
        return (getattr(self.header, "client_id", None) or "") if self.header else ""


Handler = Callable[[Any, RequestContext], Awaitable[Any]]
T = TypeVar("T")


def _ranges(numbers: list[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``"0-2, 5"``, for log lines about many partitions."""
    parts: list[str] = []
    numbers = sorted(numbers)
    start = prev = numbers[0]
    for n in [*numbers[1:], None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if n is not None:
            start = prev = n
    return ", ".join(parts)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.node_id: int = config.node_id
        log_dirs = config.log_dirs
        # Before anything in a log dir is read or written (the metadata store included):
        # a second broker on the same dirs stops here instead of "recovering" live segments.
        self._dir_locks = lock_log_dirs(log_dirs, self.node_id)
        #: I/O errors of every log dir (the metadata store's included) are reported here.
        self.dir_failures = LogDirFailures()
        metadata_dir = log_dirs[0]
        #: The link to the cluster (ZooKeeper, controller, leadership): only with
        #: ``zookeeper.connect``; without it the broker is alone and leads everything.
        self.cluster: ClusterLink | None = None
        self.metadata: MetadataStore
        try:
            if config.zookeeper_connect:
                from .cluster_link import ClusterLink

                self.cluster = ClusterLink(self)
                self.metadata = self.cluster.start_store()
            else:
                self.metadata = LocalMetadataStore(
                    metadata_dir,
                    on_io_error=lambda exc: self.dir_failures.io_failed(
                        metadata_dir, METADATA_STORE, exc),
                    on_io_ok=lambda: self.dir_failures.io_succeeded(METADATA_STORE))
            self.config = restore_dynamic_configs(config, self.metadata.broker_configs())
            self.logs = LogManager(log_dirs, cluster_id=self.metadata.cluster_id,
                                   node_id=self.node_id, failures=self.dir_failures)
        except BaseException:
            if self.cluster is not None:
                self.cluster.close()
            self._release_locks()
            raise
        #: Receive buffers for large frames, shared by all connections.
        self.frame_buffers = BufferPool()
        #: Keys the made-up SCRAM salts of unknown users (see :mod:`.scram`); per process.
        self.sasl_secret = secrets.token_bytes(32)
        self.connections: set[KafkaConnection] = set()
        self._tasks: list[asyncio.Task[None]] = []
        self.cleaner: LogCleaner | None = None
        self.scrubber: LogScrubber | None = None
        self._handlers: dict[int, Handler] = {}
        #: The hot-path counters when ``metrics.listener`` is set (``serve`` sets them
        #: before the first connection), else None and nothing is counted.
        self.metrics: BrokerCounters | None = None
        #: Set once every log dir is offline: why the broker shuts down (as Kafka's does).
        self.fatal_error: str | None = None
        #: Called to stop the broker (``serve`` sets it); a no-op for brokers run in tests.
        self.request_shutdown: Callable[[], None] = lambda: None
        #: Every hosted partition's role, epoch, ISR and high watermark; handlers use it.
        self.replicas = ReplicaManager(self.logs, self.node_id,
                                       lead_all=self.cluster is None)
        self.dir_failures.add_listener(self._dir_offline)
        self.apply_throttle_rates()
        #: The request each connection task is handling, named by the loop-stall watchdog.
        self.running = RunningRequests()
        #: Test-only fault hook (off by default), see broker/test_faults.py.
        self.produce_dropper = ProduceResponseDropper(
            self.config.test_drop_produce_response_after_append,
            self.config.test_stop_after_dropped_response)
        #: Topics whose partitions are being created, deleted, or added to, off the loop.
        self._creating: set[str] = set()
        self._deleting: set[str] = set()
        self._growing: set[str] = set()
        self._topic_tasks: set[asyncio.Task[Any]] = set()
        self._quiet_gc = partition_files.QuietGc()
        self._checkpoint_job: asyncio.Future[Any] | None = None
        self._hw_checkpoint_job: asyncio.Future[Any] | None = None
        if self.config.test_startup_delay_ms:  # test-only, off by default
            time.sleep(self.config.test_startup_delay_ms / 1000)
        self._open_logs()
        self.replicas.host_loaded()
        self.groups = GroupService(self, now_ms())
        #: The ACL authorizer when ``authorizer.class.name`` is set, else None (see authz).
        self.authorizer = authz.build(self)
        #: KIP-714 client-metrics subscriptions and the latest metrics each client pushed.
        self.client_metrics = ClientMetrics()
        #: Client quotas (AlterClientQuotas) and the rates measured against them.
        self.client_quotas = ClientQuotas(self.config.quota_window_num,
                                          self.config.quota_window_size_seconds)
        self.client_quotas.load(self.metadata.client_quotas())
        self.groups.load(now_ms())
        #: Pooled connections to the other brokers (markers, KIP-890 verification).
        self.peers = PeerClients(self)
        #: The transaction coordinator (``__transaction_state``).
        self.transactions = TransactionService(self)
        self.transactions.load()
        if self.cluster is not None:
            try:
                self.cluster.register()
            except BaseException:
                self.close()
                raise
        # What start-up loaded (every partition log) lives as long as the broker: later full
        # garbage collections need not walk it (see partition_files.QuietGc).
        gc.freeze()

    def _dir_offline(self, log_dir: Path) -> None:
        self.replicas.dir_offline(log_dir)
        if len(self.dir_failures.offline) == len(self.logs.log_dirs):
            self.fatal_error = "every log dir is offline"
            log.error("shutting down: every log dir is offline")
            self.request_shutdown()

    # -- topics ------------------------------------------------------------------------------

    def _open_logs(self) -> None:
        """Make the partition logs on disk agree with the metadata store.

        Partitions the metadata names but the disk lacks (a power loss, or a deletion that a
        crash interrupted after renaming some directories) are created empty; partitions on
        disk that the metadata does not name (a creation that a crash interrupted before the
        metadata was written) are deleted, logged once per topic.
        """
        for topic in self.metadata.topics().values():
            log_config = self.log_config(topic)
            self.logs.update_config(topic.name, log_config)
            have = self.logs.topic_logs(topic.name)
            missing = [p for p in self._local_partitions(topic) if p not in have]
            if missing:
                if have:
                    log.warning("creating %d missing partitions of %s (empty)", len(missing),
                                topic.name)
                self.logs.adopt(partition_files.make_partitions(
                    topic.name, self.logs.place(topic.name, missing), log_config,
                    topic.topic_id))
            for plog in have.values():
                if plog.topic_id != topic.topic_id:
                    plog.set_topic_id(topic.topic_id)
        local = {name: set(self._local_partitions(t)) for name, t in self.metadata.topics().items()}
        strays: dict[str, list[int]] = {}
        for plog in self.logs.all_logs():
            if plog.partition not in local.get(plog.topic, ()):
                strays.setdefault(plog.topic, []).append(plog.partition)
        for name, partitions in strays.items():
            log.warning("deleting %d partitions of %s (%s): not in the metadata", len(partitions),
                        name, _ranges(partitions))
            self.logs.delete_all(name, partitions)

    def _local_partitions(self, topic: TopicMetadata) -> range | list[int]:
        """The partitions of ``topic`` with a replica here (alone: all of them)."""
        if self.cluster is None:
            return range(topic.partitions)
        return self.cluster.assigned(topic.name)

    def reload_log_configs(self) -> None:
        """Re-apply every topic's effective log config, after the broker config changed.

        Topics without an override follow the broker's values (``log.retention.ms`` and so on),
        so a dynamic broker config change must reach their open logs.
        """
        for topic in self.metadata.topics().values():
            self.logs.update_config(topic.name, self.log_config(topic))
        self.apply_throttle_rates()

    def apply_throttle_rates(self) -> None:
        """The dynamic ``*.replication.throttled.rate`` values, to the replication quotas."""
        self.replicas.throttles.set_rates(
            int(self.config.get("leader.replication.throttled.rate")),  # type: ignore[arg-type]
            int(self.config.get("follower.replication.throttled.rate")))  # type: ignore[arg-type]
        self.replicas.mover.rate = int(
            self.config.get("replica.alter.log.dirs.io.max.bytes.per.second"))  # type: ignore[arg-type]

    def log_config(self, topic: TopicMetadata) -> Any:
        return to_log_config(effective_topic_config(self.config, topic.configs))

    def partition(self, topic: str, partition: int) -> Partition | None:
        """The hosted partition (its leadership, ISR, high watermark), None if not hosted."""
        return self.replicas.get(topic, partition)

    def not_hosted_error(self, topic: str, partition: int) -> ErrorCode:
        """What a request for a partition this broker does not host gets: in a cluster, a
        partition that exists elsewhere is NOT_LEADER_OR_FOLLOWER (the client refreshes its
        metadata and goes to the leader); otherwise UNKNOWN_TOPIC_OR_PARTITION."""
        known = self.metadata.topic(topic)
        if self.cluster is not None and known is not None and 0 <= partition < known.partitions:
            return ErrorCode.not_leader_or_follower
        return ErrorCode.unknown_topic_or_partition

    def _check_new_topic(self, name: str, partitions: int, configs: dict[str, str | None]
                         ) -> tuple[TopicMetadata, Any]:
        """The topic to create and its log config, or :class:`ApiError` as Kafka would send."""
        validate_topic_name(name)
        if name in self.metadata.topics() or name in self._creating:
            raise ApiError(ErrorCode.topic_already_exists, f"Topic '{name}' already exists.")
        key = collision_key(name)
        for existing in (*self.metadata.topics(), *self._creating):
            if collision_key(existing) == key:
                raise ApiError(
                    ErrorCode.invalid_topic_exception,
                    f"Topic '{name}' collides with existing topic: {existing}",
                )
        if partitions <= 0:
            raise ApiError(ErrorCode.invalid_partitions,
                           "Number of partitions must be larger than 0.")
        try:
            clean = validate_topic_configs(configs)
            topic = TopicMetadata(name, uuid.uuid4(), partitions, clean)
            log_config = self.log_config(topic)
        except ConfigError as exc:
            raise ApiError(ErrorCode.invalid_config, str(exc)) from exc
        return topic, log_config

    def _storage_error(self, what: str, topic: str, exc: OSError | StorageError) -> ApiError:
        """KAFKA_STORAGE_ERROR for a failed file operation on a topic; an OSError goes to the
        failure channel first (logged there; it may take a log dir offline)."""
        if isinstance(exc, OSError):
            exc = self.logs.io_failed(exc, f"topic {topic}")
        return ApiError(ErrorCode.kafka_storage_error, f"Cannot {what} topic '{topic}': {exc}")

    def _discard_made(self, made: list[tuple[PartitionLog, Path]]) -> None:
        """Remove partitions made for a change the metadata store then refused."""
        try:
            partition_files.remove_renamed(
                partition_files.rename_partitions([plog for plog, _ in made]))
        except OSError as exc:  # a leftover directory is deleted at the next start
            self.logs.io_failed(exc, "partitions of a failed change")

    def _commit_topic(self, topic: TopicMetadata, made: list[tuple[PartitionLog, Path]]) -> None:
        """The partitions exist on disk and are adopted (clients still cannot see them: the
        name is not in the metadata): write the metadata that names them.

        If the metadata store refuses (a full disk), the new partitions are removed again.
        """
        try:
            self.metadata.create_topic(topic)
        except StorageError as exc:
            self.replicas.detach(topic.name, range(topic.partitions))
            self._discard_made(made)
            raise self._storage_error("create", topic.name, exc) from None
        self.logs.update_config(topic.name, self.log_config(topic))
        log.info("created topic %s with %d partitions", topic.name, topic.partitions)

    async def _adopt_in_slices(self, made: list[tuple[PartitionLog, Path]]) -> None:
        """Adopt new logs a slice at a time: 10,000 at once hold the loop for ~20-60 ms."""
        for start in range(0, len(made), partition_files.FILE_BATCH):
            self.replicas.adopt(made[start : start + partition_files.FILE_BATCH])
            await asyncio.sleep(0)

    def create_topic(
        self,
        name: str,
        partitions: int,
        configs: dict[str, str | None],
        *,
        validate_only: bool = False,
        replication_factor: int | None = None,
    ) -> TopicMetadata:
        """Create a topic on the event loop (internal topics, auto-creation, tests).

        Raises :class:`ApiError` with the code Kafka would send. Admin requests use
        :meth:`create_topic_async`, which does the file work off the loop. In a cluster the
        topic gets ``replication_factor`` replicas (default: ``default.replication.factor``),
        capped by the live brokers.
        """
        topic, log_config = self._check_new_topic(name, partitions, configs)
        if validate_only:
            return topic
        if self.cluster is not None:
            # Not on the loop: ZooKeeper writes happen in the background (clients retry).
            self.cluster.auto_create(name, partitions,
                                     replication_factor or self.config.default_replication_factor,
                                     topic.configs)
            raise ApiError(ErrorCode.leader_not_available, f"Topic '{name}' is being created.")
        try:
            made = partition_files.make_partitions(
                name, self.logs.place(name, range(partitions)), log_config, topic.topic_id)
        except (OSError, StorageError) as exc:
            raise self._storage_error("create", name, exc) from None
        self.replicas.adopt(made)
        self._commit_topic(topic, made)
        return topic

    async def create_topic_async(
        self,
        name: str,
        partitions: int,
        configs: dict[str, str | None],
        *,
        validate_only: bool = False,
        replication_factor: int = 1,
        assignment: dict[int, list[int]] | None = None,
    ) -> TopicMetadata:
        """Create a topic, its partition files made on a worker thread, then the metadata.

        The name is reserved meanwhile (auto-creation and other requests see it as being
        created). The work runs as a task of its own, so a client that disconnects does not
        cut it short half-way.
        """
        topic, log_config = self._check_new_topic(name, partitions, configs)
        if validate_only:
            return topic
        if self.cluster is not None:
            # In a cluster each broker makes the files of its own replicas when it sees the
            # assignment in ZooKeeper (cluster_link).
            await self.cluster.create_topic(topic, replication_factor, assignment)
            return topic
        try:
            placed = self.logs.place(name, range(partitions))
        except StorageError as exc:
            raise self._storage_error("create", name, exc) from None
        self._creating.add(name)

        async def work() -> TopicMetadata:
            with self._quiet_gc:
                try:
                    made = await asyncio.to_thread(partition_files.make_partitions, name,
                                                   placed, log_config, topic.topic_id)
                    await self._adopt_in_slices(made)
                    self._commit_topic(topic, made)
                except OSError as exc:
                    raise self._storage_error("create", name, exc) from None
                finally:
                    self._creating.discard(name)
            return topic

        return await self._run_to_completion(work())

    async def _run_to_completion(self, work: Coroutine[Any, Any, T]) -> T:
        """Run ``work`` as its own task and wait for it; cancelling the waiter leaves it running."""
        task = asyncio.get_running_loop().create_task(work)
        self._track(task)
        return await asyncio.shield(task)

    def _track(self, task: asyncio.Task[Any]) -> None:
        """Keep a reference to a background task until it ends, and log an unexpected error."""
        self._topic_tasks.add(task)
        task.add_done_callback(self._topic_task_done)

    def _topic_task_done(self, task: asyncio.Task[Any]) -> None:
        self._topic_tasks.discard(task)
        if not task.cancelled() and isinstance(task.exception(), Exception):
            exc = task.exception()
            if not isinstance(exc, ApiError):
                log.error("topic operation failed: %r", exc)

    def ensure_topic(self, name: str) -> TopicMetadata | None:
        """Auto-create ``name`` when ``auto.create.topics.enable`` allows; None otherwise.

        A topic still being created answers LEADER_NOT_AVAILABLE, as Kafka does while a new
        topic has no leader yet; clients retry.
        """
        topic = self.metadata.topic(name)
        if topic is not None:
            return topic
        if name in self._creating:
            raise ApiError(ErrorCode.leader_not_available,
                           f"Topic '{name}' is being created.")
        if not self.config.auto_create_topics_enable or name in INTERNAL_TOPICS:
            return None
        return self.create_topic(name, self.config.num_partitions, {})

    def delete_topic(self, name: str) -> None:
        """Delete a topic on the event loop (tests); admin requests use the async form."""
        topic = self._topic_to_delete(name)
        detached = self._detach_partitions(name, range(topic.partitions))
        try:
            renamed = partition_files.rename_partitions(detached)
        except OSError as exc:
            self._reattach(name, detached)
            raise self._storage_error("delete", name, exc) from None
        self._forget_topic(topic, renamed)
        partition_files.remove_renamed(renamed)

    async def delete_topic_async(self, name: str) -> None:
        """Delete a topic: rename its partition directories on a worker thread (so a crash
        leaves directories the next start removes, and the metadata still names the topic
        until they are all renamed), then forget it in the metadata, then remove the files
        in the background."""
        if self.cluster is not None:
            if self.metadata.topic(name) is None:
                raise ApiError(ErrorCode.unknown_topic_or_partition,
                               f"Topic '{name}' does not exist.")
            await self.cluster.delete_topic(name)
            return
        topic = self._topic_to_delete(name)

        async def work() -> None:
            detached: list[PartitionLog] = []
            for start in range(0, topic.partitions, partition_files.FILE_BATCH):
                # In slices: detaching 10,000 logs at once holds the loop for ~50 ms.
                end = min(start + partition_files.FILE_BATCH, topic.partitions)
                detached += self._detach_partitions(name, range(start, end))
                await asyncio.sleep(0)
            try:
                with self._quiet_gc:
                    renamed = await asyncio.to_thread(partition_files.rename_partitions,
                                                      detached)
            except OSError as exc:
                self._reattach(name, detached)
                raise self._storage_error("delete", name, exc) from None
            detached.clear()
            self._forget_topic(topic, renamed)
            # The answer need not wait for the removal; a crash leaves -delete directories
            # that the next start removes.
            self._track(asyncio.get_running_loop().create_task(
                asyncio.to_thread(partition_files.remove_renamed, renamed)))

        await self._run_to_completion(work())

    def _topic_to_delete(self, name: str) -> TopicMetadata:
        """The topic, now marked as being deleted; UNKNOWN_TOPIC_OR_PARTITION if none."""
        topic = self.metadata.topic(name)
        if topic is None or name in self._deleting:
            raise ApiError(ErrorCode.unknown_topic_or_partition,
                           f"Topic '{name}' does not exist.")
        self._deleting.add(name)
        return topic

    def _detach_partitions(self, name: str, partitions: range) -> list[PartitionLog]:
        """Stop serving these partitions (fetches waiting on them are answered)."""
        return self.replicas.detach(name, partitions)

    def _reattach(self, name: str, detached: list[PartitionLog]) -> None:
        """A deletion failed before the metadata forgot the topic: serve it again."""
        self.replicas.adopt([(plog, plog.directory.parent) for plog in detached])
        self._deleting.discard(name)

    def _forget_topic(self, topic: TopicMetadata, renamed: partition_files.Renamed) -> None:
        """Every partition is renamed for deletion: forget the topic in the metadata.

        If the metadata store refuses (a full disk), the directories are renamed back and
        the topic keeps being served, so disk and metadata still agree.
        """
        try:
            self.metadata.delete_topic(topic.name)
        except StorageError as exc:
            partition_files.restore_renamed(renamed)
            self._reattach(topic.name, [plog for plog, _ in renamed])
            raise self._storage_error("delete", topic.name, exc) from None
        finally:
            self._deleting.discard(topic.name)
        if topic.name != OFFSETS_TOPIC:
            self.groups.topic_deleted(topic.name, now_ms())
        if self.metrics is not None:
            self.metrics.forget_topic(topic.name)
        log.info("deleted topic %s", topic.name)

    def _check_growth(self, name: str, count: int) -> TopicMetadata:
        topic = self.metadata.topic(name)
        if topic is None or name in self._deleting:
            raise ApiError(ErrorCode.unknown_topic_or_partition,
                           f"Topic '{name}' does not exist.")
        if name in self._growing:
            raise ApiError(ErrorCode.invalid_partitions,
                           f"Topic '{name}' is already getting new partitions.")
        if count <= topic.partitions:
            raise ApiError(
                ErrorCode.invalid_partitions,
                f"Topic currently has {topic.partitions} partitions, which is higher than or "
                f"equal to the requested {count}.",
            )
        return topic

    def _commit_growth(self, topic: TopicMetadata, count: int,
                       made: list[tuple[PartitionLog, Path]]) -> None:
        """The new partitions exist on disk and are adopted (clients ask only for partitions
        the metadata names): name them in the metadata."""
        name = topic.name
        added = range(topic.partitions, count)
        if self.metadata.topic(name) is not topic or name in self._deleting:
            # Deleted meanwhile: the new partitions belong to nobody.
            self.replicas.detach(name, added)
            self._discard_made(made)
            raise ApiError(ErrorCode.unknown_topic_or_partition,
                           f"Topic '{name}' does not exist.")
        try:
            self.metadata.set_partitions(name, count)
        except StorageError as exc:
            self.replicas.detach(name, added)
            self._discard_made(made)
            raise self._storage_error("grow", name, exc) from None
        log.info("topic %s now has %d partitions", name, count)

    def add_partitions(self, name: str, count: int, *, validate_only: bool = False) -> None:
        """Grow a topic on the event loop (tests); admin requests use the async form."""
        topic = self._check_growth(name, count)
        if validate_only:
            return
        try:
            placed = self.logs.place(name, range(topic.partitions, count))
            made = partition_files.make_partitions(name, placed, self.log_config(topic),
                                                   topic.topic_id)
        except (OSError, StorageError) as exc:
            raise self._storage_error("grow", name, exc) from None
        self.replicas.adopt(made)
        self._commit_growth(topic, count, made)

    async def add_partitions_async(self, name: str, count: int, *,
                                   validate_only: bool = False,
                                   assignment: dict[int, list[int]] | None = None) -> None:
        """Grow a topic: new partition files on a worker thread, then the metadata."""
        topic = self._check_growth(name, count)
        if validate_only:
            return
        if self.cluster is not None:
            await self.cluster.add_partitions(name, count, assignment)
            return
        try:
            placed = self.logs.place(name, range(topic.partitions, count))
        except StorageError as exc:
            raise self._storage_error("grow", name, exc) from None
        self._growing.add(name)

        async def work() -> None:
            try:
                with self._quiet_gc:
                    made = await asyncio.to_thread(partition_files.make_partitions, name,
                                                   placed, self.log_config(topic),
                                                   topic.topic_id)
                await self._adopt_in_slices(made)
                self._commit_growth(topic, count, made)
            except OSError as exc:
                raise self._storage_error("grow", name, exc) from None
            finally:
                self._growing.discard(name)

        await self._run_to_completion(work())

    def set_topic_configs(self, name: str, configs: dict[str, str | None],
                          *, validate_only: bool = False) -> None:
        topic = self.metadata.topic(name)
        if topic is None:
            raise ApiError(ErrorCode.unknown_topic_or_partition,
                           f"Topic '{name}' does not exist.")
        try:
            clean = validate_topic_configs(configs)
            log_config = self.log_config(TopicMetadata(name, topic.topic_id, 1, clean))
        except ConfigError as exc:
            raise ApiError(ErrorCode.invalid_config, str(exc)) from exc
        if validate_only:
            return
        try:
            self.metadata.set_topic_configs(name, clean)
        except StorageError as exc:
            raise ApiError(ErrorCode.kafka_storage_error, str(exc)) from None
        self.logs.update_config(name, log_config)

    # -- requests ----------------------------------------------------------------------------

    def register(self, api_key: int, handler: Handler) -> None:
        self._handlers[api_key] = authz.with_request_check(api_key, handler)

    async def handle_frame(self, frame: bytes | memoryview, client_host: str = "", *,
                           may_defer: bool = False, timing: RequestTiming | None = None,
                           session: Session | None = None
                           ) -> Response | Pending | Muted | None:
        """Decode one request frame, run its handler, and encode the response (None: no reply).

        With ``may_defer`` an ``acks=all`` Produce returns a :class:`Pending` as soon as its
        records are appended; its response is completed once the ISR has them.
        """
        if session is not None and (not session.authenticated or session.expires_at):
            if session.raw_tokens:
                return await self._raw_sasl_token(frame, session)
            gate = session_gate(session, frame)
            if gate is not None:
                raise FrameError(gate)
        header, offset = parse_request_header(frame)
        key, version = header.api_key, header.api_version
        api = SUPPORTED.get(key)
        if key == API_VERSIONS and (api is None or not api.supports(version)):
            # KIP-511: answer with v0 and UNSUPPORTED_VERSION so the client can downgrade.
            from .handlers.api_versions import unsupported_version_response

            return Response.of_bytes(response_header(header.correlation_id, False),
                                     codec.encode_body(key, 0, unsupported_version_response()))
        handler = self._handlers.get(key)
        if api is None or handler is None:
            raise FrameError(f"unknown api key {key}")
        if not api.supports(version):
            raise FrameError(f"unsupported version {version} of {api.name}")
        flexible = codec.is_flexible(key, version)
        if flexible:
            offset = skip_tagged_fields(frame, offset)
        try:
            request = codec.decode_request(key, version, frame, offset)
        except FrameError as exc:
            raise FrameError(f"malformed {api.name} v{version} request from client "
                             f"{header.client_id!r}: {exc}") from None
        ctx = RequestContext(self, header, version, codec.response_module(key, version),
                             client_host, may_defer, timing, session)
        task = self.running.begin(api.name, version, header.client_id, request)
        quotas_on = self.client_quotas.active
        started = time.perf_counter() if quotas_on else 0.0
        try:
            result = await handler(request, ctx)
        except DroppedResponse:
            self.running.end(task)
            raise
        except Exception as exc:
            self.running.end(task)
            return self._with_header(header, flexible, self._answer_failure(
                api, version, header, request, client_host, exc))
        self.running.end(task)
        throttle_ms = request_throttle(self, key, len(frame), ctx, started) if quotas_on else 0
        if isinstance(result, Deferred):
            return Pending(asyncio.ensure_future(self._complete(
                result.pending, api, version, header, flexible, request, client_host,
                throttle_ms)), throttle_ms)
        if result is None and throttle_ms > 0:
            return Muted(throttle_ms)
        return await self._encode(result, api, version, header, flexible, request,
                                  client_host, throttle_ms)

    async def _raw_sasl_token(self, frame: bytes | memoryview, session: Session) -> Response:
        """A SASL token after SaslHandshake v0: answered as a bare token (see handlers.sasl)."""
        from .handlers.sasl import handle_raw_token
        from .sasl import SaslFailure

        try:
            answer = await handle_raw_token(self, session, bytes(frame))
        except SaslFailure:
            raise FrameError("SASL authentication failed") from None
        return Response.of_bytes(answer)

    async def _complete(self, pending: Awaitable[Any], api: ApiRange, version: int,
                        header: RequestHeader, flexible: bool, request: Any,
                        client_host: str, throttle_ms: int = 0) -> Response | None:
        """Finish a deferred handler's answer and encode it (failures answered as Kafka)."""
        try:
            result = await pending
        except DroppedResponse:
            raise
        except Exception as exc:
            return self._with_header(header, flexible, self._answer_failure(
                api, version, header, request, client_host, exc))
        return await self._encode(result, api, version, header, flexible, request,
                                  client_host, throttle_ms)

    async def _encode(self, result: Any, api: ApiRange, version: int, header: RequestHeader,
                      flexible: bool, request: Any, client_host: str, throttle_ms: int = 0
                      ) -> Response | None:
        if result is None:
            return None
        if throttle_ms > 0:
            result = with_throttle(result, throttle_ms)
        try:
            body: Response | bytes = result if isinstance(result, Response) else \
                await offload.encode_body(api.key, version, result)
        except Exception as exc:
            body = self._answer_failure(api, version, header, request, client_host, exc)
        response = self._with_header(header, flexible, body)
        response.throttle_ms = throttle_ms
        return response

    @staticmethod
    def _with_header(header: RequestHeader, flexible: bool, body: Response | bytes
                     ) -> Response:
        # ApiVersions responses always carry header v0 (KIP-511).
        head = response_header(header.correlation_id,
                               flexible and header.api_key != API_VERSIONS)
        if isinstance(body, Response):
            body.parts.insert(0, head)
            body.size += len(head)
            return body
        return Response.of_bytes(head, body)

    def _answer_failure(self, api: ApiRange, version: int, header: RequestHeader,
                        request: Any, client_host: str, exc: Exception) -> bytes:
        """Answer a request whose handler (or response encoding) failed, as Kafka does.

        The request gets Kafka's generic error response (UNKNOWN_SERVER_ERROR, or the code of
        an :class:`ApiError` that escaped its handler) and the connection carries on. Where no
        answer is possible (Produce with acks=0 has none; Kafka then closes the connection) a
        FrameError closes the connection. One log line either way; the traceback at DEBUG.
        """
        where = (f"{api.name} v{version} from client {header.client_id!r} "
                 f"at {client_host or '?'}")
        # Where it failed: the innermost frame of moldau's own code, else the innermost one.
        frames = traceback.extract_tb(exc.__traceback__)
        ours = [f for f in frames if "/moldau/" in f.filename] or frames
        place = f" at {ours[-1].filename.rsplit('/', 1)[-1]}:{ours[-1].lineno}" if ours else ""
        what = f"{type(exc).__name__}: {exc}"[:300] + place
        log.debug("%s failed", where, exc_info=exc)
        if api.key == PRODUCE and getattr(request, "acks", None) == 0:
            raise FrameError(f"{where} failed ({what}); acks=0 has no response") from exc
        code = exc.code if isinstance(exc, ApiError) else ErrorCode.unknown_server_error
        if isinstance(exc, authz.AuthorizationError):
            # A refusal, not a failure: the client is told, the log stays quiet.
            log.debug("%s denied: %s", where, code.name.upper())
            return codec.encode_body(api.key, version,
                                     error_response(api.key, version, request, code))
        try:
            body = codec.encode_body(api.key, version,
                                     error_response(api.key, version, request, code))
        except Exception as build_exc:
            raise FrameError(f"{where} failed ({what}) and its error response could not be "
                             f"encoded ({build_exc})") from exc
        log.warning("%s failed, answered %s: %s", where, code.name.upper(), what)
        return body

    # -- background chores -------------------------------------------------------------------

    def start_background(self) -> None:
        loop = asyncio.get_running_loop()
        authz.attach(self, loop)
        # Moves between log dirs that a restart interrupted go on (their future logs).
        self.replicas.mover.resume_all()
        self._tasks.append(loop.create_task(self._every(
            self.config.log_retention_check_interval_ms, self._retention)))
        self._tasks.append(loop.create_task(self._every(
            self.config.log_flush_offset_checkpoint_interval_ms, self._checkpoint)))
        self._tasks.append(loop.create_task(self._every(
            self.config.replica_high_watermark_checkpoint_interval_ms,
            self._checkpoint_high_watermarks)))
        # flush.ms is per topic, so check every second (or more often when the broker asks);
        # Kafka's default scheduler interval is Long.MAX, which means "never".
        flush_check_ms = min(self.config.log_flush_scheduler_interval_ms, 1000)
        self._tasks.append(loop.create_task(self._every(flush_check_ms, self._flush)))
        # Kafka's isr-expiration chore runs every replica.lag.time.max.ms / 2; on one broker
        # no partition has a follower, so a pass costs one length check per partition.
        lag_ms = self.config.replica_lag_time_max_ms
        self._tasks.append(loop.create_task(self._every(lag_ms // 2, self._expire_isrs)))
        self._tasks.append(loop.create_task(self._every(
            self.config.producer_id_expiration_check_interval_ms, self._expire_producers)))
        self.groups.start()
        self.transactions.start()
        if self.cluster is not None:
            self.cluster.attach(loop)
        if self.config.log_cleaner_enable and self.cleaner is None:
            # Compaction runs on its own thread; it changes logs only through this loop.
            self.cleaner = LogCleaner(
                self.logs, CleanerConfig(backoff_ms=self.config.log_cleaner_backoff_ms),
                owner=loop_owner(loop), tombstone_bound=self._tombstone_bound)
            self.cleaner.start()
        if self.config.log_scrubber_enable and self.scrubber is None:
            # Re-reads closed segments at a bounded rate on its own thread (never writes).
            self.scrubber = LogScrubber(
                self.logs,
                ScrubberConfig(bytes_per_second=self.config.log_scrubber_bytes_per_second,
                               backoff_ms=self.config.log_scrubber_backoff_ms),
                owner=loop_owner(loop))
            self.scrubber.start()

    async def _every(self, interval_ms: int,
                     chore: Callable[[], None] | Callable[[], Awaitable[None]]) -> None:
        # Clamp to a day so that Long.MAX ("never") does not overflow the loop's timer.
        interval = min(max(interval_ms, 10), 86_400_000) / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                done = chore()
                if done is not None:
                    await done
            except Exception:
                log.exception("background chore %s failed", chore.__name__)

    def _tombstone_bound(self, plog: PartitionLog) -> int | None:
        """For the cleaner (on the loop): the offset from which ``plog``'s tombstones stay.
        A lone broker's log is the only replica, so it has no limit; in a cluster the hosted
        partition decides (``Partition.tombstone_bound``), and a log not hosted keeps all."""
        if self.cluster is None:
            return None
        partition = self.replicas.get(plog.topic, plog.partition)
        if partition is None or partition.log is not plog:
            return -1
        return partition.tombstone_bound()

    def _expire_isrs(self) -> None:
        self.replicas.shrink_isrs(now_ms(), self.config.replica_lag_time_max_ms)

    def _expire_producers(self) -> None:
        """Forget idempotent producers idle longer than producer.id.expiration.ms (read
        at each pass: the key is dynamic)."""
        now, expiration = now_ms(), self.config.producer_id_expiration_ms
        for plog in self.logs.all_logs():
            if len(plog.producers) and not plog.offline:
                plog.expire_producers(now, expiration)

    def _retention(self) -> None:
        deleted = self.logs.run_retention(now_ms())
        if self.metrics is not None:
            self.metrics.retention_deleted_segments += deleted

    async def _checkpoint(self) -> None:
        # Offsets are read on the loop, the files written on a worker thread.
        contents = self.logs.checkpoint_contents()
        job = asyncio.ensure_future(asyncio.to_thread(write_checkpoints, contents))
        self._checkpoint_job = job  # shutdown waits for it: close() writes the same files
        errors = await asyncio.shield(job)
        self.logs.report_checkpoint_errors(errors)

    async def _checkpoint_high_watermarks(self) -> None:
        # As the log checkpoints: values read on the loop, the files written on a thread.
        contents = self.replicas.high_watermarks()
        job = asyncio.ensure_future(asyncio.to_thread(self.replicas.write_high_watermarks,
                                                      contents))
        self._hw_checkpoint_job = job  # shutdown waits for it: close() writes the same files
        errors = await asyncio.shield(job)
        self.replicas.report_high_watermark_errors(errors)

    def _flush(self) -> None:
        self.logs.flush_due(now_ms())

    async def stop_background(self) -> None:
        if self._topic_tasks:
            # Topic creations and deletions under way finish (their files are half made or
            # half removed otherwise); whatever still runs after this is fixed at next start.
            await asyncio.wait(set(self._topic_tasks), timeout=30)
        await self.groups.stop()
        await self.replicas.mover.stop()
        await self.transactions.stop()
        self.peers.close()
        if self.cluster is not None:
            await self.cluster.stop_fetchers()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for job in (self._checkpoint_job, self._hw_checkpoint_job):
            if job is not None:
                await asyncio.gather(job, return_exceptions=True)
        self._tasks.clear()

    def close(self) -> None:
        """Stop the scrubber and the cleaner, write the high watermarks, then close the logs
        (flush, checkpoints, clean-shutdown marker)."""
        if self.scrubber is not None:
            self.scrubber.stop()
            self.scrubber = None
        if self.cleaner is not None:
            self.cleaner.stop()
            self.cleaner = None
        try:
            if self.cluster is not None:
                self.cluster.close()
        finally:
            try:
                self.replicas.checkpoint_high_watermarks()
                self.logs.close()
            finally:
                self._release_locks()

    def _release_locks(self) -> None:
        for lock in self._dir_locks:
            lock.release()
