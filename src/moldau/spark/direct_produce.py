"""The sink's batch path: an idempotent producer that sends record batches it built itself.

librdkafka takes records one call at a time (about a microsecond and a half each, plus the
Python call); a Spark task already holds its rows as Arrow columns, so this producer encodes
whole v2 record batches from them (``record_batches.py``) and sends them in Produce
requests on one connection per leader. It keeps the guarantees of the idempotent librdkafka
producer the other paths use: a producer id from InitProducerId, a sequence number per
partition, ``acks=all``, one request in flight per connection (so order is kept), and
retriable errors (leader moved, not enough replicas, a dropped connection) retried with the
same sequence after a metadata refresh until the delivery time runs out, a duplicate
sequence counting as delivered. Anything else fails the task, naming the error.

Keyed records go to ``crc32(key) % partitions``, as librdkafka's default partitioner
(``consistent_random``), so every path puts a key in the same partition; records without a
key or partition column go to a random partition.
"""

from __future__ import annotations

import datetime
import socket
import struct
import time
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from kio.index import load_response_schema
from kio.schema.errors import ErrorCode
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.produce.v9.request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from kio.schema.types import TopicName
from kio.serial import entity_reader
from kio.static.primitive import Records, i16, i32, i32Timedelta

from ..protocol.codec import encode_request, response_body_offset
from .record_batches import record_batch

# The client settings this path honours; any other ``kafka.*`` option (security, a
# partitioner, compression, ...) makes the sink use the librdkafka path instead.
SUPPORTED_CONFIG = {"bootstrap.servers", "client.id", "batch.size", "request.timeout.ms"}
DEFAULT_BATCH_BYTES = 1_000_000
_SIZE = struct.Struct(">i")
_RETRY_PAUSE_S = 0.1


# A batch ready to send: its partition, its bytes, how many records it holds.
Chunk = tuple[tuple[str, int], bytes, int]


class DirectProduceError(RuntimeError):
    """The broker refused a batch, or did not take it before the delivery time ran out."""


def supports(config: Mapping[str, str]) -> bool:
    """Whether this path can honour every client setting of ``config``."""
    protocol = config.get("security.protocol", "plaintext").lower()
    return protocol == "plaintext" and set(config) - {"security.protocol"} <= SUPPORTED_CONFIG


#: What reading a request's answer needs: the response class, the correlation id, and where
#: the body starts in the frame.
_Expected = tuple[type, int, int]


class _Connection:
    """One socket to one broker; requests go one at a time (the caller waits for each)."""

    def __init__(self, address: tuple[str, int], client_id: bytes, timeout_s: float) -> None:
        self.sock = socket.create_connection(address, timeout=timeout_s)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.reader = self.sock.makefile("rb")
        self.client_id = client_id
        self.correlation = 0

    def send(self, obj: Any) -> _Expected:
        """Write one request; returns what :meth:`receive` needs to read its answer."""
        cls = type(obj)
        self.correlation += 1
        self.sock.sendall(encode_request(obj, self.correlation, self.client_id))
        return (load_response_schema(int(cls.__api_key__), int(cls.__version__)),
                self.correlation, response_body_offset(cls))

    def receive(self, expected: _Expected) -> Any:
        response_cls, correlation, body_offset = expected
        size_bytes = self.reader.read(4)
        if len(size_bytes) != 4:
            raise OSError("connection closed before an answer")
        (size,) = _SIZE.unpack(size_bytes)
        frame = self.reader.read(size)
        if len(frame) != size:
            raise OSError(f"connection closed after {len(frame)} of {size} bytes")
        if _SIZE.unpack_from(frame, 0)[0] != correlation:
            raise OSError("answer to another request")
        value: Any = entity_reader(response_cls)(frame, body_offset)[0]
        return value

    def request(self, obj: Any) -> Any:
        return self.receive(self.send(obj))

    def close(self) -> None:
        self.reader.close()
        self.sock.close()


def _address(server: str) -> tuple[str, int]:
    host, _, port = server.strip().rpartition(":")
    return host.strip("[]"), int(port)


class DirectProducer:
    """Produces Arrow columns as record batches: :meth:`send` encodes and sends (leaving the
    last request in flight), :meth:`flush` returns once everything sent is acknowledged."""

    def __init__(self, config: Mapping[str, str], delivery_timeout_s: float) -> None:
        self.bootstraps = [_address(s) for s in config["bootstrap.servers"].split(",")
                           if s.strip()]
        self.client_id = config.get("client.id", "moldau-spark").encode()
        self.request_timeout_ms = int(config.get("request.timeout.ms", "30000"))
        self.batch_bytes = int(config.get("batch.size", DEFAULT_BATCH_BYTES))
        self.delivery_timeout_s = delivery_timeout_s
        self.connections: dict[int, _Connection] = {}
        self.brokers: dict[int, tuple[str, int]] = {}
        self.leaders: dict[tuple[str, int], int] = {}
        self.partition_counts: dict[str, int] = {}
        self.next_sequence: dict[tuple[str, int], int] = {}
        self.queue: list[Chunk] = []
        # (leader, what to read, its batches, or why it could not be sent)
        self.in_flight: list[tuple[int, _Expected | None, list[Chunk], str]] = []
        self.stalled_since = time.monotonic()
        self.producer_id, self.producer_epoch = self._init_producer_id()
        self.acked = 0

    # -- cluster state ----------------------------------------------------------------------
    def _bootstrap_request(self, obj: Any) -> Any:
        """A request to any bootstrap server, on a connection of its own (the leaders'
        connections may have a Produce request in flight)."""
        deadline = time.monotonic() + self.delivery_timeout_s
        while True:
            last: Exception | None = None
            for address in self.bootstraps:
                try:
                    conn = _Connection(address, self.client_id, self.request_timeout_ms / 1000)
                except OSError as exc:
                    last = exc
                    continue
                try:
                    return conn.request(obj)
                except OSError as exc:
                    last = exc
                finally:
                    conn.close()
            if time.monotonic() > deadline:
                raise OSError(f"no bootstrap server answered: {last}")
            time.sleep(_RETRY_PAUSE_S)

    def _init_producer_id(self) -> tuple[int, int]:
        response = self._bootstrap_request(InitProducerIdRequest(
            transactional_id=None,
            transaction_timeout=i32Timedelta.parse(datetime.timedelta(milliseconds=60_000))))
        if response.error_code is not ErrorCode.none:
            raise DirectProduceError(f"InitProducerId refused: {response.error_code.name.upper()}")
        return int(response.producer_id), int(response.producer_epoch)

    def refresh(self, topics: Sequence[str]) -> None:
        response = self._bootstrap_request(MetadataRequest(
            topics=tuple(MetadataRequestTopic(topic_id=None, name=TopicName(t))
                         for t in topics),
            allow_auto_topic_creation=True, include_topic_authorized_operations=False))
        self.brokers = {int(b.node_id): (str(b.host), int(b.port)) for b in response.brokers}
        for topic in response.topics:
            if topic.error_code is not ErrorCode.none:
                if topic.error_code.retriable:
                    continue
                raise DirectProduceError(f"topic {topic.name!r}: {topic.error_code.name.upper()}")
            self.partition_counts[str(topic.name)] = len(topic.partitions)
            for p in topic.partitions:
                self.leaders[(str(topic.name), int(p.partition_index))] = int(p.leader_id)

    def _connection(self, broker: int) -> _Connection:
        conn = self.connections.get(broker)
        if conn is None:
            conn = _Connection(self.brokers[broker], self.client_id,
                               self.request_timeout_ms / 1000)
            self.connections[broker] = conn
        return conn

    def _drop(self, broker: int) -> None:
        conn = self.connections.pop(broker, None)
        if conn is not None:
            conn.close()

    def _drop_all(self) -> None:
        for broker in list(self.connections):
            self._drop(broker)

    def close(self) -> None:
        self._drop_all()

    # -- producing --------------------------------------------------------------------------
    def partitions_of(self, topic: str) -> int:
        deadline = time.monotonic() + self.delivery_timeout_s
        while topic not in self.partition_counts:
            self.refresh([topic])
            if topic not in self.partition_counts:
                if time.monotonic() > deadline:
                    raise DirectProduceError(f"topic {topic!r} has no metadata")
                time.sleep(_RETRY_PAUSE_S)
        return self.partition_counts[topic]

    def assign_partitions(self, topic: str, keys: pa.Array, partitions: pa.Array | None
                          ) -> np.ndarray:
        """Each row's partition: the partition column, else crc32 of the key, else random."""
        count = self.partitions_of(topic)
        chosen = np.full(len(keys), -1, dtype=np.int64)
        if partitions is not None:
            chosen = np.asarray(partitions.fill_null(-1), dtype=np.int64)
        need = np.flatnonzero(chosen < 0)
        if len(need):
            wanted = keys if len(need) == len(keys) else keys.take(pa.array(need))
            crc = zlib.crc32
            if wanted.null_count == 0:
                hashed = np.fromiter(map(crc, wanted.to_pylist()), dtype=np.int64,
                                     count=len(wanted)) % count
            else:
                hashed = np.array([-1 if key is None else crc(key) % count
                                   for key in wanted.to_pylist()], dtype=np.int64)
            keyless = hashed < 0
            hashed[keyless] = np.random.randint(0, count, int(keyless.sum()))
            chosen[need] = hashed
        bad = chosen[(chosen < 0) | (chosen >= count)]
        if len(bad):
            raise DirectProduceError(f"partition {int(bad[0])} of topic {topic!r} does not "
                                     f"exist (it has {count}): UNKNOWN_PARTITION")
        return chosen

    def send(self, topic: str, keys: pa.Array, values: pa.Array,
             partitions: pa.Array | None) -> None:
        """Encode the rows (binary ``keys`` and ``values``) for ``topic`` into batches and
        send them; the last request is left in flight, so encoding the next rows overlaps
        the broker's work on it. :meth:`flush` waits for everything."""
        chosen = self.assign_partitions(topic, keys, partitions)
        stamp = int(time.time() * 1000)
        for partition in np.unique(chosen):
            tp = (topic, int(partition))
            rows = pa.array(np.flatnonzero(chosen == partition))
            part_keys, part_values = pc.take(keys, rows), pc.take(values, rows)
            for start, stop in self._chunks(part_keys, part_values):
                # Sequence numbers are fixed now, in order: each batch is resent as it is
                # until it is written, and any other outcome fails the task.
                sequence = self.next_sequence.get(tp, 0)
                count = stop - start
                data = record_batch(part_keys.slice(start, count),
                                    part_values.slice(start, count), stamp,
                                    self.producer_id, self.producer_epoch, sequence)
                self.next_sequence[tp] = (sequence + count) % 2**31
                self.queue.append((tp, data, count))
        self._pump(leave_in_flight=True)

    def flush(self) -> None:
        """Return once every record sent so far is acknowledged."""
        self._pump(leave_in_flight=False)

    def _chunks(self, keys: pa.Array, values: pa.Array) -> list[tuple[int, int]]:
        """Row ranges whose batches stay near ``batch.size`` bytes."""
        sizes = (np.asarray(pc.binary_length(keys).fill_null(0), dtype=np.int64)
                 + np.asarray(pc.binary_length(values).fill_null(0), dtype=np.int64) + 12)
        ends = np.cumsum(sizes)
        result, start, used = [], 0, 0
        while start < len(sizes):
            stop = int(np.searchsorted(ends, used + self.batch_bytes, side="right"))
            stop = max(stop, start + 1)
            result.append((start, stop))
            used = int(ends[stop - 1])
            start = stop
        return result

    def _pump(self, leave_in_flight: bool) -> None:
        """Send queued batches in rounds (per leader, one request with at most one batch
        per partition, so order is kept), completing each round before the next."""
        while self.queue or self.in_flight:
            if self.in_flight:
                self._complete()
                continue
            round_: dict[int, dict[tuple[str, int], Chunk]] = {}
            rest: list[Chunk] = []
            for chunk in self.queue:
                leader = self.leaders.get(chunk[0], -1)
                slot = round_.setdefault(leader, {})
                if chunk[0] in slot or leader < 0:
                    rest.append(chunk)
                else:
                    slot[chunk[0]] = chunk
            round_ = {leader: chunks for leader, chunks in round_.items() if chunks}
            if not round_:
                self._after_failure({c[0] for c in self.queue}, "no leader known")
                continue
            self.queue = rest
            for leader, chunks in round_.items():
                self._submit(leader, list(chunks.values()))
            if leave_in_flight and not self.queue:
                return

    def _submit(self, leader: int, chunks: list[Chunk]) -> None:
        topics: dict[str, list[PartitionProduceData]] = {}
        for (topic, partition), data, _ in chunks:
            topics.setdefault(topic, []).append(
                PartitionProduceData(index=i32(partition), records=Records(data)))
        request = ProduceRequest(
            transactional_id=None, acks=i16(-1),
            timeout=i32Timedelta.parse(datetime.timedelta(milliseconds=self.request_timeout_ms)),
            topic_data=tuple(TopicProduceData(name=TopicName(t), partition_data=tuple(ps))
                             for t, ps in topics.items()))
        try:
            expected = self._connection(leader).send(request)
        except (OSError, KeyError) as exc:
            self._drop(leader)
            self.in_flight.append((leader, None, chunks, f"broker {leader}: {exc}"))
            return
        self.in_flight.append((leader, expected, chunks, ""))

    def _complete(self) -> None:
        """Read the answers to the requests in flight. Retriable failures go back to the
        front of the queue (before the later batches of their partitions); others raise."""
        failed: list[Chunk] = []
        why = ""
        for leader, expected, chunks, error in self.in_flight:
            by_tp = {chunk[0]: chunk for chunk in chunks}
            if expected is None:
                failed.extend(chunks)
                why = why or error
                continue
            try:
                response = self._connection(leader).receive(expected)
            except (OSError, KeyError) as exc:
                self._drop(leader)
                failed.extend(chunks)
                why = why or f"broker {leader}: {exc}"
                continue
            for topic_response in response.responses:
                for p in topic_response.partition_responses:
                    tp = (str(topic_response.name), int(p.index))
                    code = p.error_code
                    if code in (ErrorCode.none, ErrorCode.duplicate_sequence_number):
                        self.acked += by_tp[tp][2]
                        self.stalled_since = time.monotonic()
                    elif code.retriable:
                        failed.append(by_tp[tp])
                        why = why or f"{tp[0]}-{tp[1]}: {code.name.upper()}"
                    else:
                        raise DirectProduceError(
                            f"the broker refused records for {tp[0]}-{tp[1]}: "
                            f"{code.name.upper()}"
                            + (f" ({p.error_message})" if p.error_message else ""))
        self.in_flight = []
        if failed:
            self.queue = failed + self.queue
            self._after_failure({c[0] for c in failed}, why)

    def _after_failure(self, tps: set[tuple[str, int]], why: str) -> None:
        if time.monotonic() - self.stalled_since > self.delivery_timeout_s:
            raise DirectProduceError(f"records not acknowledged within "
                                     f"{self.delivery_timeout_s:g} s: {why}")
        time.sleep(_RETRY_PAUSE_S)
        self.refresh(sorted({t for t, _ in tps}))

