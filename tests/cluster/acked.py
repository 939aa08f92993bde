"""What fault tests send and read back, judged by ``moldau verify``'s checker.

``Sender`` is one idempotent ``acks=all`` confluent-kafka producer on a thread of its own,
sending unique values (verify's encoding: run id, producer number, sequence) round-robin over
a topic's partitions while a test breaks the cluster; every delivery report goes into a
:class:`~moldau.verify.history.History`. ``read_back`` reads every partition from offset 0 to
its high watermark into the same history, and ``assert_nothing_lost`` runs the checker:
every acknowledged value read exactly once at the offset it was acknowledged at, in send
order per partition, nothing read that was never sent. ``replica_batches`` reads a replica's
log files directly (no broker), to compare the logs of all replicas batch by batch.

Tests inject a leader's death or pause with nothing in flight (``Sender.quiesce``, then
``resume``). The broker deduplicates a retried batch (idempotent producer state, see
docs/architecture.md), but librdkafka does not always retry: when a new leader lacks an
unacknowledged tail and answers a later batch OUT_OF_ORDER_SEQUENCE_NUMBER (as Kafka does),
librdkafka bumps the producer's epoch for every partition and re-sends what it had not seen
acknowledged under new sequence numbers, which writes records the old epoch already wrote
(NOT_ENOUGH_REPLICAS_AFTER_APPEND, timeouts) a second time. With several partitions that is
a client trait, not a broker fault, so these tests keep faults away from batches in flight;
the single-partition failover tests and tests/cluster/test_idempotence.py assert exactly once.
"""

from __future__ import annotations

import os
import secrets
import threading
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from moldau.log.inspect import BatchScan, segment_files
from moldau.verify.checker import Verdict, check
from moldau.verify.history import Ack, Failure, History, Read, encode_value

#: Producer settings of every fault test: a failover must be ridden out, not reported.
PRODUCER_CONFIG: dict[str, Any] = {
    "acks": "all", "enable.idempotence": True, "linger.ms": 5,
    "message.timeout.ms": 60000, "request.timeout.ms": 10000,
}


def new_history(topic: str, partitions: int) -> History:
    return History(run_id=secrets.token_hex(4), topic=topic, partitions=partitions,
                   start_offsets=dict.fromkeys(range(partitions), 0))


class Sender:
    """Producer number ``number`` of ``history``: sends every ``interval`` seconds, at most
    ``limit`` values, from ``start()`` until ``stop()`` (which flushes, bounded)."""

    def __init__(self, bootstrap: str, history: History, number: int = 0, *,
                 interval: float = 0.004, limit: int = 20_000, value_size: int = 0,
                 config: dict[str, Any] | None = None) -> None:
        self.history = history
        self.value_size = value_size
        self.number = number
        self.interval = interval
        self.limit = limit
        self.producer = Producer({"bootstrap.servers": bootstrap, **PRODUCER_CONFIG,
                                  **(config or {})})
        self._stop = threading.Event()
        self._go = threading.Event()
        self._go.set()
        self._sending = threading.Lock()  # held while one value is handed to the client
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name=f"sender-{number}", daemon=True)
        self.sent = 0

    @property
    def acked(self) -> int:
        with self._lock:
            return sum(1 for a in self.history.acks if a.value[0] == self.number)

    def send(self, count: int, timeout: float = 60.0) -> None:
        """Send ``count`` values now and wait for their reports (before or after a fault)."""
        for _ in range(count):
            self._send_one()
        assert self.producer.flush(timeout) == 0, "sends still pending"

    def _send_one(self) -> None:
        seq = self.sent
        self.sent += 1
        ident = (self.number, seq)
        value = encode_value(self.history.run_id, self.number, seq, self.value_size)
        started = time.monotonic()

        def report(err: KafkaError | None, msg: Any) -> None:
            with self._lock:
                if err is None:
                    self.history.acks.append(Ack(ident, msg.partition(), msg.offset(),
                                                 time.monotonic() - started))
                else:
                    self.history.failures.append(Failure(ident, str(err)))

        with self._lock:
            self.history.sent.add(ident)
        while True:
            try:
                self.producer.produce(self.history.topic, value=value,
                                      partition=seq % self.history.partitions,
                                      on_delivery=report)
                break
            except BufferError:
                self.producer.poll(0.1)
        self.producer.poll(0)

    def _run(self) -> None:
        while not self._stop.is_set() and self.sent < self.limit:
            self._go.wait()
            with self._sending:
                if self._go.is_set() and not self._stop.is_set():
                    self._send_one()
            self._stop.wait(self.interval)

    def quiesce(self, timeout: float = 60.0) -> None:
        """Stop sending and wait until every value sent so far is answered."""
        self._go.clear()
        with self._sending:
            pass
        assert self.producer.flush(timeout) == 0, "sends still pending"

    def resume(self) -> None:
        self._go.set()

    def start(self) -> Sender:
        self._thread.start()
        return self

    def stop(self, flush_timeout: float = 90.0) -> None:
        self._stop.set()
        self._go.set()
        self._thread.join(30)
        self.producer.flush(flush_timeout)

    def wait_acked(self, more: int, timeout: float = 60.0) -> None:
        """Wait until ``more`` values more than now are acknowledged (the cluster took
        writes again after a fault)."""
        target = self.acked + more
        deadline = time.monotonic() + timeout
        while self.acked < target:
            if time.monotonic() > deadline:
                raise AssertionError(f"only {self.acked} of {target} values acknowledged "
                                     f"after {timeout:.0f} s")
            time.sleep(0.05)


def read_back(bootstrap: str, history: History, timeout: float = 60.0) -> None:
    """Read every partition from offset 0 to its high watermark into ``history.reads``."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "fault-test-reader",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(history.topic, p),
                                                  timeout=30)[1]
                for p in range(history.partitions)}
        consumer.assign([TopicPartition(history.topic, p, 0) for p in ends])
        done = {p for p, end in ends.items() if end == 0}
        deadline = time.monotonic() + timeout
        while len(done) < len(ends):
            if time.monotonic() > deadline:
                history.read_complete = False
                break
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                if msg.error().code() != KafkaError._PARTITION_EOF:
                    history.read_errors.append(str(msg.error()))
                elif msg.offset() >= ends[msg.partition()]:
                    done.add(msg.partition())
                continue
            history.reads.append(Read(0, msg.partition(), msg.offset(), msg.value()))
            if msg.offset() + 1 >= ends[msg.partition()]:
                done.add(msg.partition())
    finally:
        consumer.close()


def assert_nothing_lost(bootstrap: str, history: History) -> Verdict:
    """Read back and check: nothing acknowledged lost, every value at most once, in order."""
    read_back(bootstrap, history)
    verdict = check(history)
    print(f"sent {verdict.sent}, acked {verdict.acked}, failed {verdict.failed} "
          f"({verdict.failed_but_read} of them read), read {verdict.records_read}")
    assert verdict.read_complete, "could not read every partition to its end"
    assert verdict.acked > 0
    problems = {kind: getattr(verdict, kind)[:5] for kind in Verdict.ANOMALY_KINDS
                if getattr(verdict, kind)}
    assert not problems, problems
    return verdict


Batch = tuple[int, int, int]  # (base offset, last offset, CRC)


def replica_batches(data_dir: Path, topic: str, partition: int) -> list[Batch]:
    """Every batch of one replica's log on disk, read from its segment files."""
    batches: list[Batch] = []
    for path in segment_files(data_dir / f"{topic}-{partition}"):
        if path.suffix != ".log":
            continue
        fd = os.open(path, os.O_RDONLY)
        try:
            for batch in BatchScan(fd, os.fstat(fd).st_size):
                h = batch.header
                batches.append((h.base_offset, h.base_offset + h.last_offset_delta, h.crc))
        finally:
            os.close(fd)
    return batches
