"""The broker on both event loops it supports, with requests large and small.

uvloop is the default; ``MOLDAU_EVENT_LOOP=asyncio`` selects the standard loop. Connections
receive frames through ``asyncio.BufferedProtocol``, and a frame of 64 KiB or more is read
straight into a buffer of its own, so both loops must take that path as well as many small,
pipelined requests.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from tests.integration.clients import create_topic, produce_all, producer, read_partition


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_large_and_small_frames_round_trip(make_broker: Any, topic_name: str, loop: str) -> None:
    broker = make_broker(env={"MOLDAU_EVENT_LOOP": loop})
    create_topic(broker.bootstrap, topic_name)
    big = [os.urandom(1000) for _ in range(3000)]  # linger batches these into >64 KiB requests
    small = [str(i).encode() for i in range(3000)]  # linger 0: one small request each
    reports = produce_all(producer(broker.bootstrap, linger_ms=50, batch_size=1_000_000),
                          topic_name, ({"value": v} for v in big))
    assert not reports.failed
    reports = produce_all(producer(broker.bootstrap, linger_ms=0), topic_name,
                          ({"value": v} for v in small))
    assert not reports.failed
    got = read_partition(broker.bootstrap, topic_name, 0, 0, len(big) + len(small),
                         auto_offset_reset="earliest")
    assert [m.value() for m in got] == big + small
    assert [m.offset() for m in got] == list(range(len(big) + len(small)))
