"""The broker's metrics as Prometheus families, built when ``/metrics`` is scraped.

Nothing here runs on the produce or fetch path. At scrape time (on the event loop, which owns
every object read here) the collector turns the hot-path counters of
:class:`~moldau.metrics.counters.BrokerCounters` into counter and histogram families, and
reads the rest straight from the broker's state: log sizes and segment counts, replication
health, purgatory sizes, group states and consumer lag. One pass over the hosted partitions
and one over the groups per scrape; no copy of that state is kept anywhere else. The
per-partition log numbers (the bulk of a large broker's scrape) are read by
:func:`snapshot_logs` a slice at a time and turned into families by :class:`LogRows`, off
the loop (see :mod:`.endpoint`).

Names follow Prometheus conventions (``moldau_`` prefix, ``_total`` counters, ``_bytes`` and
``_seconds`` units); docs/operations.md maps each to the Kafka MBean it stands for.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from ..coordinator.group import GroupState
from ..log.partition_log import FLUSH_TIMES
from ..protocol.apis import SUPPORTED
from .counters import STAGES, BrokerCounters
from .histogram import DurationHistogram
from .loop_lag import LoopLag

if TYPE_CHECKING:
    from ..broker.broker import Broker


def _histogram(family: HistogramMetricFamily, labels: list[str],
               histogram: DurationHistogram) -> None:
    family.add_metric(labels, histogram.cumulative(), histogram.sum_ns / 1e9)


def _api_name(key: int) -> str:
    api = SUPPORTED.get(key)
    return api.name if api is not None else str(key)


#: One partition's log as the scrape saw it: topic, partition, bytes, segments, start, end.
LogRow = tuple[str, int, int, int, int, int]

#: Partitions read between two yields to the event loop while a scrape snapshots the logs.
LOG_ROWS_PER_SLICE = 1000


async def snapshot_logs(broker: Broker) -> list[LogRow]:
    """Every online partition log's numbers, read on the loop a slice at a time (a broker
    with tens of thousands of partitions must not stall its clients for one scrape)."""
    rows: list[LogRow] = []
    plogs = broker.logs.all_logs()  # a list: logs deleted meanwhile are skipped below
    for start in range(0, len(plogs), LOG_ROWS_PER_SLICE):
        if start:
            await asyncio.sleep(0)
        for plog in plogs[start:start + LOG_ROWS_PER_SLICE]:
            if plog.offline or plog.renamed_for_deletion:
                continue
            rows.append((plog.topic, plog.partition, plog.size_bytes, len(plog.segments),
                         plog.log_start_offset, plog.log_end_offset))
    return rows


class LogRows(Collector):
    """The per-partition log families, built from a :func:`snapshot_logs` snapshot (so they
    can be built and rendered off the event loop)."""

    def __init__(self, rows: list[LogRow]) -> None:
        self.rows = rows

    def collect(self) -> Iterator[Metric]:
        labels = ["topic", "partition"]
        size = GaugeMetricFamily("moldau_log_size_bytes", "Bytes of a partition's log on disk "
                                 "(Kafka: Log Size).", labels=labels)
        segments = GaugeMetricFamily("moldau_log_segments", "Segments of a partition's log "
                                     "(Kafka: Log NumLogSegments).", labels=labels)
        start = GaugeMetricFamily("moldau_log_start_offset", "A partition's log start offset "
                                  "(Kafka: Log LogStartOffset).", labels=labels)
        end = GaugeMetricFamily("moldau_log_end_offset", "A partition's log end offset "
                                "(Kafka: Log LogEndOffset).", labels=labels)
        for topic, partition, nbytes, nsegments, log_start, log_end in self.rows:
            values = [topic, str(partition)]
            size.add_metric(values, nbytes)
            segments.add_metric(values, nsegments)
            start.add_metric(values, log_start)
            end.add_metric(values, log_end)
        yield from (size, segments, start, end)


class BrokerCollector(Collector):
    """Every metric of one broker; see the module docstring."""

    def __init__(self, broker: Broker, counters: BrokerCounters, loop_lag: LoopLag) -> None:
        self.broker = broker
        self.counters = counters
        self.loop_lag = loop_lag

    def collect(self) -> Iterator[Metric]:
        yield from self._requests()
        yield from self._topics()
        yield from self._network()
        yield from self._logs()
        yield from self._replication()
        yield from self._groups()
        yield from self._log_work()

    # -- counted on the hot path -------------------------------------------------------------

    def _requests(self) -> Iterator[Metric]:
        c = self.counters
        requests = CounterMetricFamily(
            "moldau_requests", "Requests handled, by API and version (Kafka: RequestsPerSec).",
            labels=["api", "version"])
        for (key, version), n in sorted(c.requests.items()):
            requests.add_metric([_api_name(key), str(version)], n)
        yield requests
        times = HistogramMetricFamily(
            "moldau_request_time_seconds",
            "Request time by API and stage: queue, local, remote (purgatory), response_queue, "
            "send, total (Kafka: RequestMetrics *TimeMs).", labels=["api", "stage"])
        for key, histograms in sorted(c.request_times.items()):
            name = _api_name(key)
            for stage, histogram in zip(STAGES, histograms, strict=True):
                _histogram(times, [name, stage], histogram)
        yield times

    def _topics(self) -> Iterator[Metric]:
        c = self.counters
        families = {
            "bytes_in": CounterMetricFamily(
                "moldau_topic_bytes_in", "Bytes of records appended by producers "
                "(Kafka: BytesInPerSec).", labels=["topic"]),
            "messages_in": CounterMetricFamily(
                "moldau_topic_messages_in", "Records appended by producers "
                "(Kafka: MessagesInPerSec).", labels=["topic"]),
            "bytes_out": CounterMetricFamily(
                "moldau_topic_bytes_out", "Bytes of records sent to consumers "
                "(Kafka: BytesOutPerSec).", labels=["topic"]),
            "failed_produce": CounterMetricFamily(
                "moldau_topic_failed_produce_requests", "Partitions of Produce requests that "
                "failed (Kafka: FailedProduceRequestsPerSec).", labels=["topic"]),
            "failed_fetch": CounterMetricFamily(
                "moldau_topic_failed_fetch_requests", "Partitions of Fetch requests that "
                "failed (Kafka: FailedFetchRequestsPerSec).", labels=["topic"]),
        }
        for topic, counters in sorted(c.topics.items()):
            for attr, family in families.items():
                family.add_metric([topic], getattr(counters, attr))
        yield from families.values()
        yield CounterMetricFamily(
            "moldau_replication_bytes_out", "Bytes of records sent to follower replicas "
            "(Kafka: ReplicationBytesOutPerSec).", value=c.replication_bytes_out)

    def _network(self) -> Iterator[Metric]:
        c, broker = self.counters, self.broker
        open_now: dict[str, int] = dict.fromkeys(c.connections_created, 0)
        for conn in broker.connections:
            name = conn.session.listener.name
            open_now[name] = open_now.get(name, 0) + 1
        for family, values in (
            (GaugeMetricFamily("moldau_connections", "Open client connections "
                               "(Kafka: connection-count).", labels=["listener"]), open_now),
            (CounterMetricFamily("moldau_connections_created", "Connections accepted "
                                 "(Kafka: connection-creation-total).", labels=["listener"]),
             c.connections_created),
            (CounterMetricFamily("moldau_connections_closed", "Connections closed "
                                 "(Kafka: connection-close-total).", labels=["listener"]),
             c.connections_closed),
        ):
            for listener, value in sorted(values.items()):
                family.add_metric([listener], value)
            yield family
        lag = HistogramMetricFamily(
            "moldau_event_loop_lag_seconds", "How late a callback scheduled on the event loop "
            "ran, measured every 0.5 s (Kafka: NetworkProcessorAvgIdlePercent, inverted).")
        _histogram(lag, [], self.loop_lag.histogram)
        yield lag
        yield GaugeMetricFamily("moldau_event_loop_last_lag_seconds", "The latest event-loop "
                                "lag measurement.", value=self.loop_lag.last_s)

    # -- read from the broker's state at scrape time -------------------------------------------

    def _logs(self) -> Iterator[Metric]:
        # The per-partition log metrics come from LogRows (see snapshot_logs).
        flush = HistogramMetricFamily("moldau_log_flush_time_seconds", "Time of each log "
                                      "flush (fsync) (Kafka: LogFlushRateAndTimeMs).")
        _histogram(flush, [], FLUSH_TIMES)
        yield flush

    def _replication(self) -> Iterator[Metric]:
        broker = self.broker
        replicas = broker.replicas
        leaders = under_replicated = under_min_isr = offline = acks_waiting = 0
        partitions = replicas.all_partitions()
        for partition in partitions:
            if partition.offline:
                offline += 1
                continue
            if not partition.is_leader:
                continue
            leaders += 1
            isr = len(partition.isr)
            if isr < len(partition.replicas):
                under_replicated += 1
            if isr < partition.config.min_insync_replicas:
                under_min_isr += 1
            acks_waiting += partition.acks_waiting
        cluster = broker.cluster
        controller = cluster is None or cluster.is_controller()
        if cluster is not None:
            # Kafka's OfflinePartitionsCount comes from the active controller: partitions
            # without a live leader, anywhere in the cluster.
            offline = self._leaderless() if controller else 0
        yield GaugeMetricFamily("moldau_partitions", "Partitions with a replica on this "
                                "broker (Kafka: PartitionCount).", value=len(partitions))
        yield GaugeMetricFamily("moldau_leader_partitions", "Partitions led by this broker "
                                "(Kafka: LeaderCount).", value=leaders)
        yield GaugeMetricFamily("moldau_under_replicated_partitions", "Partitions led here "
                                "whose ISR is smaller than their replica set (Kafka: "
                                "UnderReplicatedPartitions).", value=under_replicated)
        yield GaugeMetricFamily("moldau_under_min_isr_partitions", "Partitions led here whose "
                                "ISR is below min.insync.replicas (Kafka: "
                                "UnderMinIsrPartitionCount).", value=under_min_isr)
        yield GaugeMetricFamily("moldau_offline_partitions", "Partitions without a live "
                                "leader, reported by the active controller (alone: partitions "
                                "on offline log dirs) (Kafka: OfflinePartitionsCount).",
                                value=offline)
        yield GaugeMetricFamily("moldau_active_controller", "1 on the active controller "
                                "(a lone broker is its own) (Kafka: ActiveControllerCount).",
                                value=1 if controller else 0)
        yield CounterMetricFamily("moldau_isr_shrinks", "ISR shrinks applied by this broker "
                                  "as leader (Kafka: IsrShrinksPerSec).",
                                  value=replicas.isr_changes.shrinks)
        yield CounterMetricFamily("moldau_isr_expands", "ISR expands applied by this broker "
                                  "as leader (Kafka: IsrExpandsPerSec).",
                                  value=replicas.isr_changes.expands)
        yield CounterMetricFamily("moldau_replication_bytes_in", "Bytes of records this "
                                  "broker's follower replicas appended from their leaders "
                                  "(Kafka: ReplicationBytesInPerSec).",
                                  value=replicas.isr_changes.replication_bytes_in)
        purgatory = GaugeMetricFamily("moldau_purgatory_size", "Requests waiting in a "
                                      "purgatory (Kafka: DelayedOperationPurgatory "
                                      "PurgatorySize).", labels=["purgatory"])
        purgatory.add_metric(["produce"], acks_waiting)
        purgatory.add_metric(["fetch"], replicas.fetch_purgatory.size
                             + replicas.replica_fetch_purgatory.size)
        yield purgatory

    def _leaderless(self) -> int:
        cluster = self.broker.cluster
        assert cluster is not None
        count = 0
        for name, topic in self.broker.metadata.topics().items():
            for partition in range(topic.partitions):
                if cluster.partition_view(name, partition).leader < 0:
                    count += 1
        return count

    def _groups(self) -> Iterator[Metric]:
        groups = self.broker.groups
        by_state = {state.value: 0 for state in GroupState}
        lag_labels = ["group", "topic", "partition"]
        lag = GaugeMetricFamily("moldau_consumer_group_lag", "Records between a group's "
                                "committed offset and the high watermark, for partitions led "
                                "here (computed by the coordinator, as Burrow and "
                                "kafka-consumer-groups do).", labels=lag_labels)
        # The coordinator does not know a group's isolation level, so both ends are exported:
        # records inside open transactions count in the first lag, not in this one.
        stable_lag = GaugeMetricFamily("moldau_consumer_group_lag_read_committed", "Records "
                                       "between a group's committed offset and the last "
                                       "stable offset (the end a read_committed consumer "
                                       "sees), for partitions led here.", labels=lag_labels)
        for group_id, group in sorted(groups.coordinator.groups.items()):
            by_state[group.state.value] = by_state.get(group.state.value, 0) + 1
            for (topic, number), committed in group.offsets:
                partition = self.broker.partition(topic, number)
                if partition is None or not partition.is_leader or partition.offline:
                    continue
                values = [group_id, topic, str(number)]
                lag.add_metric(values, max(partition.high_watermark - committed.offset, 0))
                stable_lag.add_metric(values,
                                      max(partition.last_stable_offset - committed.offset, 0))
        for consumer_group in groups.consumer_groups.values():
            state = consumer_group.state.value
            by_state[state] = by_state.get(state, 0) + 1
        states = GaugeMetricFamily("moldau_groups", "Consumer groups this broker coordinates, "
                                   "by state (Kafka: NumGroups<State>).", labels=["state"])
        for state, n in by_state.items():
            states.add_metric([state], n)
        yield states
        yield CounterMetricFamily("moldau_group_rebalances", "Rebalances begun by the groups "
                                  "this broker coordinates (classic: a rebalance begun; "
                                  "KIP-848: a new target assignment epoch).",
                                  value=groups.rebalances)
        yield lag
        yield stable_lag

    def _log_work(self) -> Iterator[Metric]:
        cleaner = self.broker.cleaner
        stats = cleaner.stats if cleaner is not None else None
        yield CounterMetricFamily("moldau_log_cleaner_cleans", "Logs compacted by the cleaner.",
                                  value=stats.cleans if stats else 0)
        yield CounterMetricFamily("moldau_log_cleaner_bytes_read", "Bytes of the logs the "
                                  "cleaner compacted, before cleaning.",
                                  value=stats.bytes_before if stats else 0)
        reclaimed = max(stats.bytes_before - stats.bytes_after, 0) if stats else 0
        yield CounterMetricFamily("moldau_log_cleaner_bytes_reclaimed", "Bytes the cleaner "
                                  "removed from the logs.", value=reclaimed)
        yield CounterMetricFamily("moldau_log_cleaner_records_removed", "Records the cleaner "
                                  "removed.", value=stats.records_removed if stats else 0)
        yield CounterMetricFamily("moldau_log_retention_deleted_segments", "Segments deleted "
                                  "by retention (time, size, log start offset).",
                                  value=self.counters.retention_deleted_segments)
