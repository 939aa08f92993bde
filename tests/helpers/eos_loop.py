"""An exactly-once consume-transform-produce loop, the way applications write one.

``python -m tests.helpers.eos_loop --bootstrap B --input in --output out --group g
--transactional-id t`` reads ``in`` (a subscribed read_committed consumer, static member
``--instance-id`` so a restarted loop takes over at once), writes ``out:<value>`` of every
record to the same partition of ``out`` inside a transaction, and commits its input offsets
in the same transaction (``send_offsets_to_transaction``). Run under kill -9 by the tests
(tests/helpers/eos.py): every restart fences the killed incarnation through the
transactional id, its open transaction is aborted, and the loop resumes at the offsets
committed with the last committed transaction, so ``out`` read with read_committed holds
every input record exactly once, in order per partition.

It prints one line per step on stdout (flushed), which the tests use to kill it at the
right moment: ``ready``, ``open N`` (N records produced, transaction not yet committed),
``committed N TOTAL``, ``aborting REASON`` then ``aborted``. It exits 0 on SIGTERM or
after ``--max-seconds``, 3 on a fatal error (fenced, ...), printing ``fatal REASON``.

A watchdog thread ends the process (exit 4, ``hung CALL``) when one client call overruns its
own timeout by ``HANG_GRACE_S``: librdkafka >= 2.10 can wait forever in
``send_offsets_to_transaction`` once it decommissioned the group coordinator's broker
(confluentinc/librdkafka#5511, open), which a broker kill -9 triggers on a single broker (a
"re-bootstrap"). An application would be restarted by its supervisor; the tests restart it
and count these exits.
"""

from __future__ import annotations

import argparse
import faulthandler
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

FATAL_EXIT = 3
HUNG_EXIT = 4
HANG_GRACE_S = 10.0
CALL_TIMEOUT_S = 15.0


def say(line: str) -> None:
    print(line, flush=True)


def transform(value: bytes | None) -> bytes:
    return b"out:" + (value or b"")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--transactional-id", required=True)
    parser.add_argument("--instance-id", default=None,
                        help="group.instance.id (default: the transactional id)")
    parser.add_argument("--batch", type=int, default=50, help="records per transaction, at most")
    parser.add_argument("--pause-ms", type=int, default=0,
                        help="sleep inside each transaction, before committing (widens the "
                             "window for a kill mid-transaction)")
    parser.add_argument("--transaction-timeout-ms", type=int, default=10_000)
    parser.add_argument("--max-seconds", type=float, default=300.0)
    return parser.parse_args(argv)


class Loop:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.stopping = False
        common: dict[str, Any] = {"bootstrap.servers": args.bootstrap,
                                  "socket.connection.setup.timeout.ms": 5_000,
                                  "reconnect.backoff.max.ms": 1_000}
        self.consumer = Consumer({
            **common,
            "group.id": args.group,
            "group.instance.id": args.instance_id or args.transactional_id,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6_000,
            "heartbeat.interval.ms": 500,
            "fetch.wait.max.ms": 100,
        })
        self.producer = Producer({
            **common,
            "transactional.id": args.transactional_id,
            "transaction.timeout.ms": args.transaction_timeout_ms,
            "linger.ms": 5,
            "message.timeout.ms": args.transaction_timeout_ms,
            # EOS_LOOP_DEBUG=eos,protocol: librdkafka's own log of the producer, on stderr.
            **({"debug": os.environ["EOS_LOOP_DEBUG"]} if os.environ.get("EOS_LOOP_DEBUG")
               else {}),
        })
        self.total = 0
        self._call: tuple[str, float] | None = None  # (what, deadline) of the call under way
        threading.Thread(target=self._watchdog, daemon=True).start()

    def _watchdog(self) -> None:
        while True:
            time.sleep(0.5)
            call = self._call
            if call is not None and time.monotonic() > call[1]:
                say(f"hung {call[0]}")
                os._exit(HUNG_EXIT)

    def call(self, what: str, timeout: float, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args, timeout)`` under the watchdog."""
        self._call = (what, time.monotonic() + timeout + HANG_GRACE_S)
        try:
            return fn(*args, timeout)
        finally:
            self._call = None

    def run(self) -> int:
        deadline = time.monotonic() + self.args.max_seconds
        self.call("init_transactions", 60, self.producer.init_transactions)
        self.consumer.subscribe([self.args.input])
        say("ready")
        while not self.stopping and time.monotonic() < deadline:
            batch = self._poll()
            if not batch:
                continue
            try:
                self._transact(batch)
            except KafkaException as exc:
                error: KafkaError = exc.args[0]
                if error.fatal():
                    say(f"fatal {error.name()}: {error.str()}")
                    return FATAL_EXIT
                say(f"aborting {error.name()}: {error.str()}")
                try:
                    self._abort_and_rewind()
                except KafkaException as abort_exc:  # a restart sorts it out
                    error = abort_exc.args[0]
                    say(f"fatal (abort failed) {error.name()}: {error.str()}")
                    return FATAL_EXIT
                say("aborted")
        return 0

    def _poll(self) -> list[Message]:
        msgs = self.consumer.consume(num_messages=self.args.batch, timeout=0.5)
        good = []
        for msg in msgs:
            err = msg.error()
            if err is None:
                good.append(msg)
            elif err.code() != KafkaError._PARTITION_EOF:
                say(f"consume-error {err.name()}: {err.str()}")
        return good

    def _transact(self, batch: list[Message]) -> None:
        self.producer.begin_transaction()
        for msg in batch:
            while True:
                try:
                    self.producer.produce(self.args.output, key=msg.key(),
                                          value=transform(msg.value()),
                                          partition=msg.partition())
                    break
                except BufferError:
                    self.producer.poll(0.05)
        self.call("flush", self.args.transaction_timeout_ms / 1000, self.producer.flush)
        say(f"open {len(batch)}")
        if self.args.pause_ms:
            time.sleep(self.args.pause_ms / 1000)
        positions = self.consumer.position(self.consumer.assignment())
        self.call("send_offsets_to_transaction", CALL_TIMEOUT_S,
                  self.producer.send_offsets_to_transaction, positions,
                  self.consumer.consumer_group_metadata())
        self._commit()
        self.total += len(batch)
        say(f"committed {len(batch)} {self.total}")

    def _commit(self) -> None:
        for _ in range(5):
            try:
                self.call("commit_transaction", CALL_TIMEOUT_S, self.producer.commit_transaction)
                return
            except KafkaException as exc:
                if not exc.args[0].retriable():
                    raise
                time.sleep(0.2)
        self.call("commit_transaction", CALL_TIMEOUT_S, self.producer.commit_transaction)

    def _abort_and_rewind(self) -> None:
        """Abort, then continue from the offsets of the last committed transaction."""
        self.call("abort_transaction", 30, self.producer.abort_transaction)
        assignment = self.consumer.assignment()
        committed = self.call("committed", 30, self.consumer.committed, assignment)
        for tp in committed:
            offset = tp.offset if tp.offset >= 0 else -2  # OFFSET_BEGINNING
            self.consumer.seek(TopicPartition(tp.topic, tp.partition, offset))

    def close(self) -> None:
        self.consumer.close()


def main(argv: list[str] | None = None) -> int:
    loop = Loop(parse_args(argv))

    def stop(_signum: int, _frame: object) -> None:
        loop.stopping = True

    signal.signal(signal.SIGTERM, stop)
    faulthandler.register(signal.SIGUSR1)  # kill -USR1: where a stuck loop is, on stderr
    try:
        code = loop.run()
    except KafkaException as exc:
        say(f"fatal {exc.args[0].name()}: {exc.args[0].str()}")
        code = FATAL_EXIT
    loop.close()
    return code


if __name__ == "__main__":
    sys.exit(main())
