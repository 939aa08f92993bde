"""The broker config keys moldau knows: Kafka's names, types, defaults and bounds.

Three kinds of key exist, and the difference is what happens when one is set:

* defined and used: parsed, validated (a bad value stops start-up) and honoured;
* defined but unused (``used=False``): parsed and validated like Kafka would, then logged once at
  INFO and ignored: a Kafka ``server.properties`` must start moldau, and a typo in a number
  should still be caught;
* in :data:`KNOWN_UNUSED_KEYS` (or under :data:`KNOWN_UNUSED_PREFIXES`): Kafka features moldau
  does not have (TLS, SASL, quotas, KRaft, metrics reporters...). Accepted with any value and
  logged once at INFO.

Anything else is unknown: logged as a warning and ignored, as Kafka does.

moldau's own defaults differ from Kafka's in three places, all chosen for a broker that starts
with no config at all on a developer machine: ``node.id``/``broker.id`` default to 0 (Kafka: -1,
meaning "generate" or "required"), ``listeners`` to ``PLAINTEXT://127.0.0.1:9092`` (Kafka:
``PLAINTEXT://:9092``) and ``log.dir`` to ``./data`` (Kafka: ``/tmp/kafka-logs``).
"""

from __future__ import annotations

from .authorizer_keys import AUTHORIZER_KEYS
from .definitions import (
    INT_MAX,
    LONG_MAX,
    ConfigKey,
    ConfigType,
    Importance,
    ListOf,
    OneOf,
    at_least,
    between,
    index_keys,
)
from .listeners import MetricsListenerFormat
from .security_keys import SECURITY_KEYS
from .topic_keys import (
    CLEANUP_POLICIES,
    COMPRESSION_TYPES,
    MIN_SEGMENT_BYTES,
    TIMESTAMP_TYPES,
    TOPIC_DEFAULT_BROKER_KEYS,
)

BOOL, STR, INT, SHORT, LONG, DOUBLE, LIST = (
    ConfigType.BOOLEAN,
    ConfigType.STRING,
    ConfigType.INT,
    ConfigType.SHORT,
    ConfigType.LONG,
    ConfigType.DOUBLE,
    ConfigType.LIST,
)
HIGH, MEDIUM, LOW = Importance.HIGH, Importance.MEDIUM, Importance.LOW

DEFAULT_LISTENERS = ("PLAINTEXT://127.0.0.1:9092",)
DEFAULT_LOG_DIR = "./data"
DEFAULT_SECURITY_PROTOCOL_MAP = (
    "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"
)

_KEYS: list[ConfigKey] = [
    # -- identity, listeners, storage ------------------------------------------------------
    ConfigKey("node.id", INT, 0, "Id of this broker in the cluster (moldau default 0; Kafka "
              "requires it or generates one).", HIGH, at_least(0)),
    ConfigKey("broker.id", INT, 0, "Older name of node.id; if both are set they must agree.",
              HIGH, at_least(0)),
    ConfigKey("broker.rack", STR, None, "Rack of this broker, reported to clients in Metadata.",
              MEDIUM),
    ConfigKey("listeners", LIST, DEFAULT_LISTENERS, "Addresses to accept connections on, as "
              "NAME://host:port; an empty host means all interfaces.", HIGH),
    ConfigKey("advertised.listeners", LIST, None, "Addresses given to clients, if different "
              "from listeners (which are used when this is unset).", HIGH),
    ConfigKey("listener.security.protocol.map", STR, DEFAULT_SECURITY_PROTOCOL_MAP,
              "Maps listener names to security protocols (PLAINTEXT, SSL, SASL_PLAINTEXT, "
              "SASL_SSL).", LOW),
    ConfigKey("inter.broker.listener.name", STR, None, "Listener that other brokers use to "
              "reach this one (default: the first listener).", MEDIUM),
    ConfigKey("security.inter.broker.protocol", STR, None, "Security protocol between "
              "brokers: the inter-broker listener is the one of that name (set this or "
              "inter.broker.listener.name, not both).", MEDIUM,
              OneOf(("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"))),
    ConfigKey("log.dirs", LIST, None, "Directories that hold partition data; overrides log.dir.",
              HIGH),
    ConfigKey("log.dir", STR, DEFAULT_LOG_DIR, "Data directory used when log.dirs is unset "
              "(moldau default ./data).", HIGH),
    ConfigKey("zookeeper.connect", STR, None, "ZooKeeper connection string for a multi-broker "
              "cluster; unset runs one broker with embedded metadata.", HIGH),
    ConfigKey("zookeeper.session.timeout.ms", INT, 18_000, "ZooKeeper session timeout; the "
              "broker's registration vanishes this long after it dies.", HIGH),
    ConfigKey("zookeeper.connection.timeout.ms", INT, None, "How long to wait for a ZooKeeper "
              "connection (default: the session timeout).", HIGH),
    # -- topics and their defaults ---------------------------------------------------------
    ConfigKey("num.partitions", INT, 1, "Partitions of an auto-created topic.", MEDIUM,
              at_least(1)),
    ConfigKey("default.replication.factor", INT, 1, "Replication factor of an auto-created "
              "topic.", MEDIUM, at_least(1)),
    ConfigKey("auto.create.topics.enable", BOOL, True, "Create a topic when a client asks for "
              "metadata of (or produces to) one that does not exist.", HIGH),
    ConfigKey("delete.topic.enable", BOOL, True, "Allow DeleteTopics; when false the request "
              "is refused.", HIGH),
    ConfigKey("min.insync.replicas", INT, 1, "Default for the topic key of the same name.",
              HIGH, at_least(1)),
    ConfigKey("unclean.leader.election.enable", BOOL, False, "Default for the topic key of the "
              "same name.", HIGH),
    ConfigKey("compression.type", STR, "producer", "Default for the topic key of the same name.",
              HIGH, OneOf(COMPRESSION_TYPES)),
    ConfigKey("message.max.bytes", INT, 1_048_588, "Largest record batch accepted; default for "
              "the topic's max.message.bytes.", HIGH, at_least(0)),
    # -- log segments and retention ---------------------------------------------------------
    ConfigKey("log.segment.bytes", INT, 1_073_741_824, "Default segment.bytes.", HIGH,
              at_least(MIN_SEGMENT_BYTES)),
    ConfigKey("log.roll.ms", LONG, None, "Default segment.ms; beats log.roll.hours.", HIGH),
    ConfigKey("log.roll.hours", INT, 168, "Default segment.ms in hours.", HIGH, at_least(1)),
    ConfigKey("log.roll.jitter.ms", LONG, None, "Default segment.jitter.ms; beats "
              "log.roll.jitter.hours.", HIGH),
    ConfigKey("log.roll.jitter.hours", INT, 0, "Default segment.jitter.ms in hours.", HIGH,
              at_least(0)),
    ConfigKey("log.retention.ms", LONG, None, "Default retention.ms; beats the minutes and hours "
              "keys. Negative keeps data forever.", HIGH),
    ConfigKey("log.retention.minutes", INT, None, "Default retention.ms in minutes; beats "
              "log.retention.hours.", HIGH),
    ConfigKey("log.retention.hours", INT, 168, "Default retention.ms in hours.", HIGH),
    ConfigKey("log.retention.bytes", LONG, -1, "Default retention.bytes.", HIGH),
    ConfigKey("log.retention.check.interval.ms", LONG, 300_000, "How often segments are checked "
              "against retention.", MEDIUM, at_least(1)),
    ConfigKey("log.index.interval.bytes", INT, 4096, "Default index.interval.bytes.", MEDIUM,
              at_least(0)),
    ConfigKey("log.index.size.max.bytes", INT, 10_485_760, "Default segment.index.bytes.",
              MEDIUM, at_least(4)),
    ConfigKey("log.segment.delete.delay.ms", LONG, 60_000, "Default file.delete.delay.ms.", HIGH,
              at_least(0)),
    ConfigKey("log.cleanup.policy", LIST, ("delete",), "Default cleanup.policy.", MEDIUM,
              ListOf(CLEANUP_POLICIES)),
    ConfigKey("log.message.timestamp.type", STR, "CreateTime", "Default message.timestamp.type.",
              MEDIUM, OneOf(TIMESTAMP_TYPES)),
    ConfigKey("log.message.timestamp.difference.max.ms", LONG, LONG_MAX, "Default "
              "message.timestamp.difference.max.ms.", MEDIUM, at_least(0)),
    ConfigKey("log.message.timestamp.before.max.ms", LONG, LONG_MAX, "Default "
              "message.timestamp.before.max.ms.", MEDIUM, at_least(0)),
    ConfigKey("log.message.timestamp.after.max.ms", LONG, LONG_MAX, "Default "
              "message.timestamp.after.max.ms.", MEDIUM, at_least(0)),
    ConfigKey("log.message.downconversion.enable", BOOL, True, "Default "
              "message.downconversion.enable.", LOW, used=False),
    ConfigKey("log.message.format.version", STR, "3.0-IV1", "Deprecated; ignored.", MEDIUM,
              used=False),
    ConfigKey("log.preallocate", BOOL, False, "Default preallocate.", MEDIUM, used=False),
    # -- flushing and checkpoints ----------------------------------------------------------
    ConfigKey("log.flush.interval.messages", LONG, LONG_MAX, "Default flush.messages.", HIGH,
              at_least(1)),
    ConfigKey("log.flush.interval.ms", LONG, None, "Default flush.ms; unset falls back to "
              "log.flush.scheduler.interval.ms.", HIGH),
    ConfigKey("log.flush.scheduler.interval.ms", LONG, LONG_MAX, "How often the flusher checks "
              "whether a log is due an fsync.", HIGH),
    ConfigKey("log.flush.offset.checkpoint.interval.ms", INT, 60_000, "How often recovery points "
              "are written, bounding recovery work after a crash.", HIGH, at_least(0)),
    ConfigKey("log.flush.start.offset.checkpoint.interval.ms", INT, 60_000, "How often log start "
              "offsets are written.", HIGH, at_least(0)),
    ConfigKey("num.recovery.threads.per.data.dir", INT, 1, "Threads for log recovery at start-up; "
              "accepted, moldau recovers on one thread.", HIGH, at_least(1), used=False),
    # -- compaction -------------------------------------------------------------------------
    ConfigKey("log.cleaner.enable", BOOL, True, "Run the compaction thread for compacted topics.",
              MEDIUM),
    ConfigKey("log.cleaner.delete.retention.ms", LONG, 86_400_000, "Default delete.retention.ms.",
              MEDIUM, at_least(0)),
    ConfigKey("log.cleaner.min.cleanable.ratio", DOUBLE, 0.5, "Default min.cleanable.dirty.ratio.",
              MEDIUM, between(0, 1)),
    ConfigKey("log.cleaner.min.compaction.lag.ms", LONG, 0, "Default min.compaction.lag.ms.",
              MEDIUM, at_least(0)),
    ConfigKey("log.cleaner.max.compaction.lag.ms", LONG, LONG_MAX, "Default "
              "max.compaction.lag.ms.", MEDIUM, at_least(1)),
    ConfigKey("log.cleaner.backoff.ms", LONG, 15_000, "Pause of the cleaner when no log needs "
              "compaction.", MEDIUM, at_least(0)),
    ConfigKey("log.cleaner.threads", INT, 1, "Compaction threads; accepted, moldau uses one.",
              MEDIUM, at_least(0), used=False),
    ConfigKey("log.cleaner.dedupe.buffer.size", LONG, 134_217_728, "Memory for the compaction "
              "key map; accepted, unused.", MEDIUM, used=False),
    ConfigKey("log.cleaner.io.buffer.size", INT, 524_288, "Compaction I/O buffer; accepted, "
              "unused.", MEDIUM, at_least(0), used=False),
    ConfigKey("log.cleaner.io.buffer.load.factor", DOUBLE, 0.9, "Compaction map load factor; "
              "accepted, unused.", MEDIUM, used=False),
    ConfigKey("log.cleaner.io.max.bytes.per.second", DOUBLE, 1.7976931348623157e308, "Compaction "
              "I/O throttle; accepted, unused.", MEDIUM, used=False),
    # -- scrubber (moldau's own: Kafka has none) ---------------------------------------------
    ConfigKey("log.scrubber.enable", BOOL, False, "Re-check the CRCs of closed segments in the "
              "background and log corrupt batches (moldau-specific).", MEDIUM),
    ConfigKey("log.scrubber.bytes.per.second", LONG, 1_048_576, "Read rate of the scrubber "
              "(moldau-specific).", MEDIUM, at_least(1)),
    ConfigKey("log.scrubber.backoff.ms", LONG, 60_000, "Pause of the scrubber between passes "
              "over all closed segments (moldau-specific).", MEDIUM, at_least(0)),
    # -- network ---------------------------------------------------------------------------
    ConfigKey("socket.request.max.bytes", INT, 104_857_600, "Largest request frame accepted; "
              "bigger frames close the connection.", HIGH, at_least(1)),
    ConfigKey("connections.max.idle.ms", LONG, 600_000, "Connections with no activity (bytes "
              "read or a response written) are closed after this long; negative disables.",
              MEDIUM),
    ConfigKey("queued.max.request.bytes", LONG, -1, "Bytes of requests being received or "
              "waiting to be handled, over all connections; while reached, no connection starts "
              "reading a new request. -1: no limit. At least socket.request.max.bytes when set.",
              MEDIUM),
    ConfigKey("fetch.max.bytes", INT, 57_671_680, "Upper bound on the bytes of one Fetch "
              "response.", MEDIUM, at_least(1024)),
    ConfigKey("num.network.threads", INT, 3, "Network threads; accepted, moldau runs one event "
              "loop.", HIGH, at_least(1), used=False),
    ConfigKey("num.io.threads", INT, 8, "Request threads; accepted, moldau runs one event loop.",
              HIGH, at_least(1), used=False),
    ConfigKey("background.threads", INT, 10, "Background threads; accepted, unused.", HIGH,
              at_least(1), used=False),
    ConfigKey("queued.max.requests", INT, 500, "Request queue length; accepted, unused.", HIGH,
              at_least(1), used=False),
    ConfigKey("socket.send.buffer.bytes", INT, 102_400, "SO_SNDBUF; accepted, moldau keeps the "
              "OS default.", HIGH, used=False),
    ConfigKey("socket.receive.buffer.bytes", INT, 102_400, "SO_RCVBUF; accepted, moldau keeps "
              "the OS default.", HIGH, used=False),
    ConfigKey("socket.listen.backlog.size", INT, 50, "Listen backlog; accepted, unused.", MEDIUM,
              at_least(1), used=False),
    ConfigKey("max.connections", INT, INT_MAX, "Connections the broker accepts; at the limit it "
              "stops accepting until one closes.", MEDIUM, at_least(0)),
    ConfigKey("max.connections.per.ip", INT, INT_MAX, "Connections accepted from one address; "
              "more are closed at once.", MEDIUM, at_least(0)),
    ConfigKey("max.connections.per.ip.overrides", STR, "", "Per-address exceptions to "
              "max.connections.per.ip, as host:count,host:count (host names or addresses).",
              MEDIUM),
    ConfigKey("max.connection.creation.rate", INT, INT_MAX, "New connections per second; "
              "accepted, unused.", MEDIUM, at_least(0), used=False),
    # -- client quotas ---------------------------------------------------------------------
    ConfigKey("quota.window.num", INT, 11, "Windows over which a client's rate is measured "
              "against its quota.", LOW, at_least(1)),
    ConfigKey("quota.window.size.seconds", INT, 1, "Length of each quota window; also the "
              "longest a client is throttled for at once.", LOW, at_least(1)),
    # -- replication -----------------------------------------------------------------------
    ConfigKey("replica.fetch.max.bytes", INT, 1_048_576, "Bytes a follower asks for per "
              "partition.", MEDIUM, at_least(0)),
    ConfigKey("replica.fetch.response.max.bytes", INT, 10_485_760, "Bytes a follower asks for "
              "per fetch.", MEDIUM, at_least(0)),
    ConfigKey("replica.fetch.min.bytes", INT, 1, "Bytes a follower fetch waits for.", MEDIUM),
    ConfigKey("replica.fetch.wait.max.ms", INT, 500, "Longest a follower fetch waits.", MEDIUM),
    ConfigKey("replica.fetch.backoff.ms", INT, 1000, "Pause after a failed follower fetch.",
              MEDIUM, at_least(0)),
    ConfigKey("replica.lag.time.max.ms", LONG, 30_000, "A follower that has not caught up for "
              "this long leaves the ISR.", HIGH),
    ConfigKey("replica.socket.timeout.ms", INT, 30_000, "Socket timeout of follower fetches.",
              HIGH),
    ConfigKey("replica.high.watermark.checkpoint.interval.ms", LONG, 5000, "How often high "
              "watermarks are written to disk.", HIGH),
    ConfigKey("leader.replication.throttled.rate", LONG, LONG_MAX, "Bytes/s this broker "
              "serves, as leader, to followers of the partitions in a topic's "
              "leader.replication.throttled.replicas that are not in the ISR (reassignments).",
              MEDIUM, at_least(0)),
    ConfigKey("replica.alter.log.dirs.io.max.bytes.per.second", LONG, LONG_MAX, "Bytes/s "
              "copied by moves of replicas between this broker's log dirs "
              "(AlterReplicaLogDirs).", MEDIUM, at_least(1)),
    ConfigKey("follower.replication.throttled.rate", LONG, LONG_MAX, "Bytes/s this broker "
              "fetches, as follower, for the partitions in a topic's "
              "follower.replication.throttled.replicas while it is not in sync.", MEDIUM,
              at_least(0)),
    ConfigKey("num.replica.fetchers", INT, 1, "Fetcher threads per source broker; accepted, "
              "moldau runs fetchers on the event loop.", HIGH, used=False),
    ConfigKey("auto.leader.rebalance.enable", BOOL, True, "The controller moves leadership "
              "back to preferred replicas when a broker's leader imbalance is too high.", HIGH),
    ConfigKey("leader.imbalance.check.interval.seconds", LONG, 300, "How often the controller "
              "checks the leader imbalance.", HIGH, at_least(1)),
    ConfigKey("leader.imbalance.per.broker.percentage", INT, 10, "Share of a broker's "
              "preferred partitions led elsewhere above which leadership is moved back.", HIGH),
    ConfigKey("controlled.shutdown.enable", BOOL, True, "On SIGTERM, ask the controller to move "
              "this broker's leadership away before shutting down (clusters only).", MEDIUM),
    ConfigKey("controlled.shutdown.max.retries", INT, 3, "Attempts at a controlled shutdown "
              "(controller moved or unreachable, partitions still led).", MEDIUM, at_least(0)),
    ConfigKey("controlled.shutdown.retry.backoff.ms", LONG, 5000, "Pause between two attempts "
              "at a controlled shutdown.", MEDIUM, at_least(0)),
    # -- groups and offsets ----------------------------------------------------------------
    ConfigKey("group.initial.rebalance.delay.ms", INT, 3000, "Wait for more members before the "
              "first rebalance of a new group.", MEDIUM),
    ConfigKey("group.min.session.timeout.ms", INT, 6000, "Smallest session timeout a consumer "
              "may ask for.", MEDIUM),
    ConfigKey("group.max.session.timeout.ms", INT, 1_800_000, "Largest session timeout a "
              "consumer may ask for.", MEDIUM),
    ConfigKey("group.consumer.heartbeat.interval.ms", INT, 5000, "Heartbeat interval the "
              "coordinator gives members of consumer-protocol (KIP-848) groups.", MEDIUM,
              at_least(1)),
    ConfigKey("group.consumer.session.timeout.ms", INT, 45_000, "Members of consumer-protocol "
              "(KIP-848) groups silent this long are fenced.", MEDIUM, at_least(1)),
    ConfigKey("group.max.size", INT, INT_MAX, "Most members a group may have.", MEDIUM,
              at_least(1)),
    ConfigKey("offset.metadata.max.bytes", INT, 4096, "Longest metadata string an offset "
              "commit may carry.", HIGH),
    ConfigKey("offsets.topic.num.partitions", INT, 50, "Partitions of __consumer_offsets.",
              HIGH, at_least(1)),
    ConfigKey("offsets.topic.replication.factor", SHORT, 3, "Replication factor of "
              "__consumer_offsets (capped by the number of live brokers).", HIGH, at_least(1)),
    ConfigKey("offsets.topic.segment.bytes", INT, 104_857_600, "Segment size of "
              "__consumer_offsets.", HIGH, at_least(1)),
    ConfigKey("offsets.retention.minutes", INT, 10_080, "How long committed offsets of an "
              "empty group are kept.", HIGH, at_least(1)),
    ConfigKey("offsets.retention.check.interval.ms", LONG, 600_000, "How often stale offsets are "
              "looked for.", HIGH, at_least(1)),
    ConfigKey("offsets.commit.timeout.ms", INT, 5000, "How long an offset commit may wait for "
              "replication.", HIGH, at_least(1)),
    ConfigKey("offsets.load.buffer.size", INT, 5_242_880, "Read size when loading offsets; "
              "accepted, unused.", HIGH, at_least(1), used=False),
    # -- transactions ----------------------------------------------------------------------
    ConfigKey("transaction.state.log.num.partitions", INT, 50, "Partitions of "
              "__transaction_state.", HIGH, at_least(1)),
    ConfigKey("transaction.state.log.replication.factor", SHORT, 3, "Replication factor of "
              "__transaction_state (capped by the number of live brokers).", HIGH, at_least(1)),
    ConfigKey("transaction.state.log.min.isr", INT, 2, "min.insync.replicas of "
              "__transaction_state.", HIGH, at_least(1)),
    ConfigKey("transaction.state.log.segment.bytes", INT, 104_857_600, "Segment size of "
              "__transaction_state.", HIGH, at_least(1)),
    ConfigKey("transaction.state.log.load.buffer.size", INT, 5_242_880, "Read size when loading "
              "transactions; accepted, unused.", HIGH, at_least(1), used=False),
    ConfigKey("transactional.id.expiration.ms", INT, 604_800_000, "Transactional ids idle this "
              "long (no transaction, no InitProducerId) are removed from "
              "__transaction_state.", HIGH, at_least(1)),
    ConfigKey("transaction.max.timeout.ms", INT, 900_000, "Largest transaction.timeout.ms a "
              "producer may ask for (a larger one is INVALID_TRANSACTION_TIMEOUT).", HIGH,
              at_least(1)),
    ConfigKey("transaction.abort.timed.out.transaction.cleanup.interval.ms", INT, 10_000, "How "
              "often Kafka looks for timed-out transactions; accepted, unused: moldau's "
              "coordinator aborts each one at its own deadline.", LOW, at_least(1),
              used=False),
    ConfigKey("transaction.remove.expired.transaction.cleanup.interval.ms", INT, 3_600_000,
              "How often Kafka looks for expired transactional ids; accepted, unused: moldau "
              "removes each one at its own deadline.", LOW, at_least(1), used=False),
    ConfigKey("producer.id.expiration.ms", INT, 86_400_000, "Producer ids idle this long lose "
              "their idempotence state.", LOW, at_least(1)),
    ConfigKey("producer.id.expiration.check.interval.ms", INT, 600_000, "How often producer "
              "ids idle longer than producer.id.expiration.ms are forgotten.", LOW,
              at_least(1)),
    ConfigKey("confluent.schema.registry.url", STR, None, "Schema Registry URL(s), comma "
              "separated, that topics with confluent.value.schema.validation (or .key.) "
              "check record schema ids against (Confluent Server's key).", LOW),
    # -- moldau's own (Kafka has no such key) ----------------------------------------------
    ConfigKey("metrics.listener", STR, None, "moldau only: where to serve Prometheus metrics "
              "(/metrics) and health checks (/health/live, /health/ready), as http://host:port "
              "(e.g. http://127.0.0.1:9644); unset: no metrics endpoint, and the broker keeps "
              "no metrics at all.", MEDIUM, MetricsListenerFormat()),
    ConfigKey("console.enable", BOOL, False, "moldau only: serve the web console (moldau "
              "console, run as a child process) under /console/ on the metrics.listener port, "
              "which must be set.", LOW),
    ConfigKey("moldau.loop.stall.warn.ms", INT, 1000, "moldau only: log a warning naming the "
              "request being handled whenever the event loop stalls longer than this (0: off).",
              LOW, at_least(0)),
    ConfigKey("moldau.test.drop.produce.response.after.append", INT, 0, "moldau only, TEST "
              "ONLY: close the connection instead of answering every Nth Produce that wrote "
              "new records (after the append and, with acks=all, the replication; 0: off).",
              LOW, at_least(0)),
    ConfigKey("moldau.test.stop.after.dropped.response", BOOL, False, "moldau only, TEST "
              "ONLY: the broker stops itself (SIGSTOP) after dropping a Produce response.",
              LOW),
    ConfigKey("moldau.test.startup.delay.ms", INT, 0, "moldau only, TEST ONLY: start-up "
              "sleeps this long before it loads the logs (0: off), so tests can watch a "
              "broker that is still starting.", LOW, at_least(0)),
    ConfigKey("moldau.test.hold.transaction.markers", BOOL, False, "moldau only, TEST ONLY: "
              "the transaction coordinator writes PrepareCommit/PrepareAbort but sends no "
              "markers (the transaction stays in Prepare* until a restart without this key).",
              LOW),
]

#: Keys Kafka lets IncrementalAlterConfigs change on a BROKER resource and that moldau keeps
#: changeable: the cluster-wide topic defaults (log.retention.ms, log.segment.bytes,
#: message.max.bytes, ...), the connection limits, plus the thread sizing keys Kafka treats
#: as dynamic and its TLS/SASL keys (accepted, stored, unused; see :mod:`.security_keys` for
#: their listener prefixes and per-broker rules). Everything else needs a restart, as in Kafka.
DYNAMIC_KEYS: frozenset[str] = TOPIC_DEFAULT_BROKER_KEYS | {
    "num.io.threads",
    "num.network.threads",
    "num.replica.fetchers",
    "num.recovery.threads.per.data.dir",
    "background.threads",
    "log.cleaner.threads",
    "log.cleaner.dedupe.buffer.size",
    "log.cleaner.io.buffer.size",
    "log.cleaner.io.buffer.load.factor",
    "log.cleaner.io.max.bytes.per.second",
    "log.cleaner.backoff.ms",
    "max.connections",
    "max.connections.per.ip",
    "max.connections.per.ip.overrides",
    "max.connection.creation.rate",
    "producer.id.expiration.ms",
    "leader.replication.throttled.rate",
    "follower.replication.throttled.rate",
    "replica.alter.log.dirs.io.max.bytes.per.second",
} | {k.name for k in SECURITY_KEYS}


def _with_dynamic(key: ConfigKey) -> ConfigKey:
    if key.name not in DYNAMIC_KEYS:
        return key
    return ConfigKey(key.name, key.type, key.default, key.doc, key.importance, key.validator,
                     key.used, True, key.sensitive)


BROKER_KEYS: dict[str, ConfigKey] = index_keys(_with_dynamic(k) for k in _KEYS + SECURITY_KEYS
                                                    + AUTHORIZER_KEYS)

#: Kafka broker keys for features moldau does not have; accepted with any value.
KNOWN_UNUSED_KEYS: frozenset[str] = frozenset({
    "advertised.host.name",
    "advertised.port",
    "alter.config.policy.class.name",
    "alter.log.dirs.replication.quota.window.num",
    "auto.include.jmx.reporter",
    "broker.heartbeat.interval.ms",
    "broker.id.generation.enable",
    "broker.session.timeout.ms",
    "client.quota.callback.class",
    "connection.failed.authentication.delay.ms",
    "controller.listener.names",
    "controller.quorum.bootstrap.servers",
    "controller.quorum.voters",
    "controller.socket.timeout.ms",
    "create.topic.policy.class.name",
    "delegation.token.expiry.time.ms",
    "delegation.token.max.lifetime.ms",
    "delegation.token.secret.key",
    "delete.records.purgatory.purge.interval.requests",
    "fetch.purgatory.purge.interval.requests",
    "group.consumer.heartbeat.interval.ms",
    "group.consumer.session.timeout.ms",
    "group.coordinator.rebalance.protocols",
    "host.name",
    "inter.broker.protocol.version",
    "kafka.metrics.polling.interval.secs",
    "kafka.metrics.reporters",
    "log.dir.failure.timeout.ms",
    "log.initial.task.delay.ms",
    "max.incremental.fetch.session.cache.slots",
    "metadata.log.dir",
    "metadata.log.max.record.bytes.between.snapshots",
    "metadata.log.segment.bytes",
    "metadata.log.segment.ms",
    "metadata.max.retention.bytes",
    "metadata.max.retention.ms",
    "metric.reporters",
    "metrics.num.samples",
    "metrics.recording.level",
    "metrics.sample.window.ms",
    "node.id.generation.enable",
    "offsets.topic.compression.codec",
    "password.encoder.secret",
    "port",
    "principal.builder.class",
    "process.roles",
    "producer.purgatory.purge.interval.requests",
    "remote.log.storage.system.enable",
    "replica.selector.class",
    "replication.quota.window.num",
    "request.timeout.ms",
    "reserved.broker.max.id",
    "transaction.partition.verification.enable",
    "unstable.api.versions.enable",
    "zookeeper.clientCnxnSocket",
    "zookeeper.max.in.flight.requests",
    "zookeeper.metadata.migration.enable",
    "zookeeper.set.acl",
})

#: Key families moldau has no use for (TLS, SASL, per-listener overrides, tiered storage...).
KNOWN_UNUSED_PREFIXES: tuple[str, ...] = (
    "ssl.",
    "sasl.",
    "listener.name.",
    "zookeeper.ssl.",
    "remote.log.",
    "confluent.",
    "metrics.",
    "kafka.metrics.",
    "early.start.listeners",
    "log4j.",
)


def is_known_unused(name: str) -> bool:
    """True for a Kafka key moldau accepts without reading it."""
    return name in KNOWN_UNUSED_KEYS or name.startswith(KNOWN_UNUSED_PREFIXES)
