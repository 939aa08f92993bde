"""The verify workload: producers send unique values, then consumers read everything back.

Producers and consumers are confluent-kafka clients in threads of their own (librdkafka does
the I/O in its own threads; Python only creates values and records reports). Every loop is
bounded: producers stop after their share of ``records`` or at ``duration_s``, the final
flush waits at most ``flush_timeout_s``, and consumers stop when they have seen the end of
every partition at or past its highest acknowledged offset, or at ``read_timeout_s``.

With ``transactional`` each producer has a ``transactional.id`` of its own and sends its values
in transactions of ``txn_size``; it aborts a transaction on purpose with probability
``abort_fraction`` and commits the others, and records each transaction's outcome as the client
learnt it (committed, aborted, or in doubt when neither the commit nor the abort was confirmed).
A producer whose transaction ended in doubt or whose client failed fatally is replaced by a new
one with the same ``transactional.id``: its ``init_transactions`` fences the old one and makes
the coordinator finish the open transaction, so none is left hanging for the read phase.
"""

from __future__ import annotations

import contextlib
import random
import secrets
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from .history import (
    ABORTED,
    COMMITTED,
    IN_DOUBT,
    Ack,
    Failure,
    History,
    Read,
    Txn,
    ValueId,
    encode_value,
)
from .nemesis import Nemesis, NemesisContext


@dataclass
class WorkloadConfig:
    """One run's shape. ``client_config`` holds bootstrap.servers and shared client settings."""

    client_config: dict[str, Any]
    topic: str
    producers: int = 2
    consumers: int = 2
    records: int | None = None
    duration_s: float | None = None
    #: Total target rate over all producers (records/s); 0 sends as fast as the cluster takes.
    rate: float = 0.0
    value_size: int = 64
    acks: str = "all"
    idempotence: bool = True
    isolation_level: str = "read_uncommitted"
    flush_timeout_s: float = 30.0
    read_timeout_s: float = 30.0
    timeout_s: float = 10.0
    run_id: str = field(default_factory=lambda: secrets.token_hex(4))
    extra_producer_config: dict[str, Any] = field(default_factory=dict)
    #: Transactional producers (see the module docstring); read with read_committed.
    transactional: bool = False
    txn_size: int = 100
    abort_fraction: float = 0.2
    transaction_timeout_ms: int = 10_000
    #: Most producers one worker may replace after a fatal error or a transaction in doubt.
    max_replacements: int = 20

    def share(self, producer: int) -> int | None:
        """How many records producer number ``producer`` sends (None: until the deadline)."""
        if self.records is None:
            return None
        base, extra = divmod(self.records, self.producers)
        return base + (1 if producer < extra else 0)


def partition_count(config: WorkloadConfig) -> int:
    """The topic's partition count from metadata; KafkaException when it is unknown."""
    probe = Consumer({**config.client_config, "group.id": f"moldau-verify-{config.run_id}"})
    try:
        metadata = probe.list_topics(config.topic, timeout=config.timeout_s)
        found = metadata.topics.get(config.topic)
        if found is None or found.error is not None or not found.partitions:
            missing = KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)
            raise KafkaException(found.error if found is not None else missing)
        return len(found.partitions)
    finally:
        probe.close()


def end_offsets(config: WorkloadConfig, partitions: int) -> dict[int, int]:
    """Each partition's end offset now: where this run's records will start."""
    probe = Consumer({**config.client_config, "group.id": f"moldau-verify-{config.run_id}"})
    try:
        return {p: probe.get_watermark_offsets(TopicPartition(config.topic, p),
                                               timeout=config.timeout_s)[1]
                for p in range(partitions)}
    finally:
        probe.close()


class _StartClock:
    """Starts the timed phase when every producer is warmed up (a barrier with a clock)."""

    def __init__(self, producers: int, duration_s: float | None) -> None:
        self.duration_s = duration_s
        self.began = 0.0
        self.deadline = float("inf")
        self._barrier = threading.Barrier(producers + 1, action=self._start)

    def _start(self) -> None:
        self.began = time.monotonic()
        if self.duration_s is not None:
            self.deadline = self.began + self.duration_s

    def wait(self) -> None:
        self._barrier.wait()


class _ProducerWorker:
    """One idempotent producer: sends its share, records every delivery report."""

    def __init__(self, number: int, config: WorkloadConfig, clock: _StartClock) -> None:
        self.number = number
        self.config = config
        self.clock = clock
        self.sent: list[ValueId] = []
        self.sent_at: list[float] = []
        self.acks: list[Ack] = []
        self.failures: list[Failure] = []
        #: The fatal client error that stopped this producer early, if one did.
        self.fatal: str | None = None

    def _on_delivery(self, error: KafkaError | None, message: Message) -> None:
        seq = int(message.value().split(b":", 4)[3])  # type: ignore[union-attr]
        ident = (self.number, seq)
        if error is not None:
            self.failures.append(Failure(ident, error.str()))
            return
        sent_at = self.sent_at[seq]
        latency = time.monotonic() - sent_at if sent_at >= 0 else -1.0
        # offset() is None for an implicit ack (see Ack): recorded as unknown, never as 0.
        self.acks.append(Ack(ident, message.partition() or 0, message.offset(), latency))

    def _on_error(self, error: KafkaError) -> None:
        if error.fatal() and self.fatal is None:
            self.fatal = error.str()

    def run(self) -> None:
        cfg = self.config
        producer = Producer({
            **cfg.client_config,
            "client.id": f"moldau-verify-{cfg.run_id}-p{self.number}",
            "acks": cfg.acks,
            "enable.idempotence": cfg.idempotence,
            "linger.ms": 5,
            "message.timeout.ms": max(1000, int(cfg.flush_timeout_s * 1000)),
            # A fatal error (librdkafka gives up on the idempotent producer's state, e.g.
            # after an unclean election) comes here first; without an error callback
            # confluent-kafka 2.16 raises it out of flush() as an object no except catches.
            "error_cb": self._on_error,
            **cfg.extra_producer_config,
        })
        quota = cfg.share(self.number)
        seq = 0
        if quota != 0:
            # An idempotent producer first fetches its producer id (librdkafka takes ~0.5 s);
            # one record sent and flushed before the clock starts keeps that out of the figures.
            self.sent_at.append(-1.0)
            producer.produce(cfg.topic, encode_value(cfg.run_id, self.number, 0, cfg.value_size),
                             on_delivery=self._on_delivery)
            self.sent.append((self.number, 0))
            seq = 1
            self._flush(producer, cfg.flush_timeout_s)
        self.clock.wait()
        if self.fatal is None:
            try:
                self._send(producer, quota, seq)
            except KafkaException as exc:  # the fatal error, raised again out of poll()
                self.fatal = self.fatal or str(exc)
            self._flush(producer, cfg.flush_timeout_s)
        # What is still queued now gets a purge error in its report: indeterminate.
        producer.purge()
        with contextlib.suppress(KafkaException):
            producer.flush(1.0)
        reported = {a.value for a in self.acks} | {f.value for f in self.failures}
        self.failures.extend(
            Failure(value, f"no delivery report ({self.fatal or 'flush timed out'})")
            for value in self.sent if value not in reported)

    def _flush(self, producer: Producer, timeout_s: float) -> None:
        """Flush, but stop waiting once the producer had a fatal error (nothing more comes)."""
        deadline = time.monotonic() + timeout_s
        while self.fatal is None and time.monotonic() < deadline:
            try:
                if producer.flush(min(0.5, max(0.0, deadline - time.monotonic()))) == 0:
                    return
            except KafkaException as exc:  # the fatal error, raised again out of flush()
                self.fatal = self.fatal or str(exc)

    def _send(self, producer: Producer, quota: int | None, seq: int) -> None:
        """The timed phase: send from ``seq`` on, at the configured rate, until the deadline."""
        cfg = self.config
        interval = cfg.producers / cfg.rate if cfg.rate > 0 else 0.0
        while ((quota is None or seq < quota) and time.monotonic() < self.clock.deadline
               and self.fatal is None):
            if interval:
                wait = self.clock.began + (seq - 1) * interval - time.monotonic()
                if wait > 0:
                    producer.poll(min(wait, 0.1))
                    continue
            value = encode_value(cfg.run_id, self.number, seq, cfg.value_size)
            self.sent_at.append(time.monotonic())
            try:
                producer.produce(cfg.topic, value, on_delivery=self._on_delivery)
            except BufferError:
                self.sent_at.pop()
                producer.poll(0.05)
                continue
            except KafkaException as exc:
                self.failures.append(Failure((self.number, seq), str(exc)))
            self.sent.append((self.number, seq))
            seq += 1
            producer.poll(0)


class _TransactionalWorker(_ProducerWorker):
    """One transactional producer: transactions of ``txn_size`` values, some aborted on purpose.

    Values stay numbered in send order per producer, so each transaction is a range of
    sequence numbers (``Txn``). Rate and deadline are as for the idempotent worker; a
    transaction cut by the deadline or the quota is shorter, never left open.
    """

    def __init__(self, number: int, config: WorkloadConfig, clock: _StartClock) -> None:
        super().__init__(number, config, clock)
        self.transactions: list[Txn] = []
        self.transactional_id = f"moldau-verify-{config.run_id}-p{number}"
        #: Why each replaced producer was given up (its transaction in doubt).
        self.replaced: list[str] = []
        self._generation = 0
        self._rng = random.Random(f"{config.run_id}-{number}")

    def _open(self) -> Producer | None:
        """A new producer with our transactional.id, initialised (fencing any previous one).

        init_transactions is retried while it times out, for up to ``flush_timeout_s``
        (the coordinator may be moving); None when it never succeeds."""
        cfg = self.config
        self.fatal = None
        self._generation += 1
        generation = self._generation
        producer = Producer({
            **cfg.client_config,
            "client.id": f"moldau-verify-{cfg.run_id}-p{self.number}",
            "transactional.id": self.transactional_id,
            "transaction.timeout.ms": cfg.transaction_timeout_ms,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            # librdkafka refuses a message timeout above the transaction timeout.
            "message.timeout.ms": min(cfg.transaction_timeout_ms,
                                      max(1000, int(cfg.flush_timeout_s * 1000))),
            # A replaced producer's late errors must not stop its successor.
            "error_cb": lambda error: (self._on_error(error)
                                       if generation == self._generation else None),
            **cfg.extra_producer_config,
        })
        deadline = time.monotonic() + cfg.flush_timeout_s
        while True:
            try:
                producer.init_transactions(max(1.0, min(cfg.timeout_s,
                                                        deadline - time.monotonic())))
                return producer
            except KafkaException as exc:
                error = exc.args[0] if exc.args else None
                retriable = isinstance(error, KafkaError) and error.retriable()
                if not retriable or time.monotonic() >= deadline:
                    self.fatal = f"init_transactions: {exc}"
                    return None

    def _replace(self, producer: Producer) -> Producer | None:
        """Give up ``producer`` (its last transaction is in doubt): a new one fences it."""
        _quietly(producer.purge)
        if len(self.replaced) > self.config.max_replacements:
            self.fatal = self.fatal or "too many producers replaced"
            return None
        return self._open_safely()

    def _open_safely(self) -> Producer | None:
        """:meth:`_open`, whatever it raises (the start barrier must see every worker)."""
        try:
            return self._open()
        except:  # noqa: E722 - see _quietly
            self.fatal = f"cannot start a transactional producer: {sys.exc_info()[1]!s}"
            return None

    def run(self) -> None:
        cfg = self.config
        producer = self._open_safely()
        self.clock.wait()
        quota = cfg.share(self.number)
        seq = 0
        while (producer is not None and (quota is None or seq < quota)
               and time.monotonic() < self.clock.deadline):
            size = cfg.txn_size if quota is None else min(cfg.txn_size, quota - seq)
            first = seq
            chose_abort = self._rng.random() < cfg.abort_fraction
            try:
                producer.begin_transaction()
                seq, failed = self._send_transaction(producer, seq, size)
            except KafkaException as exc:  # a fatal or state error: no transaction to send in
                failed = f"begin_transaction: {exc}"
            except:  # noqa: E722 - see _quietly
                seq = len(self.sent)  # one value per sequence number, in order
                failed = f"client raised {sys.exc_info()[1]!s}"
            try:
                outcome, detail = self._end(producer, commit=not chose_abort and failed is None
                                            and seq > first, why=failed)
            except:  # noqa: E722 - see _quietly: the thread must live to record its history
                outcome, detail = IN_DOUBT, f"client raised {sys.exc_info()[1]!s}"
            if seq > first:
                self.transactions.append(Txn(self.number, len(self.transactions), first,
                                             seq - 1, outcome, detail, chose_abort))
            if outcome == IN_DOUBT:
                self.replaced.append(detail)
                producer = self._replace(producer)
        if producer is not None:
            _quietly(producer.flush, 1.0)
        reported = {a.value for a in self.acks} | {f.value for f in self.failures}
        self.failures.extend(
            Failure(value, f"no delivery report ({self.fatal or 'transaction ended'})")
            for value in self.sent if value not in reported)

    def _send_transaction(self, producer: Producer, seq: int, size: int) -> tuple[int, str | None]:
        """Send up to ``size`` values from ``seq`` in the open transaction, at the rate; the
        next sequence number, and why the transaction must be aborted (None: it may commit)."""
        cfg = self.config
        interval = cfg.producers / cfg.rate if cfg.rate > 0 else 0.0
        end = seq + size
        while seq < end and time.monotonic() < self.clock.deadline:
            if self.fatal is not None:
                return seq, f"fatal: {self.fatal}"
            if interval:
                wait = self.clock.began + seq * interval - time.monotonic()
                if wait > 0:
                    producer.poll(min(wait, 0.1))
                    continue
            value = encode_value(cfg.run_id, self.number, seq, cfg.value_size)
            self.sent_at.append(time.monotonic())
            try:
                producer.produce(cfg.topic, value, on_delivery=self._on_delivery)
            except BufferError:
                self.sent_at.pop()
                producer.poll(0.05)
                continue
            except KafkaException as exc:
                self.sent_at.pop()
                return seq, f"produce: {exc}"
            self.sent.append((self.number, seq))
            seq += 1
            producer.poll(0)
        return seq, None

    def _end(self, producer: Producer, *, commit: bool, why: str | None) -> tuple[str, str]:
        """Commit (or abort) the open transaction: its outcome as confirmed, and why.

        A retriable error (a timeout) retries the same call until ``flush_timeout_s``; a
        commit refused with an abortable error is aborted; anything else is in doubt."""
        cfg = self.config
        deadline = time.monotonic() + cfg.flush_timeout_s
        detail = why or ""
        if not commit and why is None:
            # An abort chosen on purpose: let the values reach the log first (abort would
            # purge what is still queued), so consumers really have aborted data to skip.
            _quietly(producer.flush, cfg.flush_timeout_s)  # a fatal error: abort says it again
        while True:
            left = max(1.0, deadline - time.monotonic())
            try:
                if commit:
                    producer.commit_transaction(left)
                    return COMMITTED, detail
                producer.abort_transaction(left)
                return ABORTED, detail
            except KafkaException as exc:
                error = exc.args[0] if exc.args else None
                what = f"{'commit' if commit else 'abort'}: {exc}"
                detail = f"{detail}; {what}" if detail else what
                if not isinstance(error, KafkaError) or error.fatal():
                    self.fatal = self.fatal or str(exc)
                    return IN_DOUBT, detail
                if commit and error.txn_requires_abort():
                    commit = False  # the commit cannot happen any more: abort instead
                    continue
                if not error.retriable() or time.monotonic() >= deadline:
                    return IN_DOUBT, detail


class _ConsumerWorker:
    """Reads every partition from the run's start offsets to at least the acknowledged end."""

    def __init__(self, number: int, config: WorkloadConfig, history: History,
                 targets: dict[int, int], deadline: float) -> None:
        self.number = number
        self.config = config
        self.history = history
        self.targets = targets
        self.deadline = deadline
        self.reads: list[Read] = []
        self.errors: list[str] = []
        self.complete = False

    def run(self) -> None:
        cfg = self.config
        consumer = Consumer({
            **cfg.client_config,
            "client.id": f"moldau-verify-{cfg.run_id}-c{self.number}",
            "group.id": f"moldau-verify-{cfg.run_id}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": True,
            # Records deleted below our start (retention, DeleteRecords) move us to the log start.
            "auto.offset.reset": "earliest",
            "isolation.level": cfg.isolation_level,
            "fetch.wait.max.ms": 100,
        })
        pending = set(range(self.history.partitions))
        consumer.assign([TopicPartition(cfg.topic, p, self.history.start_offsets.get(p, 0))
                         for p in pending])
        try:
            while pending and time.monotonic() < self.deadline:
                for message in consumer.consume(1000, timeout=0.2):
                    error = message.error()
                    # Both are set on records and on end-of-partition events.
                    partition, offset = message.partition() or 0, message.offset() or 0
                    if error is None:
                        self.reads.append(Read(self.number, partition, offset, message.value()))
                    elif error.code() == KafkaError._PARTITION_EOF:
                        if offset >= self.targets.get(partition, 0):
                            pending.discard(partition)
                    else:
                        self.errors.append(f"consumer {self.number}: {error.str()}")
            self.complete = not pending
        finally:
            consumer.close()


def _quietly(call: Callable[..., Any], *args: Any) -> None:
    """``call(*args)``, ignoring whatever it raises.

    After a fatal error confluent-kafka 2.16 can raise a ``KafkaError`` (no exception class)
    out of ``flush()`` even with an ``error_cb``; only a bare except stops it from killing the
    worker thread before its transactions are recorded. The error itself reaches the worker
    through ``error_cb`` or the next transactional call."""
    try:  # noqa: SIM105 - contextlib.suppress matches exception classes only
        call(*args)
    except:  # noqa: E722
        pass


def _start_threads(workers: list[Any], name: str) -> list[threading.Thread]:
    threads = [threading.Thread(target=w.run, name=f"{name}-{i}", daemon=True)
               for i, w in enumerate(workers)]
    for thread in threads:
        thread.start()
    return threads


class _NemesisRunner:
    """Calls ``nemesis.strike`` on a timer while producers run; records each event."""

    def __init__(self, nemesis: Nemesis, ctx: NemesisContext, began: float) -> None:
        self.nemesis = nemesis
        self.ctx = ctx
        self.began = began
        ctx.began = began
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="nemesis", daemon=True)

    def record(self, hook: Callable[[NemesisContext], str | None]) -> None:
        try:
            said = hook(self.ctx)
        except Exception as exc:  # a failed fault is reported, the run goes on
            said = f"{self.nemesis.name} failed: {type(exc).__name__}: {exc}"
        if said:
            self.ctx.note(said)

    def _loop(self) -> None:
        interval = self.nemesis.interval_s
        while interval and not self.stop.wait(interval):
            self.record(self.nemesis.strike)

    def __enter__(self) -> _NemesisRunner:
        self.thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop.set()
        self.thread.join()
        self.record(self.nemesis.heal)


def run_workload(config: WorkloadConfig, nemesis: Nemesis | None = None) -> History:
    """Produce, let the nemesis act, read back; return everything observed.

    The topic must exist. ``KafkaException`` escapes only from the set-up (metadata, start
    offsets); once records flow, client errors are recorded in the history instead.
    """
    if config.records is None and config.duration_s is None:
        raise ValueError("a run needs records or duration_s: every load loop must end")
    nemesis = nemesis or Nemesis()
    partitions = partition_count(config)
    history = History(config.run_id, config.topic, partitions,
                      start_offsets=end_offsets(config, partitions))
    ctx = NemesisContext(config.topic, dict(config.client_config), history, config.timeout_s)
    clock = _StartClock(config.producers, config.duration_s)
    kind = _TransactionalWorker if config.transactional else _ProducerWorker
    producers = [kind(i, config, clock) for i in range(config.producers)]
    history.transactional = config.transactional
    threads = _start_threads(producers, "verify-producer")
    clock.wait()
    with _NemesisRunner(nemesis, ctx, clock.began) as runner:
        for thread in threads:
            thread.join()
        history.produce_seconds = time.monotonic() - clock.began
    for worker in producers:
        if worker.fatal is not None:
            runner.ctx.note(f"producer {worker.number} stopped by a fatal client error: "
                            f"{worker.fatal}")
        history.sent.update(worker.sent)
        history.acks.extend(worker.acks)
        history.failures.extend(worker.failures)
        if isinstance(worker, _TransactionalWorker):
            history.transactions.extend(worker.transactions)
            if worker.replaced:
                runner.ctx.note(f"producer {worker.number} replaced its client "
                                f"{len(worker.replaced)} times, each after a transaction in "
                                f"doubt (first: {worker.replaced[0]})")
    runner.record(nemesis.before_read)

    targets: dict[int, int] = defaultdict(int)
    for ack in history.acks:
        if ack.offset is not None:
            targets[ack.partition] = max(targets[ack.partition], ack.offset + 1)
    read_began = time.monotonic()
    consumers = [_ConsumerWorker(i, config, history, targets, read_began + config.read_timeout_s)
                 for i in range(config.consumers)]
    for thread in _start_threads(consumers, "verify-consumer"):
        thread.join()
    history.read_seconds = time.monotonic() - read_began
    for reader in consumers:
        history.reads.extend(reader.reads)
        history.read_errors.extend(reader.errors)
    history.read_complete = all(reader.complete for reader in consumers)
    return history
