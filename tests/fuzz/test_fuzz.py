"""A bounded fuzz run in the ordinary test suite (``make fuzz`` runs the long one).

Tens of thousands of mutated frames from a fixed seed against a fresh broker: it must stay
alive, log no traceback and no ERROR line, keep its RSS bounded, and a producer and consumer
running alongside must lose nothing and see their records in order.
"""

from __future__ import annotations

import json
import os

import pytest

from .driver import FuzzConfig, run_fuzz

RSS_BOUND_MB = 300.0


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.timeout(240)
def test_bounded_fuzz_run(make_broker):
    broker = make_broker()
    config = FuzzConfig(
        frames=int(os.environ.get("FUZZ_FRAMES", 30_000)),
        seconds=float(os.environ.get("FUZZ_SECONDS", 45)),
        seed=int(os.environ.get("FUZZ_SEED", 1)),
    )
    report = run_fuzz(broker, config)
    summary = json.dumps(report.summary())
    print(summary)
    assert report.crashes == 0, (
        f"broker died: {summary}\nlast frames:\n" + "\n".join(report.recent_frames[-20:])
        + "\n" + "\n".join(broker.stderr_text().splitlines()[-30:]))
    assert report.tracebacks == 0 and not report.bad_log_lines, (
        summary + "\n" + "\n".join(report.bad_log_lines[:20]))
    assert report.max_rss_mb < RSS_BOUND_MB, summary
    assert report.frames >= min(config.frames, 5_000), summary
    assert report.acked > 0 and report.lost == 0 and report.out_of_order == 0, summary
    assert report.produce_errors == 0, summary
