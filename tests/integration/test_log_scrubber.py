"""The background scrubber of a running broker finds a byte flipped in a closed segment.

A real broker with ``log.scrubber.enable=true`` and small segments; a byte of a closed
segment is flipped on disk behind its back (what bit rot does); within seconds the broker
logs one ERROR line naming topic, partition, segment, offset and position, and only one,
however many passes follow. ``moldau log verify`` on the live data dir agrees.
"""

from __future__ import annotations

import re
import time
from typing import Any

import pytest

from tests.helpers.cli import run_moldau

from .clients import create_topic, produce_all, producer

pytestmark = pytest.mark.timeout(90)


def test_scrubber_reports_a_flipped_byte_once(make_broker: Any, topic_name: str) -> None:
    broker = make_broker("log.scrubber.enable=true", "log.scrubber.bytes.per.second=104857600",
                         "log.scrubber.backoff.ms=100")
    create_topic(broker.bootstrap, topic_name, config={"segment.bytes": "4096"})
    p = producer(broker.bootstrap, linger_ms=0)
    for i in range(30):  # one batch per record: 30 batches of ~560 bytes, 7 per segment
        report = produce_all(p, topic_name, [{"key": b"k%d" % i, "value": bytes(500)}])
        assert not report.failed
    directory = broker.data_dir / f"{topic_name}-0"
    segments = sorted(directory.glob("*.log"))
    assert len(segments) >= 3, segments
    first = segments[0]
    with open(first, "r+b") as file:  # inside the value of the segment's first record
        file.seek(300)
        byte = file.read(1)[0]
        file.seek(300)
        file.write(bytes([byte ^ 0x10]))

    pattern = re.compile(
        rf"Corrupt batch in {re.escape(topic_name)}-0, segment 0, offset 0, position 0: "
        r"CRC mismatch")
    deadline = time.monotonic() + 30
    while not pattern.search(broker.stderr_text() + broker.stdout_text()):
        assert time.monotonic() < deadline, "the scrubber did not report the flipped byte"
        assert broker.is_running()
        time.sleep(0.2)
    time.sleep(1.5)  # many more passes at 100 ms backoff
    log = broker.stderr_text() + broker.stdout_text()
    assert len(pattern.findall(log)) == 1, log
    assert "Traceback" not in log

    verify = run_moldau("log", "verify", str(broker.data_dir))
    assert verify.returncode == 1
    lines = verify.stdout.splitlines()
    assert lines[0].startswith(f"{first}: position 0, offset 0: CRC mismatch"), verify.stdout
    assert lines[-1].endswith(" 1 problems") and len(lines) == 2, verify.stdout
