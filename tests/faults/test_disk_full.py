"""A full disk: writes get KAFKA_STORAGE_ERROR, reads go on, writes resume, nothing acked is lost.

The broker's only log dir is a 16 MiB tmpfs, filled up by a file the test deletes later:
a real ENOSPC from the kernel on every path that needs space (segment appends and rolls,
index entries, checkpoints, ``__consumer_offsets``, the metadata store, new partitions).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient
from kio.schema.errors import ErrorCode
from kio.schema.offset_commit.v8.request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)

from tests.faults.small_disk import fill, tmpfs
from tests.integration.clients import create_topic, produce_all, producer, read_partition, unique
from tests.integration.wire import WireClient

pytestmark = pytest.mark.timeout(180)

PARTITIONS = 2
PAD = b"." * 1000


def value(phase: str, seq: int) -> bytes:
    return f"{phase}-{seq:06d}|".encode() + PAD


def records(phase: str, count: int) -> list[dict[str, object]]:
    return [{"value": value(phase, i), "partition": i % PARTITIONS} for i in range(count)]


def commit(c: WireClient, group: str, topic: str, offset: int) -> ErrorCode:
    """A simple (memberless) OffsetCommit, as ``kafka-consumer-groups --reset-offsets`` sends."""
    resp = c.request(OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
        topics=(OffsetCommitRequestTopic(name=topic, partitions=(OffsetCommitRequestPartition(
            partition_index=0, committed_offset=offset, committed_leader_epoch=-1,
            committed_metadata=""),)),)))
    return ErrorCode(resp.topics[0].partitions[0].error_code)


def test_full_disk_refuses_writes_keeps_reads_and_resumes(make_broker, tmp_path: Path) -> None:
    with tmpfs(tmp_path / "disk", "16m") as disk:
        data = disk / "data"
        broker = make_broker(f"log.dirs={data}", "log.segment.bytes=262144")
        topic = unique("full")
        create_topic(broker.bootstrap, topic, partitions=PARTITIONS)
        p = producer(broker.bootstrap, acks="all", retries=0, message_timeout_ms=30000,
                     batch_size=65536)
        acked: dict[int, list[bytes]] = {part: [] for part in range(PARTITIONS)}

        def keep(reports: object) -> None:
            for msg in reports.acked:  # type: ignore[attr-defined]
                acked[msg.partition()].append(msg.value())

        before = produce_all(p, topic, records("before", 600))
        assert not before.failed
        keep(before)
        group = unique("grp")
        with WireClient.to(broker.bootstrap) as wire:
            assert commit(wire, group, topic, 1) is ErrorCode.none  # __consumer_offsets exists

            filler = fill(disk)

            # Producing: every refused partition says KAFKA_STORAGE_ERROR (a few records may
            # still fit in the last page of a segment).
            full = produce_all(p, topic, records("full", 400))
            keep(full)
            codes = {err.code() for _, err in full.failed}
            assert codes == {KafkaError.KAFKA_STORAGE_ERROR}, codes
            assert {msg.partition() for msg, _ in full.failed} == set(range(PARTITIONS))

            # Reading goes on.
            for part in range(PARTITIONS):
                got = read_partition(broker.bootstrap, topic, part, 0, len(acked[part]))
                assert [m.value() for m in got] == acked[part]

            # Group commits get NOT_COORDINATOR (Kafka's answer to a storage error), which
            # clients retry; a few may fit before the disk refuses.
            errors = [commit(wire, group, topic, n) for n in range(2, 200)]
            assert ErrorCode.not_coordinator in errors
            assert set(errors) <= {ErrorCode.none, ErrorCode.not_coordinator}

            # A new topic: refused with KAFKA_STORAGE_ERROR, and nothing of it is left.
            new_topic = unique("nospace")
            with pytest.raises(KafkaException) as refused:
                create_topic(broker.bootstrap, new_topic, partitions=3)
            assert refused.value.args[0].code() == KafkaError.KAFKA_STORAGE_ERROR
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            assert new_topic not in admin.list_topics(timeout=10).topics
            assert not list(data.glob(f"{new_topic}-*"))

            assert broker.is_running()
            filler.unlink()

            # Space is back: writes resume without a restart.
            after = produce_all(p, topic, records("after", 400))
            assert not after.failed
            keep(after)
            assert commit(wire, group, topic, 500) is ErrorCode.none
            create_topic(broker.bootstrap, new_topic, partitions=3)

        log = broker.stderr_text()
        assert "Traceback" not in log, log
        for part in range(PARTITIONS):
            assert log.count(f"{topic}-{part}: no space left") == 1, log
            assert log.count(f"{topic}-{part}: writing again") == 1, log

        # Nothing acknowledged is lost, and nothing refused slipped in, across a kill -9.
        broker.kill9()
        broker.start()
        for part in range(PARTITIONS):
            got = read_partition(broker.bootstrap, topic, part, 0, len(acked[part]))
            assert [m.value() for m in got] == acked[part]
            assert [m.offset() for m in got] == list(range(len(acked[part])))
        broker.stop()
