"""Cost of decoding one request body: kio alone, the validator alone, and both (as the broker
does), in microseconds per request, as JSON lines.

    python -m bench.decode [--repeat 5] [--number 20000]

Requests: Produce v9 with 1 and 6 partitions of 16 KiB and with 100 partitions of 1 KiB (the
hot path; the records are opaque bytes, so their size should not matter), Fetch v12 for 6
partitions and Metadata v12 for 10 topics. The figure is the best of ``--repeat`` timings of
``--number`` calls, the usual way to read out noise from other processes on a busy machine.
"""

from __future__ import annotations

import argparse
import datetime
import io
import json
import timeit
from collections.abc import Callable
from typing import Any

from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.serial import entity_reader, entity_writer

from moldau.protocol.validate import prepare_request


def _encode(obj: Any) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(obj))(buf, obj)
    return buf.getvalue()


def _produce(partitions: int, batch_bytes: int) -> bytes:
    parts = tuple(PartitionProduceData(index=i, records=b"\x00" * batch_bytes)
                  for i in range(partitions))
    return _encode(ProduceRequest(
        transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=30),
        topic_data=(TopicProduceData(name="bench-topic", partition_data=parts),)))


def _fetch(partitions: int) -> bytes:
    parts = tuple(FetchPartition(partition=i, current_leader_epoch=0, fetch_offset=1000,
                                 last_fetched_epoch=-1, log_start_offset=-1,
                                 partition_max_bytes=1 << 20) for i in range(partitions))
    return _encode(FetchRequest(
        replica_id=-1, max_wait=datetime.timedelta(milliseconds=500), min_bytes=1,
        max_bytes=50 << 20, isolation_level=0, session_id=0, session_epoch=-1,
        topics=(FetchTopic(topic="bench-topic", partitions=parts),),
        forgotten_topics_data=(), rack_id=""))


def _metadata(topics: int) -> bytes:
    return _encode(MetadataRequest(
        topics=tuple(MetadataRequestTopic(topic_id=None, name=f"topic-{i}")
                     for i in range(topics)),
        allow_auto_topic_creation=True, include_topic_authorized_operations=False))


CASES: dict[str, tuple[int, int, Callable[[], bytes]]] = {
    "produce_v9_1x16KiB": (0, 9, lambda: _produce(1, 16384)),
    "produce_v9_6x16KiB": (0, 9, lambda: _produce(6, 16384)),
    "produce_v9_100x1KiB": (0, 9, lambda: _produce(100, 1024)),
    "fetch_v12_6": (1, 12, lambda: _fetch(6)),
    "metadata_v12_10": (3, 12, lambda: _metadata(10)),
}


def _best_us(fn: Callable[[], object], repeat: int, number: int) -> float:
    return min(timeit.repeat(fn, repeat=repeat, number=number)) / number * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--number", type=int, default=20000)
    args = parser.parse_args()
    for name, (api_key, version, make) in CASES.items():
        body = make()
        from kio.index import load_request_schema

        reader = entity_reader(load_request_schema(api_key, version))
        prepare_request(api_key, version, body, 0)  # compile before timing

        def kio_only(body: bytes = body, reader: Any = reader) -> object:
            return reader(body, 0)

        def validate_only(body: bytes = body, key: int = api_key, ver: int = version) -> object:
            return prepare_request(key, ver, body, 0)

        def both(body: bytes = body, reader: Any = reader, key: int = api_key,
                 ver: int = version) -> object:
            buf, start = prepare_request(key, ver, body, 0)
            return reader(buf, start)

        kio_us = _best_us(kio_only, args.repeat, args.number)
        validate_us = _best_us(validate_only, args.repeat, args.number)
        both_us = _best_us(both, args.repeat, args.number)
        print(json.dumps({
            "request": name, "bytes": len(body), "kio_us": round(kio_us, 2),
            "validate_us": round(validate_us, 2), "validate_then_kio_us": round(both_us, 2),
            "overhead": round(both_us / kio_us, 2),
        }), flush=True)


if __name__ == "__main__":
    main()
