"""LogManager: log dirs, meta.properties, checkpoints, clean shutdown, create/delete/load."""

from __future__ import annotations

import dataclasses
import uuid
from pathlib import Path

import pytest

from moldau.log import LogConfig, LogError, LogManager

from .batchgen import Record, build_batch

NOW = 1_700_000_000_000
CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"


def one(i: int = 0) -> bytes:
    return build_batch([Record(b"key", b"v" * 50, NOW + i)])


def manager(*dirs: Path, cluster_id: str | None = CLUSTER, node_id: int = 1) -> LogManager:
    return LogManager(list(dirs), node_id=node_id, cluster_id=cluster_id, now_ms=NOW)


def props(path: Path) -> dict[str, str]:
    lines = [ln for ln in path.read_text().splitlines() if ln and not ln.startswith("#")]
    return dict(ln.split("=", 1) for ln in lines)


def test_meta_properties(tmp_path: Path) -> None:
    manager(tmp_path / "a", tmp_path / "b").close()
    a, b = props(tmp_path / "a" / "meta.properties"), props(tmp_path / "b" / "meta.properties")
    assert a["cluster.id"] == b["cluster.id"] == CLUSTER
    assert a["node.id"] == "1" and a["version"] == "1"
    assert len(a["directory.id"]) == 22 and a["directory.id"] != b["directory.id"]
    with pytest.raises(LogError, match="cluster"):
        manager(tmp_path / "a", cluster_id="AAAAAAAAAAAAAAAAAAAAAA")
    with pytest.raises(LogError, match="node"):
        manager(tmp_path / "a", node_id=2)
    assert manager(tmp_path / "a", cluster_id=None).cluster_id == CLUSTER


def test_generated_cluster_id_is_shared(tmp_path: Path) -> None:
    m = manager(tmp_path / "a", tmp_path / "b", cluster_id=None)
    assert len(m.cluster_id) == 22
    assert props(tmp_path / "b" / "meta.properties")["cluster.id"] == m.cluster_id


def test_create_spreads_over_dirs_and_reloads(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    m = manager(*dirs)
    topic_id = uuid.uuid4()
    names = [("my-topic.v1", 0), ("my-topic.v1", 1), ("x", 0), ("x", 12)]
    for topic, partition in names:
        plog = m.create(topic, partition, LogConfig(), topic_id)
        plog.append(one(partition), leader_epoch=0, now_ms=NOW)
    sizes = m.log_dir_sizes()
    assert [len(sizes[d]) for d in dirs] == [2, 2]
    assert (("my-topic.v1", 0), len(one()), False) in sizes[dirs[0]]
    assert m.create("x", 0, LogConfig()) is m.get("x", 0)
    m.close()
    assert (dirs[0] / ".kafka_cleanshutdown").exists()

    again = manager(*dirs)
    assert not (dirs[0] / ".kafka_cleanshutdown").exists()
    assert sorted((p.topic, p.partition) for p in again.all_logs()) == sorted(names)
    plog = again.get("my-topic.v1", 1)
    assert plog is not None and plog.log_end_offset == 1 and plog.topic_id == topic_id
    assert again.get("nope", 0) is None


def test_checkpoint_files(tmp_path: Path) -> None:
    m = manager(tmp_path)
    config = dataclasses.replace(LogConfig(), segment_bytes=2 * len(one()) + 1)
    plog = m.create("t", 0, config)
    for i in range(6):
        plog.append(one(i), leader_epoch=0, now_ms=NOW)
    plog.high_watermark = 6
    plog.delete_records_before(3)
    m.create("u", 2, config)
    m.checkpoint()
    assert (tmp_path / "log-start-offset-checkpoint").read_text() == "0\n2\nt 0 3\nu 2 0\n"
    # The recovery point never lags the log start (recovery works per segment anyway).
    assert (tmp_path / "recovery-point-offset-checkpoint").read_text() == "0\n2\nt 0 3\nu 2 0\n"
    # The high watermarks are the replica manager's (tests/unit/test_replica_partition.py).
    assert not (tmp_path / "replication-offset-checkpoint").exists()
    m.flush_and_checkpoint_recovery()
    assert (tmp_path / "recovery-point-offset-checkpoint").read_text() == "0\n2\nt 0 6\nu 2 0\n"
    m.close()
    again = manager(tmp_path)
    plog2 = again.get("t", 0)
    assert plog2 is not None
    assert (plog2.log_start_offset, plog2.recovery_point, plog2.high_watermark) == (3, 6, 6)


def test_unclean_restart_recovers(tmp_path: Path) -> None:
    m = manager(tmp_path)
    plog = m.create("t", 0, LogConfig())
    for i in range(5):
        plog.append(one(i), leader_epoch=0, now_ms=NOW)
    m.checkpoint()  # recovery point 0; no clean-shutdown marker
    log_file = plog.active_segment.log_path
    log_file.write_bytes(log_file.read_bytes()[:-10])
    again = manager(tmp_path)
    recovered = again.get("t", 0)
    assert recovered is not None and recovered.log_end_offset == 4


def test_directory_scan_skips_and_cleans(tmp_path: Path) -> None:
    manager(tmp_path).close()
    doomed = tmp_path / f"t-0.{uuid.uuid4().hex}-delete"
    doomed.mkdir()
    (doomed / "00000000000000000000.log").write_bytes(b"")
    (tmp_path / "__cluster_metadata-0").mkdir()
    (tmp_path / "not a partition").mkdir()
    (tmp_path / "moldau-metadata.json").write_text("{}")
    m = manager(tmp_path)
    assert not doomed.exists()
    assert m.all_logs() == []
    assert (tmp_path / "__cluster_metadata-0").exists()


def test_delete_and_update_config(tmp_path: Path) -> None:
    m = manager(tmp_path)
    m.create("t", 0, LogConfig())
    m.create("t", 1, LogConfig())
    m.create("other", 0, LogConfig())
    config = dataclasses.replace(LogConfig(), retention_ms=5)
    m.update_config("t", config)
    assert all(p.config is config for p in m.all_logs() if p.topic == "t")
    assert m.get("other", 0).config is not config
    assert m.delete("t", 1) and not m.delete("t", 1)
    assert not (tmp_path / "t-1").exists() and m.get("t", 1) is None
    m.checkpoint()
    assert "t 1" not in (tmp_path / "recovery-point-offset-checkpoint").read_text()


def test_run_retention(tmp_path: Path) -> None:
    m = manager(tmp_path)
    config = dataclasses.replace(LogConfig(), segment_bytes=len(one()) + 1, retention_ms=1_000)
    plog = m.create("t", 0, config)
    for i in range(4):
        plog.append(one(i), leader_epoch=0, now_ms=NOW)
    assert len(plog.segments) == 4
    assert m.run_retention(NOW + 10_000) == 3
    assert plog.log_start_offset == 3
