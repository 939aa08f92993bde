"""Durability across crashes: no record the broker acknowledged is lost or duplicated.

Each test owns its broker (``make_broker``) because it kills it. Producers use acks=all and
record, in delivery callbacks, exactly which sequence numbers were acknowledged and at which
offsets; after a restart on the same data directory every acknowledged record must be there,
once, at the offset it was acknowledged with, in the order it was sent.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Message, Producer

from tests.integration.clients import (
    create_topic,
    producer,
    read_partition,
    unique,
    watermarks,
)

pytestmark = pytest.mark.timeout(120)

PARTITIONS = 2
FILLER = b"." * 80


def encode(seq: int) -> bytes:
    return b"seq=%09d|" % seq + FILLER


def decode(value: bytes | None) -> int:
    assert value is not None and value.startswith(b"seq="), value
    return int(value[4:13])


@dataclass
class Acks:
    """Sequence numbers acknowledged per partition, with their offsets, as callbacks saw them."""

    by_partition: dict[int, dict[int, int]] = field(default_factory=dict)
    failures: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, err: KafkaError | None, msg: Message) -> None:
        with self.lock:
            if err is not None:
                self.failures += 1
                return
            offsets = self.by_partition.setdefault(msg.partition(), {})
            seq = decode(msg.value())
            assert seq not in offsets, f"seq {seq} acknowledged twice"
            offsets[seq] = msg.offset()

    def count(self) -> int:
        with self.lock:
            return sum(len(v) for v in self.by_partition.values())


def durable_producer(bootstrap: str, **config: object) -> Producer:
    settings: dict[str, object] = {"acks": "all", "linger_ms": 5, "batch_num_messages": 2000,
                                   "queue_buffering_max_messages": 200_000}
    settings.update(config)
    return producer(bootstrap, **settings)


def produce_range(p: Producer, topic: str, start: int, stop: int, acks: Acks) -> None:
    for seq in range(start, stop):
        while True:
            try:
                p.produce(topic, value=encode(seq), partition=seq % PARTITIONS,
                          on_delivery=acks)
                break
            except BufferError:
                p.poll(0.01)
        if seq % 1000 == 0:
            p.poll(0)


def read_back(bootstrap: str, topic: str) -> dict[int, list[tuple[int, int]]]:
    """Every record now in each partition, as (offset, seq) in log order."""
    out: dict[int, list[tuple[int, int]]] = {}
    for part in range(PARTITIONS):
        low, high = watermarks(bootstrap, topic, part)
        assert low == 0
        msgs = read_partition(bootstrap, topic, part, 0, high, timeout=60) if high else []
        out[part] = [(m.offset(), decode(m.value())) for m in msgs]
    return out


def assert_acked_survived(acks: Acks, log: dict[int, list[tuple[int, int]]]) -> None:
    for part, acked in acks.by_partition.items():
        records = log[part]
        offsets = [o for o, _ in records]
        assert offsets == list(range(len(records))), f"gaps or repeats in partition {part}"
        seqs = [s for _, s in records]
        seen: dict[int, int] = {}
        for offset, seq in records:
            if seq in acked:
                assert seq not in seen, f"acked seq {seq} stored twice ({seen[seq]}, {offset})"
                seen[seq] = offset
        missing = sorted(set(acked) - set(seen))
        assert not missing, f"{len(missing)} acked records lost in p{part}, e.g. {missing[:5]}"
        # At the very offsets the broker acknowledged them, hence in send order.
        wrong = [(s, acked[s], seen[s]) for s in acked if seen[s] != acked[s]]
        assert not wrong, f"acked records moved: {wrong[:5]}"
        acked_in_log = [s for s in seqs if s in acked]
        assert acked_in_log == sorted(acked_in_log)


def test_kill9_after_flush_loses_nothing(make_broker):
    b = make_broker()
    topic = unique("dur-flushed")
    create_topic(b.bootstrap, topic, partitions=PARTITIONS)
    acks = Acks()
    p = durable_producer(b.bootstrap)
    total = 100_000
    started = time.monotonic()
    produce_range(p, topic, 0, total, acks)
    assert p.flush(60) == 0
    produce_s = time.monotonic() - started
    assert acks.failures == 0
    assert acks.count() == total

    b.kill9()
    b.restart()
    log = read_back(b.bootstrap, topic)
    assert_acked_survived(acks, log)
    assert sum(len(v) for v in log.values()) == total
    print(f"produced {total} acks=all in {produce_s:.1f}s")

    # The restarted broker takes new writes after the recovered ones.
    more = Acks()
    p = durable_producer(b.bootstrap)
    produce_range(p, topic, total, total + 10, more)
    assert p.flush(20) == 0
    assert more.failures == 0
    for part in range(PARTITIONS):
        assert sorted(more.by_partition[part].values()) == list(
            range(total // PARTITIONS, total // PARTITIONS + 5))


def test_kill9_while_producing_keeps_every_acked_record(make_broker):
    b = make_broker()
    topic = unique("dur-midflight")
    create_topic(b.bootstrap, topic, partitions=PARTITIONS)
    acks = Acks()
    stop = threading.Event()
    produced = [0]

    def run() -> None:
        p = durable_producer(b.bootstrap, message_timeout_ms=3000, retries=2)
        seq = 0
        deadline = time.monotonic() + 60
        while not stop.is_set() and seq < 1_000_000 and time.monotonic() < deadline:
            produce_range(p, topic, seq, seq + 500, acks)
            seq += 500
            p.poll(0)
        produced[0] = seq
        p.flush(15)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    deadline = time.monotonic() + 60
    while acks.count() < 30_000 and time.monotonic() < deadline and worker.is_alive():
        time.sleep(0.01)
    assert acks.count() >= 30_000, f"only {acks.count()} acknowledged before the kill"
    b.kill9()
    killed_at = acks.count()
    stop.set()
    worker.join(30)
    assert not worker.is_alive()
    # Requests in flight at the kill can still have been acknowledged just before it.
    assert acks.count() >= killed_at
    assert acks.failures > 0 or acks.count() == produced[0], "nothing was in flight?"

    b.restart()
    log = read_back(b.bootstrap, topic)
    assert_acked_survived(acks, log)
    stored = sum(len(v) for v in log.values())
    assert acks.count() <= stored <= produced[0]


def test_clean_restart_keeps_data_and_skips_recovery(make_broker):
    b = make_broker()
    topic = unique("dur-clean")
    create_topic(b.bootstrap, topic, partitions=PARTITIONS)
    acks = Acks()
    p = durable_producer(b.bootstrap)
    produce_range(p, topic, 0, 5000, acks)
    assert p.flush(30) == 0
    assert b.stop() == 0
    before = b.stderr_text()
    assert re.search(r"shut down cleanly", before), before[-2000:]
    b.start()
    assert_acked_survived(acks, read_back(b.bootstrap, topic))
    after = b.stderr_text()  # this run's log only
    # A clean shutdown leaves a marker, so the next start skips recovery: it neither says
    # it is recovering (the unclean-start message) nor truncates anything.
    assert not re.search(r"truncat", after, re.IGNORECASE), after[-2000:]
    assert not re.search(r"no clean shutdown|recovering", after, re.IGNORECASE), after[-2000:]
    # ...whereas after a kill -9 it does say so (the check above can tell the difference).
    b.kill9()
    b.start()
    assert re.search(r"recover", b.stderr_text(), re.IGNORECASE), b.stderr_text()[-2000:]
    assert_acked_survived(acks, read_back(b.bootstrap, topic))


def _active_segment(data_dir: Path, topic: str, partition: int) -> Path:
    segments = sorted((data_dir / f"{topic}-{partition}").glob("*.log"))
    assert segments, f"no segments for {topic}-{partition} in {data_dir}"
    return segments[-1]


@pytest.mark.parametrize("tail", ["random", "torn-batch", "zeros"])
def test_torn_tail_is_truncated(make_broker, tail):
    b = make_broker()
    topic = unique("dur-torn")
    create_topic(b.bootstrap, topic, partitions=PARTITIONS)
    acks = Acks()
    p = durable_producer(b.bootstrap, linger_ms=0)
    for start in range(0, 2000, 100):  # many batches
        produce_range(p, topic, start, start + 100, acks)
        assert p.flush(10) == 0
    assert acks.count() == 2000
    b.kill9()

    segment = _active_segment(Path(b.data_dir), topic, 0)
    size = segment.stat().st_size
    with segment.open("rb") as f:
        head = f.read(300)
    garbage = {
        "random": bytes((i * 37 + 11) % 256 for i in range(4096)),
        # A write cut short: the start of a real batch header (it even claims offset 0).
        "torn-batch": head[:200],
        "zeros": b"\x00" * 8192,  # preallocated but never written
    }[tail]
    with segment.open("ab") as f:
        f.write(garbage)
    assert segment.stat().st_size == size + len(garbage)

    b.restart()
    log = read_back(b.bootstrap, topic)
    assert_acked_survived(acks, log)
    assert [len(log[p]) for p in range(PARTITIONS)] == [1000, 1000]
    text = b.stderr_text()
    assert re.search(r"truncat", text, re.IGNORECASE), text[-3000:]
    assert segment.stat().st_size == size  # cut back to the last whole batch

    # New writes continue right after the last acknowledged record.
    more = Acks()
    p = durable_producer(b.bootstrap)
    produce_range(p, topic, 2000, 2010, more)
    assert p.flush(20) == 0
    assert more.failures == 0
    assert sorted(more.by_partition[0].values()) == list(range(1000, 1005))
    assert sorted(more.by_partition[1].values()) == list(range(1000, 1005))
    assert_acked_survived(more, read_back(b.bootstrap, topic))
