"""The loop-stall watchdog: a real event loop blocked on purpose, the warning it must log."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest
from kio.schema.list_offsets.v7.request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)

from moldau.broker.loop_watchdog import LoopWatchdog, RunningRequests, count_topics_and_partitions
from tests.helpers.logs import lines_of


def list_offsets(partitions: int) -> ListOffsetsRequest:
    return ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=(
        ListOffsetsTopic(name="t", partitions=tuple(
            ListOffsetsPartition(partition_index=i, timestamp=-1)
            for i in range(partitions))),))


def test_counts_topics_and_partitions():
    assert count_topics_and_partitions(list_offsets(3)) == (1, 3)


def run_with_watchdog(threshold_s: float, work: float, running: RunningRequests) -> LoopWatchdog:
    async def main() -> LoopWatchdog:
        watchdog = LoopWatchdog(asyncio.get_running_loop(), threshold_s, running)
        watchdog.start()
        await asyncio.sleep(0.3)  # let the heartbeat settle

        async def handler() -> None:
            task = running.begin("ListOffsets", 7, "stall-client", list_offsets(3))
            time.sleep(work)  # synchronous work on the loop: the stall
            running.end(task)

        await asyncio.get_running_loop().create_task(handler())
        await asyncio.sleep(0.5)  # the watchdog reports once the loop beats again
        await watchdog.stop()
        return watchdog

    return asyncio.run(main())


def _watchdog_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return lines_of(caplog, "moldau.broker.loop_watchdog")


def test_a_stall_is_logged_with_its_request(caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.WARNING, logger="moldau.broker.loop_watchdog")
    watchdog = run_with_watchdog(0.2, 1.0, RunningRequests())
    lines = _watchdog_lines(caplog)
    assert len(lines) == 1, lines
    assert "event loop stalled" in lines[0]
    assert "ListOffsets v7 from client 'stall-client' (1 topics, 3 partitions)" in lines[0]
    assert watchdog.stalls == 1
    # The reported length is the stall's, within the heartbeat's resolution (loaded machine).
    assert 0.7 <= watchdog.longest_s <= 3.0


def test_short_pauses_are_not_reported(caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.WARNING, logger="moldau.broker.loop_watchdog")
    watchdog = run_with_watchdog(2.0, 0.2, RunningRequests())
    assert watchdog.stalls == 0
    assert not _watchdog_lines(caplog)
