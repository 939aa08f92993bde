"""Big requests share the event loop: handlers yield every few hundred partitions and big
responses are encoded on a worker thread. A real broker (in-process, its logs in a temp dir)
handles a request naming thousands of partitions while a ticker task counts how often the loop
got to run something else meanwhile; before, it never did until the request was done."""

from __future__ import annotations

import asyncio
import datetime
import io
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.list_offsets.v7.request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from kio.serial import entity_writer

from moldau.broker import offload
from moldau.broker.broker import Broker
from moldau.broker.handlers import register_all
from moldau.config import BrokerConfig
from moldau.protocol import codec

PARTITIONS = 5000


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    b = Broker(BrokerConfig({"log.dirs": str(tmp_path / "data")}))
    register_all(b)
    b.create_topic("t", 3, {})
    yield b
    b.close()


def list_offsets_frame(partitions: int) -> bytes:
    request = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=(
        ListOffsetsTopic(name="t", partitions=tuple(
            ListOffsetsPartition(partition_index=i % 4, timestamp=-1)
            for i in range(partitions))),))
    body = io.BytesIO()
    entity_writer(ListOffsetsRequest)(body, request)
    header = struct.pack(">hhih", 2, 7, 1, 1) + b"c" + b"\x00"  # v2 header: no tags
    return header + body.getvalue()


async def ticks_while(work: Any) -> tuple[Any, int]:
    """Run ``work`` and count the loop iterations another task got meanwhile."""
    ticks = 0
    done = False

    async def ticker() -> None:
        nonlocal ticks
        while not done:
            ticks += 1
            await asyncio.sleep(0)

    task = asyncio.get_running_loop().create_task(ticker())
    await asyncio.sleep(0)
    start = ticks
    result = await work
    done = True
    await task
    return result, ticks - start


def test_big_list_offsets_lets_the_loop_run(broker: Broker) -> None:
    response, ticks = asyncio.run(ticks_while(broker.handle_frame(list_offsets_frame(PARTITIONS))))
    assert response is not None and response.size > PARTITIONS * 20
    # The handler yields every 200 partitions; encoding on a thread lets it run more.
    assert ticks >= PARTITIONS // 200 - 1


def test_small_request_stays_inline(broker: Broker) -> None:
    _, ticks = asyncio.run(ticks_while(broker.handle_frame(list_offsets_frame(3))))
    assert ticks == 0


def test_offloaded_encoding_is_the_same_bytes(broker: Broker) -> None:
    module = codec.response_module(2, 7)
    response = module.ListOffsetsResponse(throttle_time=datetime.timedelta(0), topics=(
        module.ListOffsetsTopicResponse(name="t", partitions=tuple(
            module.ListOffsetsPartitionResponse(partition_index=i, error_code=ErrorCode.none,
                                                timestamp=-1,
                                                offset=i, leader_epoch=0)
            for i in range(2 * offload.LARGE_RESPONSE_ELEMENTS))),))
    assert offload.array_elements(response) >= offload.LARGE_RESPONSE_ELEMENTS
    threaded = asyncio.run(offload.encode_body(2, 7, response))
    assert threaded == codec.encode_body(2, 7, response)
