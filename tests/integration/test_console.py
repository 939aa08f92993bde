"""The web console in a real browser against a real broker with real data.

Headless Chromium (Debian's) clicks through each page the way a person would and the
tests assert what that person sees: counts, offsets, a produced record's key, value and
header, exact lag numbers. One browser for the session, one ``moldau console`` process for
the module. Screenshots of every page land in ``test-artifacts/console/``.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import Select, WebDriverWait

from tests.helpers import chromium, free_port, moldau_executable, run_moldau, unique_topic_name

BASE_TIME_MS = 1_700_000_000_000  # the records' CreateTime: 2023-11-14T22:13:20Z onwards
RECORDS = 5


@dataclass(frozen=True)
class Data:
    bootstrap: str
    topic: str
    member_group: str
    admin: AdminClient


@pytest.fixture(scope="module")
def data(broker: Any) -> Iterator[Data]:
    """A 2-partition topic: 5 records in partition 0 (key, JSON value, header), 1 in 1."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic = unique_topic_name("console")
    futures = admin.create_topics([NewTopic(topic, 2, 1, config={"retention.ms": "86400000"})])
    futures[topic].result(30)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(RECORDS):
        producer.produce(topic, key=f"key-{i}", value=f'{{"n": {i}, "word": "value-{i}"}}',
                         partition=0, timestamp=BASE_TIME_MS + i * 1000,
                         headers=[("trace", f"id-{i}".encode())])
    producer.produce(topic, key="other", value="plain text", partition=1)
    assert producer.flush(30) == 0
    yield Data(broker.bootstrap, topic, unique_topic_name("console-members"), admin)


@contextlib.contextmanager
def _serving(args: list[str], port: int, log: Path) -> Iterator[str]:
    """``moldau ARGS`` as a user starts it, until it listens on ``port``; its output in ``log``."""
    with log.open("wb") as out:
        process = subprocess.Popen([moldau_executable(), *args], stdout=out,
                                   stderr=subprocess.STDOUT, cwd=log.parent)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{args[0]} did not start: {log.read_text()}") from None
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _console_args(bootstrap: str, port: int, *extra: str) -> list[str]:
    return ["console", "-b", bootstrap, "--listen", f"127.0.0.1:{port}",
            "--sample-interval", "0.5", *extra]


@pytest.fixture(scope="module")
def console(broker: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One console for the module, on the shared broker."""
    port = free_port()
    log = tmp_path_factory.mktemp("console") / "console.log"
    with _serving(_console_args(broker.bootstrap, port), port, log) as url:
        yield url


def _open(driver: Any, url: str) -> None:
    driver.get(url)
    WebDriverWait(driver, 30).until(EC.presence_of_element_located((By.TAG_NAME, "main")))


def _submit(driver: Any, button_id: str) -> None:
    """Click a submit button and wait for the page it leads to."""
    chromium.click_and_wait_for_next_page(driver, driver.find_element(By.ID, button_id))


def _type(driver: Any, element_id: str, text: str) -> None:
    field = driver.find_element(By.ID, element_id)
    field.clear()
    field.send_keys(text)


def _text(driver: Any, element_id: str) -> str:
    return str(driver.find_element(By.ID, element_id).text)


def _rows(driver: Any, table_id: str) -> list[list[str]]:
    rows = driver.find_elements(By.CSS_SELECTOR, f"#{table_id} tbody tr")
    return [[cell.text for cell in row.find_elements(By.TAG_NAME, "td")] for row in rows]


def _user_topics(admin: AdminClient) -> set[str]:
    """Topics the broker does not flag internal (a name starting with "__" may be a user's,
    such as the Spark sink's commits topic, which other tests on this broker create)."""
    names = list(admin.list_topics(timeout=10).topics)
    described = admin.describe_topics(TopicCollection(names), request_timeout=10)
    return {name for name in names if not described[name].result(10).is_internal}


def test_overview_shows_broker_and_topic_counts(browser: Any, console: str, data: Data) -> None:
    _open(browser, console + "/")
    chromium.screenshot(browser, "overview")
    assert _text(browser, "broker-count") == "1"
    assert _text(browser, "topic-count") == str(len(_user_topics(data.admin)))
    assert _text(browser, "offline") == "0"
    assert _rows(browser, "brokers")[0][4] == "controller"


def test_topics_search_filters(browser: Any, console: str, data: Data) -> None:
    _open(browser, console + "/topics")
    assert len(_rows(browser, "topics")) == len(_user_topics(data.admin))
    _type(browser, "search", data.topic[-8:].upper())  # the random suffix, any case
    _submit(browser, "search-button")
    chromium.screenshot(browser, "topics-search")
    rows = _rows(browser, "topics")
    assert [row[:4] + row[5:] for row in rows] == [[data.topic, "2", "1", str(RECORDS + 1), "0"]]
    assert re.fullmatch(r"\d+ B", rows[0][4]), rows  # six small records, on disk
    assert _text(browser, "topic-summary").startswith("1 topic matching")


def test_create_alter_and_delete_a_topic_through_forms_with_confirmation(
    browser: Any, console: str, data: Data
) -> None:
    name = unique_topic_name("console-created")
    _open(browser, console + "/topics")
    chromium.click_and_wait_for_next_page(browser, browser.find_element(By.ID, "new-topic"))
    _type(browser, "name", name)
    _type(browser, "partitions", "3")
    _type(browser, "configs", "retention.ms=123456")
    _submit(browser, "create-button")
    chromium.screenshot(browser, "topic-create-confirm")
    assert name in _text(browser, "confirm-summary")
    assert name not in _user_topics(data.admin)  # nothing happens before the confirmation
    _submit(browser, "confirm-button")
    assert _text(browser, "notice") == f"Created topic {name}."
    _open(browser, console + f"/topics?q={name}")
    assert [row[:2] for row in _rows(browser, "topics")] == [[name, "3"]]
    assert len(data.admin.list_topics(name, timeout=10).topics[name].partitions) == 3

    _open(browser, console + f"/topics/{name}")  # alter: grow it to 4 partitions
    _type(browser, "new-partitions", "4")
    _submit(browser, "partitions-button")
    assert _text(browser, "confirm-summary").startswith("3 → 4 partitions.")
    _submit(browser, "confirm-button")
    assert _text(browser, "notice") == f"{name} now has 4 partitions."
    assert len(_rows(browser, "partitions")) == 4
    _open(browser, console + f"/topics/{name}")
    _type(browser, "new-partitions", "2")  # Kafka never shrinks a topic
    _submit(browser, "partitions-button")
    _submit(browser, "confirm-button")
    assert "INVALID_PARTITIONS" in _text(browser, "error")

    _open(browser, console + f"/topics/{name}")  # delete: the name must be typed
    _submit(browser, "delete-button")
    _type(browser, "typed", "not-the-name")
    _submit(browser, "confirm-button")
    assert "nothing was deleted" in _text(browser, "error")
    assert name in _user_topics(data.admin)
    _open(browser, console + f"/topics/{name}")
    _submit(browser, "delete-button")
    _type(browser, "typed", name)
    _submit(browser, "confirm-button")
    assert _text(browser, "notice") == f"Deleted topic {name}."
    deadline = time.monotonic() + 10
    while name in _user_topics(data.admin) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert name not in _user_topics(data.admin)


def test_topic_detail_shows_partitions_and_a_config(
    browser: Any, console: str, data: Data
) -> None:
    _open(browser, console + f"/topics/{data.topic}")
    chromium.screenshot(browser, "topic-detail")
    partitions = _rows(browser, "partitions")
    assert [row[0] for row in partitions] == ["0", "1"]
    assert partitions[0][4:] == ["0", str(RECORDS), str(RECORDS)]
    assert partitions[1][4:] == ["0", "1", "1"]
    assert ["retention.ms", "86400000", "set"] in _rows(browser, "configs")


def _browse(driver: Any, console: str, topic: str, **fields: str) -> list[list[str]]:
    _open(driver, console + f"/topics/{topic}/messages")
    for name in ("partition", "offset", "timestamp"):
        _type(driver, name, fields.get(name, ""))
    Select(driver.find_element(By.ID, "decode")).select_by_visible_text("auto")
    _submit(driver, "browse-button")
    return _rows(driver, "messages")


def test_message_browser_by_offset(browser: Any, console: str, data: Data) -> None:
    rows = _browse(browser, console, data.topic, partition="0", offset="3")
    chromium.screenshot(browser, "messages-offset")
    assert [row[0] for row in rows] == ["3", "4"]
    _, timestamp, key, value, headers = rows[0]
    assert key == "key-3"
    assert '"word": "value-3"' in value  # decoded as JSON, pretty-printed
    assert headers == "trace=id-3"
    assert timestamp == "2023-11-14T22:13:23.000Z"


def test_message_browser_by_timestamp(browser: Any, console: str, data: Data) -> None:
    moment = datetime.fromtimestamp((BASE_TIME_MS + 2000) / 1000, tz=UTC).isoformat()
    rows = _browse(browser, console, data.topic, partition="0", timestamp=moment)
    chromium.screenshot(browser, "messages-timestamp")
    assert [row[0] for row in rows] == ["2", "3", "4"]
    assert rows[0][2] == "key-2"


def test_message_browser_decodes_avro_through_the_registry(
    browser: Any, data: Data, tmp_path: Path
) -> None:
    if run_moldau("registry", "--help").returncode != 0:
        pytest.skip("moldau registry is not part of this build: nothing to decode Avro with")
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    registry_port, console_port = free_port(), free_port()
    registry_args = ["registry", "-b", data.bootstrap, "--listen", f"127.0.0.1:{registry_port}"]
    with _serving(registry_args, registry_port, tmp_path / "registry.log") as registry:
        topic = unique_topic_name("console-avro")
        data.admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
        schema = ('{"type": "record", "name": "View", "fields": ['
                  '{"name": "page", "type": "string"}, {"name": "ms", "type": "long"}]}')
        serialize = AvroSerializer(SchemaRegistryClient({"url": registry}), schema)
        value = serialize({"page": "/home", "ms": 42},
                          SerializationContext(topic, MessageField.VALUE))
        producer = Producer({"bootstrap.servers": data.bootstrap})
        producer.produce(topic, key="visitor-1", value=value)
        assert producer.flush(30) == 0
        schema_id = int.from_bytes(value[1:5], "big")
        args = _console_args(data.bootstrap, console_port, "--schema-registry", registry)
        with _serving(args, console_port, tmp_path / "console.log") as console:
            rows = _browse(browser, console, topic, partition="0", offset="0")
            chromium.screenshot(browser, "messages-avro")
    assert rows[0][2] == "visitor-1"
    assert json.loads(rows[0][3].rsplit("\n", 1)[0]) == {"page": "/home", "ms": 42}
    assert rows[0][3].endswith(f"avro, schema id {schema_id}")


def test_group_page_shows_members_and_exact_lag(browser: Any, console: str, data: Data) -> None:
    consumer = Consumer({"bootstrap.servers": data.bootstrap, "group.id": data.member_group,
                         "client.id": "console-test-member", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([data.topic])
        deadline = time.monotonic() + 30
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.2)
        assert len(consumer.assignment()) == 2
        consumer.commit(offsets=[TopicPartition(data.topic, 0, 3),
                                 TopicPartition(data.topic, 1, 0)], asynchronous=False)
        _open(browser, console + f"/groups/{data.member_group}")
        chromium.screenshot(browser, "group")
        assert _text(browser, "state") == "Stable"
        members = _rows(browser, "members")
        assert len(members) == 1 and members[0][1] == "console-test-member"
        assert members[0][3] == f"{data.topic}:0 {data.topic}:1"
        lags = {(row[0], row[1]): row[2:5] for row in _rows(browser, "offsets")}
        assert lags == {(data.topic, "0"): ["3", "5", "2"], (data.topic, "1"): ["0", "1", "1"]}
        assert browser.find_elements(By.CSS_SELECTOR, "#lag-chart svg rect")
        _open(browser, console + "/groups")
        row = next(r for r in _rows(browser, "groups") if r[0] == data.member_group)
        assert row[1:] == ["Stable", "consumer", "1", "3"]
        # Kafka resets only groups without members: the dry run already says so.
        _open(browser, console + f"/groups/{data.member_group}")
        _type(browser, "reset-topic", data.topic)
        _submit(browser, "dry-run-button")
        assert _text(browser, "error") == (
            f"cannot reset offsets of group '{data.member_group}' while it is active (state "
            "Stable, 1 member(s)): stop its consumers first, Kafka only resets inactive groups")
    finally:
        consumer.close()


def _committed(admin: AdminClient, group: str, topic: str) -> dict[int, int]:
    request = [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0),
                                                    TopicPartition(topic, 1)])]
    answer = admin.list_consumer_group_offsets(request)[group].result(30)
    return {tp.partition: tp.offset for tp in answer.topic_partitions}


def test_reset_offsets_dry_run_then_execute(browser: Any, console: str, data: Data) -> None:
    group = unique_topic_name("console-reset")
    committed = [ConsumerGroupTopicPartitions(group, [TopicPartition(data.topic, 0, 4)])]
    data.admin.alter_consumer_group_offsets(committed)[group].result(30)
    _open(browser, console + f"/groups/{group}")
    _type(browser, "reset-topic", f"{data.topic}:0")
    Select(browser.find_element(By.ID, "reset-strategy")).select_by_value("offset")
    _type(browser, "reset-target", "1")
    _submit(browser, "dry-run-button")
    chromium.screenshot(browser, "reset-plan")
    assert _rows(browser, "plan") == [[data.topic, "0", "4", "1"]]
    assert _committed(data.admin, group, data.topic)[0] == 4  # a dry run changes nothing
    _submit(browser, "execute-button")
    assert _text(browser, "notice") == f"Reset 1 partition(s) of group {group}."
    assert _committed(data.admin, group, data.topic)[0] == 1


def test_bad_input_shows_one_clear_message(browser: Any, console: str, data: Data) -> None:
    _browse(browser, console, data.topic, partition="0", offset="99")
    assert _text(browser, "error") == (
        f"offset 99 is past the end of {data.topic}:0: its next offset is {RECORDS}, "
        f"so the last record is at {RECORDS - 1}")
    chromium.screenshot(browser, "error-offset")
    _open(browser, console + "/topics/no-such-topic-here")
    assert _text(browser, "error") == "topic 'no-such-topic-here' does not exist"
    _open(browser, console + f"/topics/{data.topic}")
    _type(browser, "config-key", "retention.ms")
    _type(browser, "config-value", "soon")
    _submit(browser, "config-button")
    _submit(browser, "confirm-button")
    chromium.screenshot(browser, "error-config")
    assert _text(browser, "error") == (
        f"cannot alter configs of topic '{data.topic}': Invalid value soon for configuration "
        "retention.ms: Not a number of type LONG (INVALID_CONFIG)")
    _open(browser, console + "/topics/new")
    _type(browser, "name", data.topic)
    _submit(browser, "create-button")
    assert _text(browser, "error") == f"topic '{data.topic}' already exists"
    _open(browser, console + "/")  # and the console keeps serving
    assert _text(browser, "broker-count") == "1"


def test_a_form_posted_from_another_site_is_refused(console: str, data: Data) -> None:
    """A page elsewhere cannot make a person's browser delete a topic through the console."""
    answer = httpx.post(f"{console}/topics/{data.topic}/delete",
                        data={"confirm": "yes", "typed": data.topic},
                        headers={"Origin": "http://evil.example"}, timeout=30)
    assert answer.status_code == 403
    assert "refused a form posted from http://evil.example" in answer.text
    assert data.topic in _user_topics(data.admin)


def test_live_page_charts_a_topic_being_written(browser: Any, console: str, data: Data) -> None:
    _open(browser, console + "/live")
    producer = Producer({"bootstrap.servers": data.bootstrap, "linger.ms": 5})
    deadline = time.monotonic() + 20
    seen = 0.0
    while time.monotonic() < deadline and seen == 0.0:  # bounded: 20 s at most
        for i in range(50):
            producer.produce(data.topic, value=f"live-{i}", partition=1)
        producer.flush(10)
        time.sleep(0.5)
        # console.js replaces the table in place: read it in one script call, not cell by
        # cell, so a refresh between two reads cannot leave a stale element behind.
        rows = browser.execute_script(
            "return Array.from(document.querySelectorAll('#rates tbody tr'))"
            ".map(r => Array.from(r.cells).map(c => c.textContent.trim()));")
        for row in rows:
            if row and row[0] == data.topic:
                seen = float(row[1])
    chromium.screenshot(browser, "live")
    assert seen > 0


def test_top_prints_rates_and_group_lag(data: Data) -> None:
    group = unique_topic_name("console-top")
    committed = [ConsumerGroupTopicPartitions(group, [TopicPartition(data.topic, 0, 1)])]
    data.admin.alter_consumer_group_offsets(committed)[group].result(30)
    result = run_moldau("top", "--once", "-b", data.bootstrap)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    topic_row = next(line for line in lines if data.topic in line and group not in line)
    assert topic_row.split("│")[1].strip() == data.topic
    group_row = next(line for line in lines if group in line)
    cells = [cell.strip() for cell in group_row.split("│")[1:-1]]
    assert cells[:3] == [group, data.topic, str(RECORDS - 1)]


def test_top_without_a_broker_is_one_line() -> None:
    result = run_moldau("top", "--once", "-b", f"127.0.0.1:{free_port()}", "--timeout", "1")
    assert result.returncode == 1
    assert result.stderr.startswith("Error: cannot reach a broker")
    assert len(result.stderr.strip().splitlines()) == 1


def test_console_without_a_broker_says_so_and_keeps_serving(tmp_path: Path) -> None:
    port, dead = free_port(), free_port()
    args = _console_args(f"127.0.0.1:{dead}", port, "--timeout", "1")
    with _serving(args, port, tmp_path / "console.log") as console:
        for path in ("/", "/topics", "/groups"):
            answer = httpx.get(console + path, timeout=30)
            assert answer.status_code == 503
            assert (f"cannot reach a broker at 127.0.0.1:{dead} within 1 s "
                    f"(127.0.0.1:{dead}: Connection refused)") in answer.text
        assert httpx.get(console + "/live", timeout=30).status_code == 200


def test_console_start_up_mistakes_are_one_line() -> None:
    with socket.create_server(("127.0.0.1", 0)) as busy:
        port = busy.getsockname()[1]
        result = run_moldau("console", "--listen", f"127.0.0.1:{port}", "-b", "127.0.0.1:1")
    assert result.returncode == 1
    assert result.stderr == f"Error: cannot listen on 127.0.0.1:{port}: Address already in use\n"
    result = run_moldau("console", "--listen", "nowhere")
    assert result.returncode == 1
    assert result.stderr == ("Error: invalid --listen 'nowhere': expected HOST:PORT, "
                             "e.g. 127.0.0.1:9021\n")


def test_metrics_page_without_an_endpoint_says_how_to_add_one(
    browser: Any, console: str
) -> None:
    _open(browser, console + "/metrics")
    assert "--metrics-url" in _text(browser, "no-metrics")
    assert not browser.find_elements(By.LINK_TEXT, "Broker metrics")


def test_metrics_page_with_an_endpoint_away_is_one_message(data: Data, tmp_path: Path) -> None:
    port, dead = free_port(), free_port()
    args = _console_args(data.bootstrap, port, "--metrics-url",
                         f"http://127.0.0.1:{dead}/metrics")
    with _serving(args, port, tmp_path / "console.log") as console:
        answer = httpx.get(console + "/metrics", timeout=30)
        assert answer.status_code == 503
        assert f"cannot read metrics from http://127.0.0.1:{dead}/metrics" in answer.text
        assert httpx.get(console + "/", timeout=30).status_code == 200


def test_metrics_page_shows_the_brokers_samples(
    browser: Any, make_broker: Any, tmp_path: Path
) -> None:
    metrics_port, console_port = free_port(), free_port()
    broker = make_broker(f"metrics.listener=http://127.0.0.1:{metrics_port}")
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", metrics_port), timeout=1).close()
            break
        except OSError:
            if time.monotonic() > deadline:
                pytest.skip("the broker of this build serves no metrics.listener endpoint")
            time.sleep(0.2)
    url = f"http://127.0.0.1:{metrics_port}/metrics"
    args = _console_args(broker.bootstrap, console_port, "--metrics-url", url)
    with _serving(args, console_port, tmp_path / "console.log") as console:
        _open(browser, console + "/")
        browser.find_element(By.LINK_TEXT, "Broker metrics").click()
        WebDriverWait(browser, 30).until(EC.presence_of_element_located((By.ID, "metrics")))
        chromium.screenshot(browser, "metrics")
        rows = _rows(browser, "metrics")
        assert rows and all("moldau_" in row[0] for row in rows)
        wanted = rows[0][0]
        _type(browser, "metric-filter", wanted)
        _submit(browser, "metric-button")
        filtered = {row[0] for row in _rows(browser, "metrics")}
        assert wanted in filtered and all(wanted in name for name in filtered)
