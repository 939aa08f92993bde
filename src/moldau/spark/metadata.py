"""Driver-side look-ups: which partitions a query reads and where their offsets stand.

The driver only lists metadata and offsets (Metadata and ListOffsets requests); it never
fetches a record. Offsets come from one batched ListOffsets call through librdkafka's
``offsets_for_times``, where the timestamps -2 and -1 mean earliest and latest, exactly as
on the wire. A consumer is created lazily and dropped when the owner is pickled, so readers
holding an :class:`OffsetLister` can still be shipped to executors.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterable, Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from .options import EARLIEST, LATEST, OffsetSpec, SourceOptions, Subscription, TopicPartition
from .options import consumer_config as make_consumer_config

log = logging.getLogger(__name__)

_TIMEOUT_S = 30.0


class DataLossError(RuntimeError):
    """Offsets the query needs are gone (retention, deletion); see ``failOnDataLoss``."""


class MetadataError(RuntimeError):
    """The broker did not answer a metadata or offset request usefully."""


def report_data_loss(message: str, fail: bool) -> None:
    """Fail the query, or log and go on, as ``failOnDataLoss`` says (Spark's wording)."""
    if fail:
        raise DataLossError(
            f"{message}. Some data may have been lost because they are not available in the "
            "broker any more; either the data was aged out or the topic was deleted. If you "
            "want your query to continue, set the source option 'failOnDataLoss' to 'false'."
        )
    log.warning("%s. Some data may have been lost; going on since failOnDataLoss is false",
                message)


class OffsetLister:
    """Lists partitions and offsets for one source's client configuration.

    A failed offset look-up is tried again ``retries`` times, ``retry_interval_ms`` apart
    (``fetchOffset.numRetries``, ``fetchOffset.retryIntervalMs``), as Spark's driver does.
    """

    def __init__(self, client_config: Mapping[str, str], retries: int = 0,
                 retry_interval_ms: int = 0) -> None:
        self._config = dict(client_config)
        self._consumer: Any = None
        self.retries = retries
        self.retry_interval_ms = retry_interval_ms

    @classmethod
    def for_source(cls, options: SourceOptions) -> OffsetLister:
        return cls(options.client_config, options.fetch_offset_retries,
                   options.fetch_offset_retry_interval_ms)

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_consumer": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    @property
    def consumer(self) -> Any:
        if self._consumer is None:
            self._consumer = Consumer(make_consumer_config(self._config, "driver"))
        return self._consumer

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    def partitions(self, subscription: Subscription) -> list[TopicPartition]:
        """The topic-partitions the subscription covers right now, sorted."""
        try:
            topics = self.consumer.list_topics(timeout=_TIMEOUT_S).topics
        except KafkaException as exc:
            raise MetadataError(f"cannot list topics: {exc}") from exc
        if subscription.kind == "assign":
            return list(subscription.partitions)
        if subscription.kind == "subscribe":
            wanted: Iterable[str] = [t for t in subscription.topics if t in topics]
        else:
            pattern = re.compile(subscription.pattern)
            wanted = [t for t in topics if pattern.fullmatch(t) and not t.startswith("__")]
        result: list[TopicPartition] = []
        for name in wanted:
            meta = topics[name]
            if meta.error is not None:
                continue  # e.g. a topic being created: its partitions show up next time
            result.extend((name, p) for p in meta.partitions)
        return sorted(result)

    def list_offsets(self, queries: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """Timestamp (or -2/-1) per partition → offset (-1: none), retried on failure."""
        attempt = 0
        while True:
            try:
                return self._list_offsets_once(queries)
            except MetadataError as exc:
                if attempt >= self.retries:
                    if self.retries:
                        raise MetadataError(f"{exc} (after {attempt} retries: "
                                            "fetchOffset.numRetries)") from exc
                    raise
                attempt += 1
                log.warning("%s; trying again in %d ms (%d of %d)", exc,
                            self.retry_interval_ms, attempt, self.retries)
                time.sleep(self.retry_interval_ms / 1000)

    def _list_offsets_once(self, queries: Mapping[TopicPartition, int]
                           ) -> dict[TopicPartition, int]:
        """One ListOffsets round."""
        if not queries:
            return {}
        request = [KafkaTopicPartition(t, p, ts) for (t, p), ts in queries.items()]
        try:
            answer = self.consumer.offsets_for_times(request, timeout=_TIMEOUT_S)
        except KafkaException as exc:
            raise MetadataError(f"cannot list offsets: {exc}") from exc
        result = {}
        for tp in answer:
            if tp.error is not None:
                raise MetadataError(f"cannot list offsets of {tp.topic}-{tp.partition}: "
                                    f"{tp.error}")
            result[(tp.topic, tp.partition)] = tp.offset
        return result

    def earliest(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self.list_offsets(dict.fromkeys(tps, EARLIEST))

    def latest(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self.list_offsets(dict.fromkeys(tps, LATEST))

    def resolve(self, spec: OffsetSpec, tps: list[TopicPartition], options: SourceOptions,
                role: str) -> dict[TopicPartition, int]:
        """Concrete offsets for ``tps`` from a starting or ending spec."""
        if spec.kind == "earliest":
            return self.earliest(tps)
        if spec.kind == "latest":
            return self.latest(tps)
        if spec.kind == "offsets":
            return self._resolve_specific(spec.offsets, tps, options, role)
        stamps = (dict.fromkeys(tps, spec.timestamp) if spec.kind == "timestamp"
                  else self._check_covers(spec.timestamps, tps, role))
        found = self.list_offsets(stamps)
        missing = [tp for tp, offset in found.items() if offset < 0]
        if missing:
            # No record at or after the timestamp: an end bound simply means "everything";
            # a start bound fails unless the strategy says to start at latest (Spark's rule).
            if role == "starting" and options.timestamp_strategy == "error":
                raise MetadataError(
                    "no offset matched the starting timestamp for "
                    + ", ".join(f"{t}-{p}" for t, p in missing)
                    + "; set startingOffsetsByTimestampStrategy=latest to start at the end"
                )
            found.update(self.latest(missing))
        return found

    @staticmethod
    def _check_covers(given: Mapping[TopicPartition, int], tps: list[TopicPartition],
                      role: str) -> dict[TopicPartition, int]:
        absent = sorted(set(tps) - set(given))
        if absent:
            raise MetadataError(
                f"{role} offsets are given per partition but miss "
                + ", ".join(f"{t}-{p}" for t, p in absent)
                + ": specify every partition (-2 for earliest, -1 for latest)"
            )
        return {tp: given[tp] for tp in tps}

    def _resolve_specific(self, given: Mapping[TopicPartition, int], tps: list[TopicPartition],
                          options: SourceOptions, role: str) -> dict[TopicPartition, int]:
        wanted = self._check_covers(given, tps, role)
        special = {tp: ts for tp, ts in wanted.items() if ts in (EARLIEST, LATEST)}
        result = dict(wanted)
        result.update(self.list_offsets(special))
        if role == "starting":
            earliest = self.earliest(tps)
            for tp, offset in result.items():
                if offset < earliest[tp]:
                    report_data_loss(
                        f"starting offset {offset} of {tp[0]}-{tp[1]} is below the earliest "
                        f"available offset {earliest[tp]}", options.fail_on_data_loss)
                    result[tp] = earliest[tp]
        return result
