"""The options of the ``moldau`` data source, parsed once on the driver.

The names and meanings are those of Spark's built-in Kafka source and sink, so a job written
for ``format("kafka")`` runs with ``format("moldau")`` after changing only the format name.
Options arrive as a case-insensitive string map; every mistake is reported here, when the
query is defined, with a message that names the option, instead of failing later in a task.
Nothing in this module talks to a broker or imports pyspark, so it is unit-testable alone.
"""

from __future__ import annotations

import json
import logging
import os
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

TopicPartition = tuple[str, int]

# Spark's sentinels in per-partition offset JSON.
LATEST = -1
EARLIEST = -2

# Client settings the source or sink owns: Spark rejects the same ones, for the same reason.
SOURCE_FORBIDDEN_KEYS = {
    "auto.offset.reset": "use startingOffsets instead",
    "enable.auto.commit": "the source never commits offsets; Spark's checkpoint keeps them",
    "key.deserializer": "keys are always returned as binary",
    "value.deserializer": "values are always returned as binary",
    "interceptor.classes": "the source reads keys and values as bytes, which an "
                           "interceptor could break",
}
SINK_FORBIDDEN_KEYS = {
    "key.serializer": "keys are written from the key column (string or binary) as they are",
    "value.serializer": "values are written from the value column (string or binary) as "
                        "they are",
}

# Spark's group id prefixes, when neither kafka.group.id nor groupIdPrefix is given.
STREAM_GROUP_PREFIX = "spark-kafka-source"
BATCH_GROUP_PREFIX = "spark-kafka-relation"
ISOLATION_LEVELS = ("read_uncommitted", "read_committed")
DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60 * 1000
DEFAULT_FETCH_OFFSET_RETRIES = 3
DEFAULT_FETCH_OFFSET_RETRY_INTERVAL_MS = 10

# Spark waits this long for a Kafka poll before failing a task (kafkaConsumer.pollTimeoutMs).
DEFAULT_POLL_TIMEOUT_MS = 120_000


class OptionError(ValueError):
    """An option is missing, malformed or does not fit this kind of query."""


@dataclass(frozen=True)
class Subscription:
    """Which partitions to read: ``subscribe``, ``subscribePattern`` or ``assign``."""

    kind: Literal["subscribe", "subscribePattern", "assign"]
    topics: tuple[str, ...] = ()
    pattern: str = ""
    partitions: tuple[TopicPartition, ...] = ()


@dataclass(frozen=True)
class OffsetSpec:
    """Where to start or end: earliest, latest, per-partition offsets, or timestamps.

    ``offsets`` holds per-partition offsets (``EARLIEST``/``LATEST`` allowed) for kind
    ``offsets``; ``timestamp`` applies to every partition for kind ``timestamp``;
    ``timestamps`` holds per-partition timestamps for kind ``timestamps``.
    """

    kind: Literal["earliest", "latest", "offsets", "timestamp", "timestamps"]
    offsets: Mapping[TopicPartition, int] = field(default_factory=dict)
    timestamp: int = 0
    timestamps: Mapping[TopicPartition, int] = field(default_factory=dict)


EARLIEST_SPEC = OffsetSpec("earliest")
LATEST_SPEC = OffsetSpec("latest")


@dataclass(frozen=True)
class SourceOptions:
    """Everything the reader needs, on the driver and (pickled) on the executors."""

    client_config: Mapping[str, str]
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec
    max_offsets_per_trigger: int | None
    min_partitions: int | None
    fail_on_data_loss: bool
    include_headers: bool
    poll_timeout_ms: int
    timestamp_strategy: Literal["error", "latest"]
    #: ``moldau.decoder``: how executors read (see fetch.py); "columnar" falls back to
    #: "rows" where it cannot work (extension not built, non-plaintext connections).
    decoder: Literal["columnar", "rows"] = "columnar"
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = DEFAULT_MAX_TRIGGER_DELAY_MS
    max_records_per_partition: int | None = None
    fetch_offset_retries: int = DEFAULT_FETCH_OFFSET_RETRIES
    fetch_offset_retry_interval_ms: int = DEFAULT_FETCH_OFFSET_RETRY_INTERVAL_MS


DEFAULT_COMMITS_TOPIC = "__moldau_spark_commits"
DEFAULT_TRANSACTIONAL_ID_PREFIX = "moldau-spark-"


@dataclass(frozen=True)
class ExactlyOnce:
    """The exactly-once sink's settings (``exactlyOnce=true``; see ``exactly_once.py``).

    ``fail_task_once`` and ``die_after_commit_once`` are test-only fault injections
    (``moldau.test.*`` options): a marker-file path; the fault fires once, when the file
    does not exist yet, and creates it.
    """

    commits_topic: str = DEFAULT_COMMITS_TOPIC
    transactional_id_prefix: str = DEFAULT_TRANSACTIONAL_ID_PREFIX
    fail_task_once: str | None = None
    die_after_commit_once: str | None = None
    # For a batch write inside ``foreachBatch``: the stream's stable name and the batch id.
    query_id: str | None = None
    batch_id: int | None = None


@dataclass(frozen=True)
class SinkOptions:
    """What the writer needs: the client config, an optional default/overriding topic and,
    for the exactly-once sink, its settings."""

    client_config: Mapping[str, str]
    topic: str | None
    exactly_once: ExactlyOnce | None = None
    write_path: Literal["batches", "columnar", "rows"] = "batches"


def _get(options: Mapping[str, str], name: str) -> str | None:
    # Spark hands us a case-insensitive map; a plain dict (unit tests) may use any case.
    for key, value in options.items():
        if key.lower() == name.lower():
            return str(value)
    return None


def client_config(options: Mapping[str, str],
                  forbidden: Mapping[str, str] | None = None) -> dict[str, str]:
    """The ``kafka.*`` options without their prefix, for librdkafka; ``forbidden`` keys
    (the source's or the sink's) are refused with the reason."""
    config = {key[len("kafka."):]: str(value) for key, value in options.items()
              if key.lower().startswith("kafka.")}
    if "bootstrap.servers" not in config:
        raise OptionError("option 'kafka.bootstrap.servers' must be specified")
    for key, why in (forbidden or {}).items():
        if key in config:
            raise OptionError(f"option 'kafka.{key}' is not supported: {why}")
    return config


def client_logger() -> logging.Logger:
    """Where librdkafka's own log lines go: nowhere, unless ``MOLDAU_CLIENT_LOG`` is set.

    Without it, every task's client writes connection chatter to the executor's stderr,
    which Spark copies into the driver's console.
    """
    logger = logging.getLogger("moldau.spark.librdkafka")
    if not logger.handlers:
        logger.propagate = False
        if os.environ.get("MOLDAU_CLIENT_LOG"):
            logger.addHandler(logging.StreamHandler())
            logger.setLevel(logging.DEBUG)
        else:
            logger.addHandler(logging.NullHandler())
    return logger


def consumer_config(base: Mapping[str, str], purpose: str) -> dict[str, Any]:
    """A consumer config that reads by ``assign`` and can never commit or join a group.

    librdkafka insists on a ``group.id`` even for assign(); a fresh one per consumer
    (unless the user set ``kafka.group.id``) keeps the source out of everyone's groups.
    """
    config: dict[str, Any] = {"logger": client_logger(), **base}
    config.setdefault("group.id", f"spark-moldau-{purpose}-{uuid.uuid4().hex[:12]}")
    config["enable.auto.commit"] = False
    config["enable.auto.offset.store"] = False
    return config


def parse_bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    raw = _get(options, name)
    if raw is None:
        return default
    if raw.strip().lower() in ("true", "false"):
        return raw.strip().lower() == "true"
    raise OptionError(f"option '{name}' must be true or false, not {raw!r}")


def _parse_positive(options: Mapping[str, str], name: str) -> int | None:
    raw = _get(options, name)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise OptionError(f"option '{name}' must be a positive integer, not {raw!r}") from None
    if value <= 0:
        raise OptionError(f"option '{name}' must be a positive integer, not {raw!r}")
    return value


_TIME_UNITS_MS = {"us": 0.001, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000,
                  "h": 3_600_000, "d": 86_400_000}


def _parse_duration_ms(options: Mapping[str, str], name: str, default: int) -> int:
    """A duration as Spark writes them (``15m``, ``30s``, ``500ms``; a bare number is ms)."""
    raw = _get(options, name)
    if raw is None:
        return default
    match = re.fullmatch(r"\s*(\d+)\s*([a-z]*)\s*", raw.lower())
    if not match or match.group(2) not in ("", *_TIME_UNITS_MS):
        raise OptionError(f"option '{name}' must be a duration such as 15m, 30s or 500ms, "
                          f"not {raw!r}")
    return int(int(match.group(1)) * _TIME_UNITS_MS.get(match.group(2) or "ms", 1))


def _parse_count(options: Mapping[str, str], name: str, default: int) -> int:
    """A count of 0 or more."""
    raw = _get(options, name)
    if raw is None:
        return default
    if not raw.strip().isdigit():
        raise OptionError(f"option '{name}' must be 0 or a positive integer, not {raw!r}")
    return int(raw)


def _partition_map(raw: str, name: str) -> dict[TopicPartition, int]:
    """``{"topic": {"0": 23, "1": -2}}`` → ``{("topic", 0): 23, ("topic", 1): -2}``."""
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise OptionError(f"option '{name}' is not valid JSON: {exc}") from None
    if not isinstance(parsed, dict):
        raise OptionError(f"option '{name}' must be a JSON object of topic to partitions")
    result: dict[TopicPartition, int] = {}
    for topic, partitions in parsed.items():
        if not isinstance(partitions, dict):
            raise OptionError(f"option '{name}': topic {topic!r} needs an object of partitions")
        for partition, value in partitions.items():
            try:
                result[(topic, int(partition))] = int(value)
            except (TypeError, ValueError):
                raise OptionError(
                    f"option '{name}': bad entry {partition!r}: {value!r} for topic {topic!r}"
                ) from None
    return result


def parse_subscription(options: Mapping[str, str]) -> Subscription:
    """Exactly one of subscribe, subscribePattern and assign, as in Spark."""
    given = {name: _get(options, name) for name in ("subscribe", "subscribePattern", "assign")}
    present = [name for name, value in given.items() if value is not None]
    if len(present) != 1:
        raise OptionError(
            "exactly one of the options 'subscribe', 'subscribePattern' or 'assign' must be "
            f"specified (got {', '.join(present) or 'none'})"
        )
    kind = present[0]
    raw = given[kind] or ""
    if kind == "subscribe":
        topics = tuple(t.strip() for t in raw.split(",") if t.strip())
        if not topics:
            raise OptionError("option 'subscribe' names no topic")
        return Subscription("subscribe", topics=topics)
    if kind == "subscribePattern":
        if not raw.strip():
            raise OptionError("option 'subscribePattern' is empty")
        return Subscription("subscribePattern", pattern=raw.strip())
    try:
        parsed = json.loads(raw)
        partitions = tuple(sorted(
            (str(topic), int(p)) for topic, ps in parsed.items() for p in ps
        ))
    except (json.JSONDecodeError, AttributeError, TypeError, ValueError):
        raise OptionError(
            f"option 'assign' must be JSON like {{\"topicA\":[0,1]}}, not {raw!r}"
        ) from None
    if not partitions:
        raise OptionError("option 'assign' names no partition")
    return Subscription("assign", partitions=partitions)


def parse_offset_spec(
    options: Mapping[str, str], which: Literal["starting", "ending"], default: OffsetSpec
) -> OffsetSpec:
    """``<which>Offsets`` / ``<which>Timestamp`` / ``<which>OffsetsByTimestamp``; one at most."""
    by_offsets = _get(options, f"{which}Offsets")
    by_timestamp = _get(options, f"{which}Timestamp")
    by_timestamps = _get(options, f"{which}OffsetsByTimestamp")
    given = [raw for raw in (by_offsets, by_timestamp, by_timestamps) if raw is not None]
    if len(given) > 1:
        raise OptionError(
            f"use only one of '{which}Offsets', '{which}Timestamp' and "
            f"'{which}OffsetsByTimestamp'"
        )
    if by_timestamp is not None:
        try:
            return OffsetSpec("timestamp", timestamp=int(by_timestamp))
        except ValueError:
            raise OptionError(
                f"option '{which}Timestamp' must be milliseconds since the epoch, "
                f"not {by_timestamp!r}"
            ) from None
    if by_timestamps is not None:
        return OffsetSpec(
            "timestamps", timestamps=_partition_map(by_timestamps, f"{which}OffsetsByTimestamp")
        )
    if by_offsets is None:
        return default
    word = by_offsets.strip().lower()
    if word == "earliest":
        return EARLIEST_SPEC
    if word == "latest":
        return LATEST_SPEC
    return OffsetSpec("offsets", offsets=_partition_map(by_offsets, f"{which}Offsets"))


def _check_batch_bounds(starting: OffsetSpec, ending: OffsetSpec) -> None:
    """Spark's rules: a batch cannot start at latest nor end at earliest."""
    if starting.kind == "latest" or LATEST in starting.offsets.values():
        raise OptionError("startingOffsets cannot be latest (-1) for a batch query")
    if ending.kind == "earliest" or EARLIEST in ending.offsets.values():
        raise OptionError("endingOffsets cannot be earliest (-2) for a batch query")


def parse_source_options(options: Mapping[str, str], streaming: bool) -> SourceOptions:
    """Validate the reader options of a batch (``streaming=False``) or streaming query."""
    starting = parse_offset_spec(
        options, "starting", LATEST_SPEC if streaming else EARLIEST_SPEC
    )
    ending = parse_offset_spec(options, "ending", LATEST_SPEC)
    if streaming:
        if ending != LATEST_SPEC:
            raise OptionError("ending offsets are not valid in a streaming query")
    else:
        _check_batch_bounds(starting, ending)
        for name in ("maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay"):
            if _get(options, name) is not None:
                raise OptionError(f"option '{name}' only applies to streaming queries")
    strategy = (_get(options, "startingOffsetsByTimestampStrategy") or "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise OptionError(
            "option 'startingOffsetsByTimestampStrategy' must be 'error' or 'latest'"
        )
    config = client_config(options, SOURCE_FORBIDDEN_KEYS)
    isolation = config.get("isolation.level")
    if isolation is not None and isolation not in ISOLATION_LEVELS:
        raise OptionError("option 'kafka.isolation.level' must be read_uncommitted or "
                          f"read_committed, not {isolation!r}")
    _set_group_id(config, options, streaming)
    return SourceOptions(
        client_config=config,
        subscription=parse_subscription(options),
        starting=starting,
        ending=ending,
        max_offsets_per_trigger=_parse_positive(options, "maxOffsetsPerTrigger"),
        min_partitions=_parse_positive(options, "minPartitions"),
        fail_on_data_loss=parse_bool(options, "failOnDataLoss", True),
        include_headers=parse_bool(options, "includeHeaders", False),
        poll_timeout_ms=(_parse_positive(options, "kafkaConsumer.pollTimeoutMs")
                         or DEFAULT_POLL_TIMEOUT_MS),
        timestamp_strategy="latest" if strategy == "latest" else "error",
        decoder=_parse_decoder(options),
        min_offsets_per_trigger=_parse_positive(options, "minOffsetsPerTrigger"),
        max_trigger_delay_ms=_parse_duration_ms(options, "maxTriggerDelay",
                                                DEFAULT_MAX_TRIGGER_DELAY_MS),
        max_records_per_partition=_parse_positive(options, "maxRecordsPerPartition"),
        fetch_offset_retries=_parse_count(options, "fetchOffset.numRetries",
                                          DEFAULT_FETCH_OFFSET_RETRIES),
        fetch_offset_retry_interval_ms=_parse_count(options, "fetchOffset.retryIntervalMs",
                                                    DEFAULT_FETCH_OFFSET_RETRY_INTERVAL_MS),
    )


def _parse_decoder(options: Mapping[str, str]) -> Literal["columnar", "rows"]:
    raw = (_get(options, "moldau.decoder") or "columnar").strip().lower()
    if raw == "columnar":
        return "columnar"
    if raw == "rows":
        return "rows"
    raise OptionError(f"option 'moldau.decoder' must be 'columnar' or 'rows', not {raw!r}")


def _set_group_id(config: dict[str, str], options: Mapping[str, str], streaming: bool) -> None:
    """One group id per query, ``<groupIdPrefix>-<uuid>`` as in Spark, unless the user set
    ``kafka.group.id``. The source only ever assigns partitions: it never joins the group
    nor commits to it, so even a shared ``kafka.group.id`` cannot disturb other readers."""
    prefix = _get(options, "groupIdPrefix")
    if "group.id" in config:
        return  # Spark ignores groupIdPrefix then
    if prefix is not None and not prefix.strip():
        raise OptionError("option 'groupIdPrefix' is empty")
    default = STREAM_GROUP_PREFIX if streaming else BATCH_GROUP_PREFIX
    config["group.id"] = f"{(prefix or default).strip()}-{uuid.uuid4()}"


def _parse_exactly_once(options: Mapping[str, str], config: Mapping[str, str]
                        ) -> ExactlyOnce | None:
    if not parse_bool(options, "exactlyOnce", False):
        for name in ("commitsTopic", "transactionalIdPrefix", "queryId", "batchId"):
            if _get(options, name) is not None:
                raise OptionError(f"option '{name}' needs option 'exactlyOnce' set to true")
        return None
    if "transactional.id" in config:
        raise OptionError("option 'kafka.transactional.id' is not supported with exactlyOnce: "
                          "each task derives its own (see 'transactionalIdPrefix')")
    commits = (_get(options, "commitsTopic") or DEFAULT_COMMITS_TOPIC).strip()
    if not commits:
        raise OptionError("option 'commitsTopic' is empty")
    prefix = _get(options, "transactionalIdPrefix")
    query_id, batch_id = _get(options, "queryId"), _get(options, "batchId")
    if (query_id is None) != (batch_id is None):
        raise OptionError("options 'queryId' and 'batchId' go together")
    if batch_id is not None and not batch_id.strip().isdigit():
        raise OptionError(f"option 'batchId' must be a batch id (0 or more), not {batch_id!r}")
    return ExactlyOnce(
        commits_topic=commits,
        transactional_id_prefix=DEFAULT_TRANSACTIONAL_ID_PREFIX if prefix is None else prefix,
        fail_task_once=_get(options, "moldau.test.failTaskOnce"),
        die_after_commit_once=_get(options, "moldau.test.dieAfterCommitOnce"),
        query_id=query_id.strip() if query_id is not None else None,
        batch_id=int(batch_id) if batch_id is not None else None,
    )


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    """The writer's options: ``kafka.*``, ``topic`` (which overrides a topic column) and the
    exactly-once sink's (``exactlyOnce``, ``commitsTopic``, ``transactionalIdPrefix``)."""
    topic = _get(options, "topic")
    config = client_config(options, SINK_FORBIDDEN_KEYS)
    parse_bool(options, "includeHeaders", False)  # a headers column is written when present
    path = (_get(options, "writePath") or "batches").strip().lower()
    if path not in ("batches", "columnar", "rows"):
        raise OptionError("option 'writePath' must be 'batches', 'columnar' or 'rows', "
                          f"not {path!r}")
    return SinkOptions(client_config=config,
                       topic=topic.strip() if topic and topic.strip() else None,
                       exactly_once=_parse_exactly_once(options, config),
                       write_path="rows" if path == "rows"
                       else "columnar" if path == "columnar" else "batches")
