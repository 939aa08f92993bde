"""Exactly-once consume-transform-produce on one broker, with the loop killed -9 mid-transaction.

The loop (tests/helpers/eos_loop.py, a confluent-kafka application in a subprocess) reads
``in``, writes ``out:<value>`` to the same partition of ``out`` in a transaction and commits
its input offsets in that transaction. Each kill -9 leaves a transaction open; the next
incarnation (same transactional.id) fences it and the coordinator aborts it, or, when no
successor comes, the broker aborts it once its ``transaction.timeout.ms`` has passed. In the
end ``out`` read with read_committed must hold every input record exactly once, in order per
partition, and no read_committed reader may have waited behind a dead loop's transaction
much longer than that timeout.

The short test is in ``make test``; the long one (more records, input written while the loop
runs, ten loop kills and two kill -9s of the broker itself) is ``long_faults``.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from tests.conftest import MakeBroker
from tests.helpers.eos import (
    LoopRunner,
    LoopSpec,
    assert_output_exactly_once,
    end_offsets,
    produce_input,
    wait_stable,
)

from .clients import create_topic, unique

PARTITIONS = 3
CLEANUP_INTERVAL_MS = 500
TXN_TIMEOUT_MS = 4000
# How much longer than the transaction timeout a reader may wait behind a dead loop: the
# cleanup interval, writing the markers, and a loaded 2-core machine.
STUCK_SLACK_S = CLEANUP_INTERVAL_MS / 1000 + 6


def _broker(make_broker: MakeBroker):  # type: ignore[no-untyped-def]
    broker = make_broker(
        f"transaction.abort.timed.out.transaction.cleanup.interval.ms={CLEANUP_INTERVAL_MS}",
        start=False)
    broker.startup_timeout = 60.0  # restarts too: a loaded 2-core machine can take 20 s
    return broker.start()


def _topics(bootstrap: str) -> tuple[str, str]:
    source, sink = unique("eos-in"), unique("eos-out")
    create_topic(bootstrap, source, PARTITIONS)
    create_topic(bootstrap, sink, PARTITIONS)
    return source, sink


def kill_and_wait_for_timeout(runner: LoopRunner, sink: str) -> float:
    """kill -9 the loop mid-transaction, start no successor, and return how long read_committed
    readers of ``sink`` were held (until the broker aborted the transaction)."""
    runner.kill_mid_transaction()
    killed = time.monotonic()
    bootstrap = runner.spec.bootstrap
    assert end_offsets(bootstrap, sink, PARTITIONS, True) != \
        end_offsets(bootstrap, sink, PARTITIONS, False), "the kill missed the open transaction"
    wait_stable(bootstrap, sink, PARTITIONS, timeout=TXN_TIMEOUT_MS / 1000 + 60)
    return time.monotonic() - killed


def test_eos_loop_killed_mid_transaction(make_broker: MakeBroker, tmp_path: Path) -> None:
    broker = _broker(make_broker)
    source, sink = _topics(broker.bootstrap)
    per_partition = 60
    produce_input(broker.bootstrap, source, PARTITIONS, per_partition)
    runner = LoopRunner(LoopSpec(broker.bootstrap, source, sink, unique("eos-g"),
                                 unique("eos-t"), batch=10, pause_ms=200,
                                 transaction_timeout_ms=TXN_TIMEOUT_MS), tmp_path)
    try:
        runner.start()
        for _ in range(2):  # each successor fences its killed predecessor at once
            runner.kill_mid_transaction()
            runner.start()
        stuck = kill_and_wait_for_timeout(runner, sink)
        runner.start()
        runner.finish(PARTITIONS, per_partition, timeout=90)
    finally:
        runner.stop()
    print(f"kills mid-transaction: {runner.kills_mid_transaction}; read_committed held "
          f"{stuck:.1f} s behind the dead loop (timeout {TXN_TIMEOUT_MS / 1000:.0f} s)")
    assert stuck <= TXN_TIMEOUT_MS / 1000 + STUCK_SLACK_S
    assert not runner.fatal_exits(), runner.fatal_exits()
    assert not runner.hung_exits(), runner.hung_exits()
    assert_output_exactly_once(broker.bootstrap, sink, PARTITIONS, per_partition)


@pytest.mark.long_faults
@pytest.mark.timeout(600)
def test_eos_loop_under_repeated_kills_of_loop_and_broker(
        make_broker: MakeBroker, tmp_path: Path) -> None:
    broker = _broker(make_broker)
    source, sink = _topics(broker.bootstrap)
    per_partition = 1000
    writer = threading.Thread(target=produce_input, daemon=True, kwargs={
        "bootstrap": broker.bootstrap, "topic": source, "partitions": PARTITIONS,
        "per_partition": per_partition, "pause_every": 20, "pause_s": 0.05})
    writer.start()
    runner = LoopRunner(LoopSpec(broker.bootstrap, source, sink, unique("eos-g"),
                                 unique("eos-t"), batch=40, pause_ms=100,
                                 transaction_timeout_ms=TXN_TIMEOUT_MS), tmp_path)
    stuck: list[float] = []
    started = time.monotonic()
    try:
        runner.start()
        for round_ in range(10):
            if round_ in (3, 7):  # the broker: coordinator and leader of everything
                runner.wait_open()
                broker.kill9()
                broker.start()
                runner.ensure_running()
            if round_ % 4 == 1:
                stuck.append(kill_and_wait_for_timeout(runner, sink))
            else:
                runner.kill_mid_transaction()
            runner.start()
            time.sleep(0.5)
        writer.join(120)
        assert not writer.is_alive()
        took = runner.finish(PARTITIONS, per_partition, timeout=240)
    finally:
        runner.stop()
    print(f"{runner.kills_mid_transaction} loop kills mid-transaction, 2 broker kill -9s, "
          f"{len(runner.incarnations)} incarnations, {time.monotonic() - started:.0f} s "
          f"(last {took:.0f} s catching up); read_committed held "
          f"{', '.join(f'{s:.1f}' for s in stuck)} s behind dead loops "
          f"(timeout {TXN_TIMEOUT_MS / 1000:.0f} s); fatal exits: {runner.fatal_exits()}; "
          f"client hangs cut by the loop's watchdog: {runner.hung_exits()}")
    assert all(s <= TXN_TIMEOUT_MS / 1000 + STUCK_SLACK_S for s in stuck), stuck
    assert_output_exactly_once(broker.bootstrap, sink, PARTITIONS, per_partition)
