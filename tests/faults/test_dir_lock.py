"""One broker per data directory: a second one on the same log dir refuses to start.

Without the ``.lock`` file a second broker would "recover" (truncate) the segments the first
is appending to, and both would hand out the same offsets. The lock is an flock, so a broker
killed with -9 leaves nothing that keeps the next start out.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.helpers import free_port, one_line_error, run_moldau
from tests.integration.clients import create_topic, produce_all, producer, read_partition, unique

pytestmark = pytest.mark.timeout(120)

COUNT = 200


def _segment_files(data_dir: Path) -> dict[str, tuple[int, bytes]]:
    """Every file under the data dir but the lock and the checkpoints, with size and content.

    The checkpoint files are left out because the first broker rewrites them on its own timer
    (a replication-offset-checkpoint may appear between two looks on a busy machine).
    """
    return {
        str(path.relative_to(data_dir)): (path.stat().st_size, path.read_bytes())
        for path in sorted(data_dir.rglob("*"))
        if path.is_file() and path.name != ".lock" and not path.name.endswith("-checkpoint")
    }


def test_second_broker_on_the_same_dir_refuses_with_one_line(make_broker) -> None:
    first = make_broker()
    topic = unique("locked")
    create_topic(first.bootstrap, topic, partitions=1)
    p = producer(first.bootstrap, acks="all")
    produce_all(p, topic, ({"value": b"v%d" % i} for i in range(COUNT)))
    before = _segment_files(first.data_dir)

    second = run_moldau(
        "broker", "--override", f"listeners=PLAINTEXT://127.0.0.1:{free_port()}",
        "--override", f"log.dirs={first.data_dir}", timeout=60,
    )
    line = one_line_error(second, "in use by another broker", str(first.data_dir))
    assert f"pid {first.pid}" in line and "node.id 0" in line
    assert second.stdout == ""

    # The first broker's files were not touched, and it still serves them and new records.
    assert _segment_files(first.data_dir) == before
    assert first.is_running()
    got = read_partition(first.bootstrap, topic, 0, 0, COUNT)
    assert [m.value() for m in got] == [b"v%d" % i for i in range(COUNT)]
    produce_all(p, topic, [{"value": b"after"}])
    assert read_partition(first.bootstrap, topic, 0, COUNT, 1)[0].value() == b"after"


def test_lock_is_released_by_kill9(make_broker) -> None:
    broker = make_broker()
    topic = unique("killed")
    create_topic(broker.bootstrap, topic, partitions=1)
    produce_all(producer(broker.bootstrap, acks="all"), topic,
                ({"value": b"v%d" % i} for i in range(COUNT)))
    lock = broker.data_dir / ".lock"
    assert f"pid={broker.pid}" in lock.read_text()
    broker.kill9()
    assert lock.exists()  # the file stays, as Kafka's does; only the flock matters

    broker.start()  # would raise BrokerStartError if the dead broker's lock still counted
    assert f"pid={broker.pid}\n" in lock.read_text() and broker.pid != os.getpid()
    got = read_partition(broker.bootstrap, topic, 0, 0, COUNT)
    assert [m.value() for m in got] == [b"v%d" % i for i in range(COUNT)]
