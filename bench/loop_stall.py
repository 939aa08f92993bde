"""Event-loop pauses and a well-behaved producer's ack latency under the fuzz mix.

    python -m bench.loop_stall --seconds 60 --seed 1 [--without bitflip ...]

Runs the wire fuzzer of ``tests/fuzz`` (mutated frames on 16 connections, big requests among
them) against a fresh broker for a fixed time, with an idempotent confluent-kafka producer at
200 records/s and a probe sending ApiVersions every 20 ms. Prints one JSON object:
``probe_max_ms`` (the slowest probe answer: a lower bound of the longest event-loop pause),
``ack_p50_ms``/``ack_p99_ms``/``ack_max_ms`` of the producer, ``loop_stalls`` and
``longest_stall_s`` as logged by the broker's watchdog (``moldau.loop.stall.warn.ms``), the
slowest stall lines, and the fuzz counts. Needs the test extras (``make test`` installs them).
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
from pathlib import Path

from tests.conftest import TEST_BROKER_OVERRIDES
from tests.fuzz.driver import FuzzConfig, run_fuzz
from tests.fuzz.mutate import DEFAULT_WEIGHTS
from tests.helpers import BrokerProcess


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.loop_stall", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--without", action="append", default=[], choices=sorted(DEFAULT_WEIGHTS))
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--only", choices=sorted(DEFAULT_WEIGHTS),
                        help="send only this mutation kind (e.g. big: 5,000-partition requests)")
    parser.add_argument("--skip-api", type=int, action="append", default=[],
                        help="leave an API key out of the fuzz corpus (repeatable)")
    parser.add_argument("--warn-ms", type=int, default=1000,
                        help="moldau.loop.stall.warn.ms of the broker under test")
    args = parser.parse_args(argv)
    weights = {k: (0 if k in args.without or args.only not in (None, k) else w)
               for k, w in DEFAULT_WEIGHTS.items()}
    config = FuzzConfig(frames=10**9, seconds=args.seconds, seed=args.seed, weights=weights,
                        connections=args.connections, skip_apis=frozenset(args.skip_api))
    workdir = Path(tempfile.mkdtemp(prefix="moldau-loop-stall-"))
    broker = BrokerProcess(workdir, overrides=(
        *TEST_BROKER_OVERRIDES, f"moldau.loop.stall.warn.ms={args.warn_ms}")).start()
    try:
        report = run_fuzz(broker, config)
    finally:
        broker.stop()
    summary = report.summary()
    summary["weights"] = {k: w for k, w in weights.items() if w}
    seconds = re.compile(r"stalled (\d+\.\d+) s")

    def length(line: str) -> float:
        found = seconds.search(line)
        return float(found.group(1)) if found else 0.0

    summary["slowest_stalls"] = [line.split(": ", 1)[-1]
                                 for line in sorted(report.stalls, key=length)[-5:]]
    summary["broker_log"] = str(broker.stderr_path)
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
