"""The web console served by the broker itself (``console.enable=true``) under ``/console/``
on the metrics port, in a real headless Chromium, while real clients use the Kafka port."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

from tests.conftest import TEST_BROKER_OVERRIDES
from tests.helpers import BrokerProcess, chromium, free_port, one_line_error, unique_topic_name
from tests.helpers.metrics import http_get

from .test_startup_refusals import start

pytestmark = pytest.mark.timeout(120)

@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, str]]:
    """A broker with its console on; yields it and the console's URL."""
    port = free_port()
    process = BrokerProcess(tmp_path_factory.mktemp("console-broker"), overrides=(
        *TEST_BROKER_OVERRIDES, f"metrics.listener=http://127.0.0.1:{port}",
        "console.enable=true")).start()
    url = f"http://127.0.0.1:{port}/console"
    try:
        deadline = time.monotonic() + 30  # the console child starts after the broker
        while time.monotonic() < deadline and http_get(url + "/")[0] != 200:
            time.sleep(0.2)
        yield process, url
    finally:
        process.stop()


def _page(driver: Any, url: str) -> None:
    driver.get(url)
    WebDriverWait(driver, 30).until(EC.presence_of_element_located((By.TAG_NAME, "main")))


def test_console_pages_and_a_form_through_the_metrics_port(
        browser: Any, served: tuple[BrokerProcess, str]) -> None:
    """Links, forms and redirects stay under /console/ (a click on "Topics", a topic created
    through the two-step form), and the Kafka port keeps answering meanwhile."""
    process, url = served
    name = unique_topic_name("via-broker-console")
    latencies: list[float] = []
    failures: list[object] = []
    stop = threading.Event()

    def produce() -> None:  # a Kafka client on the same broker, all along
        producer = Producer({"bootstrap.servers": process.bootstrap, "linger.ms": 0})
        deadline = time.monotonic() + 60
        while not stop.is_set() and time.monotonic() < deadline and len(latencies) < 200_000:
            started = time.monotonic()
            producer.produce("kafka-beside-console", b"x",
                             on_delivery=lambda e, m: failures.append(e) if e else None)
            producer.flush(10)
            latencies.append(time.monotonic() - started)

    AdminClient({"bootstrap.servers": process.bootstrap}).list_topics(timeout=10)
    producing = threading.Thread(target=produce)
    producing.start()
    try:
        _page(browser, url + "/")
        assert browser.find_element(By.ID, "broker-count").text == "1"
        chromium.click_and_wait_for_next_page(browser,
                                              browser.find_element(By.LINK_TEXT, "Topics"))
        assert browser.current_url == url + "/topics"
        browser.find_element(By.ID, "new-topic").click()
        WebDriverWait(browser, 30).until(EC.presence_of_element_located((By.ID, "name")))
        browser.find_element(By.ID, "name").send_keys(name)
        for button in ("create-button", "confirm-button"):  # the form, then its confirmation
            chromium.click_and_wait_for_next_page(browser, browser.find_element(By.ID, button))
        chromium.screenshot(browser, "served-by-broker")
        assert browser.find_element(By.ID, "notice").text == f"Created topic {name}."
        assert browser.current_url.startswith(f"{url}/topics/")
    finally:
        stop.set()
        producing.join(30)
    admin = AdminClient({"bootstrap.servers": process.bootstrap})
    assert name in admin.list_topics(timeout=10).topics
    assert not failures and len(latencies) >= 10, (failures, len(latencies))
    latencies.sort()
    print(f"{len(latencies)} produce round trips while the console was used: median "
          f"{latencies[len(latencies) // 2] * 1000:.1f} ms, max {latencies[-1] * 1000:.1f} ms")
    assert latencies[-1] < 5.0
    # The broker's own paths are untouched, and other paths are still 404.
    assert http_get(url.removesuffix("/console") + "/health/ready")[0] == 200
    assert http_get(url.removesuffix("/console") + "/consoles")[0] == 404


def test_console_enable_needs_the_metrics_listener(tmp_path: Path) -> None:
    one_line_error(start(tmp_path, "console.enable=true"),
                   "Invalid value true for configuration console.enable",
                   "metrics.listener")


def test_console_enable_needs_a_plaintext_listener(tmp_path: Path) -> None:
    one_line_error(start(tmp_path, f"listeners=SSL://127.0.0.1:{free_port()}",
                         f"metrics.listener=http://127.0.0.1:{free_port()}",
                         "console.enable=true"),
                   "Invalid value true for configuration console.enable",
                   "the console needs a PLAINTEXT listener")
