"""Shared pytest fixtures: a real broker subprocess, per-test brokers, unique names.

- ``broker`` (session): one broker for most integration tests. Set
  ``MOLDAU_TEST_BOOTSTRAP=host:port`` to run the tests against a broker you started
  yourself instead (then only ``.bootstrap``, ``.host`` and ``.port`` exist on it).
- ``make_broker`` (function): ``make_broker(*overrides, config_file=None, env=None,
  port=None, start=True)`` gives a fresh broker with its own data directory, for
  restarts, kill -9 and special configs; all are stopped at the end of the test.
- ``topic_name``: a topic name unique to the test; ``kcat``: path of the kcat binary.
- ``network_lab`` (function): ``network_lab("zk", "b1", "client", subnet=...)`` builds a
  ``NetworkLab`` of network namespaces (tests/helpers/netns.py) for partition tests and
  deletes it at the end of the test; skips with the reason when not root or no ``ip netns``.
- ``zookeeper`` (session): one real ZooKeeper server (Debian's package), skipped with one
  reason when it is not installed; ``zk_connect``: its connect string with a chroot unique
  to the test (``127.0.0.1:port/moldau-<test>-<random>``), so tests never see each other's
  znodes.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import (
    BrokerProcess,
    ExternalBroker,
    chromium,
    netns,
    parallel_units,
    unique_topic_name,
)
from tests.helpers.zookeeper import ZooKeeperServer, missing_reason

# Test brokers answer group joins at once and run retention often, so tests stay short.
# Leadership moves only through what a test does: no automatic preferred-leader rebalance
# (Kafka's default is on), which could move a leader while a test's producers run, and
# without producer-state dedup on the broker a retried batch may then be written twice.
TEST_BROKER_OVERRIDES = (
    "group.initial.rebalance.delay.ms=0",
    "log.retention.check.interval.ms=1000",
    "auto.leader.rebalance.enable=false",
)

MakeBroker = Callable[..., BrokerProcess]

# Tests are marked by the folder they live in, so `pytest -m "not integration"` runs the
# fast unit tests alone without every module repeating a pytestmark line.
_FOLDER_MARKS = ("integration", "faults", "spark", "cluster")
_TESTS_DIR = Path(__file__).resolve().parent


def _folder(item: pytest.Item) -> str:
    try:
        return item.path.resolve().relative_to(_TESTS_DIR).parts[0]
    except ValueError:
        return ""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        folder = _folder(item)
        if folder in _FOLDER_MARKS:
            item.add_marker(getattr(pytest.mark, folder))
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # Under `make test`'s two workers, the longest units start first so that neither worker
        # is left alone with a long file at the end (a stable sort: files keep their order).
        items.sort(key=lambda item: parallel_units.start_rank(_folder(item)))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Hand out whole files (all Spark tests as one unit) to the workers; see parallel_units."""
    return parallel_units.scheduler(config, log)


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess | ExternalBroker]:
    """The shared broker; its logs are in the session's ``broker0`` tmp directory."""
    external = os.environ.get("MOLDAU_TEST_BOOTSTRAP")
    if external:
        yield ExternalBroker.parse(external)
        return
    process = BrokerProcess(
        tmp_path_factory.mktemp("broker"), overrides=TEST_BROKER_OVERRIDES
    ).start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture
def make_broker(tmp_path: Path) -> Iterator[MakeBroker]:
    """Factory for brokers owned by one test."""
    created: list[BrokerProcess] = []

    def factory(
        *overrides: str,
        config_file: Path | None = None,
        env: Mapping[str, str] | None = None,
        port: int | None = None,
        start: bool = True,
    ) -> BrokerProcess:
        process = BrokerProcess(
            tmp_path / f"broker-{len(created)}",
            port=port,
            overrides=(*TEST_BROKER_OVERRIDES, *overrides),
            config_file=config_file,
            env=env,
        )
        created.append(process)
        return process.start() if start else process

    yield factory
    for process in created:
        process.stop()


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> str:
    return unique_topic_name(request.node.name)


@pytest.fixture(scope="session")
def kcat() -> str:
    """Path of Debian's kcat; its absence is a broken test machine, not a reason to skip."""
    path = shutil.which("kcat") or shutil.which("kafkacat")
    if path is None:
        pytest.fail("kcat is not installed: `make test` installs it (apt-get install kcat)")
    return path


@pytest.fixture(scope="session")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One headless Chromium (Debian's, through Selenium) for every browser test of the run."""
    reason = chromium.missing()
    if reason:
        pytest.fail(reason)
    driver = chromium.start(tmp_path_factory.mktemp("chromium-profile"))
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    """One ZooKeeper server for the session; tests that stop or pause it bring it back."""
    reason = missing_reason()
    if reason:
        pytest.skip(reason)
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper")).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def zk_connect(zookeeper: ZooKeeperServer, request: pytest.FixtureRequest) -> str:
    """``zookeeper.connect`` for this test: the shared server under a chroot of its own."""
    return zookeeper.connect_string("/" + unique_topic_name("moldau-" + request.node.name))


@pytest.fixture
def network_lab() -> Iterator[Callable[..., netns.NetworkLab]]:
    """Factory for network namespace labs; every lab is torn down after the test."""
    reason = netns.unavailable_reason()
    if reason:
        pytest.skip(reason)
    labs: list[netns.NetworkLab] = []

    def factory(*names: str, subnet: str = netns.DEFAULT_SUBNET) -> netns.NetworkLab:
        lab = netns.NetworkLab(names, subnet=subnet)
        labs.append(lab)
        return lab.start()

    yield factory
    for lab in labs:
        lab.close()
