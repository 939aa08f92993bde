"""What connections cost the broker: idle ones, stalled ones, and clients that never read.

Each test measures the broker process's resident memory (VmRSS) with real sockets, as an
attacker or a crowd of clients would hold them, and checks that everyone else is still served.
"""

from __future__ import annotations

import contextlib
import datetime
import resource
import socket
import struct
import time
from collections.abc import Iterator

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic

from tests.helpers import BrokerProcess

from .clients import create_topic, producer
from .wire import WireClient, encode_body, frame, request_header

pytestmark = pytest.mark.timeout(120)

MB = 1_000_000
IDLE_CONNECTIONS = 10_000


def api_versions() -> ApiVersionsRequest:
    return ApiVersionsRequest(client_software_name="moldau-tests", client_software_version="1")


def still_serving(b: BrokerProcess) -> None:
    with WireClient(b.host, b.port, timeout=20) as client:
        assert client.request(api_versions()).error_code == 0


def peak_rss(b: BrokerProcess, seconds: float) -> int:
    """Highest RSS seen over ``seconds`` (sampled every 50 ms)."""
    peak = b.rss_bytes()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(0.05)
        peak = max(peak, b.rss_bytes())
    return peak


@contextlib.contextmanager
def open_file_limit(soft: int) -> Iterator[None]:
    """Run with this soft RLIMIT_NOFILE (children started meanwhile inherit it)."""
    old = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, old[1]))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, old)


def test_ten_thousand_idle_connections_fit_in_200_mb(make_broker) -> None:
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = IDLE_CONNECTIONS + 500
    if hard != resource.RLIM_INFINITY and hard < needed:
        pytest.skip(f"the hard open-file limit ({hard}) is below {needed}")
    # The broker starts with a low soft limit, as under a default shell: it must raise its own.
    with open_file_limit(1024):
        b = make_broker()
    still_serving(b)
    rss_before = b.rss_bytes()
    fds_before = b.open_fds()
    socks: list[socket.socket] = []
    with open_file_limit(needed if hard == resource.RLIM_INFINITY else hard):
        try:
            for _ in range(IDLE_CONNECTIONS):
                socks.append(socket.create_connection((b.host, b.port), timeout=20))
            # (the probe connection of still_serving may or may not be closed yet: -1)
            expected = fds_before - 1 + IDLE_CONNECTIONS
            deadline = time.monotonic() + 60
            while b.open_fds() < expected and time.monotonic() < deadline:
                time.sleep(0.1)
            assert b.open_fds() >= expected, "the broker did not accept every connection"
            rss = peak_rss(b, 0.5)
            print(f"broker RSS {rss_before / MB:.1f} MB idle, {rss / MB:.1f} MB with "
                  f"{IDLE_CONNECTIONS} idle connections")
            assert rss < 200 * MB
            still_serving(b)
            # The idle connections work too.
            probe = socks[len(socks) // 2]
            probe.sendall(frame(request_header(18, 3, 1, flexible=True)
                                + encode_body(api_versions())))
            assert probe.recv(4)
        finally:
            for s in socks:
                s.close()


def test_stalled_large_prefixes_cost_no_memory(make_broker) -> None:
    """A frame announced at socket.request.max.bytes (100 MiB) and never sent costs nothing."""
    b = make_broker()
    still_serving(b)
    rss_before = b.rss_bytes()
    socks = []
    try:
        for i in range(4):
            s = socket.create_connection((b.host, b.port), timeout=10)
            # A produce header follows the prefix, as a real large request would start.
            s.sendall(struct.pack(">i", 100 * 1024 * 1024) + request_header(0, 9, i))
            socks.append(s)
        still_serving(b)
        rss = peak_rss(b, 1.0)
        print(f"broker RSS {rss_before / MB:.1f} MB before, {rss / MB:.1f} MB with "
              f"4 stalled 100 MiB frames")
        assert rss - rss_before < 40 * MB
        still_serving(b)
    finally:
        for s in socks:
            s.close()


def test_queued_max_request_bytes_stops_reading_until_memory_frees(make_broker) -> None:
    """Kafka's memory pool: with the pool taken, a new request waits until memory frees."""
    b = make_broker("socket.request.max.bytes=1048576", "queued.max.request.bytes=2097152")
    still_serving(b)
    holders = []
    for i in range(2):  # two frames announced at 1 MiB: the pool's 2 MiB are reserved
        s = socket.create_connection((b.host, b.port), timeout=10)
        s.sendall(struct.pack(">i", 1024 * 1024) + request_header(0, 9, i))
        holders.append(s)
    time.sleep(0.5)  # let the broker read both prefixes
    with WireClient(b.host, b.port, timeout=1.5) as waiting:
        correlation = waiting.send_request(api_versions())
        with pytest.raises(TimeoutError):
            waiting.read_frame()  # not read, not answered while the pool is exhausted
        holders.pop().close()  # gives back 1 MiB
        waiting.sock.settimeout(10)
        assert waiting.read_response(18, 3, correlation).error_code == 0
    for s in holders:
        s.close()
    still_serving(b)


# -- clients that never read -------------------------------------------------------------------

PARTITIONS = 50


def _fetch_everything(topic: str) -> bytes:
    """A Fetch v12 body for every partition from offset 0 (each part under sendfile's size)."""
    return encode_body(FetchRequest(
        max_wait=datetime.timedelta(0), min_bytes=1, max_bytes=50_000_000,
        forgotten_topics_data=(),
        topics=(FetchTopic(topic=topic, partitions=tuple(
            FetchPartition(partition=p, fetch_offset=0, partition_max_bytes=1_000_000)
            for p in range(PARTITIONS))),),
    ))


def test_clients_that_never_read_do_not_grow_the_broker(make_broker, topic_name) -> None:
    b = make_broker()
    create_topic(b.bootstrap, topic_name, PARTITIONS)
    p = producer(b.bootstrap, linger_ms=50)
    value = bytes(1000)
    for partition in range(PARTITIONS):  # ~60 KB a partition: 3 MB a response
        for _ in range(60):
            p.produce(topic_name, value, partition=partition)
    assert p.flush(30) == 0
    body = _fetch_everything(topic_name)
    requests = b"".join(frame(request_header(1, 12, i, flexible=True) + body)
                        for i in range(200))
    still_serving(b)
    rss_before = b.rss_bytes()
    readers = []
    try:
        for _ in range(20):
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.connect((b.host, b.port))
            s.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                s.send(requests)  # as much as the broker takes; never read anything
            readers.append(s)
        rss = peak_rss(b, 3.0)
        print(f"broker RSS {rss_before / MB:.1f} MB before, {rss / MB:.1f} MB with 20 clients "
              f"pipelining 3 MB fetches and never reading")
        assert rss - rss_before < 40 * MB
        still_serving(b)
    finally:
        for s in readers:
            s.close()
    still_serving(b)
