"""The metrics endpoint of a real broker (``metrics.listener``), read by Prometheus' parser
while real clients (confluent-kafka, a raw wire client) produce, consume and commit."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.api_versions.v3.request import ApiVersionsRequest

from moldau.cluster.processes import port_accepts
from tests.conftest import TEST_BROKER_OVERRIDES, MakeBroker
from tests.helpers import BrokerProcess, free_port, one_line_error
from tests.helpers.metrics import exposed_names, http_get, scrape, value

from .test_startup_refusals import start
from .wire import WireClient

pytestmark = pytest.mark.timeout(120)

DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana-dashboard.json"


class MetricsBroker:
    def __init__(self, process: BrokerProcess, url: str) -> None:
        self.process = process
        self.bootstrap = process.bootstrap
        self.url = url


@pytest.fixture(scope="module")
def metered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MetricsBroker]:
    """One broker with metrics on, shared by this module's tests."""
    port = free_port()
    process = BrokerProcess(
        tmp_path_factory.mktemp("metrics-broker"),
        overrides=(*TEST_BROKER_OVERRIDES, f"metrics.listener=http://127.0.0.1:{port}",
                   "log.cleaner.backoff.ms=200",
                   # KIP-848 members reconcile on heartbeats: quick ones keep the test short.
                   "group.consumer.heartbeat.interval.ms=300"),
    ).start()
    try:
        yield MetricsBroker(process, f"http://127.0.0.1:{port}")
    finally:
        process.stop()


def create(bootstrap: str, topic: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=30)


def produce(bootstrap: str, topic: str, count: int, size: int = 100) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(count):
        producer.produce(topic, b"v" * size, key=str(i).encode(), partition=0)
    assert producer.flush(30) == 0


def consume(bootstrap: str, topic: str, count: int, group: str, commit_at: int) -> None:
    """Read ``count`` records of partition 0 and commit offset ``commit_at``."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        got = 0
        deadline = time.monotonic() + 30
        while got < count and time.monotonic() < deadline:
            for msg in consumer.consume(count - got, timeout=1):
                assert msg.error() is None, msg.error()
                got += 1
        assert got == count
        consumer.commit(offsets=[TopicPartition(topic, 0, commit_at)], asynchronous=False)
    finally:
        consumer.close()


def test_bytes_and_messages_per_topic_match_the_log(metered: MetricsBroker,
                                                    topic_name: str) -> None:
    create(metered.bootstrap, topic_name)
    produce(metered.bootstrap, topic_name, 50)
    consume(metered.bootstrap, topic_name, 50, topic_name + "-g", 30)
    samples = scrape(metered.url)
    topic = {"topic": topic_name}
    part = {"topic": topic_name, "partition": "0"}
    log_bytes = value(samples, "moldau_log_size_bytes", part)
    assert log_bytes > 50 * 100  # record batches: the values plus keys and batch headers
    # What producers appended is exactly what the log holds; the one consumer read it once.
    assert value(samples, "moldau_topic_bytes_in_total", topic) == log_bytes
    assert value(samples, "moldau_topic_messages_in_total", topic) == 50
    assert value(samples, "moldau_topic_bytes_out_total", topic) == log_bytes
    assert value(samples, "moldau_log_end_offset", part) == 50
    assert value(samples, "moldau_log_segments", part) == 1
    assert value(samples, "moldau_topic_failed_produce_requests_total", topic) == 0
    # The group committed 30 of 50: the coordinator reports a lag of 20 on partition 0.
    lag = {"group": topic_name + "-g", "topic": topic_name, "partition": "0"}
    assert value(samples, "moldau_consumer_group_lag", lag, default=-1) == 20
    assert value(samples, "moldau_groups", {"state": "Empty"}) >= 1


def test_requests_are_counted_per_api_and_version(metered: MetricsBroker) -> None:
    labels = {"api": "ApiVersions", "version": "3"}
    before = scrape(metered.url)
    with WireClient.to(metered.bootstrap) as client:
        for _ in range(5):
            reply = client.request(ApiVersionsRequest(client_software_name="moldau-tests",
                                                      client_software_version="1"))
            assert reply.error_code == 0
    after = scrape(metered.url)
    assert value(after, "moldau_requests_total", labels) - \
        value(before, "moldau_requests_total", labels) == 5
    total = {"api": "ApiVersions", "stage": "total"}
    assert value(after, "moldau_request_time_seconds_count", total) - \
        value(before, "moldau_request_time_seconds_count", total) == 5
    # Every stage is filed once per request, and the stages add up to the total.
    stages = ("queue", "local", "remote", "response_queue", "send")
    stage_sum = sum(value(after, "moldau_request_time_seconds_sum",
                          {"api": "ApiVersions", "stage": s}) for s in stages)
    assert stage_sum == pytest.approx(value(after, "moldau_request_time_seconds_sum", total),
                                      rel=1e-6, abs=1e-6)
    created = {"listener": "PLAINTEXT"}
    assert value(after, "moldau_connections_created_total", created) >= \
        value(before, "moldau_connections_created_total", created) + 1


def test_a_failed_produce_is_counted(metered: MetricsBroker, topic_name: str) -> None:
    create(metered.bootstrap, topic_name)
    # The client may send up to 5 MB; the topic takes 1 MB (max.message.bytes).
    producer = Producer({"bootstrap.servers": metered.bootstrap, "acks": "all",
                         "message.timeout.ms": 5000, "retries": 0,
                         "message.max.bytes": 5_000_000})
    errors: list[object] = []
    producer.produce(topic_name, b"x" * 2_000_000, on_delivery=lambda e, m: errors.append(e))
    producer.flush(30)
    assert errors and errors[0] is not None  # MESSAGE_TOO_LARGE from the broker
    samples = scrape(metered.url)
    assert value(samples, "moldau_topic_failed_produce_requests_total",
                 {"topic": topic_name}) >= 1


def test_a_subscribed_group_is_stable_and_its_join_waits_remotely(
        metered: MetricsBroker, topic_name: str) -> None:
    create(metered.bootstrap, topic_name)
    before = scrape(metered.url)
    consumer = Consumer({"bootstrap.servers": metered.bootstrap, "group.id": topic_name,
                         "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic_name])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not consumer.assignment():
            consumer.poll(0.2)
        assert consumer.assignment()
        samples = scrape(metered.url)
        assert value(samples, "moldau_groups", {"state": "Stable"}) >= 1
        assert value(samples, "moldau_group_rebalances_total") > \
            value(before, "moldau_group_rebalances_total")
        join = {"api": "JoinGroup", "stage": "remote"}
        assert value(samples, "moldau_request_time_seconds_count", join) > \
            value(before, "moldau_request_time_seconds_count", join)
        assert value(samples, "moldau_request_time_seconds_sum", join) > 0
    finally:
        consumer.close()


def _kip848_consumer(bootstrap: str, group: str) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                     "group.protocol": "consumer", "auto.offset.reset": "earliest"})


def _poll_until(consumers: list[Consumer], done: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not done():
        for consumer in consumers:
            consumer.poll(0.1)
    assert done(), [c.assignment() for c in consumers]


def test_kip848_rebalances_are_counted(metered: MetricsBroker, topic_name: str) -> None:
    """A KIP-848 group rebalances once per new target assignment epoch: when the first
    member joins, when a second one joins, when one leaves."""
    create(metered.bootstrap, topic_name, partitions=4)

    def rebalances() -> float:
        return value(scrape(metered.url), "moldau_group_rebalances_total")

    start = rebalances()
    a = _kip848_consumer(metered.bootstrap, topic_name)
    b = _kip848_consumer(metered.bootstrap, topic_name)
    try:
        a.subscribe([topic_name])
        _poll_until([a], lambda: len(a.assignment()) == 4)
        joined = rebalances()
        b.subscribe([topic_name])
        _poll_until([a, b], lambda: len(a.assignment()) == 2 and len(b.assignment()) == 2)
        shared = rebalances()
        assert value(scrape(metered.url), "moldau_groups", {"state": "Stable"}) >= 1
        b.close()
        _poll_until([a], lambda: len(a.assignment()) == 4)
        left = rebalances()
        print(f"rebalances: {start} -> {joined} -> {shared} -> {left}")
        assert (joined - start, shared - joined, left - shared) == (1, 1, 1)
    finally:
        a.close()


def test_lag_to_the_high_watermark_and_to_the_last_stable_offset(
        metered: MetricsBroker, topic_name: str) -> None:
    """An open transaction's records count in the lag to the high watermark (what
    kafka-consumer-groups and Burrow show) but not in the read_committed lag."""
    create(metered.bootstrap, topic_name)
    produce(metered.bootstrap, topic_name, 10)
    consume(metered.bootstrap, topic_name, 10, topic_name, 10)
    txn = Producer({"bootstrap.servers": metered.bootstrap,
                    "transactional.id": topic_name + "-txn"})
    txn.init_transactions(30)
    txn.begin_transaction()
    for _ in range(5):
        txn.produce(topic_name, b"open", partition=0)
    assert txn.flush(30) == 0
    lag = {"group": topic_name, "topic": topic_name, "partition": "0"}
    samples = scrape(metered.url)
    assert value(samples, "moldau_consumer_group_lag", lag) == 5
    assert value(samples, "moldau_consumer_group_lag_read_committed", lag) == 0
    txn.commit_transaction(30)
    samples = scrape(metered.url)
    # Committed: the five records and the commit marker are below both ends now.
    assert value(samples, "moldau_consumer_group_lag", lag) == 6
    assert value(samples, "moldau_consumer_group_lag_read_committed", lag) == 6


def test_health_live_and_ready(metered: MetricsBroker) -> None:
    status, body = http_get(metered.url + "/health/live")
    assert status == 200 and json.loads(body)["status"] == "live"
    status, body = http_get(metered.url + "/health/ready")
    ready = json.loads(body)
    assert status == 200, ready
    assert ready["status"] == "ready" and ready["failing"] == []
    assert set(ready["checks"]) == {"logs_loaded", "group_coordinator_loaded",
                                    "transaction_coordinator_loaded"}


def test_bad_http_requests_get_errors_and_kafka_keeps_serving(metered: MetricsBroker) -> None:
    assert http_get(metered.url + "/nope")[0] == 404
    assert http_get(metered.url + "/metrics", method="POST")[0] == 405
    host, port = metered.url[len("http://"):].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(b"not http at all\r\n\r\n")
        assert sock.recv(100).startswith(b"HTTP/1.1 400 ")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(b"GET /" + b"x" * 20_000)  # longer than any request line may be
        try:
            answer = sock.recv(100)
        except ConnectionResetError:  # closed with our bytes unread: the 400 may be lost
            answer = b"HTTP/1.1 400 "
        assert answer.startswith(b"HTTP/1.1 400 ")
    assert http_get(metered.url + "/health/live")[0] == 200
    with WireClient.to(metered.bootstrap) as client:
        reply = client.request(ApiVersionsRequest(client_software_name="moldau-tests",
                                                  client_software_version="1"))
        assert reply.error_code == 0


def test_scraping_in_a_loop_while_clients_produce(metered: MetricsBroker,
                                                  topic_name: str) -> None:
    create(metered.bootstrap, topic_name)
    producer = Producer({"bootstrap.servers": metered.bootstrap, "acks": "all",
                         "linger.ms": 1})
    delivered: list[object] = []
    scrapes = 0
    deadline = time.monotonic() + 5
    sent = 0
    while time.monotonic() < deadline and sent < 20_000:
        for _ in range(200):
            producer.produce(topic_name, b"x" * 100, partition=0,
                             on_delivery=lambda e, m: delivered.append(e))
        sent += 200
        producer.poll(0)
        scrape(metered.url)
        scrapes += 1
    assert producer.flush(30) == 0
    assert len(delivered) == sent and all(e is None for e in delivered)
    samples = scrape(metered.url)
    assert value(samples, "moldau_topic_messages_in_total", {"topic": topic_name}) == sent
    print(f"{scrapes} scrapes while producing {sent} records")
    assert scrapes >= 5


def test_fetch_purgatory_holds_a_waiting_consumer(metered: MetricsBroker,
                                                  topic_name: str) -> None:
    create(metered.bootstrap, topic_name)
    consumer = Consumer({"bootstrap.servers": metered.bootstrap, "group.id": topic_name,
                         "fetch.wait.max.ms": 3000, "auto.offset.reset": "latest"})
    try:
        consumer.assign([TopicPartition(topic_name, 0)])
        deadline = time.monotonic() + 20
        seen = 0.0
        while time.monotonic() < deadline and seen < 1:
            consumer.poll(0.2)
            seen = value(scrape(metered.url), "moldau_purgatory_size", {"purgatory": "fetch"})
        assert seen >= 1
    finally:
        consumer.close()


def test_grafana_dashboard_uses_only_exported_metrics(metered: MetricsBroker) -> None:
    """Every metric an expression of docs/grafana-dashboard.json names is in a real scrape."""
    import re

    names = exposed_names(metered.url)
    dashboard = json.loads(DASHBOARD.read_text())
    expressions = [target["expr"] for panel in dashboard["panels"]
                   for target in panel.get("targets", [])]
    assert len(expressions) >= 10
    used = {m for expr in expressions for m in re.findall(r"\b(moldau_[a-z_]+)", expr)}
    assert used, expressions
    assert used <= names, sorted(used - names)


def test_bad_metrics_listener_refuses_start_up(tmp_path: Path) -> None:
    one_line_error(start(tmp_path / "a", "metrics.listener=127.0.0.1:9644"),
                   "Invalid value 127.0.0.1:9644 for configuration metrics.listener",
                   "http://host:port")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        one_line_error(start(tmp_path / "b", f"metrics.listener=http://127.0.0.1:{port}"),
                       f"cannot listen on metrics.listener http://127.0.0.1:{port}",
                       "Address already in use")


def test_flush_retention_and_cleaner_work_is_counted(metered: MetricsBroker,
                                                     topic_name: str) -> None:
    admin = AdminClient({"bootstrap.servers": metered.bootstrap})
    small = {"segment.bytes": "1024", "flush.messages": "1"}
    retained, compacted = topic_name + "-r", topic_name + "-c"
    futures = admin.create_topics([
        NewTopic(retained, 1, 1, config={**small, "retention.ms": "1"}),
        NewTopic(compacted, 1, 1, config={**small, "cleanup.policy": "compact",
                                          "min.cleanable.dirty.ratio": "0.01",
                                          "segment.ms": "100"})])
    for future in futures.values():
        future.result(timeout=30)
    before = scrape(metered.url)
    # Batches stay under segment.bytes (a batch larger than a segment is refused).
    producer = Producer({"bootstrap.servers": metered.bootstrap, "linger.ms": 0,
                         "batch.size": 600})
    errors: list[object] = []
    for i in range(60):
        producer.produce(retained, b"r" * 100, partition=0,
                         on_delivery=lambda e, m: errors.append(e))
        producer.produce(compacted, b"c" * 100, key=b"k%d" % (i % 3), partition=0,
                         on_delivery=lambda e, m: errors.append(e))
        producer.poll(0)
    assert producer.flush(30) == 0
    assert len(errors) == 120 and not any(errors), [e for e in errors if e]

    def grew(name: str) -> bool:
        return value(scrape(metered.url), name) > value(before, name)

    # flush.messages=1: every append is fsynced.
    assert grew("moldau_log_flush_time_seconds_count")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not (
            grew("moldau_log_retention_deleted_segments_total")
            and grew("moldau_log_cleaner_cleans_total")):
        time.sleep(0.5)
    assert grew("moldau_log_retention_deleted_segments_total")
    assert grew("moldau_log_cleaner_cleans_total")
    assert grew("moldau_log_cleaner_records_removed_total")


def test_connections_are_counted_per_listener(make_broker: MakeBroker) -> None:
    """Each listener's connections are its own series: a client on the second listener moves
    only that listener's counters, and both series exist from the start."""
    inner, outer, port = free_port(), free_port(), free_port()
    make_broker(f"listeners=INNER://127.0.0.1:{inner},OUTER://127.0.0.1:{outer}",
                "listener.security.protocol.map=INNER:PLAINTEXT,OUTER:PLAINTEXT",
                "inter.broker.listener.name=INNER",
                f"metrics.listener=http://127.0.0.1:{port}", port=inner)
    url = f"http://127.0.0.1:{port}"
    before = scrape(url)
    assert value(before, "moldau_connections_created_total", {"listener": "OUTER"}) == 0
    inner_before = value(before, "moldau_connections_created_total", {"listener": "INNER"})
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{outer}"})
    admin.list_topics(timeout=10)
    after = scrape(url)
    assert value(after, "moldau_connections_created_total", {"listener": "OUTER"}) >= 1
    # The open-connections gauge has a series per listener; its value is not checked, as
    # librdkafka may have dropped its bootstrap connection by the time of the scrape.
    assert value(after, "moldau_connections", {"listener": "OUTER"}, default=-1) >= 0
    assert value(after, "moldau_connections_created_total", {"listener": "INNER"}) == \
        inner_before


def test_health_answers_while_the_logs_load(tmp_path: Path) -> None:
    """The endpoint opens before the logs load: live, not ready (every check failing) and no
    metrics until the broker is loaded; ready once the Kafka port accepts. The load is held
    for 3 s by the test-only ``moldau.test.startup.delay.ms``."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    process = BrokerProcess(tmp_path, overrides=(
        *TEST_BROKER_OVERRIDES, f"metrics.listener={url}", "moldau.test.startup.delay.ms=3000"))
    seen: dict[str, object] = {}

    def watch() -> None:  # the broker must be started from the main thread (it dies with it)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not port_accepts(port):
            time.sleep(0.02)
        seen["ready"] = http_get(url + "/health/ready")
        seen["kafka_accepting"] = process.accepting()
        seen["live"] = http_get(url + "/health/live")[0]
        seen["metrics"] = http_get(url + "/metrics")[0]

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        process.start()
        watcher.join(30)
        status, body = seen["ready"]  # type: ignore[misc]
        assert status == 503, body
        ready = json.loads(body)
        assert ready["status"] == "not ready"
        assert set(ready["failing"]) == {"logs_loaded", "group_coordinator_loaded",
                                         "transaction_coordinator_loaded"}
        assert seen["kafka_accepting"] is False  # still loading: no Kafka port yet
        assert (seen["live"], seen["metrics"]) == (200, 503)
        status, body = http_get(url + "/health/ready")
        assert status == 200, body
        assert value(scrape(url), "moldau_partitions") >= 0
    finally:
        watcher.join(30)
        process.stop()
