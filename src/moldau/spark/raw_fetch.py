"""A small blocking Kafka client for one executor task: raw Fetch of one partition.

The columnar path needs the record batches as the broker sends them, which confluent-kafka
never hands over, so this client speaks the wire protocol itself (kio encodes and decodes;
only the framing is here): Metadata to find the partition's leader, ListOffsets for its
watermarks, Fetch v12 for the data, on one connection kept for the whole task. A leader
change (NOT_LEADER_OR_FOLLOWER and the like) or a dropped connection refreshes the metadata
and retries until the task's deadline. Plaintext connections only: with any other
``kafka.security.protocol`` the source reads through its row path (see fetch.py).
"""

from __future__ import annotations

import datetime
import socket
import struct
import time
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12 import request as fetch_req
from kio.schema.fetch.v12 import response as fetch_resp
from kio.schema.list_offsets.v7 import request as offsets_req
from kio.schema.list_offsets.v7 import response as offsets_resp
from kio.schema.metadata.v12 import request as meta_req
from kio.schema.metadata.v12 import response as meta_resp
from kio.schema.types import BrokerId, TopicName
from kio.serial import entity_reader
from kio.static.primitive import i8, i32, i32Timedelta, i64

from ..protocol.codec import encode_request, response_body_offset
from .columnar import AbortedTransaction

_SIZE = struct.Struct(">i")
_CLIENT_ID = b"moldau-spark"
#: Errors after which the leader may have moved: refresh the metadata and retry.
_RETRIABLE = frozenset({
    ErrorCode.unknown_topic_or_partition, ErrorCode.leader_not_available,
    ErrorCode.not_leader_or_follower, ErrorCode.request_timed_out, ErrorCode.network_exception,
    ErrorCode.fenced_leader_epoch, ErrorCode.unknown_leader_epoch,
    ErrorCode.kafka_storage_error, ErrorCode.not_enough_replicas,
    ErrorCode.offset_not_available, ErrorCode.replica_not_available,
})
_EARLIEST, _LATEST = -2, -1
_RETRY_PAUSE_S = 0.2


class FetchError(RuntimeError):
    """The broker answered with an error that retrying will not fix."""


@dataclass(frozen=True)
class Fetched:
    """One partition's part of a Fetch response."""

    error: ErrorCode
    high_watermark: int
    records: bytes
    #: None under read_uncommitted.
    aborted: list[AbortedTransaction] | None


def parse_bootstrap(servers: str) -> list[tuple[str, int]]:
    """``host:port,[::1]:port`` → addresses."""
    out = []
    for item in servers.split(","):
        item = item.strip()
        if not item:
            continue
        host, _, port = item.rpartition(":")
        out.append((host.strip("[]") or "localhost", int(port)))
    return out


class _Connection:
    """One socket to one broker; requests answered in order (one in flight at a time)."""

    def __init__(self, address: tuple[str, int], timeout: float) -> None:
        self.sock = socket.create_connection(address, timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.correlation = 0

    def request(self, obj: Any, response_cls: type) -> Any:
        self.correlation += 1
        self.sock.sendall(encode_request(obj, self.correlation, _CLIENT_ID))
        (size,) = _SIZE.unpack(self._read(_SIZE.size))
        frame = self._read(size)
        (correlation,) = struct.unpack_from(">i", frame)
        if correlation != self.correlation:
            raise OSError(f"answer to request {correlation}, expected {self.correlation}")
        value: Any
        value, _ = entity_reader(response_cls)(frame, response_body_offset(type(obj)))
        return value

    def _read(self, size: int) -> bytes:
        buf = bytearray(size)
        view = memoryview(buf)
        got = 0
        while got < size:
            n = self.sock.recv_into(view[got:])
            if not n:
                raise OSError(f"connection closed after {got} of {size} bytes")
            got += n
        return bytes(buf)

    def close(self) -> None:
        self.sock.close()


class PartitionFetcher:
    """Watermarks and raw fetches of one partition, from its current leader."""

    def __init__(self, bootstrap: str, topic: str, partition: int, *, read_committed: bool,
                 max_bytes: int, timeout_s: float) -> None:
        self.bootstrap = parse_bootstrap(bootstrap)
        if not self.bootstrap:
            raise FetchError(f"no broker address in bootstrap.servers {bootstrap!r}")
        self.topic = topic
        self.partition = partition
        self.read_committed = read_committed
        self.max_bytes = max_bytes
        self.timeout_s = timeout_s
        self.conn: _Connection | None = None

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def watermarks(self) -> tuple[int, int]:
        """(log start offset, high watermark), as ListOffsets earliest/latest answer them."""
        return self._list_offset(_EARLIEST), self._list_offset(_LATEST)

    def fetch(self, offset: int, max_wait_ms: int) -> Fetched:
        """The partition's data from ``offset`` (retrying leader moves; the caller handles
        OFFSET_OUT_OF_RANGE, the only error returned)."""
        request = fetch_req.FetchRequest(
            max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=max_wait_ms)),
            min_bytes=i32(1),
            max_bytes=i32(self.max_bytes), isolation_level=i8(1 if self.read_committed else 0),
            topics=(fetch_req.FetchTopic(topic=TopicName(self.topic), partitions=(
                fetch_req.FetchPartition(partition=i32(self.partition), fetch_offset=i64(offset),
                                         partition_max_bytes=i32(self.max_bytes)),)),),
            forgotten_topics_data=())

        def answer(response: Any) -> Fetched | ErrorCode:
            if response.error_code != ErrorCode.none:
                return ErrorCode(response.error_code)
            part = response.responses[0].partitions[0]
            if part.error_code not in (ErrorCode.none, ErrorCode.offset_out_of_range):
                return ErrorCode(part.error_code)
            aborted = None
            if self.read_committed:
                aborted = [AbortedTransaction(a.producer_id, a.first_offset)
                           for a in part.aborted_transactions or ()]
            return Fetched(part.error_code, part.high_watermark, part.records or b"", aborted)

        result: Fetched = self._call(request, fetch_resp.FetchResponse, answer)
        return result

    def _list_offset(self, timestamp: int) -> int:
        request = offsets_req.ListOffsetsRequest(
            replica_id=BrokerId(-1), isolation_level=i8(0),
            topics=(offsets_req.ListOffsetsTopic(name=TopicName(self.topic), partitions=(
                offsets_req.ListOffsetsPartition(partition_index=i32(self.partition),
                                                 timestamp=i64(timestamp)),)),))

        def answer(response: Any) -> int | ErrorCode:
            part = response.topics[0].partitions[0]
            return ErrorCode(part.error_code) if part.error_code != ErrorCode.none \
                else int(part.offset)

        offset: int = self._call(request, offsets_resp.ListOffsetsResponse, answer)
        return offset

    def _call(self, request: Any, response_cls: type, answer: Any) -> Any:
        """Send ``request`` to the leader until ``answer`` gives something other than a
        retriable error code, or the deadline passes."""
        deadline = time.monotonic() + self.timeout_s
        problem = "no attempt"
        while True:
            try:
                if self.conn is None:
                    self.conn = _Connection(self._leader(), self.timeout_s)
                result = answer(self.conn.request(request, response_cls))
                if not isinstance(result, ErrorCode):
                    return result
                if result not in _RETRIABLE:
                    raise FetchError(f"{self.topic}-{self.partition}: the broker answered "
                                     f"{result.name.upper()}")
                problem = result.name.upper()
            except OSError as exc:
                problem = str(exc) or type(exc).__name__
            self.close()
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.topic}-{self.partition}: no answer within "
                                   f"{self.timeout_s:g} s (last problem: {problem})")
            time.sleep(_RETRY_PAUSE_S)

    def _leader(self) -> tuple[str, int]:
        """The leader's address, from the first bootstrap broker that answers Metadata."""
        request = meta_req.MetadataRequest(
            topics=(meta_req.MetadataRequestTopic(topic_id=None, name=TopicName(self.topic)),),
            allow_auto_topic_creation=False, include_topic_authorized_operations=False)
        last: OSError | None = None
        for address in self.bootstrap:
            try:
                conn = _Connection(address, self.timeout_s)
            except OSError as exc:
                last = exc
                continue
            try:
                meta = conn.request(request, meta_resp.MetadataResponse)
            except OSError as exc:
                last = exc
                continue
            finally:
                conn.close()
            brokers = {b.node_id: (b.host, int(b.port)) for b in meta.brokers}
            for topic in meta.topics:
                for part in topic.partitions:
                    if part.partition_index == self.partition and part.leader_id in brokers:
                        return brokers[part.leader_id]
            raise OSError(f"no leader known for {self.topic}-{self.partition}")
        raise OSError(f"no bootstrap broker answered: {last}")
