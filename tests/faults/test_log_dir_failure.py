"""A failing log dir goes offline; the broker's other dirs keep serving, as in Kafka.

The second of two log dirs is a tmpfs remounted read-only under the running broker: the next
write there fails with EROFS, which (unlike a full disk) takes the whole dir offline until a
restart. Its partitions answer KAFKA_STORAGE_ERROR and show no leader in Metadata, the other
dir's partitions take produce and fetch as before. With every dir offline, the broker stops.
"""

from __future__ import annotations

import datetime
import subprocess
from pathlib import Path

import pytest
from kio.schema.describe_log_dirs.v4.request import DescribeLogDirsRequest
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.list_offsets.v7.request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData

from tests.faults.small_disk import remount_read_only, tmpfs
from tests.integration.clients import create_topic, produce_all, producer, read_partition, unique
from tests.integration.wire import WireClient
from tests.unit.batchgen import simple_batch

pytestmark = pytest.mark.timeout(180)

PARTITIONS = 4
COUNT = 100


def _ms(ms: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=ms)


def produce_code(c: WireClient, topic: str, partition: int) -> ErrorCode:
    resp = c.request(ProduceRequest(
        transactional_id=None, acks=-1, timeout=_ms(10_000),
        topic_data=(TopicProduceData(name=topic, partition_data=(
            PartitionProduceData(index=partition, records=simple_batch(3)),)),)))
    return ErrorCode(resp.responses[0].partition_responses[0].error_code)


def fetch_code(c: WireClient, topic: str, partition: int) -> ErrorCode:
    resp = c.request(FetchRequest(
        max_wait=_ms(0), min_bytes=1, max_bytes=1 << 20, forgotten_topics_data=(),
        topics=(FetchTopic(topic=topic, partitions=(FetchPartition(
            partition=partition, fetch_offset=0, partition_max_bytes=1 << 20),)),)))
    return ErrorCode(resp.responses[0].partitions[0].error_code)


def list_offsets_code(c: WireClient, topic: str, partition: int) -> ErrorCode:
    resp = c.request(ListOffsetsRequest(
        replica_id=-1, isolation_level=0, topics=(ListOffsetsTopic(name=topic, partitions=(
            ListOffsetsPartition(partition_index=partition, timestamp=-1),)),)))
    return ErrorCode(resp.topics[0].partitions[0].error_code)


def partitions_in(log_dir: Path, topic: str) -> set[int]:
    return {int(p.name.rsplit("-", 1)[1]) for p in log_dir.glob(f"{topic}-*") if p.is_dir()}


def test_failed_dir_goes_offline_and_the_other_keeps_serving(make_broker,
                                                              tmp_path: Path) -> None:
    healthy = tmp_path / "healthy"
    with tmpfs(tmp_path / "failing", "16m") as failing:
        broker = make_broker(f"log.dirs={healthy},{failing}")
        topic = unique("dirs")
        create_topic(broker.bootstrap, topic, partitions=PARTITIONS)
        on_healthy, on_failing = partitions_in(healthy, topic), partitions_in(failing, topic)
        assert on_healthy and on_failing and on_healthy | on_failing == set(range(PARTITIONS))
        p = producer(broker.bootstrap, acks="all")
        produce_all(p, topic, ({"value": b"v%d" % i, "partition": i % PARTITIONS}
                               for i in range(COUNT)))
        # A restart closes every file, so the tmpfs can be remounted read-only under it
        # (the kernel refuses while a file there is open for writing).
        broker.restart()
        remount_read_only(failing)

        with WireClient.to(broker.bootstrap) as c:
            for part in sorted(on_failing):
                assert produce_code(c, topic, part) is ErrorCode.kafka_storage_error
                assert fetch_code(c, topic, part) is ErrorCode.kafka_storage_error
                assert list_offsets_code(c, topic, part) is ErrorCode.kafka_storage_error
            for part in sorted(on_healthy):
                assert produce_code(c, topic, part) is ErrorCode.none
                assert fetch_code(c, topic, part) is ErrorCode.none

            meta = c.request(MetadataRequest(
                topics=(MetadataRequestTopic(topic_id=None, name=topic),),
                allow_auto_topic_creation=False, include_topic_authorized_operations=False))
            by_index = {pm.partition_index: pm for pm in meta.topics[0].partitions}
            for part in on_failing:
                pm = by_index[part]
                assert ErrorCode(pm.error_code) is ErrorCode.leader_not_available
                assert (pm.leader_id, tuple(pm.offline_replicas)) == (-1, (0,))
            for part in on_healthy:
                pm = by_index[part]
                assert ErrorCode(pm.error_code) is ErrorCode.none and pm.leader_id == 0

            dirs = c.request(DescribeLogDirsRequest(topics=None))
            codes = {Path(r.log_dir): ErrorCode(r.error_code) for r in dirs.results}
            assert codes == {healthy.resolve(): ErrorCode.none,
                             failing.resolve(): ErrorCode.kafka_storage_error}

        # Clients on the healthy partitions carry on: produce and read everything back.
        for part in sorted(on_healthy):
            produce_all(p, topic, [{"value": b"more", "partition": part}])
            # Its records, the raw produce's 3, and this one.
            got = read_partition(broker.bootstrap, topic, part, 0, COUNT // PARTITIONS + 4)
            assert got[-1].value() == b"more"

        log = broker.stderr_text()
        assert log.count(f"log dir {failing} is offline") == 1, log
        assert "Traceback" not in log, log
        assert broker.stop() == 0  # a clean shutdown despite the dead dir

        # Repaired: after a restart every partition serves what it had.
        subprocess.run(["mount", "-o", "remount,rw", str(failing)], check=True)
        broker.start()
        for part in sorted(on_failing):
            got = read_partition(broker.bootstrap, topic, part, 0, COUNT // PARTITIONS)
            assert [m.value() for m in got] == [b"v%d" % i for i in range(part, COUNT,
                                                                          PARTITIONS)]
        broker.stop()


def test_broker_stops_when_every_log_dir_is_offline(make_broker, tmp_path: Path) -> None:
    with tmpfs(tmp_path / "only", "16m") as only:
        broker = make_broker(f"log.dirs={only / 'data'}")
        topic = unique("last")
        create_topic(broker.bootstrap, topic, partitions=1)
        broker.restart()
        remount_read_only(only)
        with WireClient.to(broker.bootstrap) as c:
            assert produce_code(c, topic, 0) is ErrorCode.kafka_storage_error
        proc = broker._proc
        assert proc is not None
        assert proc.wait(timeout=30) == 1
        log = broker.stderr_text()
        assert "shutting down: every log dir is offline" in log, log
        assert "Traceback" not in log, log
        assert log.strip().splitlines()[-1].startswith("Error: broker stopped:"), log
